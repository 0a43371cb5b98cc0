//! IEEE 802.1Qau QCN reaction point: a bounded pool of rate limiters, per seed 000 lines 1-144
//! (the pseudocode's own line numbers are quoted as `000:NN`), seed 001 (the QCN overview) and
//! the IEEE8021-CN-MIB defaults of `reference/protocols.md`.
//!
//! # Call order
//! - build once: [`QcnParams::profile`] -> [`QcnProfile`], then [`QcnRp::new`];
//! - inputs, in time order: [`QcnRp::on_cnm`] for each CNM addressed to one of our flows,
//!   [`QcnRp::on_tx`] for each frame a rate-limited flow transmits, [`QcnRp::on_timeout`] when
//!   `now` reaches [`QcnRp::next_deadline`];
//! - inputs at the same instant as a due timer run after it (each `on_*` first runs the timers
//!   due at or before its `now`);
//! - outputs: [`QcnRp::rate`] (the rate the pacer must enforce for a flow), typed outcomes of
//!   `on_cnm` / `on_tx`, [`QcnRp::snapshot`] and [`QcnRp::counters`].
//!
//! # Invariants
//! - at most `rppp_max_rps` limiters are active; a flow without a limiter sends at C;
//! - a limiter's current rate stays in [`rpg_min_rate`, C], C = min(`rpg_max_rate`, line rate);
//! - rates are integers in bit/s and every step is integer arithmetic, so a trace replays
//!   exactly and hand-computed values can be checked to the bit.
//!
//! # Departures from seed 000, each also quoted where the code makes it
//! - 000:50-54 multiply the rate by `1 - dec_factor` with `dec_factor = 1 - GD*Fb`, i.e. the new
//!   rate would be `GD*Fb` times the old one (under 50 % of the rate *left*). Seed 001 and the
//!   IEEE text say the rate *falls* by `Gd*|Fb|`, at most 50 %: CR <- CR * (1 - Gd*|Fb|), with the
//!   factor never below `min_dec_factor` (rpgMinDecFac). We do that.
//! - 000:115 tests `si_bcount`, an undefined name: it is `si_count` (000:10, 000:121).
//! - 000:10 initialises `timer_count`: it is `timer_scount` (000:12, 000:46).
//! - 000:137/139 use `TO_THRESH` (the byte threshold) as the timer period: it is `TIMER_PERIOD`
//!   (000:60), i.e. `rpg_time_reset`, halved in active increase (protocols.md).
//! - 000:85-91: the `if .. else` has no `endif`; we read it as closing after 000:89, so the
//!   averaging of 000:91 always runs (as 001: "CR <- (CR + TR)/2" at the end of every cycle).
//! - 000:17 "return the index of the next available rate limiter": when none is available the
//!   seed does not say; we ignore the CNM and report [`CnmOutcome::PoolFull`] (see there).

use std::collections::BTreeMap;

use units::{Duration, FlowId, Instant, Rate};

use units::keys::{key, Key, KeyDefault, Range, Type};

use crate::params::{self, ParamError};

