//! DCQCN reaction point (RoCEv2 sender NIC) for one flow (QP), in two variants chosen by
//! configuration ([`Variant`]):
//!
//! - **`mlx`**: the NVIDIA / Mellanox event flow as the HPCC ns-3 simulator implements it
//!   (`rdma-hw.cc`: `cnp_received_mlx`, `UpdateAlphaMlx`, `CheckRateDecreaseMlx`,
//!   `RateIncEventTimerMlx`, `FastRecoveryMlx` / `ActiveIncreaseMlx` / `HyperIncreaseMlx`;
//!   `reference/dcqcn.md` steps 1-6). A CNP only sets flags; an alpha timer, a decrease-check
//!   timer and a rate-increase timer do the work. No byte counter (dcqcn.md step 7).
//! - **`paper`**: the DCQCN paper (SIGCOMM 2015, seed 003): the cut happens when the CNP
//!   arrives, alpha decays when no CNP came for one alpha period, and a byte counter
//!   (`rpg_byte_reset`) runs beside the increase timer, QCN-style, with hyper increase once
//!   both counters passed F (dcqcn.md step 7).
//!
//! # Call order
//! [`DcqcnParams::profile`] once; [`DcqcnState::new`] per flow (or the owning wrapper
//! [`DcqcnRp`]); then in time order `on_cnp(now)`, `on_tx(now, bytes)`, `on_ue(now)` and
//! `on_timeout(now)` when `now` reaches `next_deadline()`. Read `rate()` after any call.
//!
//! # Quiet timers
//! ns-3 runs the alpha timer every microsecond and the decrease check every 4 us for as long as
//! the flow lives. Here `next_deadline()` reports only the timers that can change the rates; the
//! others run lazily and exactly when the next call reaches their time (see
//! [`DcqcnState::next_deadline`]), so the results are the same and idle flows cost nothing.
//! Inputs at the same instant as a timer run after it.
//!
//! # Event order (mlx), as in ns-3
//! Timers due at the same instant run in the order ns-3's scheduler would run them: by deadline,
//! then by the instant they were armed (earlier first), then alpha, decrease, increase (the
//! order ns-3 arms them within one handler). Example: with `rpg_time_reset` a multiple of
//! `rate_reduce_monitor_period`, an increase event and a decrease check fall on the same
//! nanosecond; the increase was armed 300 us before, the check 4 us before, so the increase
//! runs first and the check then sees `stage != 0` and clamps the target.
//!
//! # Arithmetic
//! Alpha is an `f64` updated with the same operations in the same order as ns-3 (`(1-g)*a + g`),
//! so traces match it bit for bit. Rates are integer bit/s: a cut is `rate * factor` truncated
//! (ns-3 turns the `double` product back into a `uint64_t` rate), an average is
//! `rate/2 + target/2` with integer halves (ns-3's `(m_rate / 2) + (m_targetRate / 2)`).
//!
//! # Reaction to TCD "undetermined encountered" (UE, seed 004)
//! [`UeReaction::Ignore`]: UE notifications change nothing. [`UeReaction::Hold`]: while a UE was
//! seen within the last `ue_hold_window` (`now < last_ue + window`), rate-increase events (timer
//! or byte counter) are consumed without effect: neither the rates nor the stage counters move,
//! so the flow neither recovers nor probes while it is only a possible victim of PFC pausing;
//! decreases are unaffected. The window is configuration: TCD does not define one.

use units::{Duration, Instant, Rate};

use units::keys::{key, Key, KeyDefault, Range, Type};

use crate::params::{self, ParamError};

/// Which DCQCN event flow to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Variant {
    /// NVIDIA / ns-3 HPCC: flags + alpha timer + decrease-check timer + increase timer.
    Mlx,
    /// The DCQCN paper: cut on CNP arrival, byte counter beside the timer.
    Paper,
}

/// What the reaction point does with TCD UE notifications.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum UeReaction {
    Ignore,
    /// No rate increase while a UE was seen within `ue_hold_window`.
    Hold,
}

