//! The vocabulary shared by the sans-IO algorithm crates (`cp`, `rp`, `np`) and the engine.
//!
//! Invariants:
//! - Time is virtual: an [`Instant`] is nanoseconds since an epoch chosen by whoever drives the
//!   algorithms (the engine's TSC clock, or the simulator's virtual clock). Nothing here reads a
//!   clock.
//! - Rates are bits per second, byte counts are octets on the wire (Ethernet header to end of
//!   payload, no preamble/FCS unless a caller says otherwise).
//! - Arithmetic saturates instead of wrapping or panicking: a forged or absurd input must never
//!   crash the datapath.
#![forbid(unsafe_code)]

mod ecn;
mod param;
pub use ecn::Ecn;
pub use param::ParamError;

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in time, nanoseconds since the driver's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    pub const MAX: Instant = Instant(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Time elapsed since `earlier`, zero if `earlier` is in the future.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    pub const ZERO: Duration = Duration(0);
    pub const MAX: Duration = Duration(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    pub const fn from_micros(us: u64) -> Self {
        Duration(us.saturating_mul(1_000))
    }
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms.saturating_mul(1_000_000))
    }
    pub const fn from_secs(s: u64) -> Self {
        Duration(s.saturating_mul(1_000_000_000))
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    pub const fn saturating_mul(self, k: u64) -> Duration {
        Duration(self.0.saturating_mul(k))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.0))
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: `a - b` is zero when `b` is later than `a`.
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_since(earlier)
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, d: Duration) -> Duration {
        Duration(self.0.saturating_add(d.0))
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, d: Duration) -> Duration {
        Duration(self.0.saturating_sub(d.0))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns >= 1_000_000_000 && ns % 1_000_000 == 0 {
            write!(f, "{}ms", ns / 1_000_000)
        } else if ns >= 1_000 && ns % 1_000 == 0 {
            write!(f, "{}us", ns / 1_000)
        } else {
            write!(f, "{}ns", ns)
        }
    }
}

/// A data rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(u64);

impl Rate {
    pub const ZERO: Rate = Rate(0);

    pub const fn from_bps(bps: u64) -> Self {
        Rate(bps)
    }
    pub const fn from_kbps(k: u64) -> Self {
        Rate(k.saturating_mul(1_000))
    }
    pub const fn from_mbps(m: u64) -> Self {
        Rate(m.saturating_mul(1_000_000))
    }
    pub const fn from_gbps(g: u64) -> Self {
        Rate(g.saturating_mul(1_000_000_000))
    }
    /// Rounds to the nearest bit per second; negative and NaN become zero.
    pub fn from_bps_f64(bps: f64) -> Self {
        if bps.is_nan() || bps <= 0.0 {
            Rate(0)
        } else if bps >= u64::MAX as f64 {
            Rate(u64::MAX)
        } else {
            Rate((bps + 0.5) as u64)
        }
    }
    pub const fn as_bps(self) -> u64 {
        self.0
    }
    pub fn as_bps_f64(self) -> f64 {
        self.0 as f64
    }
    pub fn as_gbps_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }

    /// Time to serialise `bytes` octets at this rate, rounded up to the next nanosecond.
    /// A zero rate never finishes: `Duration::MAX`.
    pub fn tx_time(self, bytes: u64) -> Duration {
        if self.0 == 0 {
            return Duration::MAX;
        }
        let bits = (bytes as u128) * 8 * 1_000_000_000;
        let ns = bits.div_ceil(self.0 as u128);
        Duration(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// Octets this rate carries in `d`, rounded down.
    pub fn bytes_in(self, d: Duration) -> u64 {
        let b = (self.0 as u128) * (d.0 as u128) / 8 / 1_000_000_000;
        u64::try_from(b).unwrap_or(u64::MAX)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= 1_000_000_000 && b % 1_000_000 == 0 {
            write!(f, "{}gbit", b as f64 / 1e9)
        } else if b >= 1_000_000 && b % 1_000 == 0 {
            write!(f, "{}mbit", b as f64 / 1e6)
        } else if b >= 1_000 && b % 1_000 == 0 {
            write!(f, "{}kbit", b / 1_000)
        } else {
            write!(f, "{}bit", b)
        }
    }
}

/// Error from [`Rate::parse`]: the text is not a rate such as `1gbit`, `100mbit`, `40Gbps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseRateError;

impl fmt::Display for ParseRateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "not a rate: expected a number and a unit such as 1gbit, 100mbit, 40Gbps, 5Mbps",
        )
    }
}

