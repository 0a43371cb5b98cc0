//! TIMELY reaction point (SIGCOMM 2015) for one flow, as the HPCC ns-3 simulator runs it under
//! `CC_MODE 7` (`rdma-hw.cc`: `HandleAckTimely`, `UpdateRateTimely`; state in
//! `rdma-queue-pair.h`, `tmly`).
//!
//! Each data packet carries its send time (`SeqTsHeader`, INT in its `TS` mode) and the ACK
//! echoes it; the RTT sample is the ACK's arrival time minus that stamp. Once per RTT (an ACK
//! beyond `m_lastUpdateSeq`) the RTT gradient, an EWMA of successive RTT differences over
//! `TimelyMinRtt`, picks the step: below `TLow` or with a gradient <= 0, an additive increase
//! (`RATE_AI`, or `RATE_HAI` from the sixth consecutive one); above `THigh`, a cut by
//! `beta x (1 - THigh / rtt)`; else a cut by `beta x gradient`. ns-3's fast reaction for TIMELY
//! is empty (`FastReactTimely`), so ACKs between updates change nothing.
//!
//! Sans-IO: [`TimelyState::on_ack`] takes the ACK's arrival time, its echoed stamp, its
//! sequence number and the sender's `snd_nxt`.

use units::keys::{key, Key, KeyDefault, Range, Type};
use units::{Instant, Rate};

use crate::hpcc::dr;
use crate::params::{self, ParamError};

/// TIMELY parameters. `alpha`, `beta`, `t_low`, `t_high` and `min_rtt` are `RdmaHw`'s
/// `Timely*` attributes, which config.txt does not set (their defaults are what ns-3 runs).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct TimelyParams {
    /// EWMA weight of a new RTT difference (`TimelyAlpha`). Default 0.875.
    pub alpha: f64,
    /// Multiplicative decrease factor (`TimelyBeta`). Default 0.8.
    pub beta: f64,
    /// `TimelyTLow`, ns: below it always increase. Default 50000.
    pub t_low: u64,
    /// `TimelyTHigh`, ns: above it always cut. Default 500000.
    pub t_high: u64,
    /// `TimelyMinRtt`, ns: the gradient's normaliser. Default 20000.
    pub min_rtt: u64,
    /// RATE_AI, Mb/s. Default 5.
    pub rate_ai: u64,
    /// RATE_HAI, Mb/s: the step from the sixth consecutive increase. Default 50.
    pub rate_hai: u64,
    /// MIN_RATE, Mb/s. Default 100.
    pub min_rate: u64,
    /// Rate ceiling, Mb/s; 0 (default) = the port speed.
    pub max_rate: u64,
}

impl Default for TimelyParams {
    fn default() -> Self {
        TimelyParams {
            alpha: 0.875,
            beta: 0.8,
            t_low: 50_000,
            t_high: 500_000,
            min_rtt: 20_000,
            rate_ai: 5,
            rate_hai: 50,
            min_rate: 100,
            max_rate: 0,
        }
    }
}

/// The keys of [`TimelyParams`].
pub const KEYS: &[Key] = &[
    Key {
        name: "alpha",
        ty: Type::Float,
        unit: "",
        default: KeyDefault::Value("0.875"),
        range: Range::Float(0.0, 1.0),
        doc: "EWMA weight of a new RTT difference (ns-3 TimelyAlpha).",
    },
    Key {
        name: "beta",
        ty: Type::Float,
        unit: "",
        default: KeyDefault::Value("0.8"),
        range: Range::Float(0.0, 1.0),
        doc: "Multiplicative decrease factor (ns-3 TimelyBeta).",
    },
    Key {
        name: "t_low",
        ty: Type::Integer,
        unit: "ns",
        default: KeyDefault::Value("50000"),
        range: Range::Int(0, 1 << 40),
        doc: "Below this RTT the rate always increases (ns-3 TimelyTLow).",
    },
    Key {
        name: "t_high",
        ty: Type::Integer,
        unit: "ns",
        default: KeyDefault::Value("500000"),
        range: Range::Int(1, 1 << 40),
        doc: "Above this RTT the rate is always cut (ns-3 TimelyTHigh).",
    },
    Key {
        name: "min_rtt",
        ty: Type::Integer,
        unit: "ns",
        default: KeyDefault::Value("20000"),
        range: Range::Int(1, 1 << 40),
        doc: "The RTT gradient's normaliser (ns-3 TimelyMinRtt).",
    },
    Key {
        name: "rate_ai",
        ty: Type::Integer,
        unit: "Mb/s",
        default: KeyDefault::Value("5"),
        range: Range::Int(0, 1 << 30),
        doc: "The additive increase step (ns-3 RATE_AI).",
    },
    Key {
        name: "rate_hai",
        ty: Type::Integer,
        unit: "Mb/s",
        default: KeyDefault::Value("50"),
        range: Range::Int(0, 1 << 30),
        doc: "The step from the sixth consecutive increase on (ns-3 RATE_HAI).",
    },
    params::MIN_RATE_KEY,
    params::MAX_RATE_KEY,
];
const ALPHA: &Key = key(KEYS, "alpha");
const BETA: &Key = key(KEYS, "beta");
const T_LOW: &Key = key(KEYS, "t_low");
const T_HIGH: &Key = key(KEYS, "t_high");
const MIN_RTT: &Key = key(KEYS, "min_rtt");
const RATE_AI: &Key = key(KEYS, "rate_ai");
const RATE_HAI: &Key = key(KEYS, "rate_hai");