/// DCQCN reaction-point parameters, with NVIDIA's names and units (NVIDIA DOCA "DCQCN CC
/// Parameters"; protocols.md): microseconds, Mb/s, octets, percent, 1/1024 fixed point.
/// Defaults are NVIDIA's firmware defaults (protocols.md, tag V) unless marked otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct DcqcnParams {
    /// Event flow: `"mlx"` (default) or `"paper"`.
    pub variant: Variant,
    /// (1 - g) x 1024: alpha <- (1-g) alpha + g (CNP seen) or (1-g) alpha. Default 1019
    /// (g = 5/1024). ns-3's EwmaGain 1/256 is 1020; 1/16 is 960.
    pub dce_tcp_g: u32,
    /// Alpha update period, us (ns-3 ALPHA_RESUME_INTERVAL; the paper's K). Default 1.
    pub dce_tcp_rtt: u64,
    /// Alpha set on the first CNP (mlx) or at flow start (paper), x 1024 (1024 = 1.0, ns-3's
    /// value). Default 1023.
    pub initial_alpha_value: u32,
    /// Rate set on the first CNP, Mb/s (ns-3 RateOnFirstCnp as a fraction: 1.0 = keep = 0 here).
    /// 0 (default) keeps the current rate.
    pub rate_to_set_on_first_cnp: u64,
    /// Decrease-check period, us (ns-3 RATE_DECREASE_INTERVAL; mlx only). Default 4.
    pub rate_reduce_monitor_period: u64,
    /// Always set the target to the current rate before a cut (ns-3 CLAMP_TARGET_RATE).
    /// Default false.
    pub clamp_tgt_rate: bool,
    /// Set the target to the current rate before a cut if a timer increase happened since the
    /// last cut (ns-3 `m_rpTimeStage != 0`). Default true.
    pub clamp_tgt_rate_after_time_inc: bool,
    /// Rate-increase timer period, us (ns-3 RP_TIMER; the paper's T). Default 300.
    pub rpg_time_reset: u64,
    /// Byte-counter cycle, octets (paper variant only; the paper's B). Default 32767 (NVIDIA's
    /// number; some NVIDIA docs count it in 64-octet units, U).
    pub rpg_byte_reset: u64,
    /// F: increase events of fast recovery before additive increase. Default 1.
    pub rpg_threshold: u32,
    /// R_AI, Mb/s. Default 5.
    pub rpg_ai_rate: u64,
    /// R_HAI, Mb/s. Default 50.
    pub rpg_hai_rate: u64,
    /// log2(Gd): a cut is rate * (1 - alpha_1024 / 2^rpg_gd) with alpha_1024 = alpha x 1024
    /// (NVIDIA). Default 11, i.e. rate * (1 - alpha/2) as in the paper and ns-3.
    pub rpg_gd: u32,
    /// Floor of the cut factor, percent. Default 50.
    pub rpg_min_dec_fac: u32,
    /// Rate floor, Mb/s (ns-3 MIN_RATE). Default 1.
    pub rpg_min_rate: u64,
    /// Rate ceiling, Mb/s; 0 (default) = the port speed.
    pub rpg_max_rate: u64,
    /// Reaction to TCD UE: `"ignore"` (default) or `"hold"`. Not an NVIDIA parameter.
    pub ue_reaction: UeReaction,
    /// Hold window after a UE, us (only with `ue_reaction = "hold"`). Default 55 (one paper
    /// rate-increase period; U: TCD does not define it).
    pub ue_hold_window: u64,
}

impl Default for DcqcnParams {
    fn default() -> Self {
        DcqcnParams {
            variant: Variant::Mlx,
            dce_tcp_g: 1019,
            dce_tcp_rtt: 1,
            initial_alpha_value: 1023,
            rate_to_set_on_first_cnp: 0,
            rate_reduce_monitor_period: 4,
            clamp_tgt_rate: false,
            clamp_tgt_rate_after_time_inc: true,
            rpg_time_reset: 300,
            rpg_byte_reset: 32767,
            rpg_threshold: 1,
            rpg_ai_rate: 5,
            rpg_hai_rate: 50,
            rpg_gd: 11,
            rpg_min_dec_fac: 50,
            rpg_min_rate: 1,
            rpg_max_rate: 0,
            ue_reaction: UeReaction::Ignore,
            ue_hold_window: 55,
        }
    }
}

