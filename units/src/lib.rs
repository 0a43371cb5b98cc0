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
pub mod keys;
mod param;
pub use ecn::Ecn;
pub use param::{within, ParamError, MAX_BUFFER_BYTES, MAX_TIME_NS};

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

/// How a frame's length turns into its serialisation time: a simulated link's transmission,
/// and with `rp::Spacing::Ns3` a simulated NIC's gap between a flow's frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TxTime {
    /// Rounded up to the nanosecond: a link never carries more than its rate.
    #[default]
    Ceil,
    /// As ns-3's `QbbNetDevice::TransmitStart`: "Seconds(m_bps.CalculateTxTime(p->GetSize()))",
    /// the double `bytes * 8 / bps` turned into nanoseconds by `int64x64_t`, which truncates
    /// (`Time (const int64x64_t &value) : m_data (value.GetHigh ())`). A 1048-octet frame takes
    /// 83 ns at 100 Gb/s and 20 ns at 400 Gb/s (83.84 and 20.96 exactly).
    Ns3,
}

impl TxTime {
    pub fn of(self, rate: Rate, bytes: u64) -> Duration {
        match self {
            TxTime::Ceil => rate.tx_time(bytes),
            TxTime::Ns3 => {
                if rate == Rate::ZERO {
                    return Duration::MAX;
                }
                // DataRate::CalculateTxTime: "static_cast<double>(bytes)*8/m_bps".
                let s = bytes as f64 * 8.0 / rate.as_bps() as f64;
                if s < 1.0 {
                    // Every frame: `ns3_seconds_to_nanos` with `hi` = 0, in 64-bit integers
                    // (s x 2^64 is exact and below 2^64), without the 128-bit float
                    // conversion, a library call, that took 7 % of a fat-tree simulation.
                    let lo = (s * TWO_TO_64) as u64;
                    return Duration::from_nanos(((u128::from(lo) * 1_000_000_000) >> 64) as u64);
                }
                Duration::from_nanos(u64::try_from(ns3_seconds_to_nanos(s)).unwrap_or(u64::MAX))
            }
        }
    }
}

/// 2^64 (`HP128_MAX_64` of ns-3's int64x64-128.cc).
const TWO_TO_64: f64 = 18_446_744_073_709_551_616.0;

/// ns-3's `Seconds(double)` at nanosecond resolution, for `s` >= 0: int64x64_t(double):
/// "double hi = std::floor (value); double lo = (value - hi) * HP128_MAX_64;" then
/// `(int128_t)lo` (truncated), times the 1e9 of the nanosecond resolution in 64.64 fixed
/// point, integer part.
fn ns3_seconds_to_nanos(s: f64) -> u128 {
    let hi = s.floor();
    let lo = ((s - hi) * TWO_TO_64) as u128;
    hi as u128 * 1_000_000_000 + ((lo * 1_000_000_000) >> 64)
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

/// Error from [`Rate::parse`] and [`Duration::parse`]: names the text and the spelling expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseUnitError {
    /// Not a rate: no number, or no unit, or an unknown unit.
    Rate(String),
    /// `100mbps` and the like: tc reads `bps` as bytes per second, most other tools (ns-3,
    /// iperf, NIC data sheets) as bits; refused rather than guessed.
    AmbiguousRate(String),
    /// Not a duration: no number, or no unit, or an unknown unit.
    Duration(String),
    /// A rate or duration with a minus sign: neither is ever negative.
    Negative(String),
}

