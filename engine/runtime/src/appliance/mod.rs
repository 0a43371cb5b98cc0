//! `quench appliance`: a bump in the wire between unmodified hosts (the inside port) and the
//! network (the outside port) that gives every flow the hosts send its own reaction point.
//!
//! One [`Appliance`] serves one inside/outside pair, sans-IO: the driver ([`runtime`])
//! hands it each received frame and a way to allocate a frame on the port it will leave by, and
//! sends what it returns.
//!
//! - **Inside -> outside** ([`Appliance::on_inside`]): data frames are classified into flows
//!   ([`classify`]), copied into a frame of the outside port (adding a CN-TAG with the flow's
//!   RPID for QCN, setting ECT(0) on Not-ECT packets for DCQCN, IPv4 checksum updated by
//!   [`quench_wire::ipv4::set_ecn`]) and queued on the flow ([`table`]); the driver polls
//!   [`Appliance::poll_release`] for frames due at their flow's RP rate. Frames that are not
//!   flow data (ARP, ND, LLDP, PFC, CNMs) leave at once, unpaced.
//! - **Outside -> inside** ([`Appliance::on_outside`]): feedback that names a flow the table holds
//!   and passes validation drives that flow's RP and is consumed; all else passes unchanged,
//!   and refused feedback is counted by reason. Validation (issue 18, item 1):
//!   - a CNM must be addressed to the source MAC of the flow it names (the appliance is
//!     transparent: the frames it sends carry the host's MAC), its encapsulated DA must be the
//!     flow's destination MAC, and its encapsulated MSDU (the sampled frame's first octets, which
//!     a real CP copies) must classify to the same flow; the flow is found by the CN-TAG's RPID
//!     (the appliance's own, or the host's with the CNM's DA) or, untagged, by the MSDU;
//!   - a CNP must come from the flow's destination address to its source, for the QP the flow
//!     has (RoCEv2's destination QP, or [`classify::FiveTuple::qp`] for other traffic).
//! - **Notification point role** (`role = "np"`, in front of a receiver): frames from the
//!   outside pass inside; a CE-marked IPv4 frame that is not RoCEv2 also makes the np crate's
//!   notification point decide on a CNP, sent out of the outside port to the frame's source
//!   with DestQP = [`classify::FiveTuple::qp`] of its 5-tuple (the rule both roles share).
//!   Inside -> outside frames pass unpaced.
pub use quench_wire::classify;
pub mod config;
pub mod runtime;
pub mod table;

use hdrhistogram::Histogram;
use units::{FlowId, Instant};

use classify::{
    classify, encapsulated_key, feedback, Class, CnpKey, Feedback, FlowFrame, FlowKey, PassReason,
    L3,
};
use quench_node::host::announce::Announcer;
use quench_node::host::rp::HostRp;
use quench_node::host::validate::{self, CnmExpect, ForgedCounts};
use table::{key_hash, Admitted, FlowTable, Release, TableConfig};

use quench_port::{Frame, MAX_FRAME};
use quench_wire::ethernet::{walk, L2Repr};
use quench_wire::frame::{announce_frame, emit_cnp_reply};
use quench_wire::ipv4::{self, Ecn};
use quench_wire::{cnm, cntag, ipv6, MacAddr};

/// Which side of the network the appliance stands on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// In front of senders: reaction points, per-flow pacing.
    #[default]
    Rp,
    /// In front of a receiver: CE marks become CNPs.
    Np,
}

/// Counters of one appliance pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    pub inside_frames: u64,
    pub outside_frames: u64,
    /// Inside frames forwarded at once because they are not flow data, by reason.
    pub pass_arp: u64,
    pub pass_nd: u64,
    pub pass_lldp: u64,
    pub pass_mac_control: u64,
    pub pass_cnm: u64,
    pub pass_other: u64,
    pub pass_malformed: u64,
    /// Inside data frames forwarded at once because there is no reaction point or the role is
    /// `np`.
    pub direct: u64,
    /// Frames lost because the leaving port had no free buffer.
    pub no_buffer: u64,
    /// Frames that would exceed the largest frame with a CN-TAG added: sent untagged.
    pub untagged_too_long: u64,
    /// Frames passed inside with their CN-TAG removed.
    pub cn_tags_stripped: u64,
    /// Feedback accepted (and consumed).
    pub cnms_accepted: u64,
    pub cnps_accepted: u64,
    /// Feedback naming no flow the table holds (passed inside).
    pub unknown_flow: u64,
    /// Feedback naming a held flow that cannot answer it, by reason ([`validate`]): a CNM whose
    /// addresses or encapsulated frame do not match the flow, a CNP for a QP a flow to its
    /// addressee holds but not from that flow's destination (`cnp_source`).
    pub forged: ForgedCounts,
    /// Feedback of the congestion control not in use (CNPs under QCN, CNMs under DCQCN).
    pub other_cc_feedback: u64,
    /// Notification-point role.
    pub cnps_sent: u64,
    pub cnps_suppressed: u64,
    /// PFC frames from the network honoured ([`Appliance::set_pfc`]) and consumed.
    pub pfc_rx: u64,
    /// Notification-point role: frames announcing the host's address on the outside port
    /// ([`Appliance::announce`]).
    pub announced: u64,
}

/// What to do with an inside frame.
#[derive(Debug)]
pub enum InsideAction<F> {
    /// Send this frame (a copy on the outside port) now: not paced, or its flow was idle and
    /// its reaction point allows it now (released at once: counted as released, its latency
    /// recorded, [`Appliance::set_release_on_arrival`]).
    Send(F),
    /// Queued on its flow.
    Queued,
    /// Dropped (flow queue full, table full with `when_full = drop`, or no buffer): counted.
    Dropped,
}

/// What to do with an outside frame.
#[derive(Debug)]
pub enum OutsideAction<F> {
    /// Feedback (or, honoured, a PFC frame) accepted and consumed.
    Consumed,
    /// Pass it inside: `inside` is the copy for the inside port (`None`: no buffer, counted),
    /// and in the NP role there may be a CNP to send out of the outside port.
    Pass { inside: Option<F>, cnp: Option<F> },
}

/// One inside/outside pair. See the module docs.
pub struct Appliance<F> {
    role: Role,
    cn_tag: bool,
    ect0: bool,
    table: FlowTable<F>,
    np: Option<np::Np>,
    counters: Counters,
    /// Nanoseconds each released frame spent in the appliance.
    latency: Histogram<u64>,
    /// Frames the current [`Appliance::on_inside`] / [`Appliance::on_inside_burst`] call
    /// released at once, the instant they arrived: recorded in `latency` together when the call
    /// ends (one `record_n` per call, not one `record` per frame).
    at_once: u64,
    /// [`Appliance::on_inside_burst`]'s classified frames (kept to reuse its allocation).
    burst: Vec<Option<(FlowFrame, u64)>>,
    /// Largest frame the outside port carries ([`Appliance::set_max_frame`]): a CN-TAG is
    /// added only to frames that stay within it.
    max_frame: usize,
    /// The outside link's speed when PFC PAUSE frames from the network are honoured
    /// ([`Appliance::set_pfc`]; `None`: PFC frames pass inside like any other frame). The
    /// pauses themselves are the host core's ([`HostCore::handle_pfc`](quench_node::host::core::HostCore::handle_pfc)).
    pfc: Option<units::Rate>,
    /// Notification-point role: the address of the host behind the inside port (the source of
    /// its latest frame), and when to announce it to the bridges ([`Appliance::announce`]).
    host_mac: Option<MacAddr>,
    announcer: Announcer,
}