/// The keys of [`DcqcnParams`], as the configuration reference lists them; the validation checks the
/// integer ranges given here.
pub const KEYS: &[Key] = &[
    Key {
        name: "variant",
        ty: Type::OneOf(&["mlx", "paper"]),
        unit: "",
        default: KeyDefault::Value("\"mlx\""),
        range: Range::Any,
        doc: "The event flow: NVIDIA's and ns-3 HPCC's (mlx), or the DCQCN paper's.",
    },
    Key {
        name: "dce_tcp_g",
        ty: Type::Integer,
        unit: "1/1024",
        default: KeyDefault::Value("1019"),
        range: Range::Int(0, 1024),
        doc: "(1 - g) x 1024, the alpha gain's complement: alpha <- (1 - g) alpha + g on a CNP \
              (1019: g = 5/1024; ns-3's EwmaGain 1/256 is 1020; 1024, g = 0, is third.cc's \
              default without EWMA_GAIN).",
    },
    Key {
        name: "dce_tcp_rtt",
        ty: Type::Integer,
        unit: "us",
        default: KeyDefault::Value("1"),
        range: Range::Int(1, 1_000_000_000),
        doc: "The alpha update period (ns-3 ALPHA_RESUME_INTERVAL; the paper's K).",
    },
    Key {
        name: "initial_alpha_value",
        ty: Type::Integer,
        unit: "1/1024",
        default: KeyDefault::Value("1023"),
        range: Range::Int(0, 1024),
        doc: "Alpha on the first CNP (mlx) or at flow start (paper); 1024 is 1.0, ns-3's value.",
    },
    Key {
        name: "rate_to_set_on_first_cnp",
        ty: Type::Integer,
        unit: "Mb/s",
        default: KeyDefault::Value("0"),
        range: Range::Any,
        doc: "The rate set on the first CNP; 0 keeps the current rate.",
    },
    Key {
        name: "rate_reduce_monitor_period",
        ty: Type::Integer,
        unit: "us",
        default: KeyDefault::Value("4"),
        range: Range::Int(1, 1_000_000_000),
        doc: "The decrease-check period (ns-3 RATE_DECREASE_INTERVAL; mlx only).",
    },
    Key {
        name: "clamp_tgt_rate",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("false"),
        range: Range::Any,
        doc: "Always set the target rate to the current rate before a cut (ns-3 \
              CLAMP_TARGET_RATE).",
    },
    Key {
        name: "clamp_tgt_rate_after_time_inc",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("true"),
        range: Range::Any,
        doc: "Set the target to the current rate before a cut if a timer increase happened since \
              the last cut.",
    },
    Key {
        name: "rpg_time_reset",
        ty: Type::Integer,
        unit: "us",
        default: KeyDefault::Value("300"),
        range: Range::Int(1, 1_000_000_000),
        doc: "The rate-increase timer period (ns-3 RP_TIMER; the paper's T).",
    },
    Key {
        name: "rpg_byte_reset",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("32767"),
        range: Range::Int(1, 1 << 40),
        doc: "The byte-counter cycle (paper variant only; the paper's B).",
    },
    Key {
        name: "rpg_threshold",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1"),
        range: Range::Int(0, 1 << 16),
        doc: "F: increase events of fast recovery before additive increase.",
    },
    Key {
        name: "rpg_ai_rate",
        ty: Type::Integer,
        unit: "Mb/s",
        default: KeyDefault::Value("5"),
        range: Range::Int(0, 1 << 30),
        doc: "R_AI, the additive increase step.",
    },
    Key {
        name: "rpg_hai_rate",
        ty: Type::Integer,
        unit: "Mb/s",
        default: KeyDefault::Value("50"),
        range: Range::Int(0, 1 << 30),
        doc: "R_HAI, the hyper increase step.",
    },
    Key {
        name: "rpg_gd",
        ty: Type::Integer,
        unit: "log2",
        default: KeyDefault::Value("11"),
        range: Range::Int(0, 40),
        doc: "A cut is rate x (1 - alpha x 1024 / 2^rpg_gd); 11 gives rate x (1 - alpha/2), as \
              the paper and ns-3.",
    },
    Key {
        name: "rpg_min_dec_fac",
        ty: Type::Integer,
        unit: "percent",
        default: KeyDefault::Value("50"),
        range: Range::Int(0, 100),
        doc: "The floor of the cut factor.",
    },
    Key {
        name: "rpg_min_rate",
        ty: Type::Integer,
        unit: "Mb/s",
        default: KeyDefault::Value("1"),
        range: Range::Text("1..=the rate ceiling"),
        doc: "The rate floor (ns-3 MIN_RATE).",
    },
    Key {
        name: "rpg_max_rate",
        ty: Type::Integer,
        unit: "Mb/s",
        default: KeyDefault::Value("0"),
        range: Range::Any,
        doc: "The rate ceiling; 0 is the port speed (never above it).",
    },
    Key {
        name: "ue_reaction",
        ty: Type::OneOf(&["ignore", "hold"]),
        unit: "",
        default: KeyDefault::Value("\"ignore\""),
        range: Range::Any,
        doc: "The reaction to a TCD undetermined mark (UE): none, or hold rate increases for \
              ue_hold_window.",
    },
    Key {
        name: "ue_hold_window",
        ty: Type::Integer,
        unit: "us",
        default: KeyDefault::Value("55"),
        range: Range::Int(1, 1_000_000_000),
        doc: "The hold after a UE with ue_reaction = \"hold\" (one paper rate-increase period).",
    },
];
const DCE_TCP_G: &Key = key(KEYS, "dce_tcp_g");
const DCE_TCP_RTT: &Key = key(KEYS, "dce_tcp_rtt");
const INITIAL_ALPHA_VALUE: &Key = key(KEYS, "initial_alpha_value");
const RATE_REDUCE_MONITOR_PERIOD: &Key = key(KEYS, "rate_reduce_monitor_period");
const RPG_TIME_RESET: &Key = key(KEYS, "rpg_time_reset");
const RPG_BYTE_RESET: &Key = key(KEYS, "rpg_byte_reset");
const RPG_THRESHOLD: &Key = key(KEYS, "rpg_threshold");
const RPG_AI_RATE: &Key = key(KEYS, "rpg_ai_rate");
const RPG_HAI_RATE: &Key = key(KEYS, "rpg_hai_rate");
const RPG_GD: &Key = key(KEYS, "rpg_gd");
const RPG_MIN_DEC_FAC: &Key = key(KEYS, "rpg_min_dec_fac");
const UE_HOLD_WINDOW: &Key = key(KEYS, "ue_hold_window");

