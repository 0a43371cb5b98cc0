//! Ternary congestion detection (TCD), after seed 004 ("Congestion Detection in Lossless
//! Networks", SIGCOMM '21, section 4) and tcd.md.
//!
//! # Method groups and call order
//! 1. Configure: [`TcdParams`] (B1, B0, tau, C, epsilon, period T, thresholds) ->
//!    [`TcdProfile::new`], which computes max(Ton) from eq. (3).
//! 2. Create: [`TcdPort::new`]`(&profile, now)` per egress port (per lossless queue).
//! 3. Flow control on the port: [`TcdPort::on_pause`]`(now)` when a received PAUSE stops it (an
//!    OFF period begins), [`TcdPort::on_resume`]`(now)` when it may send again (the OFF period
//!    ends: a resume frame or the pause quanta ran out).
//! 4. Per packet leaving the port: [`TcdPort::on_dequeue`]`(&profile, now, queue_bytes, codepoint)`
//!    -> the [`TcdCodepoint`] to write into the packet's ECN field.
//! 5. Timer: when `now >= `[`TcdPort::next_deadline`], [`TcdPort::on_timeout`]`(&profile, now,
//!    queue_bytes)` checks the queue trend over the period T. A spurious call does nothing.
//!    `on_dequeue` also runs an overdue check first, so a caller that only feeds packets still
//!    sees the trend applied.
//!
//! The queue belongs to the caller, who hands its length in (octets).
//!
//! Interpretation of the seed where it leaves room (each also at the code):
//! - Entering undetermined is decided at each dequeue (seed: "When each packet dequeues ...
//!   switches calculate the current Ton ... If the current Ton is smaller than max(Ton), the port
//!   is considered as entering an ON-OFF sending pattern"), and also when a PAUSE ends an ON
//!   period shorter than max(Ton) (tcd.md: "If a port goes OFF (paused) and the current Ton <
//!   max(Ton)").
//! - After the port leaves the ON-OFF pattern (continuously ON for max(Ton)), it stays
//!   undetermined until the queue trend decides ("After max(Ton) expires, it may take some time
//!   for the port to drain out the accumulated packets caused by OFF").
//! - The trend rule, applied every period T outside ON-OFF patterns (also between the congestion
//!   and non-congestion states, where "the queue length is the primary transition condition"):
//!   "Once the queue size increases in the current period T and exceeds the threshold, the
//!   current state transits to congestion. The current state changes to non-congestion if the
//!   queue size has already decreased to a low threshold value." Otherwise the state is kept.
//! - T and the two thresholds are not given by the seed: they are configuration with quench's
//!   own defaults (tcd.md: "make every unstated constant a documented configuration value").
use units::{Duration, Instant, Rate};

use units::keys::{key, Key, KeyDefault, Range, Type};

use crate::ParamError;

/// The ternary code points in the 2-bit ECN field (seed 004, Table 1). Meaning only: the engine
/// writes the bits (00, 01, 10, 11).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcdCodepoint {
    /// 00: Non TCD-Capable Transport. Never marked.
    NotCapable,
    /// 01: TCD-Capable Transport.
    Capable,
    /// 10: Undetermined Encountered.
    Ue,
    /// 11: Congestion Encountered.
    Ce,
}

impl From<crate::Ecn> for TcdCodepoint {
    /// seed 004 Table 1: the same two bits, read as TCD code points.
    fn from(e: crate::Ecn) -> TcdCodepoint {
        match e {
            crate::Ecn::NotEct => TcdCodepoint::NotCapable,
            crate::Ecn::Ect1 => TcdCodepoint::Capable,
            crate::Ecn::Ect0 => TcdCodepoint::Ue,
            crate::Ecn::Ce => TcdCodepoint::Ce,
        }
    }
}

impl From<TcdCodepoint> for crate::Ecn {
    /// seed 004 Table 1: 00 not capable, 01 capable, 10 UE, 11 CE.
    fn from(c: TcdCodepoint) -> crate::Ecn {
        match c {
            TcdCodepoint::NotCapable => crate::Ecn::TCD_NOT_CAPABLE,
            TcdCodepoint::Capable => crate::Ecn::TCD_CAPABLE,
            TcdCodepoint::Ue => crate::Ecn::TCD_UNDETERMINED,
            TcdCodepoint::Ce => crate::Ecn::TCD_CONGESTED,
        }
    }
}