/// How many frames ahead of the one it queues [`Appliance::on_inside_burst`] asks the cache
/// for a flow's lines (its slot in the core, [`table::TableFlow`] in it: four lines, five with
/// the drivers' frames): the lines should arrive while the frames before are queued, so the
/// distance times the work per frame (about 100 ns) is about one miss's latency (390 ns with
/// huge pages on a KVM guest), and few enough requests are in flight at once (16 lines) that
/// issuing one does not wait for a line fill buffer (a core has 10-16: Intel's optimization
/// reference manual, "software prefetch"). docs/design.md, "Sender appliance", has the
/// distances measured (2 to 8, and a whole burst first).
const LOOKAHEAD: usize = 4;

/// How many frames ahead of the one it queues [`Appliance::on_inside_burst`] asks the cache
/// for a frame's key index entry: [`LOOKAHEAD`] frames before its flow's lines are asked for,
/// which needs the entry, so the entry has about one miss's latency to arrive.
const INDEX_AHEAD: usize = 2 * LOOKAHEAD;

/// Flows [`Appliance::report`] lists.
pub const TOP_FLOWS: usize = 16;

/// Largest latency recorded, ns (anything above is clamped): 10 s.
const MAX_LATENCY_NS: u64 = 10_000_000_000;

/// What the latency histogram records for a frame that arrived at `arrived` and left at `now`:
/// nanoseconds, within the histogram's bounds (1 to [`MAX_LATENCY_NS`]).
fn latency_ns(now: Instant, arrived: Instant) -> u64 {
    now.saturating_since(arrived)
        .as_nanos()
        .clamp(1, MAX_LATENCY_NS)
}