/// QCN reaction-point parameters, named as Linux `struct ieee_qcn` (dcbnl.h) names them, in its
/// units: microseconds, octets, Mb/s, percent, and the `rpg_gd` exponent (Gd = 2^-rpg_gd).
/// Defaults are the IEEE8021-CN-MIB values (protocols.md, tag V) unless marked otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct QcnParams {
    /// Reaction point enabled. When false every CNM is ignored ([`CnmOutcome::Disabled`]).
    pub rpg_enable: bool,
    /// Size of the rate-limiter pool RL[*] (000:4). Default 16: not in protocols.md (U);
    /// hardware pools are small, which is why 001 installs limiters only on congestion.
    pub rppp_max_rps: u32,
    /// rpgTimeReset, microseconds: the timer period (000:60 TIMER_PERIOD). Default 15000 (15 ms).
    pub rpg_time_reset: u64,
    /// rpgByteReset, octets: the byte-counter cycle (000:116 TO_THRESH). Default 150000.
    pub rpg_byte_reset: u64,
    /// rpgThreshold: fast-recovery cycles (000:68 FAST_RECOVERY_TH). Default 5.
    pub rpg_threshold: u32,
    /// rpgMaxRate, Mb/s: the rate C a limiter starts from and saturates at. 0 (default) = the
    /// port speed; never above it.
    pub rpg_max_rate: u64,
    /// rpgAiRate, Mb/s: the active-increase step A (000:76). Default 5.
    pub rpg_ai_rate: u64,
    /// rpgHaiRate, Mb/s: the hyper-active step B (000:73). Default 50.
    pub rpg_hai_rate: u64,
    /// rpgGd: Gd = 2^-rpg_gd (000:50 GD). Default 7 (Gd = 1/128, so Gd*63 < 1/2).
    pub rpg_gd: u32,
    /// rpgMinDecFac, percent: the decrease factor's floor (000:20 min_dec_factor). Default 50.
    pub rpg_min_dec_fac: u32,
    /// rpgMinRate, Mb/s: the rate floor (000:55 MIN_RATE). Default 5.
    pub rpg_min_rate: u64,
    /// The EXTRA_FAST_RECOVERY option of 000:38 and 000:85. Not in dcbnl; default false.
    pub extra_fast_recovery: bool,
}

impl Default for QcnParams {
    fn default() -> Self {
        QcnParams {
            rpg_enable: true,
            rppp_max_rps: 16,
            rpg_time_reset: 15_000,
            rpg_byte_reset: 150_000,
            rpg_threshold: 5,
            rpg_max_rate: 0,
            rpg_ai_rate: 5,
            rpg_hai_rate: 50,
            rpg_gd: 7,
            rpg_min_dec_fac: 50,
            rpg_min_rate: 5,
            extra_fast_recovery: false,
        }
    }
}

/// The keys of [`QcnParams`], as the configuration reference lists them; the validation checks the
/// integer ranges given here.
pub const KEYS: &[Key] = &[
    Key {
        name: "rpg_enable",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("true"),
        range: Range::Any,
        doc: "The reaction point is on; off, every CNM is ignored.",
    },
    Key {
        name: "rppp_max_rps",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("16"),
        range: Range::Int(1, 1 << 20),
        doc: "Rate limiters in the pool (seed 000:4).",
    },
    Key {
        name: "rpg_time_reset",
        ty: Type::Integer,
        unit: "us",
        default: KeyDefault::Value("15000"),
        range: Range::Int(2, 3_600_000_000),
        doc: "rpgTimeReset: the timer period (seed 000:60 TIMER_PERIOD).",
    },
    Key {
        name: "rpg_byte_reset",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("150000"),
        range: Range::Int(2, 1 << 40),
        doc: "rpgByteReset: the byte-counter cycle (seed 000:116 TO_THRESH).",
    },
    Key {
        name: "rpg_threshold",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("5"),
        range: Range::Int(1, 1 << 16),
        doc: "rpgThreshold: fast-recovery cycles (seed 000:68 FAST_RECOVERY_TH).",
    },
    Key {
        name: "rpg_max_rate",
        ty: Type::Integer,
        unit: "Mb/s",
        default: KeyDefault::Value("0"),
        range: Range::Any,
        doc: "rpgMaxRate: the rate a limiter starts from and saturates at; 0 is the port speed \
              (never above it).",
    },
    Key {
        name: "rpg_ai_rate",
        ty: Type::Integer,
        unit: "Mb/s",
        default: KeyDefault::Value("5"),
        range: Range::Int(0, 1 << 30),
        doc: "rpgAiRate: the active increase step (seed 000:76).",
    },
    Key {
        name: "rpg_hai_rate",
        ty: Type::Integer,
        unit: "Mb/s",
        default: KeyDefault::Value("50"),
        range: Range::Int(0, 1 << 30),
        doc: "rpgHaiRate: the hyper-active increase step (seed 000:73).",
    },
    Key {
        name: "rpg_gd",
        ty: Type::Integer,
        unit: "log2",
        default: KeyDefault::Value("7"),
        range: Range::Int(0, 31),
        doc: "Gd = 2^-rpg_gd (seed 000:50).",
    },
    Key {
        name: "rpg_min_dec_fac",
        ty: Type::Integer,
        unit: "percent",
        default: KeyDefault::Value("50"),
        range: Range::Int(0, 100),
        doc: "rpgMinDecFac: the decrease factor's floor (seed 000:20).",
    },
    Key {
        name: "rpg_min_rate",
        ty: Type::Integer,
        unit: "Mb/s",
        default: KeyDefault::Value("5"),
        range: Range::Text("1..=the rate ceiling"),
        doc: "rpgMinRate: the rate floor (seed 000:55).",
    },
    Key {
        name: "extra_fast_recovery",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("false"),
        range: Range::Any,
        doc: "The EXTRA_FAST_RECOVERY option of seed 000:38 and 000:85.",
    },
];
const RPPP_MAX_RPS: &Key = key(KEYS, "rppp_max_rps");
const RPG_TIME_RESET: &Key = key(KEYS, "rpg_time_reset");
const RPG_BYTE_RESET: &Key = key(KEYS, "rpg_byte_reset");
const RPG_THRESHOLD: &Key = key(KEYS, "rpg_threshold");
const RPG_GD: &Key = key(KEYS, "rpg_gd");
const RPG_MIN_DEC_FAC: &Key = key(KEYS, "rpg_min_dec_fac");
const RPG_AI_RATE: &Key = key(KEYS, "rpg_ai_rate");
const RPG_HAI_RATE: &Key = key(KEYS, "rpg_hai_rate");

