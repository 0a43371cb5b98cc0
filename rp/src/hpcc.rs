//! HPCC reaction point (HPCC, SIGCOMM 2019) for one flow, as the HPCC ns-3 simulator runs it
//! under `CC_MODE 3` (`rdma-hw.cc`: `HandleAckHp`, `UpdateRateHp`, `FastReactHp`; state in
//! `rdma-queue-pair.h`, `hp`).
//!
//! Each ACK echoes the INT hops its data packet collected ([`crate::int`]). Per hop the
//! reaction point estimates the link's utilisation from the change since the previous ACK's
//! hop: `u = txRate / lineRate + min(qlen, qlen_prev) x maxRate / lineRate / win`, and smooths
//! it over one base RTT. Once per RTT (an ACK beyond `m_lastUpdateSeq`, the `snd_nxt` of the
//! last full update) it sets the reference rate: multiplicatively towards `U_TARGET` when over
//! it or after `MI_THRESH` additive steps, else `+ RATE_AI`. Between full updates, with
//! `FAST_REACT`, every ACK recomputes the sending rate from the reference without moving it.
//! `MULTI_RATE` keeps one estimate and reference per hop and sends at their minimum;
//! `SAMPLE_FEEDBACK` skips, on fast reactions, hops whose queue is empty.
//!
//! Sans-IO: [`HpccState::on_ack`] takes what the ACK carries and the sender's `snd_nxt`; read
//! [`HpccState::rate`] after. No timers. Arithmetic: `f64` in ns-3's operation order, rates as
//! integer bit/s truncated where ns-3 builds a `DataRate` from a `double`.

use units::keys::{key, Key, KeyDefault, Range, Type};
use units::{Duration, Rate};

use crate::int::{IntHop, IntHops, MAX_HOPS};
use crate::params::{self, ParamError};

/// HPCC parameters, by their config.txt names (third.cc / `RdmaHw` attributes). Defaults are
/// `RdmaHw`'s attribute defaults.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct HpccParams {
    /// U_TARGET (`TargetUtil`), eta: the utilisation aimed at. Default 0.95.
    pub u_target: f64,
    /// MI_THRESH (`MiThresh`): additive steps before a multiplicative one. Default 5.
    pub mi_thresh: u32,
    /// RATE_AI (`RateAI`), Mb/s: the additive step (run.py's HPAI). Default 5.
    pub rate_ai: u64,
    /// MIN_RATE, Mb/s. Default 100.
    pub min_rate: u64,
    /// Rate ceiling, Mb/s; 0 (default) = the port speed (ns-3's `m_max_rate`).
    pub max_rate: u64,
    /// FAST_REACT: react to every ACK between full updates. Default true.
    pub fast_react: bool,
    /// MULTI_RATE: a reference rate per hop. Default true.
    pub multi_rate: bool,
    /// SAMPLE_FEEDBACK: fast reactions skip hops with an empty queue. Default false.
    pub sample_feedback: bool,
    /// INT_MULTI (`IntHop::multi`): the INT byte and queue units' multiplier. Default 1.
    pub int_multi: u32,
}

impl Default for HpccParams {
    fn default() -> Self {
        HpccParams {
            u_target: 0.95,
            mi_thresh: 5,
            rate_ai: 5,
            min_rate: 100,
            max_rate: 0,
            fast_react: true,
            multi_rate: true,
            sample_feedback: false,
            int_multi: 1,
        }
    }
}

/// The keys of [`HpccParams`].
pub const KEYS: &[Key] = &[
    params::U_TARGET_KEY,
    params::MI_THRESH_KEY,
    params::RATE_AI_KEY,
    params::MIN_RATE_KEY,
    params::MAX_RATE_KEY,
    Key {
        name: "fast_react",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("true"),
        range: Range::Any,
        doc: "React to every ACK between the once-per-RTT updates (ns-3 FAST_REACT).",
    },
    Key {
        name: "multi_rate",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("true"),
        range: Range::Any,
        doc: "Keep a reference rate per hop and send at the least (ns-3 MULTI_RATE).",
    },
    Key {
        name: "sample_feedback",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("false"),
        range: Range::Any,
        doc: "Fast reactions skip hops whose queue is empty (ns-3 SAMPLE_FEEDBACK).",
    },
    Key {
        name: "int_multi",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1"),
        range: Range::Int(1, 1 << 16),
        doc: "Multiplier of INT's byte (128) and queue (80 octets) units (ns-3 INT_MULTI).",
    },
];
const U_TARGET: &Key = key(KEYS, "u_target");
const MI_THRESH: &Key = key(KEYS, "mi_thresh");
const RATE_AI: &Key = key(KEYS, "rate_ai");
const INT_MULTI: &Key = key(KEYS, "int_multi");