impl Rate {
    /// Parses tc-style (`1gbit`, `100mbit`, `64kbit`, `1000bit`) and `Gbps`/`Mbps`/`Kbps`/`bps`
    /// spellings, case-insensitively; decimals allowed (`2.5gbit`). Bits, never bytes.
    pub fn parse(s: &str) -> Result<Rate, ParseRateError> {
        let s = s.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or(ParseRateError)?;
        let (num, unit) = s.split_at(split);
        let value: f64 = num.parse().map_err(|_| ParseRateError)?;
        let mult = match unit.trim().to_ascii_lowercase().as_str() {
            "bit" | "bps" | "b/s" => 1.0,
            "kbit" | "kbps" | "kb/s" => 1e3,
            "mbit" | "mbps" | "mb/s" => 1e6,
            "gbit" | "gbps" | "gb/s" => 1e9,
            "tbit" | "tbps" | "tb/s" => 1e12,
            _ => return Err(ParseRateError),
        };
        let bps = value * mult;
        if !bps.is_finite() || bps < 0.0 || bps > u64::MAX as f64 {
            return Err(ParseRateError);
        }
        Ok(Rate::from_bps_f64(bps))
    }
}

/// Identifies a flow end to end: the 802.1Qau RPID (16 bits on the wire), a RoCEv2 QP number
/// (24 bits), or quench's own test-traffic flow id (32 bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId(pub u32);

impl fmt::Display for FlowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Egress priority (802.1p PCP / traffic class), 0..=7.
pub const PRIORITIES: usize = 8;

/// A uniform draw in [0, 1) from the top 53 bits of a random word (the `urand()` of seed 000
/// line 168, ns-3's `UniformVariable(0, 1)`): every QCN/RED sampling decision, simulated link
/// loss and generated flow size goes through this one conversion, so a seed replays everywhere.
pub fn unit_interval(random_word: u64) -> f64 {
    (random_word >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_time_of_a_full_frame_at_10g() {
        // 1500 octets = 12000 bits at 10 Gb/s = 1200 ns.
        assert_eq!(
            Rate::from_gbps(10).tx_time(1500),
            Duration::from_nanos(1200)
        );
        // 64 octets at 1 Gb/s = 512 ns; rounding up at an odd rate.
        assert_eq!(Rate::from_gbps(1).tx_time(64), Duration::from_nanos(512));
        assert_eq!(
            Rate::from_bps(3).tx_time(1),
            Duration::from_nanos(2_666_666_667)
        );
        assert_eq!(Rate::ZERO.tx_time(1), Duration::MAX);
    }

    #[test]
    fn parse_rates() {
        assert_eq!(Rate::parse("1gbit"), Ok(Rate::from_gbps(1)));
        assert_eq!(Rate::parse("100mbit"), Ok(Rate::from_mbps(100)));
        assert_eq!(Rate::parse("40Gbps"), Ok(Rate::from_gbps(40)));
        assert_eq!(Rate::parse("2.5gbit"), Ok(Rate::from_bps(2_500_000_000)));
        assert_eq!(Rate::parse("5 Mbps"), Ok(Rate::from_mbps(5)));
        assert!(Rate::parse("fast").is_err());
        assert!(Rate::parse("10").is_err());
        assert!(Rate::parse("10MB").is_err());
    }

    #[test]
    fn unit_interval_spans_zero_to_below_one() {
        assert_eq!(unit_interval(0), 0.0);
        assert_eq!(unit_interval(1 << 11), 1.0 / (1u64 << 53) as f64);
        assert!(unit_interval(u64::MAX) < 1.0);
        assert_eq!(unit_interval(1 << 63), 0.5);
    }

    #[test]
    fn time_saturates() {
        let t = Instant::from_nanos(5);
        assert_eq!(t - Instant::from_nanos(9), Duration::ZERO);
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
    }

    proptest::proptest! {
        #[test]
        fn bytes_in_tx_time_round_trips(bps in 1_000u64..400_000_000_000, bytes in 0u64..10_000_000) {
            let r = Rate::from_bps(bps);
            // Serialising for tx_time(bytes) carries at least `bytes` (tx_time rounds up).
            proptest::prop_assert!(r.bytes_in(r.tx_time(bytes)) >= bytes);
        }

        #[test]
        fn parse_never_panics(s in ".{0,24}") {
            let _ = Rate::parse(&s);
        }
    }
}