/// Validated TIMELY parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimelyProfile {
    pub alpha: f64,
    pub beta: f64,
    pub t_low: u64,
    pub t_high: u64,
    pub min_rtt: u64,
    pub rate_ai: Rate,
    pub rate_hai: Rate,
    pub min_rate: Rate,
    pub max_rate: Rate,
}

impl TimelyParams {
    pub fn profile(&self, line_rate: Rate) -> Result<TimelyProfile, ParamError> {
        let (max_rate, min_rate) = params::rates(self.max_rate, self.min_rate, line_rate)?;
        Ok(TimelyProfile {
            alpha: ALPHA.within_f64(self.alpha)?,
            beta: BETA.within_f64(self.beta)?,
            t_low: T_LOW.within(self.t_low)?,
            t_high: T_HIGH.within(self.t_high)?,
            min_rtt: MIN_RTT.within(self.min_rtt)?,
            rate_ai: Rate::from_mbps(RATE_AI.within(self.rate_ai)?),
            rate_hai: Rate::from_mbps(RATE_HAI.within(self.rate_hai)?),
            min_rate,
            max_rate,
        })
    }
}

/// Per-flow TIMELY state (`RdmaQueuePair::tmly` and `m_rate`).
#[derive(Clone, Debug, PartialEq)]
pub struct TimelyState {
    rate: u64,
    /// `tmly.m_curRate`.
    cur_rate: u64,
    /// `tmly.m_lastUpdateSeq`.
    last_update_seq: u64,
    /// `tmly.m_incStage`: consecutive increases.
    inc_stage: u32,
    /// `tmly.lastRtt`, ns.
    last_rtt: u64,
    /// `tmly.rttDiff`, ns.
    rtt_diff: f64,
}

impl TimelyState {
    pub fn new(p: &TimelyProfile) -> Self {
        let max = p.max_rate.as_bps();
        TimelyState {
            rate: max,
            cur_rate: max,
            last_update_seq: 0,
            inc_stage: 0,
            last_rtt: 0,
            rtt_diff: 0.0,
        }
    }

    pub fn rate(&self) -> Rate {
        Rate::from_bps(self.rate)
    }

    pub fn rtt_diff(&self) -> f64 {
        self.rtt_diff
    }