/// What the network gives a flow (third.cc with `GLOBAL_T 1`: the largest of every host pair).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowPath {
    /// `m_win`, octets: the window (one BDP); HPCC's queue term divides by it.
    pub window: u64,
    /// `m_baseRtt`: the smoothing period of the utilisation estimates.
    pub base_rtt: Duration,
}

/// Validated HPCC parameters for a port and a path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HpccProfile {
    pub target_util: f64,
    pub mi_thresh: u32,
    pub rate_ai: Rate,
    pub min_rate: Rate,
    pub max_rate: Rate,
    pub fast_react: bool,
    pub multi_rate: bool,
    pub sample_feedback: bool,
    pub int_multi: u32,
    pub path: FlowPath,
}

impl HpccParams {
    /// Validates the parameters for a port of `line_rate` and flows on `path`; errors name
    /// the key.
    pub fn profile(&self, line_rate: Rate, path: FlowPath) -> Result<HpccProfile, ParamError> {
        let (max_rate, min_rate) = params::rates(self.max_rate, self.min_rate, line_rate)?;
        if path.window == 0 {
            return Err(ParamError::new(
                "window",
                0,
                "HPCC needs a window (ns-3 HAS_WIN 1): its queue term divides by it",
            ));
        }
        if path.base_rtt == Duration::ZERO {
            return Err(ParamError::new("base_rtt", 0, "must be greater than 0"));
        }
        Ok(HpccProfile {
            target_util: U_TARGET.within_f64(self.u_target)?,
            mi_thresh: MI_THRESH.within(self.mi_thresh.into())? as u32,
            rate_ai: Rate::from_mbps(RATE_AI.within(self.rate_ai)?),
            min_rate,
            max_rate,
            fast_react: self.fast_react,
            multi_rate: self.multi_rate,
            sample_feedback: self.sample_feedback,
            int_multi: INT_MULTI.within(self.int_multi.into())? as u32,
            path,
        })
    }
}

/// One hop's estimate and reference rate under `MULTI_RATE` (`hp.hopState[i]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HopState {
    pub u: f64,
    pub inc_stage: u32,
    /// `Rc`, bit/s.
    pub rc: u64,
}

/// Per-flow HPCC state (`RdmaQueuePair::hp` and `m_rate`).
#[derive(Clone, Debug, PartialEq)]
pub struct HpccState {
    /// `m_rate`: the sending rate, bit/s.
    rate: u64,
    /// `hp.m_curRate`: the reference rate of the last full update, bit/s.
    cur_rate: u64,
    /// `hp.m_lastUpdateSeq`: `snd_nxt` at the last full update; 0 before the first ACK.
    last_update_seq: u64,
    /// `hp.m_incStage`.
    inc_stage: u32,
    /// `hp.u`: the smoothed utilisation (single rate).
    u: f64,
    /// `hp.hop`: each hop's INT word as the last ACK reported it.
    hops: [IntHop; MAX_HOPS],
    /// `hp.hopState` (multi rate).
    hop_state: [HopState; MAX_HOPS],
}

/// What one ACK did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpccUpdate {
    /// The first ACK: the hops are stored, nothing else moves.
    First,
    /// A full update (once per RTT); `changed` tells whether the sending rate was set.
    Full { changed: bool },
    /// A fast reaction between full updates.
    Fast { changed: bool },
    /// Nothing: no fast reaction configured, or more hops than INT carries.
    None,
}

impl HpccState {
    /// A new flow at the ceiling, utilisation 1 (`RdmaQueuePair` constructor, `AddQueuePair`).
    pub fn new(p: &HpccProfile) -> Self {
        let max = p.max_rate.as_bps();
        HpccState {
            rate: max,
            cur_rate: max,
            last_update_seq: 0,
            inc_stage: 0,
            u: 1.0,
            hops: [IntHop::default(); MAX_HOPS],
            hop_state: [HopState {
                u: 1.0,
                inc_stage: 0,
                rc: max,
            }; MAX_HOPS],
        }
    }

