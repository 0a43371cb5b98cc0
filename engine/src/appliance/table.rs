//! The sender appliance's flows, sans-IO: a bounded flow table, one octet-bounded queue per flow,
//! one reaction point per flow, and the release of each flow's frames at its RP rate.
//!
//! Call order: [`FlowTable::on_inside`] per classified data frame; [`FlowTable::poll_release`]
//! in a loop with the burst's `now` until `None`; [`FlowTable::on_cnm`] /
//! [`FlowTable::on_cnp`] per validated feedback; [`FlowTable::on_timeout`] when
//! [`FlowTable::next_deadline`] has passed (a spurious call does nothing);
//! [`FlowTable::on_housekeeping`] once per poll (bounded idle eviction).
//!
//! - **Bounded table** ([`TableConfig::max_flows`], default 1M). Flows with an empty queue that
//!   saw no frame for [`TableConfig::idle_timeout`] are evicted by a clock hand that looks at a
//!   bounded number of entries per call. When the table is full, a new flow first tries to take
//!   the slot of an idle flow (empty queue) the hand finds within [`FULL_SCAN`] entries; if
//!   there is none, [`TableConfig::when_full`] decides: `bypass` sends the frame at once,
//!   unpaced (a NIC that runs out of rate limiters sends at line rate: seed 001, "(iv) Sources
//!   start at the line rate"), `drop` drops it. Both are counted.
//! - **Per-flow queues are bounded in octets** ([`TableConfig::queue_bytes`]); a frame that does
//!   not fit is dropped and counted: the appliance stands where a NIC's send queue would be.
//! - **Pacing**: each flow has an [`rp::Pacer`], the one pacer (exact fixed-point release
//!   times; an idle flow keeps no credit, a busy one at most [`MAX_CATCH_UP`]). The head frame of a flow waits on the timing wheel until the pacer's earliest
//!   release; when it leaves, its own length at the rate in force then spaces the next one.
//! - **Reaction points**: QCN keeps one pool of rate limiters (the `rp` crate's [`QcnRp`], keyed
//!   by a flow id unique over the table's lifetime, so a recycled slot never inherits a
//!   limiter); DCQCN keeps a [`DcqcnState`] per flow, created by its first CNP (a flow no CNP
//!   named runs at the line rate, as DCQCN's RP starts at it).
//!
//! Memory per flow: [`FlowTable::bytes_per_flow`] (the slot, one entry in each index, no frames
//! queued; a DCQCN flow that was cut adds its boxed state).
use std::collections::{HashMap, VecDeque};

use rp::DcqcnState;
use units::{Duration, FlowId, Instant, Rate};

use super::classify::{CnpKey, FlowKey};
use crate::send::wheel::{Wheel, WheelError};
use crate::wire::MacAddr;

/// Entries the clock hand looks at for an idle slot when the table is full.
pub const FULL_SCAN: usize = 64;
/// How far behind its schedule a flow may fall (the loop was late) and still catch up by
/// sending what it owes at once: the rate limiter's burst tolerance, as `quench send`'s
/// `max_catch_up_us` default.
pub const MAX_CATCH_UP: Duration = Duration::from_micros(50);
/// Entries the clock hand looks at per [`FlowTable::on_housekeeping`] call for idle eviction.
pub const IDLE_SCAN: usize = 16;

/// What to do with a new flow's frame when the table is full of busy flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFull {
    /// Send it at once, unpaced (counted `bypass_frames`).
    #[default]
    Bypass,
    /// Drop it (counted `full_drops`).
    Drop,
}

/// Limits of the flow table.
#[derive(Clone, Copy, Debug)]
pub struct TableConfig {
    pub max_flows: usize,
    /// Octets each flow may queue.
    pub queue_bytes: u32,
    /// A flow with an empty queue and no frame for this long is evicted.
    pub idle_timeout: Duration,
    pub when_full: WhenFull,
    /// Wheel resolution (a power of two nanoseconds).
    pub tick: Duration,
    /// The RPs' line rate C: a flow never leaves faster.
    pub line_rate: Rate,
    /// Give each flow a 16-bit RPID for the CN-TAG the appliance adds (QCN).
    pub rpids: bool,
}