    /// An ACK for `ack_seq` arriving at `now`, echoing the send stamp `sent`, while the sender's
    /// next sequence number is `snd_nxt`. True when it ran an update (the rate may have moved).
    pub fn on_ack(
        &mut self,
        p: &TimelyProfile,
        now: Instant,
        sent: Instant,
        ack_seq: u64,
        snd_nxt: u64,
    ) -> bool {
        // HandleAckTimely: only an ACK past the last update's snd_nxt updates; the fast
        // reaction (FastReactTimely) does nothing.
        if ack_seq <= self.last_update_seq {
            return false;
        }
        // UpdateRateTimely(qp, p, ch, false): "rtt = Now - ch.ack.ih.ts".
        let rtt = now.as_nanos().wrapping_sub(sent.as_nanos());
        let updated = self.last_update_seq != 0;
        if updated {
            let new_rtt_diff = rtt as i64 - self.last_rtt as i64;
            let rtt_diff = (1.0 - p.alpha) * self.rtt_diff + p.alpha * new_rtt_diff as f64;
            let gradient = rtt_diff / p.min_rtt as f64;
            let mut c = 0.0;
            let inc = if rtt < p.t_low {
                true
            } else if rtt > p.t_high {
                c = 1.0 - p.beta * (1.0 - p.t_high as f64 / rtt as f64);
                false
            } else if gradient <= 0.0 {
                true
            } else {
                c = (1.0 - p.beta * gradient).max(0.0);
                false
            };
            if inc {
                let step = if self.inc_stage < 5 {
                    p.rate_ai
                } else {
                    p.rate_hai
                };
                self.rate = (self.cur_rate + step.as_bps()).min(p.max_rate.as_bps());
                self.inc_stage += 1;
            } else {
                // "std::max(m_minRate, qp->tmly.m_curRate * c)"
                self.rate = dr(self.cur_rate as f64 * c).max(p.min_rate.as_bps());
                self.inc_stage = 0;
            }
            self.cur_rate = self.rate;
            self.rtt_diff = rtt_diff;
        }
        if snd_nxt > self.last_update_seq {
            self.last_update_seq = snd_nxt;
            self.last_rtt = rtt;
        }
        updated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_py_100g() -> TimelyProfile {
        // run.py --cc timely --bw 100: RATE_AI 100Mb/s, RATE_HAI 500Mb/s, MIN_RATE 1000Mb/s.
        TimelyParams {
            rate_ai: 100,
            rate_hai: 500,
            min_rate: 1000,
            ..TimelyParams::default()
        }
        .profile(Rate::from_gbps(100))
        .unwrap()
    }

    fn ns(t: u64) -> Instant {
        Instant::from_nanos(t)
    }

    /// Expected numbers: `UpdateRateTimely` evaluated by hand in IEEE doubles, and printed
    /// alike by ns-3's own `HandleAckTimely` / `UpdateRateTimely` compiled in the harness
    /// described in `hpcc/tests.rs`.
    /// - ACK 1 (seq 1000, snd_nxt 20000, rtt 12 us): first RTT, stores rtt and seq 20000.
    /// - ACK 2 (seq 21000, rtt 60 us): diff 48000, rtt_diff = 0.875 x 48000 = 42000, gradient
    ///   2.1 > 0 with TLow < rtt < THigh: c = 1 - 0.8 x 2.1 < 0, so 0: the rate floor, 1 Gb/s.
    /// - ACK 3 (rtt 40 us): below TLow: +100 Mb/s, stage 1.
    /// - ACK 4 (rtt 600 us): above THigh: c = 1 - 0.8 x (1 - 500/600) = 0.8666..,
    ///   1.1e9 x c = 953_333_333.33 -> the floor 1e9.
    #[test]
    fn follows_update_rate_timely() {
        let p = run_py_100g();
        let mut s = TimelyState::new(&p);
        assert!(!s.on_ack(&p, ns(12_000), ns(0), 1000, 20_000));
        assert_eq!(s.rate(), Rate::from_gbps(100));
        // Not past snd_nxt 20000: nothing.
        assert!(!s.on_ack(&p, ns(13_000), ns(1_000), 20_000, 21_000));
        assert!(s.on_ack(&p, ns(100_000), ns(40_000), 21_000, 40_000));
        assert_eq!(s.rtt_diff(), 42_000.0);
        assert_eq!(s.rate().as_bps(), 1_000_000_000);
        assert!(s.on_ack(&p, ns(200_000), ns(160_000), 41_000, 60_000));
        assert_eq!(s.rate().as_bps(), 1_100_000_000);
        // rtt_diff = 0.125 x 42000 + 0.875 x (40000 - 60000) = -12250.
        assert_eq!(s.rtt_diff(), -12_250.0);
        assert!(s.on_ack(&p, ns(1_000_000), ns(400_000), 61_000, 80_000));
        assert_eq!(s.rate().as_bps(), 1_000_000_000);
    }

    #[test]
    fn hyper_step_from_the_sixth_increase_and_the_ceiling() {
        let p = run_py_100g();
        let mut s = TimelyState::new(&p);
        s.on_ack(&p, ns(10_000), ns(0), 1, 1000);
        // Cut to the floor once (rtt 600 us), then eight increases at rtt 10 us.
        s.on_ack(&p, ns(700_000), ns(100_000), 1001, 2000);
        // c = 1 - 0.8 x (1 - 5/6) = 0.8666666666666667; 100e9 x c truncated.
        assert_eq!(s.rate().as_bps(), 86_666_666_666);
        let mut seq = 2000;
        let mut rates = Vec::new();
        for k in 0..8 {
            let t = 1_000_000 + k * 100_000;
            s.on_ack(&p, ns(t), ns(t - 10_000), seq + 1, seq + 1000);
            seq += 1000;
            rates.push(s.rate().as_bps());
        }
        let base = rates[0] - 100_000_000;
        let want: Vec<u64> = [1, 2, 3, 4, 5, 10, 15, 20]
            .iter()
            .map(|k| base + k * 100_000_000)
            .collect();
        assert_eq!(rates, want);
        // The harness's RTT gradient EWMA after the last of them.
        assert_eq!(s.rtt_diff(), -0.21539628505706787);
    }
}