/// Validated QCN parameters with the rates resolved against the port's line rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QcnProfile {
    pub enabled: bool,
    pub pool_size: usize,
    /// C: the rate a limiter starts at and saturates at.
    pub max_rate: Rate,
    pub min_rate: Rate,
    pub ai_rate: Rate,
    pub hai_rate: Rate,
    pub time_reset: Duration,
    pub byte_reset: u64,
    pub threshold: u32,
    pub gd_shift: u32,
    pub min_dec_pct: u32,
    pub extra_fast_recovery: bool,
}

impl QcnParams {
    /// Validates the parameters for a port of `line_rate`. Errors name the offending key.
    pub fn profile(&self, line_rate: Rate) -> Result<QcnProfile, ParamError> {
        let max_rate = params::max_rate(self.rpg_max_rate, line_rate)?;
        let min_rate = params::min_rate(self.rpg_min_rate, max_rate)?;
        let pool = RPPP_MAX_RPS.within(self.rppp_max_rps.into())?;
        let time_reset = params::positive("rpg_time_reset", self.rpg_time_reset)?;
        // The timer period halves in active increase (000:139): keep it at least 2 us.
        RPG_TIME_RESET.within(time_reset)?;
        let byte_reset = RPG_BYTE_RESET.within(self.rpg_byte_reset)?;
        let threshold = RPG_THRESHOLD.within(self.rpg_threshold.into())?;
        let gd = RPG_GD.within(self.rpg_gd.into())?;
        let min_dec = RPG_MIN_DEC_FAC.within(self.rpg_min_dec_fac.into())?;
        let ai = RPG_AI_RATE.within(self.rpg_ai_rate)?;
        let hai = RPG_HAI_RATE.within(self.rpg_hai_rate)?;
        Ok(QcnProfile {
            enabled: self.rpg_enable,
            pool_size: pool as usize,
            max_rate,
            min_rate,
            ai_rate: Rate::from_mbps(ai),
            hai_rate: Rate::from_mbps(hai),
            time_reset: Duration::from_micros(time_reset),
            byte_reset,
            threshold: threshold as u32,
            gd_shift: gd as u32,
            min_dec_pct: min_dec as u32,
            extra_fast_recovery: self.extra_fast_recovery,
        })
    }
}