impl Default for TableConfig {
    fn default() -> Self {
        TableConfig {
            max_flows: 1 << 20,
            // 1 MiB: 8 ms at 1 Gb/s.
            queue_bytes: 1 << 20,
            idle_timeout: Duration::from_secs(10),
            when_full: WhenFull::Bypass,
            tick: Duration::from_nanos(256),
            line_rate: Rate::from_gbps(1),
            rpids: false,
        }
    }
}

use crate::host::rp::{Feedback, FlowRp, HostRp, Refused};

/// Counters of the flow table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TableCounters {
    pub queued_frames: u64,
    pub released_frames: u64,
    pub released_bytes: u64,
    /// Frames that did not fit their flow's queue.
    pub queue_drops: u64,
    /// Frames sent unpaced because the table was full of busy flows (`when_full = bypass`).
    pub bypass_frames: u64,
    /// Frames dropped because the table was full of busy flows (`when_full = drop`).
    pub full_drops: u64,
    pub flows_created: u64,
    /// Flows evicted after `idle_timeout`.
    pub idle_evictions: u64,
    /// Idle flows whose slot a new flow took because the table was full.
    pub full_evictions: u64,
    /// Flows that got no RPID (all 65,535 in use): their frames leave without a CN-TAG.
    pub no_rpid: u64,
    pub cnms: u64,
    pub cnps: u64,
    /// Feedback the RP refused (QntzFb out of range, QCN limiter pool full).
    pub refused_feedback: u64,
}

/// What [`FlowTable::on_inside`] did with a frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Admitted<F> {
    /// Queued for the flow (the slot index).
    Queued(u32),
    /// The flow's queue is full: the frame is handed back to be freed.
    Dropped(F),
    /// The table is full of busy flows and the policy is `bypass`: send the frame now.
    Bypass(F),
    /// The table is full of busy flows and the policy is `drop`.
    Refused(F),
}

/// A frame the table releases.
#[derive(Debug, PartialEq, Eq)]
pub struct Release<F> {
    pub slot: u32,
    pub len: u32,
    /// When it entered the appliance (for the latency the appliance adds).
    pub arrived: Instant,
    pub frame: F,
}

/// One flow.
struct Slot<F> {
    key: FlowKey,
    live: bool,
    src_mac: MacAddr,
    dst_mac: MacAddr,
    fid: FlowId,
    rpid: Option<u16>,
    queue: VecDeque<(u32, Instant, F)>,
    queued: u32,
    scheduled: bool,
    pacer: rp::Pacer,
    last_active: Instant,
    dcqcn: Option<Box<DcqcnState>>,
    /// On the `limited` list (its DCQCN timers are watched).
    timed: bool,
    sent_bytes: u64,
    sent_frames: u64,
    drops: u64,
}

/// A flow's figures, for the control socket and the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowView {
    pub key: FlowKey,
    pub fid: FlowId,
    pub rpid: Option<u16>,
    pub rate: Rate,
    pub queued_bytes: u32,
    pub sent_bytes: u64,
    pub sent_frames: u64,
    pub drops: u64,
}

/// The flow table. See the module docs.
pub struct FlowTable<F> {
    cfg: TableConfig,
    rp: HostRp,
    slots: Vec<Slot<F>>,
    free: Vec<u32>,
    by_key: HashMap<FlowKey, u32>,
    by_cnp: HashMap<CnpKey, u32>,
    by_rpid: HashMap<u16, u32>,
    wheel: Wheel<u32>,
    /// Slots with a DCQCN state whose timers may be due.
    limited: Vec<u32>,
    hand: usize,
    next_fid: u32,
    next_rpid: u16,
    live: usize,
    counters: TableCounters,
}

impl<F> FlowTable<F> {
    pub fn new(cfg: TableConfig, rp: HostRp) -> Result<Self, WheelError> {
        Ok(FlowTable {
            cfg,
            rp,
            slots: Vec::new(),
            free: Vec::new(),
            by_key: HashMap::new(),
            by_cnp: HashMap::new(),
            by_rpid: HashMap::new(),
            wheel: Wheel::new(cfg.tick, 4096)?,
            limited: Vec::new(),
            hand: 0,
            next_fid: 0,
            next_rpid: 0,
            live: 0,
            counters: TableCounters::default(),
        })
    }