/// The ternary port states (seed 004, section 4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PortState {
    #[default]
    NonCongestion,
    /// Paused intermittently by hop-by-hop flow control (an ON-OFF sending pattern), or
    /// draining after one: the actual state is not yet known.
    Undetermined,
    Congestion,
}

/// TCD parameters as users write them (seed 004, Table 2 names).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct TcdParams {
    /// B1: the downstream ingress queue length that triggers OFF (PFC XOFF), octets.
    /// Default 100000.
    pub b1_bytes: u64,
    /// B0: the downstream ingress queue length that triggers ON (PFC XON), octets. Default
    /// 97000: B1 - B0 = 2 MTU, "the recommended value ... in PFC" (seed 004).
    pub b0_bytes: u64,
    /// tau: the response time to start/stop transmitting, ns. Default 8000 (seed 004, Fig. 8).
    pub tau_ns: u64,
    /// C: link capacity. Default 40 Gb/s (seed 004, Fig. 8).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "crate::de::rate"))]
    pub link_rate: Rate,
    /// epsilon: the congestion degree (Ri - Rd)/C that max(Ton) must cover. Default 0.05, "We
    /// empirically recommend epsilon to 0.05" (seed 004).
    pub epsilon: f64,
    /// T: the queue-trend period, ns. Default 10000 (quench's choice, U: not in the seed).
    pub period_ns: u64,
    /// The queue must exceed this (and have grown over T) to enter congestion, octets.
    /// Default 40000 (quench's choice, U).
    pub congestion_threshold_bytes: u64,
    /// The queue at or below this means non-congestion, octets. Default 10000 (quench's
    /// choice, U).
    pub non_congestion_threshold_bytes: u64,
}

impl Default for TcdParams {
    fn default() -> Self {
        TcdParams {
            b1_bytes: 100_000,
            b0_bytes: 97_000,
            tau_ns: 8_000,
            link_rate: Rate::from_gbps(40),
            epsilon: 0.05,
            period_ns: 10_000,
            congestion_threshold_bytes: 40_000,
            non_congestion_threshold_bytes: 10_000,
        }
    }
}

/// The keys of [`TcdParams`], as the configuration reference lists them; the validation checks the
/// integer and float ranges given here.
pub const KEYS: &[Key] = &[
    Key {
        name: "b1_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("100000"),
        range: Range::Int(0, units::MAX_BUFFER_BYTES),
        doc: "B1: the downstream ingress queue that triggers OFF (PFC XOFF).",
    },
    Key {
        name: "b0_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("97000"),
        range: Range::Text("<= b1_bytes"),
        doc: "B0: the downstream ingress queue that triggers ON (PFC XON); B1 - B0 = 2 MTU as \
              seed 004 recommends.",
    },
    Key {
        name: "tau_ns",
        ty: Type::Integer,
        unit: "ns",
        default: KeyDefault::Value("8000"),
        range: Range::Int(0, units::MAX_TIME_NS),
        doc: "tau: the response time to start or stop sending (seed 004, Fig. 8).",
    },
    Key {
        name: "link_rate",
        ty: Type::Rate,
        unit: "",
        default: KeyDefault::Value("\"40gbit\""),
        range: Range::Text("> 0"),
        doc: "C: the link capacity (seed 004, Fig. 8); the simulator sets each port's.",
    },
    Key {
        name: "epsilon",
        ty: Type::Float,
        unit: "",
        default: KeyDefault::Value("0.05"),
        range: Range::Text("(0, 1]"),
        doc: "The congestion degree (Ri - Rd)/C that max(Ton) must cover (seed 004 recommends \
              0.05).",
    },
    Key {
        name: "period_ns",
        ty: Type::Integer,
        unit: "ns",
        default: KeyDefault::Value("10000"),
        range: Range::Int(1, units::MAX_TIME_NS),
        doc: "T: the queue-trend period.",
    },
    Key {
        name: "congestion_threshold_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("40000"),
        range: Range::Int(0, units::MAX_BUFFER_BYTES),
        doc: "The queue must exceed this, and have grown over T, to enter congestion.",
    },
    Key {
        name: "non_congestion_threshold_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("10000"),
        range: Range::Text("<= congestion_threshold_bytes"),
        doc: "The queue at or below this means non-congestion.",
    },
];