/// What a CNM did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CnmOutcome {
    /// `rpg_enable` is false.
    Disabled,
    /// QntzFb = 0 for a flow without a limiter (000:26-28 "ignore FBFrame").
    Ignored,
    /// QntzFb = 0 for a flow with a limiter: 000:32 does nothing.
    NoChange,
    /// The rate was cut (000:32-61); `new_limiter` when the CNM also assigned a limiter
    /// (000:18-25).
    Decreased { new_limiter: bool, rate: Rate },
    /// Pool-full policy: the flow has no limiter and all `rppp_max_rps` are active. The CNM is
    /// ignored and counted; the flow keeps sending at C until a limiter frees up (a limiter frees
    /// when its flow is back at C with an empty queue, 000:101-110) and a later CNM reaches it.
    /// We never evict: an active limiter is by definition throttling a flow that a congestion
    /// point asked to slow down, and releasing it would send that flow back to C at once.
    PoolFull,
}

/// A CNM whose content cannot be acted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CnmError {
    /// QntzFb is a 6-bit field (000:24, protocols.md); the value does not fit.
    #[error("QntzFb {0} does not fit 6 bits")]
    FbOutOfRange(u8),
}

/// What a transmitted frame did (000:99-126).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxOutcome {
    /// The flow has no limiter: it sends at C.
    NotLimited,
    /// The limiter was at C with an empty queue and went back to the pool (000:103-110).
    Released,
    /// Bytes counted, no cycle completed.
    Counted,
    /// A byte-counter cycle completed: `si_count` advanced and the rate rose (000:120-124).
    Increased,
}

/// Running totals, for the engine's per-core counters and for tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QcnCounters {
    pub cnm: u64,
    pub cnm_bad_fb: u64,
    pub cnm_pool_full: u64,
    pub assigned: u64,
    pub released: u64,
    pub decreases: u64,
    pub byte_cycles: u64,
    pub timer_cycles: u64,
}

/// A read-only view of one limiter, for replay output and CSV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QcnSnapshot {
    pub flow: FlowId,
    pub rate: Rate,
    pub target_rate: Rate,
    /// Bytes sent in the current byte-counter cycle (000:9 tx_bcount).
    pub tx_bcount: u64,
    /// Byte-counter stage (000:10 si_count).
    pub si_count: u32,
    /// Timer stage (000:12 timer_scount).
    pub timer_scount: u32,
    pub timer_deadline: Option<Instant>,
}

/// One active rate limiter RL[i] (000:5-13); an inactive one is a `None` slot.
#[derive(Clone, Copy, Debug)]
struct Limiter {
    flow: FlowId,
    crate_bps: u64,
    trate_bps: u64,
    tx_bcount: u64,
    si_count: u32,
    timer_scount: u32,
    timer: Instant,
}

/// The reaction point of one port (one CNPV): a pool of rate limiters.
#[derive(Clone, Debug)]
pub struct QcnRp {
    profile: QcnProfile,
    slots: Vec<Option<Limiter>>,
    by_flow: BTreeMap<FlowId, usize>,
    counters: QcnCounters,
}

impl QcnRp {
    /// 000:1-11 initialize(): every limiter inactive.
    pub fn new(profile: QcnProfile) -> Self {
        QcnRp {
            profile,
            slots: vec![None; profile.pool_size],
            by_flow: BTreeMap::new(),
            counters: QcnCounters::default(),
        }
    }

    pub fn profile(&self) -> &QcnProfile {
        &self.profile
    }