    pub fn counters(&self) -> TableCounters {
        self.counters
    }

    /// The flows' reaction points.
    pub fn rp(&self) -> &HostRp {
        &self.rp
    }

    /// Flows held.
    pub fn flows(&self) -> usize {
        self.live
    }

    /// Octets of table memory one flow costs with nothing queued: its slot and its entries in
    /// the key and CNP indexes (a hashbrown entry is the key, the value and one control octet,
    /// at a load factor of at most 7/8).
    pub fn bytes_per_flow() -> usize {
        let entry = |k: usize| (k + 4 + 1) * 8 / 7;
        std::mem::size_of::<Slot<F>>()
            + entry(std::mem::size_of::<FlowKey>())
            + entry(std::mem::size_of::<CnpKey>())
    }

    /// The flow's current rate: its RP's, capped at the line rate.
    fn rate(&self, i: u32) -> Rate {
        let s = &self.slots[i as usize];
        let rp = match &self.rp {
            HostRp::None => self.cfg.line_rate,
            HostRp::Qcn(q) => q.rate(s.fid),
            HostRp::Dcqcn(_) => s.dcqcn.as_ref().map_or(self.cfg.line_rate, |d| d.rate()),
        };
        rp.min(self.cfg.line_rate)
    }

    fn alloc_rpid(&mut self) -> Option<u16> {
        if self.by_rpid.len() >= usize::from(u16::MAX) {
            return None;
        }
        loop {
            self.next_rpid = self.next_rpid.wrapping_add(1).max(1);
            if !self.by_rpid.contains_key(&self.next_rpid) {
                return Some(self.next_rpid);
            }
        }
    }

    /// Removes slot `i`'s flow from the indexes (the slot must be idle: empty, unscheduled).
    fn unlink(&mut self, i: u32) {
        let s = &mut self.slots[i as usize];
        s.live = false;
        s.dcqcn = None;
        if s.timed {
            s.timed = false;
            self.limited.retain(|&j| j != i);
        }
        self.by_key.remove(&s.key);
        if let Some(k) = s.key.cnp_key() {
            if self.by_cnp.get(&k) == Some(&i) {
                self.by_cnp.remove(&k);
            }
        }
        if let Some(r) = s.rpid.take() {
            self.by_rpid.remove(&r);
        }
        self.live -= 1;
    }

    fn idle(s: &Slot<F>) -> bool {
        s.live && s.queue.is_empty() && !s.scheduled
    }

    /// Advances the clock hand over at most `n` slots; the first for which `pick` holds.
    fn sweep(&mut self, n: usize, mut pick: impl FnMut(&Slot<F>) -> bool) -> Option<u32> {
        let len = self.slots.len();
        for _ in 0..n.min(len) {
            self.hand = (self.hand + 1) % len;
            if pick(&self.slots[self.hand]) {
                return Some(self.hand as u32);
            }
        }
        None
    }

    /// A slot for a new flow: a free one, a fresh one, or (table full) an idle one.
    fn new_slot(&mut self) -> Option<u32> {
        if let Some(i) = self.free.pop() {
            return Some(i);
        }
        if self.slots.len() < self.cfg.max_flows {
            return Some(self.slots.len() as u32);
        }
        let i = self.sweep(FULL_SCAN, Self::idle)?;
        self.unlink(i);
        self.counters.full_evictions += 1;
        Some(i)
    }

    fn create(&mut self, now: Instant, key: FlowKey, src: MacAddr, dst: MacAddr) -> Option<u32> {
        let i = self.new_slot()?;
        self.next_fid = self.next_fid.wrapping_add(1);
        let rpid = if self.cfg.rpids {
            let r = self.alloc_rpid();
            if r.is_none() {
                self.counters.no_rpid += 1;
            }
            r
        } else {
            None
        };
        let slot = Slot {
            key,
            live: true,
            src_mac: src,
            dst_mac: dst,
            fid: FlowId(self.next_fid),
            rpid,
            queue: VecDeque::new(),
            queued: 0,
            scheduled: false,
            pacer: rp::Pacer::new(),
            last_active: now,
            dcqcn: None,
            timed: false,
            sent_bytes: 0,
            sent_frames: 0,
            drops: 0,
        };
        if (i as usize) < self.slots.len() {
            // Keep the recycled queue's allocation.
            let old = &mut self.slots[i as usize];
            let queue = std::mem::take(&mut old.queue);
            *old = Slot { queue, ..slot };
        } else {
            self.slots.push(slot);
        }
        self.by_key.insert(key, i);
        if let Some(k) = key.cnp_key() {
            self.by_cnp.entry(k).or_insert(i);
        }
        if let Some(r) = rpid {
            self.by_rpid.insert(r, i);
        }
        self.live += 1;
        self.counters.flows_created += 1;
        Some(i)
    }

