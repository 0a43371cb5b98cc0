//! Validation of parameters into profiles: the small checks both reaction points share (the
//! error is `units::ParamError`, one type for every crate).

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
    let min = Rate::from_mbps(positive("rpg_min_rate", rpg_min_rate_mbps)?);
    if min > max {
        return Err(ParamError::new(
            "rpg_min_rate",
            rpg_min_rate_mbps,
            "must not exceed rpg_max_rate / the line rate",
        ));
    }
    Ok(min)
}