    /// The sending rate (`m_rate`).
    pub fn rate(&self) -> Rate {
        Rate::from_bps(self.rate)
    }

    /// The reference rate of the last full update (`hp.m_curRate`), which `VAR_WIN` does not
    /// read (ns-3's window follows `m_rate`).
    pub fn reference_rate(&self) -> Rate {
        Rate::from_bps(self.cur_rate)
    }

    pub fn utilisation(&self) -> f64 {
        self.u
    }

    pub fn inc_stage(&self) -> u32 {
        self.inc_stage
    }

    pub fn hop_state(&self) -> &[HopState; MAX_HOPS] {
        &self.hop_state
    }

    /// An ACK for `ack_seq` carrying `int`, arriving while the sender's next sequence number is
    /// `snd_nxt`. `HandleAckHp`: a full update when the ACK passes the last update's `snd_nxt`,
    /// else a fast reaction if configured.
    pub fn on_ack(
        &mut self,
        p: &HpccProfile,
        ack_seq: u64,
        snd_nxt: u64,
        int: &IntHops,
    ) -> HpccUpdate {
        if ack_seq > self.last_update_seq {
            self.update(p, snd_nxt, int, false)
        } else if p.fast_react {
            self.update(p, snd_nxt, int, true)
        } else {
            HpccUpdate::None
        }
    }

    /// `UpdateRateHp(qp, p, ch, fast_react)`.
    fn update(&mut self, p: &HpccProfile, snd_nxt: u64, int: &IntHops, fast: bool) -> HpccUpdate {
        if self.last_update_seq == 0 {
            // "first RTT": remember snd_nxt and the hops.
            self.last_update_seq = snd_nxt;
            let n = usize::from(int.nhop).min(MAX_HOPS);
            self.hops[..n].copy_from_slice(&int.hops[..n]);
            return HpccUpdate::First;
        }
        let mut out = HpccUpdate::None;
        if let Some(hops) = int.valid() {
            let changed = self.react(p, hops, fast);
            out = if fast {
                HpccUpdate::Fast { changed }
            } else {
                HpccUpdate::Full { changed }
            };
        }
        // "if (!fast_react) if (next_seq > qp->hp.m_lastUpdateSeq) m_lastUpdateSeq = next_seq"
        if !fast && snd_nxt > self.last_update_seq {
            self.last_update_seq = snd_nxt;
        }
        out
    }