/// Validated DCQCN parameters, shared by every flow of a port.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DcqcnProfile {
    pub variant: Variant,
    /// g, the alpha gain.
    pub g: f64,
    pub alpha_interval: Duration,
    pub initial_alpha: f64,
    pub rate_on_first_cnp: Option<Rate>,
    pub decrease_interval: Duration,
    pub clamp_tgt_rate: bool,
    pub clamp_after_time_inc: bool,
    pub time_reset: Duration,
    pub byte_reset: u64,
    pub threshold: u32,
    pub ai_rate: Rate,
    pub hai_rate: Rate,
    /// Cut factor = 1 - alpha * dec_scale, with dec_scale = 1024 / 2^rpg_gd.
    pub dec_scale: f64,
    pub min_dec_factor: f64,
    pub min_rate: Rate,
    pub max_rate: Rate,
    pub ue_reaction: UeReaction,
    pub ue_hold_window: Duration,
}

impl DcqcnParams {
    /// Validates the parameters for a port of `line_rate`. Errors name the offending key.
    pub fn profile(&self, line_rate: Rate) -> Result<DcqcnProfile, ParamError> {
        let max_rate = params::max_rate(self.rpg_max_rate, line_rate)?;
        let min_rate = params::min_rate(self.rpg_min_rate, max_rate)?;
        let g1 = DCE_TCP_G.within(self.dce_tcp_g.into())?;
        let alpha_us = DCE_TCP_RTT.within(self.dce_tcp_rtt)?;
        let alpha0 = INITIAL_ALPHA_VALUE.within(self.initial_alpha_value.into())?;
        let dec_us = RATE_REDUCE_MONITOR_PERIOD.within(self.rate_reduce_monitor_period)?;
        let inc_us = RPG_TIME_RESET.within(self.rpg_time_reset)?;
        let bytes = RPG_BYTE_RESET.within(self.rpg_byte_reset)?;
        let threshold = RPG_THRESHOLD.within(self.rpg_threshold.into())?;
        let ai = RPG_AI_RATE.within(self.rpg_ai_rate)?;
        let hai = RPG_HAI_RATE.within(self.rpg_hai_rate)?;
        let gd = RPG_GD.within(self.rpg_gd.into())?;
        let min_dec = RPG_MIN_DEC_FAC.within(self.rpg_min_dec_fac.into())?;
        let first = match self.rate_to_set_on_first_cnp {
            0 => None,
            mbps => Some(Rate::from_mbps(mbps).min(max_rate).max(min_rate)),
        };
        // Checked whatever `ue_reaction` says: a bad value is a mistake either way.
        let hold_us = UE_HOLD_WINDOW.within(self.ue_hold_window)?;
        let hold = match self.ue_reaction {
            UeReaction::Ignore => Duration::ZERO,
            UeReaction::Hold => Duration::from_micros(hold_us),
        };
        Ok(DcqcnProfile {
            variant: self.variant,
            g: (1024 - g1) as f64 / 1024.0,
            alpha_interval: Duration::from_micros(alpha_us),
            initial_alpha: alpha0 as f64 / 1024.0,
            rate_on_first_cnp: first,
            decrease_interval: Duration::from_micros(dec_us),
            clamp_tgt_rate: self.clamp_tgt_rate,
            clamp_after_time_inc: self.clamp_tgt_rate_after_time_inc,
            time_reset: Duration::from_micros(inc_us),
            byte_reset: bytes,
            threshold: threshold as u32,
            ai_rate: Rate::from_mbps(ai),
            hai_rate: Rate::from_mbps(hai),
            dec_scale: 1024.0 / 2f64.powi(gd as i32),
            min_dec_factor: min_dec as f64 / 100.0,
            min_rate,
            max_rate,
            ue_reaction: self.ue_reaction,
            ue_hold_window: hold,
        })
    }
}

