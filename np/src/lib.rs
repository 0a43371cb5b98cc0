//! Notification point: CNP generation from ECN/TCD marks (the RoCEv2 receiver NIC of DCQCN).
//!
//! Sans-IO: fed `(now, event)`, returns decisions; never reads a clock, a socket or a random
//! source it was not handed.
//!
//! # What it decides
//! For each data packet that arrives for a flow (QP), [`Np::on_arrival`] says whether to send a
//! CNP back to the flow's sender ([`Decision::SendCnp`]), per the configured [`CnpMode`]:
//! - [`CnpMode::Interval`]: at most one CNP per flow per `min_time_between_cnps` (the DCQCN
//!   paper: 50 us; NVIDIA `min_time_between_cnps`: 4 us). Seed 003: "The algorithm may generate a
//!   CNP for every ECN-marked packet or limit generation to one CNP per 50 us."
//! - [`CnpMode::PerPacket`]: one CNP per CE-marked packet (ns-3 HPCC: the ACK of an ECN-marked
//!   packet carries the CNP flag, `if (ecnbits) seqh.SetCnp();`).
//!
//! TCD-aware (seed 004): with `tcd = true`, ECN code point 10 means "undetermined encountered"
//! (UE), not ECT(0). UE arrivals are reported as their own decision ([`Decision::SendUe`]),
//! limited per flow by the same interval but independently of CNPs; what the sender does with
//! them is its own configuration (`rp::UeReaction`).
//!
//! # Flow table (interval mode)
//! Bounded by `max_flows`. An entry only matters while its last notification is younger than
//! the interval, so entries older than that are dropped as time passes (a FIFO of sends makes
//! this O(1) amortised). When every one of `max_flows` entries is still within its interval and
//! a new flow needs one, the notification is **suppressed** ([`Decision::TableFull`], counted):
//! never sending without recording keeps the spacing guarantee for every flow. Per-packet mode
//! keeps no table.
//!
//! Invariant (property-tested): two notifications of one kind for one flow are never closer
//! than the interval; the table never holds more than `max_flows` flows.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, VecDeque};

use units::keys::{key, Key, KeyDefault, Range, Type};
use units::{Duration, FlowId, Instant};

/// How CNPs are generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum CnpMode {
    /// At most one CNP per flow per `min_time_between_cnps`.
    Interval,
    /// One CNP per CE-marked packet (ns-3 HPCC).
    PerPacket,
}

/// NP parameters. Defaults: NVIDIA (protocols.md: `min_time_between_cnps` 4 us).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct NpParams {
    /// `"interval"` (default) or `"per_packet"`.
    pub cnp_mode: CnpMode,
    /// Microseconds between two CNPs of one flow (interval mode). Default 4 (NVIDIA); the
    /// DCQCN paper uses 50.
    pub min_time_between_cnps: u64,
    /// Flow-table size (interval mode). Default 65536 (U: a NIC's QP count is its own).
    pub max_flows: u32,
    /// ECN code point 10 means TCD "undetermined encountered" instead of ECT(0). Default false.
    pub tcd: bool,
}

impl Default for NpParams {
    fn default() -> Self {
        NpParams {
            cnp_mode: CnpMode::Interval,
            min_time_between_cnps: 4,
            max_flows: 65_536,
            tcd: false,
        }
    }
}

/// A parameter failed validation (one type across quench: `units::ParamError`).
pub use units::ParamError;

/// The keys of [`NpParams`], as the configuration reference lists them; the validation checks the
/// integer ranges given here.
pub const KEYS: &[Key] = &[
    Key {
        name: "cnp_mode",
        ty: Type::OneOf(&["interval", "per_packet"]),
        unit: "",
        default: KeyDefault::Value("\"interval\""),
        range: Range::Any,
        doc: "At most one CNP per flow per min_time_between_cnps, or one per CE-marked packet \
              (ns-3 HPCC).",
    },
    Key {
        name: "min_time_between_cnps",
        ty: Type::Integer,
        unit: "us",
        default: KeyDefault::Value("4"),
        range: Range::Text("1..=1000000000 (0..= with per_packet)"),
        doc: "The interval between two CNPs of one flow (NVIDIA's 4; the DCQCN paper uses 50).",
    },
    Key {
        name: "max_flows",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("65536"),
        range: Range::Int(1, 1 << 24),
        doc: "The flow table's size (interval mode).",
    },
    Key {
        name: "tcd",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("false"),
        range: Range::Any,
        doc: "ECN code point 10 means TCD's undetermined (UE) instead of ECT(0).",
    },
];

const MAX_FLOWS: &Key = key(KEYS, "max_flows");

/// Validated NP parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NpProfile {
    pub mode: CnpMode,
    pub interval: Duration,
    pub max_flows: usize,
    pub tcd: bool,
}

impl NpParams {
    pub fn profile(&self) -> Result<NpProfile, ParamError> {
        let interval = self.min_time_between_cnps;
        // Per-packet mode does not use the interval, but a value no mode accepts is a mistake.
        let lo = u64::from(self.cnp_mode == CnpMode::Interval);
        if !(lo..=1_000_000_000).contains(&interval) {
            return Err(ParamError::new(
                "min_time_between_cnps",
                interval,
                format!(
                    "must be {lo}..=1e9 us in {} mode (cnp_mode = \"per_packet\" sends one CNP \
                     per marked packet)",
                    if lo == 1 { "interval" } else { "per_packet" }
                ),
            ));
        }
        MAX_FLOWS.within(self.max_flows.into())?;
        Ok(NpProfile {
            mode: self.cnp_mode,
            interval: Duration::from_micros(interval),
            max_flows: self.max_flows as usize,
            tcd: self.tcd,
        })
    }
}