const B1_BYTES: &Key = key(KEYS, "b1_bytes");
const TAU_NS: &Key = key(KEYS, "tau_ns");
const PERIOD_NS: &Key = key(KEYS, "period_ns");
const CONGESTION_THRESHOLD_BYTES: &Key = key(KEYS, "congestion_threshold_bytes");

/// Validated TCD parameters with max(Ton) precomputed.
#[derive(Clone, Debug, PartialEq)]
pub struct TcdProfile {
    max_ton: Duration,
    period: Duration,
    high: u64,
    low: u64,
}

/// max(Ton), eq. (3) of seed 004: "Ton <= (2(B1 - B0) + tau*C) / (2*epsilon*C) + tau", with B in
/// bits, C in bit/s, tau in seconds; rounded to the nearest ns. Defaults: (2*3000*8 + 8e-6*40e9)
/// / (2*0.05*40e9) + 8e-6 = 368000/4e9 + 8e-6 = 92 us + 8 us = 100 us.
pub fn max_ton(b1_bytes: u64, b0_bytes: u64, tau: Duration, c: Rate, epsilon: f64) -> Duration {
    let b_bits = b1_bytes.saturating_sub(b0_bytes) as f64 * 8.0;
    let tau_s = tau.as_secs_f64();
    let c = c.as_bps_f64();
    let secs = (2.0 * b_bits + tau_s * c) / (2.0 * epsilon * c) + tau_s;
    let ns = (secs * 1e9).round();
    if ns >= u64::MAX as f64 {
        Duration::MAX
    } else {
        Duration::from_nanos(ns as u64)
    }
}

impl TcdProfile {
    pub fn new(p: &TcdParams) -> Result<Self, ParamError> {
        B1_BYTES.within(p.b1_bytes)?;
        CONGESTION_THRESHOLD_BYTES.within(p.congestion_threshold_bytes)?;
        TAU_NS.within(p.tau_ns)?;
        if p.b0_bytes > p.b1_bytes {
            return Err(ParamError::new(
                "b0_bytes",
                p.b0_bytes,
                format!("must not exceed b1_bytes ({})", p.b1_bytes),
            ));
        }
        if p.link_rate == Rate::ZERO {
            return Err(ParamError::new(
                "link_rate",
                p.link_rate,
                "must be above zero",
            ));
        }
        if !(p.epsilon > 0.0 && p.epsilon <= 1.0) {
            return Err(ParamError::new("epsilon", p.epsilon, "must be in (0, 1]"));
        }
        PERIOD_NS.within(p.period_ns)?;
        if p.non_congestion_threshold_bytes > p.congestion_threshold_bytes {
            return Err(ParamError::new(
                "non_congestion_threshold_bytes",
                p.non_congestion_threshold_bytes,
                format!(
                    "must not exceed congestion_threshold_bytes ({})",
                    p.congestion_threshold_bytes
                ),
            ));
        }
        Ok(TcdProfile {
            max_ton: max_ton(
                p.b1_bytes,
                p.b0_bytes,
                Duration::from_nanos(p.tau_ns),
                p.link_rate,
                p.epsilon,
            ),
            period: Duration::from_nanos(p.period_ns),
            high: p.congestion_threshold_bytes,
            low: p.non_congestion_threshold_bytes,
        })
    }

    /// max(Ton) from eq. (3).
    pub fn max_ton(&self) -> Duration {
        self.max_ton
    }

    /// The queue-trend period T.
    pub fn period(&self) -> Duration {
        self.period
    }
}

/// TCD state of one egress port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcdPort {
    state: PortState,
    /// The port is OFF (paused).
    off: bool,
    /// When the latest OFF period ended ("the timestamp when the latest OFF period ends").
    last_off_end: Option<Instant>,
    /// The length of the last completed ON period (from an OFF end to the next OFF start).
    last_ton: Option<Duration>,
    /// The current trend period started here, with this queue length.
    period_start: Instant,
    period_start_queue: u64,
}

impl TcdPort {
    /// A port in the non-congestion state, never paused; the first trend period starts `now`
    /// with an empty queue.
    pub fn new(_profile: &TcdProfile, now: Instant) -> Self {
        TcdPort {
            state: PortState::NonCongestion,
            off: false,
            last_off_end: None,
            last_ton: None,
            period_start: now,
            period_start_queue: 0,
        }
    }

    pub fn state(&self) -> PortState {
        self.state
    }

    pub fn is_off(&self) -> bool {
        self.off
    }