/// ns-3 arms the first decrease check 1 ns after the period "to make sure rate decrease is after
/// alpha update" (`ScheduleDecreaseRateMlx(q, 1)` in `cnp_received_mlx`); later checks follow
/// every period from there. Kept so the traces line up with ns-3 to the nanosecond.
const FIRST_DECREASE_OFFSET: Duration = Duration::from_nanos(1);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Timer {
    at: Option<Instant>,
    /// When it was armed: ties on `at` go to the one armed first (ns-3's FIFO for equal times).
    armed: Instant,
}

impl Timer {
    fn arm(&mut self, now: Instant, after: Duration) {
        *self = Timer {
            at: Some(now + after),
            armed: now,
        };
    }
}

// Indices into `DcqcnState::timers`, in the tie-break order of ns-3 handlers.
const ALPHA: usize = 0;
const DECREASE: usize = 1;
const INCREASE: usize = 2;

/// Per-flow DCQCN state (a few words); every method takes the shared [`DcqcnProfile`].
#[derive(Clone, Debug, PartialEq)]
pub struct DcqcnState {
    rate: u64,
    target: u64,
    alpha: f64,
    alpha_cnp: bool,
    decrease_cnp: bool,
    cnp_seen: bool,
    time_stage: u32,
    byte_stage: u32,
    bytes: u64,
    timers: [Timer; 3],
    last_ue: Option<Instant>,
    held: u32,
    /// Increase events can no longer move the rates: R_T is at the max rate and R_C = R_C/2 +
    /// R_T/2 already. Then the increase timer is quiet (see [`DcqcnState::next_deadline`]).
    inc_quiet: bool,
}

/// A read-only view of one flow's state, for replay output and CSV.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DcqcnSnapshot {
    pub rate: Rate,
    pub target_rate: Rate,
    pub alpha: f64,
    /// Rate-increase events since the last cut (ns-3 `m_rpTimeStage`; the paper's T counter).
    pub time_stage: u32,
    /// Byte-counter cycles since the last cut (paper variant).
    pub byte_stage: u32,
    /// Bytes counted in the current byte-counter cycle (paper variant).
    pub byte_count: u64,
    /// A CNP arrived since the last decrease check (mlx).
    pub cnp_pending: bool,
    pub next_alpha_update: Option<Instant>,
    pub next_decrease_check: Option<Instant>,
    pub next_increase: Option<Instant>,
    /// Increase events skipped because of a recent UE (`ue_reaction = "hold"`).
    pub held_increases: u32,
}

impl DcqcnState {
    /// dcqcn.md step 1: a flow starts at line rate, target = current = max rate, stage 0.
    pub fn new(p: &DcqcnProfile) -> Self {
        DcqcnState {
            rate: p.max_rate.as_bps(),
            target: p.max_rate.as_bps(),
            alpha: p.initial_alpha,
            alpha_cnp: false,
            decrease_cnp: false,
            cnp_seen: false,
            time_stage: 0,
            byte_stage: 0,
            bytes: 0,
            timers: [Timer::default(); 3],
            last_ue: None,
            held: 0,
            inc_quiet: false,
        }
    }

    pub fn rate(&self) -> Rate {
        Rate::from_bps(self.rate)
    }

    pub fn target_rate(&self) -> Rate {
        Rate::from_bps(self.target)
    }