    /// A CNM for `flow` with quantised feedback `qntz_fb` (0..=63, larger = more congested).
    pub fn on_cnm(
        &mut self,
        now: Instant,
        flow: FlowId,
        qntz_fb: u8,
    ) -> Result<CnmOutcome, CnmError> {
        let p = self.profile;
        if !p.enabled {
            return Ok(CnmOutcome::Disabled);
        }
        // Timers due at or before `now` run first, so an input never overtakes a due timer.
        self.on_timeout(now);
        if qntz_fb > 63 {
            self.counters.cnm_bad_fb += 1;
            return Err(CnmError::FbOutOfRange(qntz_fb));
        }
        self.counters.cnm += 1;
        let fb = u64::from(qntz_fb);
        // 000:17 rlidx = get_rate_limiter_index(FBFrame.flowid);
        let (idx, new_limiter) = match self.by_flow.get(&flow) {
            Some(&i) => (i, false),
            None => {
                // 000:18-19 if (RL[rlidx].state == INACTIVE) then if (FBFrame.fb != 0) then
                if fb == 0 {
                    // 000:27 //ignore FBFrame
                    return Ok(CnmOutcome::Ignored);
                }
                let Some(i) = self.slots.iter().position(Option::is_none) else {
                    self.counters.cnm_pool_full += 1;
                    return Ok(CnmOutcome::PoolFull);
                };
                // 000:21-25 state = ACTIVE; flowid = FBFrame.flowid; crate = C; trate = C;
                // si_count = 0; (tx_bcount and timer_scount as left by 000:8-10 / 000:108-109)
                self.slots[i] = Some(Limiter {
                    flow,
                    crate_bps: p.max_rate.as_bps(),
                    trate_bps: p.max_rate.as_bps(),
                    tx_bcount: 0,
                    si_count: 0,
                    timer_scount: 0,
                    timer: now,
                });
                self.by_flow.insert(flow, i);
                self.counters.assigned += 1;
                (i, true)
            }
        };
        let Some(l) = self.slots[idx].as_mut() else {
            return Ok(CnmOutcome::NoChange);
        };
        // 000:32 if (FBFrame.fb != 0) then
        if fb == 0 {
            return Ok(CnmOutcome::NoChange);
        }
        // 000:38-42 if (EXTRA_FAST_RECOVERY != TRUE || RL[rlidx].si_count != 0) then
        //             trate = crate; tx_bcount = 0;
        if !p.extra_fast_recovery || l.si_count != 0 {
            l.trate_bps = l.crate_bps;
            l.tx_bcount = 0;
        }
        // 000:45-46 si_count = 0; timer_scount = 0;
        l.si_count = 0;
        l.timer_scount = 0;
        // 000:50 dec_factor = (1 - GD * FBFrame.fb);
        // 000:51-53 if (dec_factor < min_dec_factor) then dec_factor = min_dec_factor;
        // 000:54 RL[rlidx].crate = RL[rlidx].crate * (1 - dec_factor);
        // Departure: 000:54 inverts the factor (the rate would become GD*Fb times itself). Per
        // 001 ("the sending rate can decrease by at most 50%") and the IEEE definition the rate
        // is multiplied by dec_factor itself: crate = crate * max(1 - Gd*Fb, min_dec_factor).
        // Exact integers: Gd = 2^-gd_shift, so 1 - Gd*Fb = (2^gd_shift - Fb) / 2^gd_shift.
        let scale = 1u128 << p.gd_shift;
        let factor_num = scale.saturating_sub(u128::from(fb));
        let by_gd = u128::from(l.crate_bps) * factor_num / scale;
        let by_min_dec = u128::from(l.crate_bps) * u128::from(p.min_dec_pct) / 100;
        let cut = by_gd.max(by_min_dec);
        // 000:55-57 if (crate < MIN_RATE) then crate = MIN_RATE;
        l.crate_bps = (cut as u64).max(p.min_rate.as_bps());
        // 000:60 set_timer(rlidx, TIMER_PERIOD);
        l.timer = now + p.time_reset;
        self.counters.decreases += 1;
        Ok(CnmOutcome::Decreased {
            new_limiter,
            rate: Rate::from_bps(l.crate_bps),
        })
    }