impl fmt::Display for ParseUnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseUnitError::Rate(s) => write!(
                f,
                "`{s}` is not a rate: expected a number and a unit, bits per second as 1gbit, \
                 100mbit, 64kbit, 10Gb/s, or bytes per second as 125MBps, 1GB/s"
            ),
            ParseUnitError::AmbiguousRate(s) => {
                let (num, unit) = split_number(s.trim()).unwrap_or(("N", "bps"));
                let prefix = unit.get(..unit.len().saturating_sub(3)).unwrap_or("");
                write!(
                    f,
                    "`{s}` is ambiguous: tc reads `{unit}` as bytes per second, most tools as \
                     bits; write {num}{}bit for bits or {num}{}Bps for bytes",
                    prefix.to_ascii_lowercase(),
                    prefix.to_ascii_uppercase()
                )
            }
            ParseUnitError::Duration(s) => write!(
                f,
                "`{s}` is not a duration: expected a number and a unit, e.g. 10s, 1.5s, 100ms, \
                 50us, 250ns, 2min, 1h"
            ),
            ParseUnitError::Negative(s) => {
                write!(f, "`{s}` is negative: rates and durations are 0 or more")
            }
        }
    }
}

impl std::error::Error for ParseUnitError {}

/// `"2.5 gbit"` -> `("2.5", "gbit")`; `None` without a number or without a unit.
fn split_number(s: &str) -> Option<(&str, &str)> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = s.split_at(split);
    (!num.is_empty()).then_some((num, unit.trim()))
}

/// A leading minus sign is its own error, so `-5ms` is not reported as a malformed number.
fn negative(s: &str) -> Result<(), ParseUnitError> {
    match s.trim().strip_prefix('-') {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.') => {
            Err(ParseUnitError::Negative(s.to_string()))
        }
        _ => Ok(()),
    }
}

/// Multiplier of an SI prefix, case-insensitive: `""`, `k`, `m`, `g`, `t`.
fn si_prefix(p: &str) -> Option<f64> {
    Some(match p.to_ascii_lowercase().as_str() {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        _ => return None,
    })
}

impl Rate {
    /// Parses a rate with an explicit unit, with tc's meaning of bits and bytes:
    /// - bits per second: `bit`, `kbit`, `mbit`, `gbit`, `tbit` (any case), `b/s`, `kb/s`,
    ///   `Mb/s`, `Gb/s`;
    /// - bytes per second (x 8): `Bps`, `KBps`, `MBps`, `GBps`, `B/s`, `MB/s` (capital B);
    /// - `bps`, `mbps`, `Gbps` (small b before `ps`) are refused with a hint: tc reads them as
    ///   bytes, most tools as bits.
    ///
    /// Decimals allowed (`2.5gbit`). The ns-3 topology format has its own spelling:
    /// [`Rate::parse_ns3`].
    pub fn parse(s: &str) -> Result<Rate, ParseUnitError> {
        let bad = || ParseUnitError::Rate(s.to_string());
        negative(s)?;
        let (num, unit) = split_number(s.trim()).ok_or_else(bad)?;
        let value: f64 = num.parse().map_err(|_| bad())?;
        let lower = unit.to_ascii_lowercase();
        let mult = if let Some(p) = lower.strip_suffix("bit") {
            si_prefix(p).ok_or_else(bad)?
        } else if let Some(p) = unit.strip_suffix("b/s") {
            si_prefix(p).ok_or_else(bad)?
        } else if let Some(p) = unit.strip_suffix("B/s").or(unit.strip_suffix("Bps")) {
            si_prefix(p).ok_or_else(bad)? * 8.0
        } else if let Some(p) = unit.strip_suffix("bps") {
            si_prefix(p).ok_or_else(bad)?;
            return Err(ParseUnitError::AmbiguousRate(s.to_string()));
        } else {
            return Err(bad());
        };
        Self::checked(value * mult).ok_or_else(bad)
    }