    pub fn snapshot(&self) -> DcqcnSnapshot {
        DcqcnSnapshot {
            rate: self.rate(),
            target_rate: self.target_rate(),
            alpha: self.alpha,
            time_stage: self.time_stage,
            byte_stage: self.byte_stage,
            byte_count: self.bytes,
            cnp_pending: self.decrease_cnp,
            next_alpha_update: self.timers[ALPHA].at,
            next_decrease_check: self.timers[DECREASE].at,
            next_increase: self.timers[INCREASE].at,
            held_increases: self.held,
        }
    }

    /// The earliest deadline whose timer can change the rate or the target: an alpha update
    /// that must fold in a CNP (mlx), a decrease check with a CNP pending (mlx), an increase
    /// event while increases still move the rates. Quiet timers (alpha decay without a CNP,
    /// decrease checks with nothing pending, increase events at the fixed point) are not
    /// reported: they run, in order and exactly, inside the next call that reaches their time
    /// (every `on_*` first runs the timers due at or before its `now`). So a driver that wakes
    /// only at these deadlines sees the same rates at every call as one that wakes at every
    /// timer, and an idle flow costs no wake-ups; [`DcqcnState::snapshot`] shows alpha and the
    /// stages as of the last call. Before the first CNP nothing is armed.
    pub fn next_deadline(&self) -> Option<Instant> {
        let loud = [self.alpha_cnp, self.decrease_cnp, !self.inc_quiet];
        self.timers
            .iter()
            .zip(loud)
            .filter_map(|(t, loud)| t.at.filter(|_| loud))
            .min()
    }