    /// The slot of flow `key` (source and destination MACs `src`, `dst`), created if new; when
    /// the table is full of busy flows, the policy that applies (counted here).
    pub fn slot_for(
        &mut self,
        now: Instant,
        key: FlowKey,
        src: MacAddr,
        dst: MacAddr,
    ) -> Result<u32, WhenFull> {
        if let Some(&i) = self.by_key.get(&key) {
            return Ok(i);
        }
        self.create(now, key, src, dst).ok_or_else(|| {
            match self.cfg.when_full {
                WhenFull::Bypass => self.counters.bypass_frames += 1,
                WhenFull::Drop => self.counters.full_drops += 1,
            }
            self.cfg.when_full
        })
    }

    /// Queues a frame of `len` octets on the flow in `slot` (from [`FlowTable::slot_for`]).
    pub fn enqueue(&mut self, now: Instant, slot: u32, len: u32, frame: F) -> Admitted<F> {
        let s = &mut self.slots[slot as usize];
        s.last_active = now;
        if s.queued.saturating_add(len) > self.cfg.queue_bytes {
            s.drops += 1;
            self.counters.queue_drops += 1;
            return Admitted::Dropped(frame);
        }
        s.queue.push_back((len, now, frame));
        s.queued += len;
        self.counters.queued_frames += 1;
        if !s.scheduled {
            // An idle flow keeps no credit: its first frame goes at once, the next on its rate.
            s.pacer.forget_credit(now, Duration::ZERO);
            s.scheduled = true;
            self.wheel.insert(s.pacer.earliest(now), slot);
        }
        Admitted::Queued(slot)
    }

    /// A data frame of `len` octets of flow `key` entered the inside port:
    /// [`FlowTable::slot_for`] then [`FlowTable::enqueue`].
    pub fn on_inside(
        &mut self,
        now: Instant,
        key: FlowKey,
        src: MacAddr,
        dst: MacAddr,
        len: u32,
        frame: F,
    ) -> Admitted<F> {
        match self.slot_for(now, key, src, dst) {
            Ok(i) => self.enqueue(now, i, len, frame),
            Err(WhenFull::Bypass) => Admitted::Bypass(frame),
            Err(WhenFull::Drop) => Admitted::Refused(frame),
        }
    }

    /// The next frame due at `now`, if any.
    pub fn poll_release(&mut self, now: Instant) -> Option<Release<F>> {
        loop {
            let (_, i) = self.wheel.pop_due(now)?;
            let rate = self.rate(i);
            let s = &mut self.slots[i as usize];
            let Some((len, arrived, frame)) = s.queue.pop_front() else {
                // A scheduled slot always has a frame; an empty one is unscheduled and skipped.
                s.scheduled = false;
                continue;
            };
            s.queued -= len;
            // The frame leaves on the schedule it was due at, not when the loop got to it, so
            // polling lateness does not accumulate; lateness beyond MAX_CATCH_UP is given up.
            s.pacer
                .next_release(now, u64::from(len), rate, MAX_CATCH_UP);
            s.sent_bytes += u64::from(len);
            s.sent_frames += 1;
            if s.queue.is_empty() {
                s.scheduled = false;
            } else {
                self.wheel.insert(s.pacer.earliest(now), i);
            }
            let (fid, empty) = (s.fid, s.queue.is_empty());
            match &mut self.rp {
                HostRp::None => {}
                HostRp::Qcn(q) => {
                    // An empty queue lets a limiter back at C free itself (000:101-110).
                    q.on_tx(now, fid, u64::from(len), empty);
                }
                HostRp::Dcqcn(p) => {
                    if let Some(d) = s.dcqcn.as_mut() {
                        d.on_tx(p, now, u64::from(len));
                    }
                }
            }
            self.counters.released_frames += 1;
            self.counters.released_bytes += u64::from(len);
            return Some(Release {
                slot: i,
                len,
                arrived,
                frame,
            });
        }
    }