impl<F: Frame> Appliance<F> {
    /// `cn_tag` applies with QCN reaction points, `ect0` with DCQCN ones.
    pub fn new(
        role: Role,
        cn_tag: bool,
        ect0: bool,
        table_cfg: TableConfig,
        rp: HostRp,
        np: Option<np::Np>,
    ) -> Result<Self, table_error::Error> {
        let cn_tag = cn_tag && matches!(rp, HostRp::Qcn(_));
        let ect0 = ect0 && matches!(rp, HostRp::Dcqcn(_));
        let table = FlowTable::new(
            TableConfig {
                rpids: cn_tag,
                ..table_cfg
            },
            rp,
        )?;
        Ok(Appliance {
            role,
            cn_tag,
            ect0,
            table,
            np,
            counters: Counters::default(),
            latency: Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3)?,
            at_once: 0,
            burst: Vec::new(),
            max_frame: MAX_FRAME,
            pfc: None,
            host_mac: None,
            announcer: Announcer::default(),
        })
    }

    /// Honour PFC (802.1Qbb) on the outside port, whose speed is `link_rate` (PAUSE quanta are
    /// 512 bit times of it), as a NIC does: a PAUSE frame for a priority holds that priority's
    /// releases for its quanta (until an XON), so the flows' frames wait in their queues
    /// (bounded; what does not fit is dropped and counted there) and their schedules move on by
    /// the pause; the PFC frame is consumed, since the appliance is the link's end. RP role
    /// only: in the NP role the outside port's PFC frames still pass inside.
    pub fn set_pfc(&mut self, link_rate: units::Rate) {
        self.pfc = Some(link_rate);
    }

    /// Whether PFC pauses `prio` at `now` (never without [`Appliance::set_pfc`]; `now` no
    /// earlier than the last call with a time: [`HostCore::paused`](quench_node::host::core::HostCore::paused)).
    pub fn paused(&self, now: Instant, prio: u8) -> bool {
        self.pfc.is_some() && self.table.core().paused(now, prio)
    }

    /// The outside port's largest frame (its `Capabilities::max_frame`; [`MAX_FRAME`] until
    /// set): frames the CN-TAG would take past it leave untagged, counted.
    pub fn set_max_frame(&mut self, max_frame: usize) {
        self.max_frame = max_frame;
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    pub fn table(&self) -> &FlowTable<F> {
        &self.table
    }

    pub fn latency(&self) -> &Histogram<u64> {
        &self.latency
    }

    pub fn np_counters(&self) -> Option<np::NpCounters> {
        self.np.as_ref().map(|n| n.counters())
    }

    /// Counters, flows held, the latency added (us) and the [`TOP_FLOWS`] flows that sent the
    /// most (their RP rate, mean sent rate over `secs`, queue and drops), as JSON: what the
    /// control socket answers and the report at exit prints.
    pub fn report(&self, secs: f64) -> serde_json::Value {
        let h = &self.latency;
        let q = |p: f64| h.value_at_quantile(p) as f64 / 1e3;
        let flows: Vec<serde_json::Value> = self
            .table
            .top(TOP_FLOWS)
            .iter()
            .map(|f| {
                serde_json::json!({
                    "flow": f.key.to_string(),
                    "rpid": f.rpid,
                    "rate_mbps": f.rate.as_bps() as f64 / 1e6,
                    "sent_mbps": f.sent_bytes as f64 * 8.0 / secs.max(1e-9) / 1e6,
                    "sent_bytes": f.sent_bytes,
                    "sent_frames": f.sent_frames,
                    "queued_bytes": f.queued_bytes,
                    "drops": f.drops,
                })
            })
            .collect();
        serde_json::json!({
            "role": self.role,
            "counters": self.counters,
            "table": self.table.counters(),
            "flows_held": self.table.flows(),
            "latency_us": {"count": h.len(), "p50": q(0.5), "p99": q(0.99), "p999": q(0.999),
                           "max": h.max() as f64 / 1e3},
            "np": self.np_counters().map(|n| serde_json::json!({"ce": n.ce, "cnps": n.cnps,
                                                                 "suppressed": n.suppressed})),
            "top_flows": flows,
        })
    }

    /// Copies `src` unchanged into a frame from `alloc`.
    fn copy(&mut self, src: &[u8], alloc: impl FnOnce(usize) -> Option<F>) -> InsideAction<F> {
        let Some(mut f) = alloc(src.len()) else {
            self.counters.no_buffer += 1;
            return InsideAction::Dropped;
        };
        f.data_mut()[..src.len()].copy_from_slice(src);
        InsideAction::Send(f)
    }

    /// Copies `src` into a frame from `alloc` with the flow's rewrites; `None` when no buffer.
    fn rewrite(
        &mut self,
        ff: &FlowFrame,
        rpid: Option<u16>,
        src: &[u8],
        alloc: impl FnOnce(usize) -> Option<F>,
    ) -> Option<F> {
        let mut insert = rpid.filter(|_| !ff.tagged);
        if insert.is_some() && src.len() + cntag::LEN > self.max_frame {
            self.counters.untagged_too_long += 1;
            insert = None;
        }
        let shift = if insert.is_some() { cntag::LEN } else { 0 };
        let Some(mut out) = alloc(src.len() + shift) else {
            self.counters.no_buffer += 1;
            return None;
        };
        let o = out.data_mut();
        let at = usize::from(ff.tag_at);
        o[..at].copy_from_slice(&src[..at]);
        if let Some(r) = insert {
            // 802.1Qau CN-TAG: EtherType 0x22E9 in the EtherType slot, the RPID, then the
            // frame's own EtherType (cntag.rs).
            o[at..at + 2].copy_from_slice(&cntag::ETHERTYPE.0.to_be_bytes());
            o[at + 2..at + 4].copy_from_slice(&r.to_be_bytes());
        }
        o[at + shift..src.len() + shift].copy_from_slice(&src[at..]);
        if self.ect0 {
            // RFC 3168 section 6.1.1: ECT is set only on packets of transports that were not
            // ECN-capable here (Not-ECT); ECT(1), ECT(0) and CE are left as they are.
            match ff.l3 {
                L3::V4 {
                    at,
                    ecn: Ecn::NotEct,
                } => {
                    let _ = ipv4::set_ecn(&mut o[usize::from(at) + shift..], Ecn::Ect0);
                }
                L3::V6 {
                    at,
                    ecn: Ecn::NotEct,
                } => {
                    let _ = ipv6::set_ecn(&mut o[usize::from(at) + shift..], Ecn::Ect0);
                }
                _ => {}
            }
        }
        Some(out)
    }

    /// A frame arrived on the inside port; `alloc(len)` gives a frame of the outside port.
    pub fn on_inside(
        &mut self,
        now: Instant,
        frame: &[u8],
        alloc: impl FnOnce(usize) -> Option<F>,
    ) -> InsideAction<F> {
        let a = match self.sort(frame) {
            Some(ff) => self.queue(now, &ff, key_hash(&ff.key), frame, alloc),
            None => self.copy(frame, alloc),
        };
        self.record_at_once(now);
        a
    }

    /// A burst of frames arrived on the inside port: [`Appliance::on_inside`] for each, in
    /// order, `out` getting each one's action, as a pipeline: every frame classified, its key
    /// hashed and its index entry asked of the cache ([`FlowTable::prefetch`]) before the first
    /// is queued, then each frame queued while the flow of the frame [`LOOKAHEAD`] places
    /// further is asked for ([`FlowTable::prefetch_flow`]): over a table of a million flows each
    /// frame misses the cache on its index entry and then on its flow, and the misses of a
    /// burst overlap with one another and with the work on the frames before them instead of
    /// following one another. `data(r)` is the frame `r` holds.
    pub fn on_inside_burst<R>(
        &mut self,
        now: Instant,
        frames: &[R],
        data: impl Fn(&R) -> &[u8],
        mut alloc: impl FnMut(usize) -> Option<F>,
        mut out: impl FnMut(InsideAction<F>),
    ) {
        let mut sorted = std::mem::take(&mut self.burst);
        sorted.clear();
        for r in frames {
            let ff = self.sort(data(r)).map(|ff| {
                let h = key_hash(&ff.key);
                (ff, h)
            });
            sorted.push(ff);
        }
        // A frame's index entry is asked for INDEX_AHEAD frames ahead of the one being queued,
        // its flow's lines LOOKAHEAD frames ahead (reading the entry, which has had the
        // frames between to arrive): the misses overlap with the queueing of the frames
        // before, and only so many are in flight at once.
        let ahead = |j: usize| sorted.get(j).and_then(|ff| ff.as_ref()).map(|&(_, h)| h);
        for j in 0..INDEX_AHEAD {
            if let Some(h) = ahead(j) {
                self.table.prefetch(h);
            }
        }
        for j in 0..LOOKAHEAD {
            if let Some(h) = ahead(j) {
                self.table.prefetch_flow(h);
            }
        }
        for (j, (r, ff)) in frames.iter().zip(&sorted).enumerate() {
            if let Some(h) = ahead(j + INDEX_AHEAD) {
                self.table.prefetch(h);
            }
            if let Some(h) = ahead(j + LOOKAHEAD) {
                self.table.prefetch_flow(h);
            }
            out(match ff {
                Some((ff, h)) => self.queue(now, ff, *h, data(r), &mut alloc),
                None => self.copy(data(r), &mut alloc),
            });
        }
        self.burst = sorted;
        self.record_at_once(now);
    }

    /// Counts an inside frame and classifies it: the flow it belongs to if the appliance paces
    /// it, `None` (counted by reason) if it leaves at once, unchanged.
    fn sort(&mut self, frame: &[u8]) -> Option<FlowFrame> {
        self.counters.inside_frames += 1;
        if self.role == Role::Np {
            // An individual source address (I/G bit 0): the host's own.
            if let Some(sa) = frame.get(6..12).filter(|sa| sa[0] & 1 == 0) {
                self.host_mac = Some(MacAddr::new(sa[0], sa[1], sa[2], sa[3], sa[4], sa[5]));
            }
        }
        match classify(frame) {
            Class::Flow(ff)
                if self.role == Role::Rp && !matches!(self.table.rp(), HostRp::None) =>
            {
                Some(ff)
            }
            Class::Flow(_) => {
                self.counters.direct += 1;
                None
            }
            Class::Pass(r) => {
                let c = &mut self.counters;
                *match r {
                    PassReason::Arp => &mut c.pass_arp,
                    PassReason::Nd => &mut c.pass_nd,
                    PassReason::Lldp => &mut c.pass_lldp,
                    PassReason::MacControl => &mut c.pass_mac_control,
                    PassReason::Cnm => &mut c.pass_cnm,
                    PassReason::Other => &mut c.pass_other,
                    PassReason::Malformed => &mut c.pass_malformed,
                } += 1;
                None
            }
        }
    }

    /// Copies the data frame `frame` of flow `ff` (key hash `hash`) with its rewrites and queues
    /// it on the flow.
    fn queue(
        &mut self,
        now: Instant,
        ff: &FlowFrame,
        hash: u64,
        frame: &[u8],
        alloc: impl FnOnce(usize) -> Option<F>,
    ) -> InsideAction<F> {
        let slot =
            match self
                .table
                .slot_for_hashed(now, hash, ff.key, ff.priority, ff.src_mac, ff.dst_mac)
            {
                Ok(slot) => slot,
                Err(table::WhenFull::Bypass) => {
                    return match self.rewrite(ff, None, frame, alloc) {
                        Some(f) => InsideAction::Send(f),
                        None => InsideAction::Dropped,
                    }
                }
                Err(table::WhenFull::Drop) => return InsideAction::Dropped,
            };
        let rpid = self.table.rpid(slot);
        let Some(out) = self.rewrite(ff, rpid, frame, alloc) else {
            return InsideAction::Dropped;
        };
        let len = out.len() as u32;
        match self.table.enqueue(now, slot, len, out) {
            Admitted::Queued(_) => InsideAction::Queued,
            Admitted::Released(r) => {
                // Its flow was idle: the frame leaves the instant it arrived, as the call's
                // others released at once (recorded with them, `record_at_once`).
                if r.arrived == now {
                    self.at_once += 1;
                } else {
                    self.on_sent(now, r.arrived);
                }
                InsideAction::Send(r.frame)
            }
            _ => InsideAction::Dropped,
        }
    }

    /// Whether a data frame whose flow is idle and whose reaction point allows it now leaves at
    /// once, as [`Appliance::poll_release`] would release it next ([`InsideAction::Send`]),
    /// instead of waiting on the flow for a poll (default: yes). A driver whose transmit
    /// backlog is full says no, so that such frames wait on their flows, not in the backlog.
    pub fn set_release_on_arrival(&mut self, yes: bool) {
        self.table.set_release_on_arrival(yes);
    }

    /// The next frame due at `now`; the driver sends it and calls
    /// [`Appliance::on_sent`] with its arrival time when it has left.
    pub fn poll_release(&mut self, now: Instant) -> Option<Release<F>> {
        self.table.poll_release(now)
    }

    /// A released frame that arrived at `arrived` was handed to the outside port at `now`.
    pub fn on_sent(&mut self, now: Instant, arrived: Instant) {
        let _ = self.latency.record(latency_ns(now, arrived));
    }

    /// Records the frames the call that ends at `now` released the instant they arrived, as
    /// one [`Appliance::on_sent`]`(now, now)` each.
    fn record_at_once(&mut self, now: Instant) {
        if self.at_once > 0 {
            let _ = self.latency.record_n(latency_ns(now, now), self.at_once);
            self.at_once = 0;
        }
    }

    /// The slot of the flow a CNM names, if it passes [`validate::check_cnm`] for that flow.
    fn validate_cnm(
        &mut self,
        da: MacAddr,
        rpid: Option<u16>,
        encap_da: MacAddr,
        msdu: &[u8],
    ) -> Option<u32> {
        let slot = match rpid {
            Some(r) => self
                .table
                .find_rpid(r)
                .filter(|_| self.cn_tag)
                .or_else(|| self.table.find(&FlowKey::CnTag { src: da, rpid: r })),
            None => encapsulated_key(msdu).and_then(|k| self.table.find(&k)),
        };
        let Some(slot) = slot else {
            self.counters.unknown_flow += 1;
            return None;
        };
        let (key, src_mac, dst_mac) = self.table.addresses(slot)?;
        let expect = CnmExpect {
            src_mac,
            dst_mac,
            // The host's own CN-TAG names the flow; its packets may be anything.
            key: (!matches!(key, FlowKey::CnTag { .. })).then_some(key),
            // The hosts' frames carry no quench test header.
            sent: None,
        };
        match validate::check_cnm(&expect, da, encap_da, msdu) {
            Ok(()) => Some(slot),
            Err(why) => {
                self.counters.forged.count(why);
                None
            }
        }
    }

    /// The slot of the flow a CNP answers: among the flows holding its DestQP with its
    /// addressee as source, the one [`validate::check_cnp`] accepts it for. One for a held QP
    /// from another address counts as forged, one naming no held QP as `unknown_flow`.
    fn validate_cnp(&mut self, cnp: &CnpKey) -> Option<u32> {
        let mut refused = None;
        for (slot, flow) in self.table.cnp_flows(cnp.qp, cnp.src) {
            // The CNP travels from the flow's destination (`cnp.dst`) to its source.
            match validate::check_cnp(flow.src, flow.dst, cnp.dst, cnp.src) {
                Ok(()) => return Some(slot),
                Err(why) => refused = Some(why),
            }
        }
        match refused {
            Some(why) => self.counters.forged.count(why),
            None => self.counters.unknown_flow += 1,
        }
        None
    }

    /// A frame arrived on the outside port; `alloc_in(len)` gives a frame of the inside port,
    /// `alloc_out(len)` one of the outside port (for a CNP in the NP role).
    pub fn on_outside(
        &mut self,
        now: Instant,
        frame: &[u8],
        alloc_in: impl FnOnce(usize) -> Option<F>,
        alloc_out: impl FnOnce(usize) -> Option<F>,
    ) -> OutsideAction<F> {
        self.counters.outside_frames += 1;
        if self.role == Role::Np {
            let cnp = self.notification_point(now, frame, alloc_out);
            return OutsideAction::Pass {
                inside: self.inward(frame, alloc_in),
                cnp,
            };
        }
        if let Some(link_rate) = self.pfc {
            if let Some(pfc) = pfc_frame(frame) {
                self.counters.pfc_rx += 1;
                self.table.on_pfc(now, link_rate, &pfc);
                return OutsideAction::Consumed;
            }
        }
        match feedback(frame) {
            Some(Feedback::Cnm {
                da,
                rpid,
                qntz_fb,
                encap_da,
                msdu,
            }) => {
                if !matches!(self.table.rp(), HostRp::Qcn(_)) {
                    self.counters.other_cc_feedback += 1;
                } else if let Some(slot) = self.validate_cnm(da, rpid, encap_da, msdu) {
                    self.counters.cnms_accepted += 1;
                    self.table.on_cnm(now, slot, qntz_fb);
                    return OutsideAction::Consumed;
                }
            }
            Some(Feedback::Cnp { key }) => {
                if !matches!(self.table.rp(), HostRp::Dcqcn(_)) {
                    self.counters.other_cc_feedback += 1;
                } else if let Some(slot) = self.validate_cnp(&key) {
                    self.counters.cnps_accepted += 1;
                    self.table.on_cnp(now, slot);
                    return OutsideAction::Consumed;
                }
            }
            None => {}
        }
        OutsideAction::Pass {
            inside: self.inward(frame, alloc_in),
            cnp: None,
        }
    }

    /// The copy of an outside frame for the inside port. The appliance is the edge of the
    /// congestion-notification domain for its hosts, so a CN-TAG is removed (802.1Qau 32.4:
    /// the CN-TAG is not passed to stations outside the domain; an unmodified host's stack
    /// drops EtherType 0x22E9); everything else is copied unchanged.
    fn inward(&mut self, frame: &[u8], alloc: impl FnOnce(usize) -> Option<F>) -> Option<F> {
        let at = match walk(frame) {
            // A CNM keeps its CN-TAG: it is how the CNM names the flow, for a host that has
            // reaction points of its own.
            Ok(w) if w.rpid.is_some() && w.ethertype != cnm::ETHERTYPE => {
                Some(12 + 4 * usize::from(w.vlan_tags))
            }
            _ => None,
        };
        let len = frame.len() - at.map_or(0, |_| cntag::LEN);
        let Some(mut f) = alloc(len) else {
            self.counters.no_buffer += 1;
            return None;
        };
        let o = f.data_mut();
        match at {
            Some(at) => {
                o[..at].copy_from_slice(&frame[..at]);
                o[at..len].copy_from_slice(&frame[at + cntag::LEN..]);
                self.counters.cn_tags_stripped += 1;
            }
            None => o[..len].copy_from_slice(frame),
        }
        Some(f)
    }

    /// NP role: the frame announcing the host's address to the bridges on the outside port,
    /// when one is due ([`Announcer`]: at once, then every few seconds), `alloc(len)` giving a
    /// frame of the outside port. The host behind a notification point may never send (a QCN
    /// receiver): without this the switch would flood its frames to every host. The address is
    /// the one the host's frames carry, known from its first frame (which the switch learns
    /// itself); `None` before then and in the reaction-point role.
    pub fn announce(&mut self, now: Instant, alloc: impl FnOnce(usize) -> Option<F>) -> Option<F> {
        let mac = self.host_mac?;
        if !self.announcer.due(now) {
            return None;
        }
        let frame = announce_frame(mac);
        let Some(mut f) = alloc(frame.len()) else {
            self.counters.no_buffer += 1;
            return None;
        };
        f.data_mut()[..frame.len()].copy_from_slice(&frame);
        self.counters.announced += 1;
        Some(f)
    }

    /// NP role: the CNP a CE-marked IPv4 data frame asks for, if the np crate decides to send
    /// one now.
    fn notification_point(
        &mut self,
        now: Instant,
        frame: &[u8],
        alloc: impl FnOnce(usize) -> Option<F>,
    ) -> Option<F> {
        let Class::Flow(ff) = classify(frame) else {
            return None;
        };
        let (L3::V4 { ecn: Ecn::Ce, .. }, FlowKey::Ip(t)) = (ff.l3, ff.key) else {
            return None;
        };
        let (src, dst) = t.v4_addrs()?;
        let np = self.np.as_mut()?;
        let qp = t.qp();
        match np.on_arrival(now, FlowId(qp), np::Mark::Ce) {
            np::Decision::SendCnp => {}
            _ => {
                self.counters.cnps_suppressed += 1;
                return None;
            }
        }
        let (l2, _) = L2Repr::parse(frame).ok()?;
        let mut buf = [0u8; 128];
        // The CNP leaves as if from the receiver: its MAC is the data frame's destination.
        let n = emit_cnp_reply(&l2, src, dst, t.dst_port, ff.dst_mac, qp, &mut buf).ok()?;
        let Some(mut f) = alloc(n) else {
            self.counters.no_buffer += 1;
            return None;
        };
        f.data_mut()[..n].copy_from_slice(&buf[..n]);
        self.counters.cnps_sent += 1;
        Some(f)
    }

    /// Runs the reaction points' timers due at `now`, and bounded idle eviction.
    pub fn on_timeout(&mut self, now: Instant) {
        self.table.on_timeout(now);
        self.table.on_housekeeping(now);
    }

    /// When the next release or RP timer is due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.table.next_deadline()
    }
}