    /// The earliest armed timer, quiet or not: for a driver that wants to step through every
    /// timer event as ns-3 does (a replay printing alpha after each update, say).
    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.iter().filter_map(|t| t.at).min()
    }

    /// A CNP for this flow arrived.
    pub fn on_cnp(&mut self, p: &DcqcnProfile, now: Instant) {
        self.on_timeout(p, now);
        match p.variant {
            Variant::Mlx => self.cnp_mlx(p, now),
            Variant::Paper => self.cnp_paper(p, now),
        }
        self.refresh(p);
    }

    /// The flow sent `bytes` octets. Only the paper variant counts them.
    pub fn on_tx(&mut self, p: &DcqcnProfile, now: Instant, bytes: u64) {
        self.on_timeout(p, now);
        self.count_bytes(p, now, bytes);
        self.refresh(p);
    }

    fn count_bytes(&mut self, p: &DcqcnProfile, now: Instant, bytes: u64) {
        // The byte counter runs once a cut started the increase machinery (the timer is armed).
        if p.variant != Variant::Paper || self.timers[INCREASE].at.is_none() {
            return;
        }
        self.bytes = self.bytes.saturating_add(bytes);
        // Paper: a byte-counter event every B bytes; the count restarts (QCN 000:122).
        if self.bytes >= p.byte_reset {
            self.bytes = 0;
            if self.holding(p, now) {
                self.held += 1;
                return;
            }
            self.byte_stage = self.byte_stage.saturating_add(1);
            self.increase_paper(p);
        }
    }

    /// A TCD "undetermined encountered" notification for this flow arrived.
    pub fn on_ue(&mut self, p: &DcqcnProfile, now: Instant) {
        self.on_timeout(p, now);
        self.last_ue = Some(now);
    }

    /// Runs every timer due at or before `now`, quiet ones included, in ns-3's order (see the
    /// module doc). A call with nothing due does nothing.
    pub fn on_timeout(&mut self, p: &DcqcnProfile, now: Instant) {
        while let Some(k) = self.due(now) {
            let Some(at) = self.timers[k].at else { break };
            match k {
                ALPHA => self.alpha_timer(p, at),
                DECREASE => self.decrease_timer(p, at),
                _ => self.increase_timer(p, at),
            }
            self.refresh(p);
        }
    }

    fn refresh(&mut self, p: &DcqcnProfile) {
        let max = p.max_rate.as_bps();
        self.inc_quiet = self.target == max && self.rate == self.rate / 2 + self.target / 2;
    }

    fn due(&self, now: Instant) -> Option<usize> {
        (0..3)
            .filter_map(|k| {
                let t = self.timers[k];
                t.at.filter(|&at| at <= now).map(|at| (at, t.armed, k))
            })
            .min()
            .map(|(_, _, k)| k)
    }

    fn holding(&self, p: &DcqcnProfile, now: Instant) -> bool {
        p.ue_reaction == UeReaction::Hold
            && self.last_ue.is_some_and(|ue| now < ue + p.ue_hold_window)
    }

    /// The cut: `rate * max(1 - alpha * dec_scale, min_dec_factor)`, at least the min rate.
    fn cut(&mut self, p: &DcqcnProfile) {
        // ns-3: q->m_rate = std::max(m_minRate, q->m_rate * (1 - q->mlx.m_alpha / 2));
        // (dec_scale = 1/2 for rpg_gd 11; alpha * 0.5 == alpha / 2 exactly in binary floating
        // point.)
        let factor = (1.0 - self.alpha * p.dec_scale)
            .max(p.min_dec_factor)
            .max(0.0);
        let cut = (self.rate as f64 * factor) as u64;
        self.rate = cut.max(p.min_rate.as_bps());
    }

    /// Clamp rule before a cut: ns-3 `clamp = m_EcnClampTgtRate || m_rpTimeStage != 0`.
    fn clamp(&mut self, p: &DcqcnProfile) {
        if p.clamp_tgt_rate || (p.clamp_after_time_inc && self.time_stage != 0) {
            self.target = self.rate;
        }
    }

    fn first_cnp_rate(&mut self, p: &DcqcnProfile) {
        // ns-3: q->mlx.m_targetRate = q->m_rate = m_rateOnFirstCNP * q->m_rate;
        // NVIDIA: rate_to_set_on_first_cnp in Mb/s, 0 = keep the current rate.
        if let Some(r) = p.rate_on_first_cnp {
            self.rate = r.as_bps();
        }
        self.target = self.rate;
    }

    // ---- mlx (dcqcn.md steps 3-6; ns-3 rdma-hw.cc) ----

    fn cnp_mlx(&mut self, p: &DcqcnProfile, now: Instant) {
        // Step 3 / cnp_received_mlx: mark "CNP seen" for the alpha update and the decrease.
        self.alpha_cnp = true;
        self.decrease_cnp = true;
        if !self.cnp_seen {
            // First CNP only: alpha = 1 (initial_alpha_value), and this CNP does not count for
            // the alpha update (ns-3 clears m_alpha_cnp_arrived); start the alpha timer and the
            // decrease check; R_T = R_C = rate_on_first_cnp.
            self.alpha = p.initial_alpha;
            self.alpha_cnp = false;
            self.timers[ALPHA].arm(now, p.alpha_interval);
            self.timers[DECREASE].arm(now, p.decrease_interval + FIRST_DECREASE_OFFSET);
            self.first_cnp_rate(p);
            self.cnp_seen = true;
        }
    }

    fn alpha_timer(&mut self, p: &DcqcnProfile, at: Instant) {
        match p.variant {
            Variant::Mlx => {
                // Step 4 / UpdateAlphaMlx: alpha = (1-g)*alpha + g if a CNP was seen, else
                // (1-g)*alpha; clear the flag; re-arm.
                self.alpha = if self.alpha_cnp {
                    (1.0 - p.g) * self.alpha + p.g
                } else {
                    (1.0 - p.g) * self.alpha
                };
                self.alpha_cnp = false;
            }
            // Paper: "if no CNP for K, alpha = (1-g) alpha" (a CNP re-arms this timer).
            Variant::Paper => self.alpha *= 1.0 - p.g,
        }
        self.timers[ALPHA].arm(at, p.alpha_interval);
    }

    fn decrease_timer(&mut self, p: &DcqcnProfile, at: Instant) {
        // Step 5 / CheckRateDecreaseMlx: re-arm first, act only if a CNP was seen.
        self.timers[DECREASE].arm(at, p.decrease_interval);
        if !self.decrease_cnp {
            return;
        }
        self.clamp(p);
        self.cut(p);
        // Reset the increase machinery and restart the increase timer.
        self.time_stage = 0;
        self.byte_stage = 0;
        self.bytes = 0;
        self.decrease_cnp = false;
        self.timers[INCREASE].arm(at, p.time_reset);
    }

    fn increase_timer(&mut self, p: &DcqcnProfile, at: Instant) {
        // RateIncEventTimerMlx: re-arm, increase by stage, then stage += 1.
        self.timers[INCREASE].arm(at, p.time_reset);
        if self.holding(p, at) {
            self.held += 1;
            return;
        }
        match p.variant {
            Variant::Mlx => {
                // Step 6: stage < F fast recovery; == F additive; > F hyper.
                let inc = match self.time_stage.cmp(&p.threshold) {
                    std::cmp::Ordering::Less => 0,
                    std::cmp::Ordering::Equal => p.ai_rate.as_bps(),
                    std::cmp::Ordering::Greater => p.hai_rate.as_bps(),
                };
                self.raise(p, inc);
                self.time_stage = self.time_stage.saturating_add(1);
            }
            Variant::Paper => {
                self.time_stage = self.time_stage.saturating_add(1);
                self.increase_paper(p);
            }
        }
    }

    /// R_T += inc (capped at the max rate), then R_C = R_C/2 + R_T/2 (FastRecoveryMlx with inc
    /// = 0, ActiveIncreaseMlx with R_AI, HyperIncreaseMlx with R_HAI).
    fn raise(&mut self, p: &DcqcnProfile, inc: u64) {
        if inc > 0 {
            self.target = self.target.saturating_add(inc).min(p.max_rate.as_bps());
        }
        self.rate = self.rate / 2 + self.target / 2;
    }

    // ---- paper ----

    fn cnp_paper(&mut self, p: &DcqcnProfile, now: Instant) {
        if !self.cnp_seen {
            self.first_cnp_rate(p);
            self.cnp_seen = true;
        }
        // Paper: on a CNP, R_T = R_C; R_C = R_C (1 - alpha/2); alpha = (1-g) alpha + g.
        // (The target is clamped by the same rule as mlx: the paper preset sets
        // clamp_tgt_rate = true, which is the paper's unconditional R_T = R_C.)
        self.clamp(p);
        self.cut(p);
        self.alpha = (1.0 - p.g) * self.alpha + p.g;
        self.timers[ALPHA].arm(now, p.alpha_interval);
        // The byte counter and the timer restart; both stages go back to 0.
        self.time_stage = 0;
        self.byte_stage = 0;
        self.bytes = 0;
        self.timers[INCREASE].arm(now, p.time_reset);
    }

    /// Paper increase after the timer or the byte counter advanced its stage: fast recovery
    /// while neither counter passed F; hyper increase once both did, by R_HAI x (min - F) as in
    /// QCN (seed 000:73); additive increase otherwise.
    fn increase_paper(&mut self, p: &DcqcnProfile) {
        let f = p.threshold;
        let (t, b) = (self.time_stage, self.byte_stage);
        let inc = if t.max(b) <= f {
            0
        } else if t.min(b) > f {
            p.hai_rate.as_bps().saturating_mul(u64::from(t.min(b) - f))
        } else {
            p.ai_rate.as_bps()
        };
        self.raise(p, inc);
    }
}