    /// The current Ton: time since the latest OFF period ended (`None`: never paused, or OFF
    /// now).
    pub fn ton(&self, now: Instant) -> Option<Duration> {
        if self.off {
            return None;
        }
        self.last_off_end.map(|t| now - t)
    }

    /// The length of the last completed ON period.
    pub fn last_ton(&self) -> Option<Duration> {
        self.last_ton
    }

    /// The port is in an ON-OFF sending pattern: OFF now, or ON for less than max(Ton) since
    /// the latest OFF period ended.
    pub fn in_on_off_pattern(&self, profile: &TcdProfile, now: Instant) -> bool {
        self.off || self.ton(now).is_some_and(|ton| ton < profile.max_ton)
    }

    /// A PAUSE stopped the port: an OFF period begins. Repeated calls while OFF are no-ops.
    pub fn on_pause(&mut self, profile: &TcdProfile, now: Instant) {
        if self.off {
            return;
        }
        if let Some(ton) = self.ton(now) {
            self.last_ton = Some(ton);
            // tcd.md: "If a port goes OFF (paused) and the current Ton < max(Ton), the port is
            // in an ON-OFF pattern: undetermined."
            if ton < profile.max_ton {
                self.state = PortState::Undetermined;
            }
        }
        self.off = true;
    }

    /// The port may send again: the OFF period ends. No-op if it was not OFF.
    pub fn on_resume(&mut self, now: Instant) {
        if self.off {
            self.off = false;
            self.last_off_end = Some(now);
        }
    }

    /// When the current trend period ends.
    pub fn next_deadline(&self, profile: &TcdProfile) -> Option<Instant> {
        Some(self.period_start + profile.period)
    }

    /// The trend check at the end of a period T; `queue_bytes` is the port's queue now.
    pub fn on_timeout(&mut self, profile: &TcdProfile, now: Instant, queue_bytes: u64) {
        if now < self.period_start + profile.period {
            return;
        }
        if !self.in_on_off_pattern(profile, now) {
            // "Once the queue size increases in the current period T and exceeds the
            // threshold, the current state transits to congestion."
            if queue_bytes > self.period_start_queue && queue_bytes > profile.high {
                self.state = PortState::Congestion;
            // "The current state changes to non-congestion if the queue size has already
            // decreased to a low threshold value."
            } else if queue_bytes <= profile.low {
                self.state = PortState::NonCongestion;
            }
        }
        self.period_start = now;
        self.period_start_queue = queue_bytes;
    }

    /// A packet carrying `codepoint` leaves the port, whose queue now holds `queue_bytes`;
    /// returns the codepoint to write.
    pub fn on_dequeue(
        &mut self,
        profile: &TcdProfile,
        now: Instant,
        queue_bytes: u64,
        codepoint: TcdCodepoint,
    ) -> TcdCodepoint {
        self.on_timeout(profile, now, queue_bytes);
        // "When each packet dequeues (the port is ON), switches calculate the current Ton ...
        // If the current Ton is smaller than max(Ton), the port is considered as entering an
        // ON-OFF sending pattern."
        if self.in_on_off_pattern(profile, now) {
            self.state = PortState::Undetermined;
        }
        mark(self.state, codepoint)
    }
}