    /// The slot of the flow with `key`, if held.
    pub fn find(&self, key: &FlowKey) -> Option<u32> {
        self.by_key.get(key).copied()
    }

    /// The slot of the flow a CNP names, if held.
    pub fn find_cnp(&self, key: &CnpKey) -> Option<u32> {
        self.by_cnp.get(key).copied()
    }

    /// The slot of the flow the appliance gave `rpid`, if held.
    pub fn find_rpid(&self, rpid: u16) -> Option<u32> {
        self.by_rpid.get(&rpid).copied()
    }

    /// The flow's key and MACs (source, destination).
    pub fn addresses(&self, slot: u32) -> (FlowKey, MacAddr, MacAddr) {
        let s = &self.slots[slot as usize];
        (s.key, s.src_mac, s.dst_mac)
    }

    /// The RPID the appliance gave the flow (for the CN-TAG it adds).
    pub fn rpid(&self, slot: u32) -> Option<u16> {
        self.slots[slot as usize].rpid
    }

    /// A validated CNM for the flow in `slot` with quantised feedback `qntz_fb`.
    pub fn on_cnm(&mut self, now: Instant, slot: u32, qntz_fb: u8) {
        self.counters.cnms += 1;
        let fid = self.slots[slot as usize].fid;
        // QCN keeps no per-flow state outside its limiter pool.
        let refused = self
            .rp
            .on_feedback(&mut FlowRp::None, fid, now, Feedback::Cnm(qntz_fb));
        if refused == Err(Refused::Rejected) {
            self.counters.refused_feedback += 1;
        }
    }

    /// A validated CNP for the flow in `slot`.
    pub fn on_cnp(&mut self, now: Instant, slot: u32) {
        self.counters.cnps += 1;
        if let HostRp::Dcqcn(p) = &self.rp {
            let s = &mut self.slots[slot as usize];
            let d = s.dcqcn.get_or_insert_with(|| Box::new(DcqcnState::new(p)));
            d.on_cnp(p, now);
            if !s.timed {
                s.timed = true;
                self.limited.push(slot);
            }
        }
    }

    /// Runs the reaction points' timers due at `now`.
    pub fn on_timeout(&mut self, now: Instant) {
        if self.rp.host_deadline().is_some_and(|t| t <= now) {
            self.rp.on_host_timeout(now);
        }
        if let HostRp::Dcqcn(p) = &self.rp {
            let slots = &mut self.slots;
            // A flow leaves the list when no timer of its can change its rate (quiet timers run
            // inside its next `on_tx`); its next CNP puts it back.
            self.limited.retain(|&i| {
                let s = &mut slots[i as usize];
                let keep = s.dcqcn.as_mut().is_some_and(|d| {
                    if d.next_deadline().is_some_and(|t| t <= now) {
                        d.on_timeout(p, now);
                    }
                    d.next_deadline().is_some()
                });
                s.timed = keep;
                keep
            });
        }
    }