/// What an arriving packet carried, in meaning (the engine decodes the IP ECN field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// Not-ECT, ECT(1), or ECT(0) without TCD.
    Unmarked,
    /// Congestion Experienced (11).
    Ce,
    /// TCD Undetermined Encountered (10 when TCD is on).
    Ue,
}

impl Mark {
    /// Decodes the two ECN bits (RFC 3168; TCD table 1: 10 = UE, 11 = CE).
    pub fn from_ecn(bits: u8, tcd: bool) -> Mark {
        match bits & 0b11 {
            0b11 => Mark::Ce,
            0b10 if tcd => Mark::Ue,
            _ => Mark::Unmarked,
        }
    }
}

/// What the NP does about one arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Not marked: nothing to send.
    Nothing,
    /// Send a CNP to this flow's sender.
    SendCnp,
    /// CE, but this flow had a CNP less than the interval ago.
    CnpSuppressed,
    /// Send a UE notification to this flow's sender (TCD).
    SendUe,
    /// UE, but this flow had a UE notification less than the interval ago.
    UeSuppressed,
    /// Marked, but the flow table is full of flows still within their interval: suppressed.
    TableFull,
}

/// Running totals for the engine's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NpCounters {
    pub arrivals: u64,
    pub ce: u64,
    pub ue: u64,
    pub cnps: u64,
    pub ue_sent: u64,
    pub suppressed: u64,
    pub table_full: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Entry {
    last_cnp: Option<Instant>,
    last_ue: Option<Instant>,
}

impl Entry {
    fn latest(&self) -> Option<Instant> {
        self.last_cnp.max(self.last_ue)
    }
}

/// The notification point of one receiver.
#[derive(Clone, Debug)]
pub struct Np {
    profile: NpProfile,
    table: BTreeMap<FlowId, Entry>,
    /// Every recorded send, in time order; entries superseded by a later send of the same
    /// flow are skipped when they reach the front.
    sends: VecDeque<(FlowId, Instant)>,
    counters: NpCounters,
}

impl Np {
    pub fn new(profile: NpProfile) -> Self {
        Np {
            profile,
            table: BTreeMap::new(),
            sends: VecDeque::new(),
            counters: NpCounters::default(),
        }
    }

    pub fn profile(&self) -> &NpProfile {
        &self.profile
    }

    /// A data packet of `flow` arrived at `now` carrying `mark`. `now` must not go backwards.
    pub fn on_arrival(&mut self, now: Instant, flow: FlowId, mark: Mark) -> Decision {
        self.counters.arrivals += 1;
        match mark {
            Mark::Unmarked => return Decision::Nothing,
            Mark::Ce => self.counters.ce += 1,
            Mark::Ue => self.counters.ue += 1,
        }
        let decision = match self.profile.mode {
            CnpMode::PerPacket => match mark {
                Mark::Ce => Decision::SendCnp,
                _ => Decision::SendUe,
            },
            CnpMode::Interval => self.interval_decision(now, flow, mark),
        };
        match decision {
            Decision::SendCnp => self.counters.cnps += 1,
            Decision::SendUe => self.counters.ue_sent += 1,
            Decision::TableFull => self.counters.table_full += 1,
            Decision::CnpSuppressed | Decision::UeSuppressed => self.counters.suppressed += 1,
            Decision::Nothing => {}
        }
        decision
    }

    fn interval_decision(&mut self, now: Instant, flow: FlowId, mark: Mark) -> Decision {
        self.expire(now);
        let interval = self.profile.interval;
        let recent = |t: Option<Instant>| t.is_some_and(|t| now.saturating_since(t) < interval);
        if !self.table.contains_key(&flow) && self.table.len() >= self.profile.max_flows {
            return Decision::TableFull;
        }
        let entry = self.table.entry(flow).or_default();
        let decision = match mark {
            Mark::Ce if recent(entry.last_cnp) => Decision::CnpSuppressed,
            Mark::Ce => {
                entry.last_cnp = Some(now);
                Decision::SendCnp
            }
            _ if recent(entry.last_ue) => Decision::UeSuppressed,
            _ => {
                entry.last_ue = Some(now);
                Decision::SendUe
            }
        };
        if matches!(decision, Decision::SendCnp | Decision::SendUe) {
            self.sends.push_back((flow, now));
        }
        decision
    }

    /// Drops table entries whose last notification is at least one interval old: they no longer
    /// constrain anything, so the flow behaves as if untracked.
    fn expire(&mut self, now: Instant) {
        while let Some(&(flow, t)) = self.sends.front() {
            let current = self.table.get(&flow).and_then(Entry::latest) == Some(t);
            if current && now.saturating_since(t) < self.profile.interval {
                break;
            }
            self.sends.pop_front();
            if current {
                self.table.remove(&flow);
            }
        }
    }

    /// Flows currently tracked (interval mode); never above `max_flows`.
    pub fn tracked(&self) -> usize {
        self.table.len()
    }

    pub fn counters(&self) -> NpCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests;