/// One flow's DCQCN reaction point owning its profile: the shape the replay tool and the
/// simulator drive (`on_cnp(now)`, ...). Engines with many flows keep one [`DcqcnProfile`] and a
/// [`DcqcnState`] per flow instead.
#[derive(Clone, Debug, PartialEq)]
pub struct DcqcnRp {
    profile: DcqcnProfile,
    state: DcqcnState,
}

impl DcqcnRp {
    pub fn new(profile: DcqcnProfile) -> Self {
        DcqcnRp {
            state: DcqcnState::new(&profile),
            profile,
        }
    }
    pub fn profile(&self) -> &DcqcnProfile {
        &self.profile
    }
    pub fn state(&self) -> &DcqcnState {
        &self.state
    }
    pub fn on_cnp(&mut self, now: Instant) {
        self.state.on_cnp(&self.profile, now);
    }
    pub fn on_tx(&mut self, now: Instant, bytes: u64) {
        self.state.on_tx(&self.profile, now, bytes);
    }
    pub fn on_ue(&mut self, now: Instant) {
        self.state.on_ue(&self.profile, now);
    }
    pub fn on_timeout(&mut self, now: Instant) {
        self.state.on_timeout(&self.profile, now);
    }
    pub fn next_deadline(&self) -> Option<Instant> {
        self.state.next_deadline()
    }
    pub fn next_timer(&self) -> Option<Instant> {
        self.state.next_timer()
    }
    pub fn rate(&self) -> Rate {
        self.state.rate()
    }
    pub fn target_rate(&self) -> Rate {
        self.state.target_rate()
    }
    pub fn snapshot(&self) -> DcqcnSnapshot {
        self.state.snapshot()
    }
}

#[cfg(test)]
mod tests;