    /// When the wheel or a reaction point's timer is next due.
    pub fn next_deadline(&self) -> Option<Instant> {
        let rp = match &self.rp {
            HostRp::Dcqcn(_) => self
                .limited
                .iter()
                .filter_map(|&i| self.slots[i as usize].dcqcn.as_ref()?.next_deadline())
                .min(),
            _ => self.rp.host_deadline(),
        };
        match (self.wheel.next_deadline(), rp) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Bounded idle eviction: looks at [`IDLE_SCAN`] slots.
    pub fn on_housekeeping(&mut self, now: Instant) {
        let timeout = self.cfg.idle_timeout;
        if let Some(i) = self.sweep(IDLE_SCAN, |s| {
            Self::idle(s) && now.saturating_since(s.last_active) >= timeout
        }) {
            self.unlink(i);
            self.free.push(i);
            self.counters.idle_evictions += 1;
        }
    }

    /// The flow in `slot`.
    pub fn view(&self, slot: u32) -> FlowView {
        let s = &self.slots[slot as usize];
        FlowView {
            key: s.key,
            fid: s.fid,
            rpid: s.rpid,
            rate: self.rate(slot),
            queued_bytes: s.queued,
            sent_bytes: s.sent_bytes,
            sent_frames: s.sent_frames,
            drops: s.drops,
        }
    }

    /// The `n` flows that have sent the most octets.
    pub fn top(&self, n: usize) -> Vec<FlowView> {
        let mut v: Vec<(u64, u32)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live)
            .map(|(i, s)| (s.sent_bytes, i as u32))
            .collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.into_iter().take(n).map(|(_, i)| self.view(i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appliance::classify::FiveTuple;
    use std::net::Ipv4Addr;

    const M1: MacAddr = MacAddr(2, 0, 0, 0, 0, 1);
    const M2: MacAddr = MacAddr(2, 0, 0, 0, 0, 2);

    fn tuple(sport: u16) -> FlowKey {
        FlowKey::Ip(FiveTuple::v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            17,
            sport,
            9,
        ))
    }

    fn table(cfg: TableConfig) -> FlowTable<u32> {
        FlowTable::new(cfg, HostRp::None).unwrap()
    }

    fn queued(a: Admitted<u32>) -> u32 {
        match a {
            Admitted::Queued(i) => i,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn releases_each_flow_at_its_line_rate_in_order() {
        let mut t = table(TableConfig {
            line_rate: Rate::from_mbps(100),
            ..TableConfig::default()
        });
        let t0 = Instant::from_nanos(1_000_000);
        for n in 0..100u32 {
            queued(t.on_inside(t0, tuple(1), M1, M2, 1000, n));
            queued(t.on_inside(t0, tuple(2), M1, M2, 500, 1000 + n));
        }
        // 100 Mb/s: 80 us per 1000-octet frame, 40 us per 500-octet frame.
        let mut got: HashMap<u32, Vec<(u64, u32)>> = HashMap::new();
        let mut now = t0.as_nanos();
        while now < t0.as_nanos() + 2_000_000 {
            while let Some(r) = t.poll_release(Instant::from_nanos(now)) {
                got.entry(r.slot).or_default().push((now, r.frame));
            }
            now += 1_000;
        }
        // In 2 ms: frames at t0, t0 + 80 us, ..., t0 + 1920 us = 25; and 50 of the other flow.
        let a = &got[&0];
        let b = &got[&1];
        assert_eq!(a.len(), 25);
        assert_eq!(b.len(), 50);
        assert!(a.windows(2).all(|w| w[0].1 < w[1].1));
        // Never before its release time, at most one 1 us poll step after it.
        for (k, (at, _)) in a.iter().enumerate() {
            let due = t0.as_nanos() + 80_000 * k as u64;
            assert!(
                *at >= due && *at < due + 1_256,
                "frame {k} at {at}, due {due}"
            );
        }
        assert_eq!(t.counters().released_frames, 75);
    }

    #[test]
    fn per_flow_queue_is_bounded_in_octets() {
        let mut t = table(TableConfig {
            queue_bytes: 2500,
            ..TableConfig::default()
        });
        let now = Instant::ZERO;
        queued(t.on_inside(now, tuple(1), M1, M2, 1000, 1));
        queued(t.on_inside(now, tuple(1), M1, M2, 1000, 2));
        assert_eq!(
            t.on_inside(now, tuple(1), M1, M2, 1000, 3),
            Admitted::Dropped(3)
        );
        queued(t.on_inside(now, tuple(1), M1, M2, 500, 4));
        assert_eq!(t.counters().queue_drops, 1);
        assert_eq!(t.view(0).drops, 1);
        assert_eq!(t.view(0).queued_bytes, 2500);
    }

    #[test]
    fn full_table_recycles_an_idle_flow_then_applies_the_policy() {
        for policy in [WhenFull::Bypass, WhenFull::Drop] {
            let mut t = table(TableConfig {
                max_flows: 2,
                when_full: policy,
                ..TableConfig::default()
            });
            let t0 = Instant::from_nanos(10);
            queued(t.on_inside(t0, tuple(1), M1, M2, 100, 1));
            queued(t.on_inside(t0, tuple(2), M1, M2, 100, 2));
            // Both busy: the policy decides.
            let got = t.on_inside(t0, tuple(3), M1, M2, 100, 3);
            match policy {
                WhenFull::Bypass => assert_eq!(got, Admitted::Bypass(3)),
                WhenFull::Drop => assert_eq!(got, Admitted::Refused(3)),
            }
            // Drain both: idle; the new flow takes a slot and the old key is gone.
            let t1 = Instant::from_nanos(1_000_000);
            while t.poll_release(t1).is_some() {}
            queued(t.on_inside(t1, tuple(3), M1, M2, 100, 4));
            let c = t.counters();
            assert_eq!(c.full_evictions, 1);
            assert_eq!(c.bypass_frames + c.full_drops, 1);
            assert_eq!(t.flows(), 2);
            assert_eq!(
                [tuple(1), tuple(2)]
                    .iter()
                    .filter(|k| t.find(k).is_some())
                    .count(),
                1
            );
        }
    }

    #[test]
    fn idle_flows_are_evicted_after_the_timeout_only() {
        let mut t = table(TableConfig {
            idle_timeout: Duration::from_millis(5),
            ..TableConfig::default()
        });
        let t0 = Instant::from_nanos(1_000);
        for p in 0..8 {
            queued(t.on_inside(t0, tuple(p), M1, M2, 100, 0));
        }
        let t1 = t0 + Duration::from_millis(1);
        while t.poll_release(t1).is_some() {}
        for _ in 0..100 {
            t.on_housekeeping(t0 + Duration::from_millis(4));
        }
        assert_eq!(t.flows(), 8);
        for _ in 0..100 {
            t.on_housekeeping(t0 + Duration::from_millis(6));
        }
        assert_eq!(t.flows(), 0);
        assert_eq!(t.counters().idle_evictions, 8);
        // Freed slots are reused before the table grows.
        queued(t.on_inside(t0, tuple(99), M1, M2, 100, 0));
        assert_eq!(t.slots.len(), 8);
    }

    #[test]
    fn dcqcn_cnp_cuts_only_the_named_flow_and_timers_recover_it() {
        let line = Rate::from_gbps(1);
        let p = rp::DcqcnParams::default().profile(line).unwrap();
        let mut t: FlowTable<u32> = FlowTable::new(
            TableConfig {
                line_rate: line,
                ..TableConfig::default()
            },
            HostRp::Dcqcn(p),
        )
        .unwrap();
        let t0 = Instant::from_nanos(1_000);
        let a = queued(t.on_inside(t0, tuple(1), M1, M2, 1000, 0));
        let b = queued(t.on_inside(t0, tuple(2), M1, M2, 1000, 0));
        let k = tuple(1).cnp_key().unwrap();
        assert_eq!(t.find_cnp(&k), Some(a));
        t.on_cnp(t0, a);
        // DCQCN (mlx) cuts at the decrease check the CNP armed (within its 4 us default).
        let check = t0 + Duration::from_micros(50);
        t.on_timeout(check);
        let cut = t.view(a).rate;
        assert!(cut < line, "{cut}");
        assert_eq!(t.view(b).rate, line);
        let mut now = check;
        for _ in 0..100 {
            now += Duration::from_micros(100);
            t.on_timeout(now);
        }
        assert!(t.view(a).rate > cut, "{}", t.view(a).rate);
    }

    #[test]
    fn rpids_are_unique_among_held_flows_and_freed_with_them() {
        let mut t = table(TableConfig {
            rpids: true,
            idle_timeout: Duration::from_nanos(1),
            ..TableConfig::default()
        });
        let t0 = Instant::from_nanos(1_000);
        let a = queued(t.on_inside(t0, tuple(1), M1, M2, 100, 0));
        let b = queued(t.on_inside(t0, tuple(2), M1, M2, 100, 0));
        let (ra, rb) = (t.rpid(a).unwrap(), t.rpid(b).unwrap());
        assert_ne!(ra, rb);
        assert_eq!(t.find_rpid(ra), Some(a));
        while t.poll_release(t0 + Duration::from_millis(1)).is_some() {}
        for _ in 0..10 {
            t.on_housekeeping(t0 + Duration::from_millis(2));
        }
        assert_eq!(t.find_rpid(ra), None);
    }
}
