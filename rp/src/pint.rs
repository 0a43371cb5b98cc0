//! HPCC-PINT reaction point (PINT, SIGCOMM 2020) for one flow, as the HPCC ns-3 simulator runs
//! it under `CC_MODE 10` (`rdma-hw.cc`: `HandleAckHpPint`, `UpdateRateHpPint`; state in
//! `rdma-queue-pair.h`, `hpccPint`).
//!
//! Instead of per-hop INT, each switch folds its utilisation estimate into one number, the
//! packet's maximum over the path, coded as a power of `PINT_LOG_BASE` ([`crate::int::Pint`]),
//! and the ACK echoes it. The sender samples ACKs with probability `PINT_PROB`; on a sampled
//! ACK it runs HPCC's single-rate rule with that utilisation (once per RTT a full update of the
//! reference rate, else a fast reaction from it). Unlike [`crate::hpcc`], the fast reaction
//! always runs (ns-3 does not consult `FAST_REACT` here) and there is no smoothing at the
//! sender: the switches smooth.
//!
//! Sans-IO: [`PintState::on_ack`] takes the ACK's sequence number, its power, the sender's
//! `snd_nxt` and the sampling coin (ns-3's `rand() % 65536`).

use units::keys::{key, Key, KeyDefault, Range, Type};
use units::Rate;

use crate::hpcc::{step, Step};
use crate::int::Pint;
use crate::params::{self, ParamError};

/// HPCC-PINT parameters, by their config.txt names.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct PintParams {
    /// U_TARGET. Default 0.95.
    pub u_target: f64,
    /// MI_THRESH. Default 5.
    pub mi_thresh: u32,
    /// RATE_AI, Mb/s. Default 5.
    pub rate_ai: u64,
    /// MIN_RATE, Mb/s. Default 100.
    pub min_rate: u64,
    /// Rate ceiling, Mb/s; 0 (default) = the port speed.
    pub max_rate: u64,
    /// PINT_LOG_BASE: the code's base. Default 1.05 (`Pint::log_base`).
    pub log_base: f64,
    /// PINT_PROB: the fraction of ACKs the sender reacts to. Default 1.0.
    pub prob: f64,
}

impl Default for PintParams {
    fn default() -> Self {
        PintParams {
            u_target: 0.95,
            mi_thresh: 5,
            rate_ai: 5,
            min_rate: 100,
            max_rate: 0,
            log_base: 1.05,
            prob: 1.0,
        }
    }
}

/// The keys of [`PintParams`].
pub const KEYS: &[Key] = &[
    params::U_TARGET_KEY,
    params::MI_THRESH_KEY,
    params::RATE_AI_KEY,
    params::MIN_RATE_KEY,
    params::MAX_RATE_KEY,
    Key {
        name: "log_base",
        ty: Type::Float,
        unit: "",
        default: KeyDefault::Value("1.05"),
        range: Range::Text("> 1, with a code of at most 16 bits (>= 1.0002)"),
        doc: "The base of PINT's logarithmic utilisation code (ns-3 PINT_LOG_BASE).",
    },
    Key {
        name: "prob",
        ty: Type::Float,
        unit: "",
        default: KeyDefault::Value("1.0"),
        range: Range::Float(0.0, 1.0),
        doc: "The fraction of ACKs the sender reacts to (ns-3 PINT_PROB).",
    },
];
const U_TARGET: &Key = key(KEYS, "u_target");
const MI_THRESH: &Key = key(KEYS, "mi_thresh");
const RATE_AI: &Key = key(KEYS, "rate_ai");
const PROB: &Key = key(KEYS, "prob");

/// Validated HPCC-PINT parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PintProfile {
    pub target_util: f64,
    pub mi_thresh: u32,
    pub rate_ai: Rate,
    pub min_rate: Rate,
    pub max_rate: Rate,
    pub code: Pint,
    /// `pint_smpl_thresh` = (u32)(65536 x PINT_PROB): an ACK is used when its coin is below.
    pub sample_thresh: u32,
}

impl PintParams {
    pub fn profile(&self, line_rate: Rate) -> Result<PintProfile, ParamError> {
        let (max_rate, min_rate) = params::rates(self.max_rate, self.min_rate, line_rate)?;
        let code = Pint::new(self.log_base).ok_or_else(|| {
            ParamError::new(
                "log_base",
                self.log_base,
                "must be above 1 with a code of at most 16 bits",
            )
        })?;
        Ok(PintProfile {
            target_util: U_TARGET.within_f64(self.u_target)?,
            mi_thresh: MI_THRESH.within(self.mi_thresh.into())? as u32,
            rate_ai: Rate::from_mbps(RATE_AI.within(self.rate_ai)?),
            min_rate,
            max_rate,
            code,
            // SetPintSmplThresh: "(uint32_t)(65536 * p)"
            sample_thresh: (65536.0 * PROB.within_f64(self.prob)?) as u32,
        })
    }
}