    /// The "check packet INT" block of `UpdateRateHp`; true when the rate was set.
    fn react(&mut self, p: &HpccProfile, hops: &[IntHop], fast: bool) -> bool {
        let base_rtt = p.path.base_rtt.as_nanos();
        let max_rate = p.max_rate.as_bps();
        let rule = Step {
            mi_thresh: p.mi_thresh,
            rate_ai: p.rate_ai.as_bps(),
            min_rate: p.min_rate.as_bps(),
            max_rate,
        };
        let mut big_u = 0.0f64;
        let mut dt = 0u64;
        let mut updated = [false; MAX_HOPS];
        let mut updated_any = false;
        for (i, &h) in hops.iter().enumerate() {
            if p.sample_feedback && h.qlen(p.int_multi) == 0 && fast {
                continue;
            }
            updated[i] = true;
            updated_any = true;
            let prev = self.hops[i];
            let mut tau = h.time_delta(prev);
            let duration = tau as f64 * 1e-9;
            let tx_rate = h.bytes_delta(prev, p.int_multi).wrapping_mul(8) as f64 / duration;
            let line = h.line_rate() as f64;
            let qlen = h.qlen(p.int_multi).min(prev.qlen(p.int_multi));
            let u =
                tx_rate / line + f64::from(qlen) * max_rate as f64 / line / p.path.window as f64;
            if !p.multi_rate {
                if u > big_u {
                    big_u = u;
                    dt = tau;
                }
            } else {
                tau = tau.min(base_rtt);
                let s = &mut self.hop_state[i];
                s.u = (s.u * (base_rtt - tau) as f64 + u * tau as f64) / base_rtt as f64;
            }
            self.hops[i] = h;
        }
        let mut new_rate = 0u64;
        let mut new_inc = 0u32;
        let mut per_hop = [(0u64, 0u32); MAX_HOPS];
        if !p.multi_rate {
            if updated_any {
                dt = dt.min(base_rtt);
                self.u = (self.u * (base_rtt - dt) as f64 + big_u * dt as f64) / base_rtt as f64;
                let max_c = self.u / p.target_util;
                (new_rate, new_inc) = step(self.cur_rate, self.inc_stage, max_c, &rule);
            }
        } else {
            new_rate = max_rate;
            for (i, h) in self.hop_state[..hops.len()].iter().enumerate() {
                if updated[i] {
                    per_hop[i] = step(h.rc, h.inc_stage, h.u / p.target_util, &rule);
                    new_rate = new_rate.min(per_hop[i].0);
                } else {
                    new_rate = new_rate.min(h.rc);
                }
            }
        }
        if updated_any {
            // ChangeRate(qp, new_rate)
            self.rate = new_rate;
        }
        if !fast {
            if updated_any {
                self.cur_rate = new_rate;
                // Under MULTI_RATE ns-3 stores an uninitialised `new_incStage` here; the single
                // stage is read only without MULTI_RATE, so it is left as it was.
                if !p.multi_rate {
                    self.inc_stage = new_inc;
                }
            }
            if p.multi_rate {
                for (i, s) in self.hop_state[..hops.len()].iter_mut().enumerate() {
                    if updated[i] {
                        (s.rc, s.inc_stage) = per_hop[i];
                    }
                }
            }
        }
        updated_any
    }
}

/// The reference-rate rule HPCC and HPCC-PINT share.
pub(crate) struct Step {
    pub mi_thresh: u32,
    pub rate_ai: u64,
    pub min_rate: u64,
    pub max_rate: u64,
}

/// From reference rate `rc` at stage `inc_stage` with normalised utilisation `c` (u / eta):
/// multiplicative (`rc / c + RATE_AI`, stage 0) when `c >= 1` or after MI_THRESH additive
/// steps, else additive (`rc + RATE_AI`, stage + 1); then bounded by MIN_RATE and the ceiling
/// (`UpdateRateHp`, per hop and aggregate alike; `UpdateRateHpPint`).
pub(crate) fn step(rc: u64, inc_stage: u32, c: f64, s: &Step) -> (u64, u32) {
    let (r, inc) = if c >= 1.0 || inc_stage >= s.mi_thresh {
        (dr(rc as f64 / c).wrapping_add(s.rate_ai), 0)
    } else {
        (rc.wrapping_add(s.rate_ai), inc_stage + 1)
    };
    (r.max(s.min_rate).min(s.max_rate), inc)
}

/// `DataRate(double)`: the `uint64_t` bit rate a `double` expression gives, as GCC's x86-64
/// code converts it (out of range is undefined in C++; ns-3's numbers are these): at or above
/// 2^63 the signed conversion of `x - 2^63` with the top bit flipped, else the signed
/// conversion, which gives 2^63 for NaN and for values out of `i64`'s range (so NaN is 2^63,
/// +inf and values from 2^64 on are 0, a negative value wraps).
pub(crate) fn dr(x: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    let cvttsd2si = |v: f64| -> u64 {
        if v.is_nan() || !(-TWO63..TWO63).contains(&v) {
            1 << 63
        } else {
            v as i64 as u64
        }
    };
    if x >= TWO63 {
        cvttsd2si(x - TWO63) ^ (1 << 63)
    } else {
        cvttsd2si(x)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod dr_tests {
    /// What GCC's x86-64 code gives for `(uint64_t)x` (a C++ program printed these).
    #[test]
    fn converts_as_gcc_on_x86_64() {
        assert_eq!(super::dr(f64::NAN), 1 << 63);
        assert_eq!(super::dr(f64::INFINITY), 0);
        assert_eq!(super::dr(1e20), 0);
        assert_eq!(super::dr(-5.0), u64::MAX - 4);
        assert_eq!(super::dr(1e19), 10_000_000_000_000_000_000);
        assert_eq!(super::dr(83_828_482_730.9), 83_828_482_730);
    }
}
