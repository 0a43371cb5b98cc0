//! Validation of parameters into profiles: the small checks both reaction points share (the
//! error is `units::ParamError`, one type for every crate).

use units::keys::{Key, KeyDefault, Range, Type};
use units::Rate;

pub use units::ParamError;

/// `value` must be at least 1.
pub(crate) fn positive(param: &'static str, value: u64) -> Result<u64, ParamError> {
    if value == 0 {
        Err(ParamError::new(param, value, "must be greater than 0"))
    } else {
        Ok(value)
    }
}

/// The rate ceiling: `rpg_max_rate` in Mb/s, where 0 means "the port speed"; never above
/// `line_rate`.
pub(crate) fn max_rate(rpg_max_rate_mbps: u64, line_rate: Rate) -> Result<Rate, ParamError> {
    if line_rate == Rate::ZERO {
        return Err(ParamError::new(
            "line_rate",
            line_rate,
            "must be greater than 0",
        ));
    }
    if rpg_max_rate_mbps == 0 {
        return Ok(line_rate);
    }
    Ok(Rate::from_mbps(rpg_max_rate_mbps).min(line_rate))
}

/// The rate floor `rpg_min_rate` (Mb/s): positive and not above the ceiling.
pub(crate) fn min_rate(rpg_min_rate_mbps: u64, max: Rate) -> Result<Rate, ParamError> {
    min_rate_named("rpg_min_rate", rpg_min_rate_mbps, max)
}

/// The rate floor held by key `name` (Mb/s): positive and not above the ceiling.
pub(crate) fn min_rate_named(name: &'static str, mbps: u64, max: Rate) -> Result<Rate, ParamError> {
    let min = Rate::from_mbps(positive(name, mbps)?);
    if min > max {
        return Err(ParamError::new(
            name,
            mbps,
            "must not exceed the rate ceiling / the line rate",
        ));
    }
    Ok(min)
}

/// Keys the ns-3 ACK-driven reaction points share (HPCC, HPCC-PINT, TIMELY, DCTCP).
pub(crate) const MIN_RATE_KEY: Key = Key {
    name: "min_rate",
    ty: Type::Integer,
    unit: "Mb/s",
    default: KeyDefault::Value("100"),
    range: Range::Text("1..=the rate ceiling"),
    doc: "The rate floor (ns-3 MIN_RATE).",
};
pub(crate) const MAX_RATE_KEY: Key = Key {
    name: "max_rate",
    ty: Type::Integer,
    unit: "Mb/s",
    default: KeyDefault::Value("0"),
    range: Range::Any,
    doc: "The rate ceiling; 0 is the port speed (never above it).",
};
pub(crate) const U_TARGET_KEY: Key = Key {
    name: "u_target",
    ty: Type::Float,
    unit: "",
    default: KeyDefault::Value("0.95"),
    range: Range::Float(0.01, 1.0),
    doc: "The utilisation aimed at, eta (ns-3 U_TARGET).",
};
pub(crate) const MI_THRESH_KEY: Key = Key {
    name: "mi_thresh",
    ty: Type::Integer,
    unit: "",
    default: KeyDefault::Value("5"),
    range: Range::Int(0, 1 << 16),
    doc: "Additive steps before a multiplicative one (ns-3 MI_THRESH).",
};
pub(crate) const RATE_AI_KEY: Key = Key {
    name: "rate_ai",
    ty: Type::Integer,
    unit: "Mb/s",
    default: KeyDefault::Value("5"),
    range: Range::Int(0, 1 << 30),
    doc: "The additive increase step (ns-3 RATE_AI).",
};

/// The rate ceiling and floor of an ns-3 reaction point, from `max_rate` and `min_rate` (Mb/s).
pub(crate) fn rates(
    max_mbps: u64,
    min_mbps: u64,
    line_rate: Rate,
) -> Result<(Rate, Rate), ParamError> {
    let max = max_rate(max_mbps, line_rate)?;
    Ok((max, min_rate_named("min_rate", min_mbps, max)?))
}