/// The PDU of a PFC frame (EtherType 0x8808, opcode 0x0101), if `frame` is one.
fn pfc_frame(frame: &[u8]) -> Option<quench_wire::pfc::PfcRepr> {
    let w = walk(frame).ok()?;
    if w.ethertype != quench_wire::ethernet::ethertype::MAC_CONTROL {
        return None;
    }
    quench_wire::pfc::PfcRepr::parse(frame.get(w.payload_offset..)?).ok()
}

/// Errors from [`Appliance::new`].
pub mod table_error {
    #[derive(Debug, thiserror::Error)]
    pub enum Error {
        #[error(transparent)]
        Wheel(#[from] quench_node::wheel::WheelError),
        #[error("latency histogram: {0}")]
        Histogram(#[from] hdrhistogram::CreationError),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use quench_port::heap::HeapFrame;
    use quench_wire::cnm::{encap_msdu, CnmRepr};
    use quench_wire::ethernet::{ethertype, walk, VlanTci};
    use quench_wire::frame::{cnm_l2, decode, emit_cnm, emit_test_frame, Body, Ipv4UdpHeaders};
    use quench_wire::testhdr::{TestHdrRepr, UDP_PORT};
    use std::net::Ipv4Addr;
    use units::Duration;

    const HOST: MacAddr = MacAddr(2, 0x71, 0x6e, 1, 0, 0);
    const RCV: MacAddr = MacAddr(2, 0x71, 0x6e, 2, 0, 0);
    const CP: MacAddr = MacAddr(2, 0x71, 0x6e, 0xcc, 0, 0);
    const SRC: Ipv4Addr = Ipv4Addr::new(10, 71, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 71, 0, 101);

    /// A UDP test frame from 10.71.0.1:`sport` to 10.71.0.101 (the test header's port).
    pub(crate) fn data(sport: u16, ecn: Ecn, vlan: bool) -> Vec<u8> {
        let mut l2 = L2Repr::new(RCV, HOST, ethertype::IPV4);
        if vlan {
            l2 = l2.with_vlan(VlanTci {
                pcp: 3,
                dei: false,
                vid: 1,
            });
        }
        let h = Ipv4UdpHeaders {
            l2,
            src: SRC,
            dst: DST,
            dscp: 0,
            ecn,
            src_port: sport,
            dst_port: UDP_PORT,
        };
        let mut buf = vec![0; 1600];
        let hdr = TestHdrRepr::new(FlowId(1), 1, Instant::ZERO);
        let n = emit_test_frame(&h, &hdr, 1000, &mut buf).unwrap();
        buf.truncate(n);
        buf
    }

    fn heap(n: usize) -> Option<HeapFrame> {
        HeapFrame::zeroed(n)
    }

    #[derive(PartialEq)]
    enum Cc {
        None,
        Qcn,
        Dcqcn,
    }

    fn appliance(cc: Cc, role: Role) -> Appliance<HeapFrame> {
        let line = units::Rate::from_gbps(1);
        let rp = match cc {
            Cc::None => HostRp::None,
            Cc::Qcn => HostRp::qcn(rp::QcnParams::default().profile(line).unwrap()),
            Cc::Dcqcn => HostRp::Dcqcn(rp::DcqcnParams::default().profile(line).unwrap()),
        };
        let np =
            (role == Role::Np).then(|| np::Np::new(np::NpParams::default().profile().unwrap()));
        Appliance::new(role, true, true, TableConfig::default(), rp, np).unwrap()
    }

    fn release_all(a: &mut Appliance<HeapFrame>, now: Instant) -> Vec<Vec<u8>> {
        // A new flow's first poll puts it on the wheel at that poll's time; a second poll a
        // tick later takes the frame.
        let mut out = Vec::new();
        for now in [now, now + Duration::from_micros(1)] {
            while let Some(r) = a.poll_release(now) {
                a.on_sent(now, r.arrived);
                out.push(r.frame.into_vec());
            }
        }
        out
    }

    /// The CNM a CP sends for `sampled`.
    fn cnm_for(sampled: &[u8], da: MacAddr, qntz_fb: u8) -> Vec<u8> {
        let (l2, _) = L2Repr::parse(sampled).unwrap();
        let w = walk(sampled).unwrap();
        let cnm = CnmRepr {
            version: 0,
            reserved_v: 0,
            qntz_fb,
            cpid: 1,
            q_offset: 0,
            q_delta: 0,
            encap_priority: 0,
            encap_da: l2.dst,
            encap_msdu: encap_msdu(sampled, &w),
        };
        let mut l2 = cnm_l2(&l2, CP, 6);
        l2.dst = da;
        let mut buf = vec![0; 200];
        let n = emit_cnm(&l2, &cnm, &mut buf).unwrap();
        buf.truncate(n);
        buf
    }

    /// A PFC frame from the network pausing `prio` for `quanta` (0: XON).
    fn pfc(prio: u8, quanta: u16) -> Vec<u8> {
        use quench_wire::pfc::{emit_frame, PfcRepr, FRAME_LEN};
        let mut buf = vec![0u8; FRAME_LEN];
        emit_frame(CP, &PfcRepr::pause(1 << prio, quanta), &mut buf).unwrap();
        buf
    }

    /// The UDP source port of every frame in `frames` (IPv4 without options).
    fn sports(frames: &[Vec<u8>]) -> Vec<u16> {
        frames
            .iter()
            .map(|f| {
                let at = walk(f).unwrap().payload_offset + 20;
                u16::from_be_bytes([f[at], f[at + 1]])
            })
            .collect()
    }

    /// Honouring PFC: a PAUSE for priority 3 holds the tagged (PCP 3) flow's frames in its
    /// queue while the untagged flow (priority 0) goes on, and the XON releases them; the PFC
    /// frames are consumed. Without `set_pfc` a PFC frame passes inside as before.
    #[test]
    fn pfc_holds_the_paused_priority_until_resumed() {
        let mut a = appliance(Cc::Qcn, Role::Rp);
        a.set_pfc(units::Rate::from_gbps(1));
        let t0 = Instant::from_nanos(1_000_000);
        let pause = pfc(3, quench_wire::pfc::MAX_QUANTA);
        assert!(matches!(
            a.on_outside(t0, &pause, heap, heap),
            OutsideAction::Consumed
        ));
        assert_eq!(a.counters().pfc_rx, 1);
        assert!(a.paused(t0, 3) && !a.paused(t0, 0));
        for _ in 0..3 {
            assert!(matches!(
                a.on_inside(t0, &data(5000, Ecn::NotEct, false), heap),
                InsideAction::Queued
            ));
            assert!(matches!(
                a.on_inside(t0, &data(5001, Ecn::NotEct, true), heap),
                InsideAction::Queued
            ));
        }
        // 1 ms on (the pause is 33.5 ms): every untagged frame is out (three 1,060-octet frames
        // at 1 Gb/s take 25 us), none of the tagged flow's.
        let t1 = t0 + Duration::from_millis(1);
        let mut out = Vec::new();
        for k in 0..100 {
            out.extend(release_all(&mut a, t0 + Duration::from_micros(10 * k)));
        }
        out.extend(release_all(&mut a, t1));
        assert_eq!(sports(&out), [5000, 5000, 5000]);
        // The XON: the held frames leave.
        assert!(matches!(
            a.on_outside(t1, &pfc(3, 0), heap, heap),
            OutsideAction::Consumed
        ));
        assert!(!a.paused(t1, 3));
        let mut out = Vec::new();
        for k in 0..100 {
            out.extend(release_all(&mut a, t1 + Duration::from_micros(10 * k)));
        }
        assert_eq!(sports(&out), [5001, 5001, 5001]);
        assert_eq!(a.counters().pfc_rx, 2);

        let mut plain = appliance(Cc::Qcn, Role::Rp);
        let OutsideAction::Pass {
            inside: Some(f), ..
        } = plain.on_outside(t0, &pause, heap, heap)
        else {
            panic!("a PFC frame passes inside when PFC is not honoured");
        };
        assert_eq!(f.data(), &pause[..]);
        assert_eq!(plain.counters().pfc_rx, 0);
        assert!(!plain.paused(t0, 3));
    }

    /// A burst does what the same frames one at a time do: the same actions in order, the same
    /// counters and flows, the same frames released (a mix of flows, a repeated new flow, a
    /// frame that passes, a malformed one, a queue that overflows).
    #[test]
    fn a_burst_is_the_same_frames_one_at_a_time() {
        let mut frames = Vec::new();
        for k in 0..40u16 {
            frames.push(data(5000 + k % 7, Ecn::NotEct, k % 3 == 0));
        }
        frames.insert(5, vec![0xff; 60]);
        frames.insert(9, frames[2][..20].to_vec());
        // An untagged frame turned into ARP (EtherType 0x0806): passes unpaced.
        let mut arp = frames[1].clone();
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        frames.insert(13, arp);
        let small = TableConfig {
            queue_bytes: 4000,
            ..TableConfig::default()
        };
        let line = units::Rate::from_gbps(1);
        let mk = || -> Appliance<HeapFrame> {
            let rp = HostRp::qcn(rp::QcnParams::default().profile(line).unwrap());
            Appliance::new(Role::Rp, true, false, small, rp, None).unwrap()
        };
        let kind = |a: &InsideAction<HeapFrame>| match a {
            InsideAction::Send(f) => (0, f.data().to_vec()),
            InsideAction::Queued => (1, Vec::new()),
            InsideAction::Dropped => (2, Vec::new()),
        };
        // The frames at `t` one at a time and as a burst: the same actions, counters and
        // releases after; the actions.
        let round = |one: &mut Appliance<HeapFrame>, burst: &mut Appliance<HeapFrame>, t| {
            let singly: Vec<_> = frames
                .iter()
                .map(|f| kind(&one.on_inside(t, f, heap)))
                .collect();
            let mut together = Vec::new();
            burst.on_inside_burst(
                t,
                &frames,
                |f| f.as_slice(),
                heap,
                |a| together.push(kind(&a)),
            );
            assert_eq!(singly, together);
            assert_eq!(one.counters(), burst.counters());
            assert_eq!(one.table().counters(), burst.table().counters());
            // The frames released at once, recorded per call: the same latencies.
            assert_eq!(one.latency(), burst.latency());
            let at = t + Duration::from_millis(10);
            assert_eq!(release_all(one, at), release_all(burst, at));
            singly
        };
        let (mut one, mut burst) = (mk(), mk());
        let t0 = Instant::from_nanos(1_000_000);
        let singly = round(&mut one, &mut burst, t0);
        assert!(singly.iter().any(|(k, _)| *k == 2), "a queue overflowed");
        assert_eq!(one.table().flows(), 7);
        // Again, the flows now started and idle: each flow's first frame leaves at once.
        let singly = round(&mut one, &mut burst, t0 + Duration::from_millis(11));
        assert!(
            singly.iter().any(|(k, f)| *k == 0 && f.len() > 100),
            "released at once"
        );
    }

    /// A frame of an idle flow whose reaction point allows it now leaves in the same call,
    /// rewritten, counted as released, its latency recorded; a frame its flow owes time for,
    /// and any frame while the driver says its transmit backlog is full, wait for a poll.
    #[test]
    fn an_idle_flows_frame_leaves_at_once_unless_the_driver_says_wait() {
        let mut a = appliance(Cc::Qcn, Role::Rp);
        let t0 = Instant::from_nanos(1_000_000);
        let f = data(5000, Ecn::NotEct, false);
        // A new flow starts at the next poll; its first frame waits for it.
        assert!(matches!(a.on_inside(t0, &f, heap), InsideAction::Queued));
        assert_eq!(release_all(&mut a, t0).len(), 1);
        let t1 = t0 + Duration::from_millis(1);
        let InsideAction::Send(out) = a.on_inside(t1, &f, heap) else {
            panic!("an idle flow's frame waited")
        };
        assert_eq!(out.len(), f.len() + cntag::LEN, "CN-TAG added");
        let t = a.table().counters();
        assert_eq!((t.queued_frames, t.released_frames), (2, 2));
        assert_eq!(a.latency().len(), 2);
        // The next one owes the first one's time on the wire at the flow's rate.
        assert!(matches!(a.on_inside(t1, &f, heap), InsideAction::Queued));
        assert_eq!(release_all(&mut a, t1 + Duration::from_millis(1)).len(), 1);
        // The driver's backlog is full: the frame waits on its flow, for the next poll.
        a.set_release_on_arrival(false);
        let t2 = t1 + Duration::from_millis(2);
        assert!(matches!(a.on_inside(t2, &f, heap), InsideAction::Queued));
        assert_eq!(release_all(&mut a, t2).len(), 1);
        assert_eq!(a.table().counters().released_frames, 4);
    }

    /// The CN-TAG goes on while the tagged frame fits the outside port's largest frame and
    /// not past it (the frame then leaves untagged, counted): the bound is the port's, so a
    /// large-MTU port's frames are tagged too.
    #[test]
    fn the_cn_tag_is_added_up_to_the_outside_ports_largest_frame() {
        let t0 = Instant::from_nanos(1_000_000);
        let f = data(5000, Ecn::NotEct, false);
        for (max_frame, tagged) in [(f.len() + 4, true), (f.len() + 3, false)] {
            let mut a = appliance(Cc::Qcn, Role::Rp);
            a.set_max_frame(max_frame);
            assert!(matches!(a.on_inside(t0, &f, heap), InsideAction::Queued));
            let out = release_all(&mut a, t0 + Duration::from_micros(1));
            assert_eq!(out.len(), 1);
            assert_eq!(decode(&out[0]).unwrap().l2.rpid.is_some(), tagged);
            assert_eq!(out[0].len(), f.len() + if tagged { 4 } else { 0 });
            assert_eq!(a.counters().untagged_too_long, u64::from(!tagged));
        }
    }

    #[test]
    fn qcn_adds_a_cn_tag_and_a_valid_cnm_drives_the_flow_and_is_consumed() {
        let mut a = appliance(Cc::Qcn, Role::Rp);
        let t0 = Instant::from_nanos(1_000_000);
        let f = data(5000, Ecn::NotEct, true);
        assert!(matches!(a.on_inside(t0, &f, heap), InsideAction::Queued));
        let out = release_all(&mut a, t0 + Duration::from_micros(1));
        assert_eq!(out.len(), 1);
        let sent = &out[0];
        assert_eq!(sent.len(), f.len() + 4);
        // Decodes with the CN-TAG after the VLAN tag; everything else as it came in.
        let d = decode(sent).unwrap();
        let rpid = d.l2.rpid.expect("CN-TAG");
        assert_eq!(d.l2.tags[0].unwrap().tci.vid, 1);
        assert!(matches!(d.body, Body::Ipv4 { .. }));
        assert_eq!(&sent[20..], &f[16..]);
        // A CNM for the frame as sent: accepted, consumed, the flow is cut.
        let before = a.table().view(0).unwrap().rate;
        let cnm = cnm_for(sent, HOST, 63);
        assert!(matches!(
            a.on_outside(t0, &cnm, heap, heap),
            OutsideAction::Consumed
        ));
        assert!(a.table().view(0).unwrap().rate < before);
        assert_eq!(a.counters().cnms_accepted, 1);
        // Forged: right RPID, wrong destination MAC or a foreign encapsulated frame.
        let wrong_da = cnm_for(sent, MacAddr(2, 0, 0, 0, 0, 0x66), 63);
        assert!(matches!(
            a.on_outside(t0, &wrong_da, heap, heap),
            OutsideAction::Pass { cnp: None, .. }
        ));
        let mut other = data(5001, Ecn::NotEct, true);
        other.splice(16..16, [0x22, 0xe9, (rpid >> 8) as u8, rpid as u8]);
        let foreign = cnm_for(&other, HOST, 63);
        assert!(matches!(
            a.on_outside(t0, &foreign, heap, heap),
            OutsideAction::Pass { .. }
        ));
        assert_eq!(a.counters().forged.total(), 2);
        // The flow's own fields, the copy cut after the UDP header (at 50: DA, SA, VLAN tag,
        // CN-TAG, EtherType, IPv4, UDP): no CP copies so little of a 1000-octet frame.
        let cut = cnm_for(&sent[..50], HOST, 63);
        assert!(matches!(
            a.on_outside(t0, &cut, heap, heap),
            OutsideAction::Pass { .. }
        ));
        assert_eq!(a.counters().forged.short_copy, 1);
        assert_eq!(a.counters().forged.total(), 3);
        assert_eq!(a.counters().cnms_accepted, 1);
        // Unknown RPID: passed, counted.
        let mut unknown = sent.clone();
        unknown[18] ^= 0x40;
        let cnm = cnm_for(&unknown, HOST, 63);
        assert!(matches!(
            a.on_outside(t0, &cnm, heap, heap),
            OutsideAction::Pass { .. }
        ));
        assert_eq!(a.counters().unknown_flow, 1);
        assert_eq!(a.counters().cnms_accepted, 1);
        // A tagged data frame coming back in loses its CN-TAG (hosts do not know 0x22E9).
        let OutsideAction::Pass {
            inside: Some(back), ..
        } = a.on_outside(t0, sent, heap, heap)
        else {
            panic!()
        };
        assert_eq!(back.into_vec(), f);
        assert_eq!(a.counters().cn_tags_stripped, 1);
    }

    #[test]
    fn untagged_cnm_is_matched_by_its_encapsulated_five_tuple() {
        let line = units::Rate::from_gbps(1);
        let rp = HostRp::qcn(rp::QcnParams::default().profile(line).unwrap());
        let mut a: Appliance<HeapFrame> =
            Appliance::new(Role::Rp, false, false, TableConfig::default(), rp, None).unwrap();
        let t0 = Instant::from_nanos(1_000);
        let f = data(7000, Ecn::NotEct, false);
        a.on_inside(t0, &f, heap);
        let sent = release_all(&mut a, t0 + Duration::from_micros(1)).remove(0);
        assert_eq!(sent, f, "no CN-TAG, no rewrite");
        let cnm = cnm_for(&sent, HOST, 40);
        assert!(matches!(
            a.on_outside(t0, &cnm, heap, heap),
            OutsideAction::Consumed
        ));
        let other = cnm_for(&data(7001, Ecn::NotEct, false), HOST, 40);
        assert!(matches!(
            a.on_outside(t0, &other, heap, heap),
            OutsideAction::Pass { .. }
        ));
        assert_eq!(a.counters().unknown_flow, 1);
    }

    #[test]
    fn dcqcn_marks_ect0_with_a_valid_checksum_and_np_cnps_drive_the_same_flow() {
        let mut rp_side = appliance(Cc::Dcqcn, Role::Rp);
        let mut np_side = appliance(Cc::None, Role::Np);
        let t0 = Instant::from_nanos(1_000);
        let f = data(6000, Ecn::NotEct, false);
        rp_side.on_inside(t0, &f, heap);
        let sent = release_all(&mut rp_side, t0 + Duration::from_micros(1)).remove(0);
        // decode() verifies the IPv4 header checksum.
        let Body::Ipv4 { ip, .. } = decode(&sent).unwrap().body else {
            panic!()
        };
        assert_eq!(ip.ecn, Ecn::Ect0);
        // The switch marks CE; the NP role in front of the receiver answers with a CNP.
        let mut marked = sent.clone();
        ipv4::set_ecn(&mut marked[14..], Ecn::Ce).unwrap();
        let OutsideAction::Pass { cnp: Some(cnp), .. } =
            np_side.on_outside(t0, &marked, heap, heap)
        else {
            panic!("no CNP")
        };
        // An unmarked frame asks for nothing.
        assert!(matches!(
            np_side.on_outside(t0, &sent, heap, heap),
            OutsideAction::Pass { cnp: None, .. }
        ));
        let cnp = cnp.into_vec();
        let d = decode(&cnp).unwrap();
        assert_eq!((d.l2.dst, d.l2.src), (HOST, RCV));
        // Back on the RP side the CNP names the flow and cuts it (at the decrease check).
        assert!(matches!(
            rp_side.on_outside(t0, &cnp, heap, heap),
            OutsideAction::Consumed
        ));
        rp_side.on_timeout(t0 + Duration::from_micros(50));
        assert!(rp_side.table().view(0).unwrap().rate < units::Rate::from_gbps(1));
        // A CNP for the same QP from a third address is not for this flow.
        let mut forged = cnp.clone();
        forged[14 + 15] = 77; // IPv4 source's last octet
        let sum = {
            forged[24] = 0;
            forged[25] = 0;
            let h = &forged[14..34];
            let mut s: u32 = (0..10)
                .map(|i| u32::from(u16::from_be_bytes([h[2 * i], h[2 * i + 1]])))
                .sum();
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            !(s as u16)
        };
        forged[24..26].copy_from_slice(&sum.to_be_bytes());
        assert!(matches!(
            rp_side.on_outside(t0, &forged, heap, heap),
            OutsideAction::Pass { .. }
        ));
        assert_eq!(rp_side.counters().forged.cnp_source, 1);
        assert_eq!(rp_side.counters().unknown_flow, 0);
        // One for a QP no flow holds names no flow.
        let mut other_qp = cnp.clone();
        other_qp[14 + 20 + 8 + 7] ^= 1; // BTH DestQP's last octet
        assert!(matches!(
            rp_side.on_outside(t0, &other_qp, heap, heap),
            OutsideAction::Pass { .. }
        ));
        assert_eq!(rp_side.counters().unknown_flow, 1);
        assert_eq!(rp_side.counters().forged.total(), 1);
        assert_eq!(rp_side.counters().cnps_accepted, 1);
    }

    #[test]
    fn non_flow_frames_pass_at_once_and_malformed_ones_are_counted() {
        let mut a = appliance(Cc::Qcn, Role::Rp);
        let t0 = Instant::from_nanos(1_000);
        let mut arp = vec![0u8; 60];
        arp[..6].fill(0xff);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let InsideAction::Send(out) = a.on_inside(t0, &arp, heap) else {
            panic!()
        };
        assert_eq!(out.into_vec(), arp);
        let mut bad = data(1, Ecn::NotEct, false);
        bad[14] = 0x44; // IPv4 header length 4 words
        assert!(matches!(a.on_inside(t0, &bad, heap), InsideAction::Send(_)));
        assert!(matches!(
            a.on_inside(t0, &[0u8; 5], heap),
            InsideAction::Send(_)
        ));
        let c = a.counters();
        assert_eq!((c.pass_arp, c.pass_malformed), (1, 2));
        assert_eq!(a.table().flows(), 0);
    }

    /// An IPv4 header checksum is left to the receiver: a frame with a bad one is paced as its
    /// fields say, and leaves with the checksum still bad after the ECT(0) rewrite (RFC 1624's
    /// incremental update carries the error), so the receiver still discards it.
    #[test]
    fn a_bad_ipv4_checksum_is_paced_and_stays_bad() {
        let mut a = appliance(Cc::Dcqcn, Role::Rp);
        let t0 = Instant::from_nanos(1_000);
        let mut bad = data(1, Ecn::NotEct, false);
        bad[14 + 10] ^= 1; // IPv4 checksum
        assert!(matches!(a.on_inside(t0, &bad, heap), InsideAction::Queued));
        assert_eq!(a.counters().pass_malformed, 0);
        let sent = release_all(&mut a, t0 + Duration::from_micros(1)).remove(0);
        assert_eq!(ipv4::ecn(&sent[14..]), Ok(Ecn::Ect0));
        assert!(matches!(
            ipv4::Ipv4Repr::parse(&sent[14..]),
            Err(ipv4::Ipv4Error::BadChecksum { .. })
        ));
    }

    #[test]
    fn the_np_side_announces_its_hosts_address_at_once_then_every_interval() {
        use quench_node::host::announce::ANNOUNCE_EVERY;
        let mut np_side = appliance(Cc::None, Role::Np);
        let t0 = Instant::from_nanos(1_000_000);
        // No frame from the host yet: its address is unknown.
        assert!(np_side.announce(t0, heap).is_none());
        let sent = np_side.on_inside(t0, &data(5000, Ecn::NotEct, false), heap);
        assert!(matches!(sent, InsideAction::Send(_)));
        let f = np_side.announce(t0, heap).expect("announced at once");
        assert_eq!(f.data(), &announce_frame(HOST)[..]);
        assert!(np_side
            .announce(t0 + Duration::from_millis(10), heap)
            .is_none());
        assert!(np_side.announce(t0 + ANNOUNCE_EVERY, heap).is_some());
        assert_eq!(np_side.counters().announced, 2);
        // A host's reaction-point side sends frames of its own: nothing to announce.
        let mut rp_side = appliance(Cc::Qcn, Role::Rp);
        let _ = rp_side.on_inside(t0, &data(5000, Ecn::NotEct, false), heap);
        assert!(rp_side.announce(t0, heap).is_none());
    }
}