/// The marking rule (seed 004): "UE can only be marked when the current code point is not CE.
/// Switches mark CE whenever the port is in a congestion state." Non-TCD-capable packets are
/// never marked; nothing is ever lowered (CE stays CE, UE can only become CE).
pub fn mark(state: PortState, codepoint: TcdCodepoint) -> TcdCodepoint {
    match (state, codepoint) {
        (_, TcdCodepoint::NotCapable) => TcdCodepoint::NotCapable,
        (PortState::Congestion, _) => TcdCodepoint::Ce,
        (PortState::Undetermined, TcdCodepoint::Ce) => TcdCodepoint::Ce,
        (PortState::Undetermined, _) => TcdCodepoint::Ue,
        (PortState::NonCongestion, c) => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(us: u64) -> Instant {
        Instant::from_nanos(us * 1_000)
    }

    #[test]
    fn max_ton_by_hand() {
        // Defaults (module doc): 100 us.
        let p = TcdProfile::new(&TcdParams::default()).unwrap();
        assert_eq!(p.max_ton(), Duration::from_micros(100));
        // B1 - B0 = 0, tau = 8 us, C = 40G, eps = 0.05: 320000/4e9 + 8e-6 = 80 + 8 = 88 us.
        assert_eq!(
            max_ton(5, 5, Duration::from_micros(8), Rate::from_gbps(40), 0.05),
            Duration::from_micros(88)
        );
        // 10G, B1 - B0 = 2 MTU = 3000, tau 2 us, eps 0.1: (48000 + 20000)/(2e9) + 2e-6 =
        // 34 us + 2 us = 36 us.
        assert_eq!(
            max_ton(3_000, 0, Duration::from_micros(2), Rate::from_gbps(10), 0.1),
            Duration::from_micros(36)
        );
    }

    #[test]
    fn marking_rule() {
        use PortState::*;
        use TcdCodepoint::*;
        assert_eq!(mark(Congestion, Capable), Ce);
        assert_eq!(mark(Congestion, Ue), Ce);
        assert_eq!(mark(Congestion, NotCapable), NotCapable);
        assert_eq!(mark(Undetermined, Capable), Ue);
        assert_eq!(mark(Undetermined, Ce), Ce);
        assert_eq!(mark(NonCongestion, Capable), Capable);
        assert_eq!(mark(NonCongestion, Ue), Ue);
    }

    /// A port walks through the three states. Defaults: max(Ton) = 100 us, T = 10 us, high
    /// 40000, low 10000. Times in us.
    #[test]
    fn state_trace_by_hand() {
        let p = TcdProfile::new(&TcdParams::default()).unwrap();
        let mut port = TcdPort::new(&p, t(0));
        use TcdCodepoint::*;
        // t = 5: queue 20000, no pause ever: non-congestion, the packet keeps its codepoint.
        assert_eq!(port.on_dequeue(&p, t(5), 20_000, Capable), Capable);
        assert_eq!(port.next_deadline(&p), Some(t(10)));
        // t = 10: period ends, queue 50000 > 0 at start and > 40000 -> congestion; marks CE.
        port.on_timeout(&p, t(10), 50_000);
        assert_eq!(port.state(), PortState::Congestion);
        assert_eq!(port.on_dequeue(&p, t(11), 50_000, Capable), Ce);
        // t = 20: paused (OFF). First pause ever: no Ton yet, the state is kept.
        port.on_pause(&p, t(20));
        assert!(port.is_off());
        // Trend checks while OFF decide nothing (t = 21 closes the period started at 10; the
        // dequeue at 11 fell inside it).
        port.on_timeout(&p, t(21), 90_000);
        assert_eq!(port.state(), PortState::Congestion);
        // t = 30: resumed; the OFF period ended at 30. t = 31: dequeue, Ton = 1 us < 100 us ->
        // undetermined; a CE packet stays CE, a capable one becomes UE.
        port.on_resume(t(30));
        assert_eq!(port.on_dequeue(&p, t(31), 80_000, Ce), Ce);
        assert_eq!(port.state(), PortState::Undetermined);
        assert_eq!(port.on_dequeue(&p, t(31), 80_000, Capable), Ue);
        assert_eq!(port.ton(t(31)), Some(Duration::from_micros(1)));
        // t = 60: paused again after an ON period of 30 us (< 100): undetermined, last Ton 30.
        port.on_pause(&p, t(60));
        assert_eq!(port.last_ton(), Some(Duration::from_micros(30)));
        port.on_resume(t(70));
        // t = 169: Ton = 99 us < 100: still ON-OFF; the trend check (period from 31) decides
        // nothing.
        assert_eq!(port.on_dequeue(&p, t(169), 60_000, Capable), Ue);
        // t = 180: Ton = 110 us >= max(Ton): the pattern is over. Queue 30000, which fell from
        // 60000 at t = 169 but is above the low threshold: still undetermined (draining).
        port.on_timeout(&p, t(180), 30_000);
        assert_eq!(port.state(), PortState::Undetermined);
        // t = 190: queue 8000 <= 10000 -> non-congestion; packets pass unmarked.
        port.on_timeout(&p, t(190), 8_000);
        assert_eq!(port.state(), PortState::NonCongestion);
        assert_eq!(port.on_dequeue(&p, t(191), 8_000, Capable), Capable);
        // t = 200, 210: queue grows to 30000 (not above high): kept; then 45000 > 40000 and grew
        // -> congestion.
        port.on_timeout(&p, t(200), 30_000);
        assert_eq!(port.state(), PortState::NonCongestion);
        port.on_timeout(&p, t(210), 45_000);
        assert_eq!(port.state(), PortState::Congestion);
        // A spurious timeout (before 220) does nothing.
        port.on_timeout(&p, t(215), 0);
        assert_eq!(port.state(), PortState::Congestion);
    }

    #[test]
    fn validation_names_the_parameter() {
        let bad = |f: fn(&mut TcdParams)| {
            let mut p = TcdParams::default();
            f(&mut p);
            TcdProfile::new(&p).unwrap_err().param
        };
        assert_eq!(bad(|p| p.b0_bytes = p.b1_bytes + 1), "b0_bytes");
        assert_eq!(bad(|p| p.link_rate = Rate::ZERO), "link_rate");
        assert_eq!(bad(|p| p.epsilon = 0.0), "epsilon");
        assert_eq!(bad(|p| p.period_ns = 0), "period_ns");
        assert_eq!(
            bad(|p| p.non_congestion_threshold_bytes = 50_000),
            "non_congestion_threshold_bytes"
        );
    }

    #[derive(Clone, Debug)]
    enum Op {
        Pause,
        Resume,
        Dequeue(u64, TcdCodepoint),
        Timeout(u64),
    }

    fn codepoint() -> impl Strategy<Value = TcdCodepoint> {
        prop_oneof![
            Just(TcdCodepoint::NotCapable),
            Just(TcdCodepoint::Capable),
            Just(TcdCodepoint::Ue),
            Just(TcdCodepoint::Ce),
        ]
    }

    fn op() -> impl Strategy<Value = (u64, Op)> {
        (
            0u64..40_000,
            prop_oneof![
                1 => Just(Op::Pause),
                1 => Just(Op::Resume),
                4 => (0u64..100_000, codepoint()).prop_map(|(q, c)| Op::Dequeue(q, c)),
                2 => (0u64..100_000).prop_map(Op::Timeout),
            ],
        )
    }

    proptest! {
        /// Model-based: random pause/resume/dequeue/timeouts. Marking never turns CE into UE,
        /// never lowers anything, never marks a non-TCD packet; a dequeue within max(Ton) of an
        /// OFF end always leaves the port undetermined; Ton matches the model; congestion is
        /// only entered by a trend check outside ON-OFF patterns.
        #[test]
        fn tcd_model(ops in prop::collection::vec(op(), 1..300)) {
            let p = TcdProfile::new(&TcdParams::default()).unwrap();
            let mut port = TcdPort::new(&p, Instant::ZERO);
            let mut now = Instant::ZERO;
            let mut off = false;
            let mut off_end: Option<Instant> = None;
            let rank = |c: TcdCodepoint| match c {
                TcdCodepoint::NotCapable => 0,
                TcdCodepoint::Capable => 1,
                TcdCodepoint::Ue => 2,
                TcdCodepoint::Ce => 3,
            };
            for (dt, o) in ops {
                now += Duration::from_nanos(dt);
                let before = port.state();
                match o {
                    Op::Pause => { port.on_pause(&p, now); off = true; }
                    Op::Resume => {
                        if off { off_end = Some(now); }
                        off = false;
                        port.on_resume(now);
                    }
                    Op::Timeout(q) => port.on_timeout(&p, now, q),
                    Op::Dequeue(q, c) => {
                        let out = port.on_dequeue(&p, now, q, c);
                        prop_assert!(!(c == TcdCodepoint::Ce && out == TcdCodepoint::Ue));
                        if c == TcdCodepoint::NotCapable {
                            prop_assert_eq!(out, TcdCodepoint::NotCapable);
                        } else {
                            prop_assert!(rank(out) >= rank(c));
                        }
                        let in_pattern = off || off_end.is_some_and(|e| now - e < p.max_ton());
                        if in_pattern {
                            prop_assert_eq!(port.state(), PortState::Undetermined);
                        }
                        if port.state() == PortState::Congestion && c != TcdCodepoint::NotCapable {
                            prop_assert_eq!(out, TcdCodepoint::Ce);
                        }
                    }
                }
                prop_assert_eq!(port.is_off(), off);
                let want_ton = if off { None } else { off_end.map(|e| now - e) };
                prop_assert_eq!(port.ton(now), want_ton);
                if port.state() == PortState::Congestion && before != PortState::Congestion {
                    prop_assert!(!port.in_on_off_pattern(&p, now));
                }
            }
        }
    }
}