    /// `flow` transmitted a frame of `bytes` octets; `queue_empty` tells whether its limiter
    /// queue (000:13 RL[i].qlen) is empty after this frame left. With no limiter active (no
    /// flow was cut) there is nothing to count and no timer to run: the sender's every frame
    /// asks, so that answer comes first.
    #[inline]
    pub fn on_tx(
        &mut self,
        now: Instant,
        flow: FlowId,
        bytes: u64,
        queue_empty: bool,
    ) -> TxOutcome {
        if self.by_flow.is_empty() {
            return TxOutcome::NotLimited;
        }
        self.on_timeout(now);
        let p = self.profile;
        let Some(&idx) = self.by_flow.get(&flow) else {
            return TxOutcome::NotLimited;
        };
        let Some(l) = self.slots[idx].as_mut() else {
            return TxOutcome::NotLimited;
        };
        // 000:103 if (RL[rlidx].rate == C && RL[rlidx].qlen == 0) then
        if l.crate_bps == p.max_rate.as_bps() && queue_empty {
            // 000:104-110 state = INACTIVE; flowid = -1; ...; timer = INACTIVE;
            self.slots[idx] = None;
            self.by_flow.remove(&flow);
            self.counters.released += 1;
            return TxOutcome::Released;
        }
        // 000:112 tx_bcount += length(Transmit Frame);
        l.tx_bcount = l.tx_bcount.saturating_add(bytes);
        // 000:115 if (RL[rlidx].si_bcount < FAST_RECOVERY_TH) then expire_thresh = TO_THRESH;
        // 000:117   else expire_thresh = TO_THRESH/2;
        // Departure: `si_bcount` is undefined; the stage counter `si_count` is meant (000:10).
        let expire_thresh = if l.si_count < p.threshold {
            p.byte_reset
        } else {
            p.byte_reset / 2
        };
        // 000:120 if (RL[rlidx].tx_bcount > expire_thresh) then
        if l.tx_bcount > expire_thresh {
            // 000:121-123 si_count++; tx_bcount = 0; self_increase(rlidx);
            l.si_count = l.si_count.saturating_add(1);
            l.tx_bcount = 0;
            self_increase(&p, l);
            self.counters.byte_cycles += 1;
            return TxOutcome::Increased;
        }
        TxOutcome::Counted
    }

    /// Runs every limiter timer due at or before `now`, earliest first. A call with nothing due
    /// does nothing.
    pub fn on_timeout(&mut self, now: Instant) {
        if self.by_flow.is_empty() {
            return;
        }
        let p = self.profile;
        while let Some((idx, due)) = self.earliest_timer().filter(|&(_, t)| t <= now) {
            let Some(l) = self.slots[idx].as_mut() else {
                break;
            };
            // 000:130-132 if (state == ACTIVE) then timer_scount++; self_increase(rlidx);
            l.timer_scount = l.timer_scount.saturating_add(1);
            self_increase(&p, l);
            // 000:136 if (timer_scount < FAST_RECOVERY_TH) then expire_period = TO_THRESH;
            // 000:138   else expire_period = TO_THRESH/2;
            // 000:141 set_timer(rlidx, expire_period);
            // Departure: TO_THRESH is the byte threshold; the timer runs on TIMER_PERIOD (000:60)
            // = rpg_time_reset, halved in active increase (protocols.md).
            let period = if l.timer_scount < p.threshold {
                p.time_reset
            } else {
                Duration::from_nanos(p.time_reset.as_nanos() / 2)
            };
            // Re-armed from the deadline, not from `now`: a late caller catches up exactly.
            l.timer = due + period;
            self.counters.timer_cycles += 1;
        }
    }