    /// Parses a rate as ns-3's `DataRate` does (the HPCC topology files): `bps` and `b/s` are
    /// bits, `Bps` and `B/s` bytes, with prefixes `k`/`K`, `M`, `G` (powers of 1000) and `Ki`,
    /// `Mi`, `Gi` (powers of 1024): `100Gbps`, `40Gb/s`, `1GBps`.
    pub fn parse_ns3(s: &str) -> Result<Rate, ParseUnitError> {
        let bad = || ParseUnitError::Rate(s.to_string());
        let (num, unit) = split_number(s.trim()).ok_or_else(bad)?;
        let value: f64 = num.parse().map_err(|_| bad())?;
        let (prefix, bytes) = if let Some(p) = unit.strip_suffix("bps").or(unit.strip_suffix("b/s"))
        {
            (p, false)
        } else if let Some(p) = unit.strip_suffix("Bps").or(unit.strip_suffix("B/s")) {
            (p, true)
        } else {
            return Err(bad());
        };
        let mult = match prefix {
            "" => 1.0,
            "k" | "K" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            "Ki" => 1024.0,
            "Mi" => 1024.0 * 1024.0,
            "Gi" => 1024.0 * 1024.0 * 1024.0,
            _ => return Err(bad()),
        };
        let bits = value * mult * if bytes { 8.0 } else { 1.0 };
        Self::checked(bits).ok_or_else(bad)
    }

    fn checked(bps: f64) -> Option<Rate> {
        (bps.is_finite() && bps >= 0.0 && bps <= u64::MAX as f64).then(|| Rate::from_bps_f64(bps))
    }
}

impl Duration {
    /// A duration with its unit ([`Duration::parse`]), or a bare number of seconds, which an
    /// option that once took bare seconds still reads: then the number comes back too, so the
    /// caller can say how to write it.
    pub fn parse_or_secs(s: &str) -> Result<(Duration, Option<f64>), ParseUnitError> {
        match Duration::parse(s) {
            Ok(d) => Ok((d, None)),
            Err(e) => match s.trim().parse::<f64>() {
                Ok(secs) if secs.is_finite() && secs >= 0.0 => Ok((
                    Duration::from_nanos((secs * 1e9).round() as u64),
                    Some(secs),
                )),
                _ => Err(e),
            },
        }
    }