/// Per-flow HPCC-PINT state (`RdmaQueuePair::hpccPint` and `m_rate`).
#[derive(Clone, Debug, PartialEq)]
pub struct PintState {
    rate: u64,
    cur_rate: u64,
    last_update_seq: u64,
    inc_stage: u32,
}

impl PintState {
    pub fn new(p: &PintProfile) -> Self {
        let max = p.max_rate.as_bps();
        PintState {
            rate: max,
            cur_rate: max,
            last_update_seq: 0,
            inc_stage: 0,
        }
    }

    pub fn rate(&self) -> Rate {
        Rate::from_bps(self.rate)
    }

    pub fn reference_rate(&self) -> Rate {
        Rate::from_bps(self.cur_rate)
    }

    /// An ACK for `ack_seq` echoing `power`, while the sender's next sequence number is
    /// `snd_nxt`; `coin` is ns-3's `rand() % 65536` for the sampling. True when the rate was
    /// set.
    pub fn on_ack(
        &mut self,
        p: &PintProfile,
        ack_seq: u64,
        snd_nxt: u64,
        power: u16,
        coin: u32,
    ) -> bool {
        // HandleAckHpPint: "if (rand() % 65536 >= pint_smpl_thresh) return;"
        if coin >= p.sample_thresh {
            return false;
        }
        let fast = ack_seq <= self.last_update_seq;
        // UpdateRateHpPint
        if self.last_update_seq == 0 {
            self.last_update_seq = snd_nxt;
            return false;
        }
        let u = p.code.decode(p.code.stored(power));
        let rule = Step {
            mi_thresh: p.mi_thresh,
            rate_ai: p.rate_ai.as_bps(),
            min_rate: p.min_rate.as_bps(),
            max_rate: p.max_rate.as_bps(),
        };
        let (new_rate, new_inc) = step(self.cur_rate, self.inc_stage, u / p.target_util, &rule);
        self.rate = new_rate;
        if !fast {
            self.cur_rate = new_rate;
            self.inc_stage = new_inc;
            if snd_nxt > self.last_update_seq {
                self.last_update_seq = snd_nxt;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// run.py --cc hpccPint --bw 100 (defaults): U_TARGET 0.95, MI_THRESH 0, RATE_AI 400Mb/s,
    /// MIN_RATE 1000Mb/s, PINT_LOG_BASE 1.01, PINT_PROB 1.0.
    fn run_py_100g() -> PintProfile {
        PintParams {
            mi_thresh: 0,
            rate_ai: 400,
            min_rate: 1000,
            log_base: 1.01,
            ..PintParams::default()
        }
        .profile(Rate::from_gbps(100))
        .unwrap()
    }

    /// Expected numbers: printed by ns-3's own `HandleAckHpPint` / `UpdateRateHpPint` and
    /// `Pint::decode_u`, compiled in the harness described in `hpcc/tests.rs`, on these ACKs.
    #[test]
    fn follows_update_rate_hp_pint() {
        let p = run_py_100g();
        let mut s = PintState::new(&p);
        // First ACK: only remembers snd_nxt.
        assert!(!s.on_ack(&p, 1000, 20_000, 627, 0));
        assert_eq!(s.rate(), Rate::from_gbps(100));
        // Full update with power 640: u = 1.01^640 / 512 = 1.14, max_c = u / 0.95: 100e9 /
        // max_c + 400e6.
        assert!(s.on_ack(&p, 21_000, 40_000, 640, 0));
        assert_eq!(s.rate().as_bps(), 83_828_482_730);
        assert_eq!(s.reference_rate().as_bps(), 83_828_482_730);
        // A fast reaction (ACK 22000 <= 40000) sets the rate from the reference without moving
        // it: u = 0.76, 83.8e9 / 0.80 is above the line rate, so the line rate.
        assert!(s.on_ack(&p, 22_000, 41_000, 600, 0));
        assert_eq!(s.rate(), Rate::from_gbps(100));
        assert_eq!(s.reference_rate().as_bps(), 83_828_482_730);
    }

    #[test]
    fn sampling_skips_acks_at_or_above_the_threshold() {
        let p = PintParams {
            prob: 0.5,
            ..PintParams::default()
        }
        .profile(Rate::from_gbps(100))
        .unwrap();
        assert_eq!(p.sample_thresh, 32768);
        let mut s = PintState::new(&p);
        assert!(!s.on_ack(&p, 1000, 2000, 0, 32768));
        assert!(
            !s.on_ack(&p, 1000, 2000, 0, 32767),
            "first sampled ACK: stored"
        );
        assert!(s.on_ack(&p, 3000, 4000, 0, 0));
    }
}
