//! The one error every parameter validation returns (cp, rp and np profiles, and the engine's
//! config loaders that wrap them).

use std::borrow::Cow;
use std::fmt;

/// A parameter failed validation.
///
/// `param` is the configuration key as users write it (`rpg_time_reset`, `kmin_bytes`,
/// `min_time_between_cnps`), so that a config loader can prefix its table (`qcn.`, `pfc.`) and the
/// file name; `value` is the rejected value as it prints; `problem` says what the value must
/// satisfy. Displays as ``parameter `kmin_bytes` = 9000: must not exceed kmax_bytes (6000)``.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamError {
    pub param: &'static str,
    pub value: String,
    pub problem: Cow<'static, str>,
}

impl ParamError {
    pub fn new(
        param: &'static str,
        value: impl fmt::Display,
        problem: impl Into<Cow<'static, str>>,
    ) -> Self {
        ParamError {
            param,
            value: value.to_string(),
            problem: problem.into(),
        }
    }

    /// The value and the problem without the key (`9000: must not exceed kmax_bytes (6000)`),
    /// for a loader that names the key itself (`pfc.xon_bytes`).
    pub fn why(&self) -> String {
        format!("{}: {}", self.value, self.problem)
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "parameter `{}` = {}", self.param, self.why())
    }
}

impl std::error::Error for ParamError {}

/// The most octets a buffer, queue or threshold parameter may name: 2^32 (4 GiB), far above the
/// shared buffer of any switch chip (tens of MB), so that sums over ports and priorities stay
/// far inside `u64`.
pub const MAX_BUFFER_BYTES: u64 = 1 << 32;

/// The longest time parameter in nanoseconds: 1 s, above any timer, interval or hold time the
/// algorithms use (microseconds to milliseconds).
pub const MAX_TIME_NS: u64 = 1_000_000_000;

/// `value` must lie in `lo..=hi`; the error names `param` and the range.
pub fn within(param: &'static str, value: u64, lo: u64, hi: u64) -> Result<u64, ParamError> {
    if value < lo || value > hi {
        Err(ParamError::new(
            param,
            value,
            format!("must be in {lo}..={hi}"),
        ))
    } else {
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_key_the_value_and_the_problem() {
        let e = ParamError::new(
            "kmin_bytes",
            9000,
            format!("must not exceed kmax_bytes ({})", 6000),
        );
        assert_eq!(
            e.to_string(),
            "parameter `kmin_bytes` = 9000: must not exceed kmax_bytes (6000)"
        );
        assert_eq!(e.why(), "9000: must not exceed kmax_bytes (6000)");
        assert_eq!(e, ParamError::new("kmin_bytes", "9000", e.problem.clone()));
    }
}