    /// Parses a duration with an explicit unit: `ns`, `us`, `ms`, `s`, `min`, `h`; decimals
    /// allowed (`1.5s`). A bare number is refused: its unit would be a guess.
    pub fn parse(s: &str) -> Result<Duration, ParseUnitError> {
        let bad = || ParseUnitError::Duration(s.to_string());
        negative(s)?;
        let (num, unit) = split_number(s.trim()).ok_or_else(bad)?;
        let value: f64 = num.parse().map_err(|_| bad())?;
        let ns_per = match unit {
            "ns" => 1.0,
            "us" | "\u{b5}s" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "min" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        let ns = value * ns_per;
        if !(ns.is_finite() && ns >= 0.0 && ns <= u64::MAX as f64) {
            return Err(bad());
        }
        Ok(Duration((ns + 0.5) as u64))
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
        assert_eq!(Rate::parse("100Mbit"), Ok(Rate::from_mbps(100)));
        assert_eq!(Rate::parse("2.5gbit"), Ok(Rate::from_bps(2_500_000_000)));
        assert_eq!(Rate::parse("40Gb/s"), Ok(Rate::from_gbps(40)));
        assert_eq!(Rate::parse("5 mbit"), Ok(Rate::from_mbps(5)));
        // Capital B: bytes.
        assert_eq!(Rate::parse("125MBps"), Ok(Rate::from_gbps(1)));
        assert_eq!(Rate::parse("1GB/s"), Ok(Rate::from_gbps(8)));
        assert!(Rate::parse("fast").is_err());
        assert!(Rate::parse("10").is_err());
        assert!(Rate::parse("10MB").is_err());
        assert!(Rate::parse("10xbit").is_err());
    }

    #[test]
    fn bps_is_refused_with_both_readings() {
        for s in ["100mbps", "40Gbps", "5 Mbps", "10bps"] {
            assert_eq!(
                Rate::parse(s),
                Err(ParseUnitError::AmbiguousRate(s.to_string()))
            );
        }
        let e = Rate::parse("100mbps").unwrap_err().to_string();
        assert!(
            e.contains("write 100mbit for bits or 100MBps for bytes"),
            "{e}"
        );
    }

    #[test]
    fn parse_ns3_rates() {
        assert_eq!(Rate::parse_ns3("100Gbps"), Ok(Rate::from_gbps(100)));
        assert_eq!(Rate::parse_ns3("40Gb/s"), Ok(Rate::from_gbps(40)));
        assert_eq!(Rate::parse_ns3("1GBps"), Ok(Rate::from_gbps(8)));
        assert_eq!(Rate::parse_ns3("10kbps"), Ok(Rate::from_kbps(10)));
        assert_eq!(Rate::parse_ns3("1Kibps"), Ok(Rate::from_bps(1024)));
        assert!(Rate::parse_ns3("1gbit").is_err());
        assert!(Rate::parse_ns3("1gbps").is_err());
    }

    #[test]
    fn parse_durations() {
        assert_eq!(Duration::parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(Duration::parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(Duration::parse("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(Duration::parse("50 us"), Ok(Duration::from_micros(50)));
        assert_eq!(Duration::parse("250ns"), Ok(Duration::from_nanos(250)));
        assert_eq!(Duration::parse("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(Duration::parse("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(Duration::parse("0s"), Ok(Duration::ZERO));
        for neg in ["-1s", " -5ms", "-.5s"] {
            assert_eq!(
                Duration::parse(neg),
                Err(ParseUnitError::Negative(neg.to_string()))
            );
        }
        assert_eq!(
            Rate::parse("-1gbit"),
            Err(ParseUnitError::Negative("-1gbit".to_string()))
        );
        for bad in ["10", "s", "10 seconds", "1e3s", "", "-", "-s"] {
            assert_eq!(
                Duration::parse(bad),
                Err(ParseUnitError::Duration(bad.to_string())),
                "{bad}"
            );
        }
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
            let _ = Rate::parse_ns3(&s);
            let _ = Duration::parse(&s);
            // The hint of an ambiguous rate is built from the text: it must not panic either.
            if let Err(e) = Rate::parse(&s) {
                let _ = e.to_string();
            }
        }
    }

    #[test]
    fn ns3_serialisation_times_truncate() {
        let (g100, g400) = (Rate::from_gbps(100), Rate::from_gbps(400));
        let ns = |t: TxTime, r, b| t.of(r, b).as_nanos();
        // 1048 octets: 83.84 ns and 20.96 ns; a 60-octet ACK 4.8 ns.
        assert_eq!(ns(TxTime::Ns3, g100, 1048), 83);
        assert_eq!(ns(TxTime::Ns3, g400, 1048), 20);
        assert_eq!(ns(TxTime::Ns3, g100, 60), 4);
        assert_eq!(ns(TxTime::Ceil, g100, 1048), 84);
        assert_eq!(ns(TxTime::Ceil, g400, 1048), 21);
        // An exact quotient: the double nearest 8e-8 s lies below 80 ns, so ns-3 takes 79.
        assert_eq!(ns(TxTime::Ns3, g100, 1000), 79);
        assert_eq!(ns(TxTime::Ceil, g100, 1000), 80);
        // Past one second, the whole seconds too (96 and 144 bits at 64 b/s: 1.5 s, 2.25 s).
        assert_eq!(ns(TxTime::Ns3, Rate::from_bps(64), 12), 1_500_000_000);
        assert_eq!(ns(TxTime::Ns3, Rate::from_bps(64), 18), 2_250_000_000);
    }

    proptest::proptest! {
        /// Below one second `TxTime::Ns3` takes a 64-bit shortcut; it must give what the
        /// general conversion gives.
        #[test]
        fn ns3_tx_time_shortcut_is_the_general_conversion(
            bytes in 0u64..100_000_000,
            bps in 1_000u64..2_000_000_000_000,
        ) {
            let s = bytes as f64 * 8.0 / bps as f64;
            let got = TxTime::Ns3.of(Rate::from_bps(bps), bytes).as_nanos();
            proptest::prop_assert_eq!(u128::from(got), ns3_seconds_to_nanos(s));
        }
    }
}