    /// The earliest limiter timer, if any limiter is active.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.earliest_timer().map(|(_, t)| t)
    }

    fn earliest_timer(&self) -> Option<(usize, Instant)> {
        // Over the active limiters only (`by_flow` holds exactly those): a busy-polling sender
        // asks on every loop iteration and every frame, and a pool may be far larger than the
        // limiters in use.
        self.by_flow
            .values()
            .filter_map(|&i| self.slots[i].as_ref().map(|l| (i, l.timer)))
            .min_by_key(|&(i, t)| (t, i))
    }

    /// The rate `flow` may send at: its limiter's current rate, or C without a limiter.
    #[inline]
    pub fn rate(&self, flow: FlowId) -> Rate {
        if self.by_flow.is_empty() {
            return self.profile.max_rate;
        }
        self.limiter(flow)
            .map_or(self.profile.max_rate, |l| Rate::from_bps(l.crate_bps))
    }

    /// `flow`'s target rate (000:8 trate), C without a limiter. Seed 000 caps only the current
    /// rate at C (000:94), so in active increase the target may exceed C.
    pub fn target_rate(&self, flow: FlowId) -> Rate {
        self.limiter(flow)
            .map_or(self.profile.max_rate, |l| Rate::from_bps(l.trate_bps))
    }

    pub fn snapshot(&self, flow: FlowId) -> Option<QcnSnapshot> {
        self.limiter(flow).map(|l| QcnSnapshot {
            flow: l.flow,
            rate: Rate::from_bps(l.crate_bps),
            target_rate: Rate::from_bps(l.trate_bps),
            tx_bcount: l.tx_bcount,
            si_count: l.si_count,
            timer_scount: l.timer_scount,
            timer_deadline: Some(l.timer),
        })
    }

    /// Flows that currently hold a limiter, in flow-id order.
    pub fn limited_flows(&self) -> impl Iterator<Item = FlowId> + '_ {
        self.by_flow.keys().copied()
    }

    /// Number of active limiters (never above `rppp_max_rps`).
    pub fn active(&self) -> usize {
        self.by_flow.len()
    }

    pub fn counters(&self) -> QcnCounters {
        self.counters
    }

    fn limiter(&self, flow: FlowId) -> Option<&Limiter> {
        self.by_flow
            .get(&flow)
            .and_then(|&i| self.slots.get(i))
            .and_then(Option::as_ref)
    }
}

/// 000:63-97 self_increase(rlidx).
fn self_increase(p: &QcnProfile, l: &mut Limiter) {
    let th = p.threshold;
    // 000:65 to_count = minimum(si_count, timer_scount);
    let to_count = l.si_count.min(l.timer_scount);
    // 000:68-80 active probing: hyperactive when both stages passed the threshold, active when
    // one did, nothing (fast recovery) otherwise.
    let ri = if l.si_count > th || l.timer_scount > th {
        if l.si_count > th && l.timer_scount > th {
            // 000:73 Ri = B * (to_count - FAST_RECOVERY_TH);
            p.hai_rate.as_bps().saturating_mul(u64::from(to_count - th))
        } else {
            // 000:76 Ri = A;
            p.ai_rate.as_bps()
        }
    } else {
        // 000:79 Ri = 0;
        0
    };
    // 000:85-86 if (EXTRA_FAST_RECOVERY && si_count == 1 && trate > 10 * crate) then
    if p.extra_fast_recovery && l.si_count == 1 && l.trate_bps > l.crate_bps.saturating_mul(10) {
        // 000:87 trate = trate/8;
        l.trate_bps /= 8;
    } else {
        // 000:89 trate = trate + Ri;
        l.trate_bps = l.trate_bps.saturating_add(ri);
    }
    // 000:91 crate = (trate + crate)/2;  (runs in both branches: the seed's `if` has no endif)
    let avg = (u128::from(l.trate_bps) + u128::from(l.crate_bps)) / 2;
    // 000:94-96 if (crate > C) then crate = C;
    l.crate_bps = (avg.min(u128::from(p.max_rate.as_bps()))) as u64;
}

#[cfg(test)]
mod tests;
