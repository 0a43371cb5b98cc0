//! Appliance mode of `quench send`, sans-IO: frames entering the inside port are classified into
//! flows, queued per flow, and released out of the outside port at each flow's RP rate.
//!
//! - Classification ([`FlowKey`]): a CN-TAG flow id (RPID) if the frame carries one, else a
//!   RoCEv2 destination QP, else the IPv4 5-tuple. The flow's [`FlowId`] is what feedback names:
//!   the RPID for CN-TAG flows (CNMs echo it), the QP for RoCEv2 flows (CNPs carry it as DestQP),
//!   an allocated id (1..=65535, so it fits a CN-TAG the engine adds) for 5-tuple flows.
//! - Per-flow queues are bounded in octets; a frame that does not fit is dropped and counted
//!   (`queue_drops`): the sender appliance stands where a NIC's send queue would be.
//! - **The flow table is bounded** ([`ApplianceConfig::max_flows`]). Policy when full: a new flow
//!   takes the slot of the idle flow (empty queue) that was active least recently; if every flow
//!   has frames queued, the new flow's frame is handed back as [`Admitted::Bypass`] for the engine
//!   to send at once, unpaced, and counted (`bypass_frames`) -- a NIC that runs out of rate
//!   limiters sends at line rate (seed 001, "(iv) Sources start at the line rate").
//! - Feedback naming a flow the table does not hold is counted (`unknown_feedback`) and ignored.
//! - Pacing: the one pacer ([`rp::Pacer`]) per flow; a flow with frames queued sits on the
//!   [`Wheel`] at its pacer's release time. A flow that went idle restarts at `now` (no credit is
//!   kept while idle); a backlogged flow whose worker was late catches up at most
//!   [`CATCH_UP`].
use std::collections::{HashMap, VecDeque};

use units::{Duration, FlowId, Instant, Rate};

use super::wheel::{Wheel, WheelError};

/// How far a backlogged flow's schedule may lag `now` (its worker was late) and still be caught
/// up: the pacer's credit bound, as `quench send`'s default `max_catch_up`.
pub const CATCH_UP: Duration = Duration::from_micros(50);

/// How a frame is assigned to a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowKey {
    /// 802.1Qau CN-TAG flow id (RPID).
    CnTag(u16),
    /// RoCEv2 destination QP (24 bits).
    RoceQp(u32),
    /// IPv4 5-tuple.
    Ipv4 {
        src: [u8; 4],
        dst: [u8; 4],
        protocol: u8,
        src_port: u16,
        dst_port: u16,
    },
}

/// Limits of the appliance.
#[derive(Clone, Copy, Debug)]
pub struct ApplianceConfig {
    pub max_flows: usize,
    /// Octets each flow may queue.
    pub queue_bytes: u64,
    /// Wheel resolution.
    pub tick: Duration,
}

impl Default for ApplianceConfig {
    fn default() -> Self {
        ApplianceConfig {
            max_flows: 1024,
            // 1 MiB: 8 ms at 1 Gb/s.
            queue_bytes: 1 << 20,
            tick: Duration::from_nanos(256),
        }
    }
}

/// Counters of the appliance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplianceCounters {
    pub queued_frames: u64,
    pub sent_frames: u64,
    pub queue_drops: u64,
    pub bypass_frames: u64,
    pub evictions: u64,
    pub unknown_feedback: u64,
}

/// What [`Appliance::on_inside`] did with a frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Admitted<F> {
    /// Queued for the flow.
    Queued(FlowId),
    /// The flow's queue is full: the frame is handed back to be freed.
    Dropped(F),
    /// The flow table is full of busy flows: send the frame now, unpaced.
    Bypass(F),
}

struct Slot<F> {
    key: FlowKey,
    id: FlowId,
    queue: VecDeque<(u32, F)>,
    queued_bytes: u64,
    /// The flow's schedule: the release time of the frame at the head of the queue.
    pacer: rp::Pacer,
    scheduled: bool,
    last_active: Instant,
}

/// Per-flow queues paced at RP rates. Call order: [`Appliance::on_inside`] per inside frame;
/// [`Appliance::poll`] in a loop until `None`; [`Appliance::flow_for_feedback`] per CNM / CNP.
pub struct Appliance<F> {
    cfg: ApplianceConfig,
    by_key: HashMap<FlowKey, usize>,
    by_id: HashMap<FlowId, usize>,
    slots: Vec<Slot<F>>,
    wheel: Wheel<usize>,
    next_alloc: u16,
    counters: ApplianceCounters,
}

impl<F> Appliance<F> {
    pub fn new(cfg: ApplianceConfig) -> Result<Self, WheelError> {
        Ok(Appliance {
            cfg,
            by_key: HashMap::new(),
            by_id: HashMap::new(),
            slots: Vec::new(),
            wheel: Wheel::new(cfg.tick, 4096)?,
            next_alloc: 0,
            counters: ApplianceCounters::default(),
        })
    }

    pub fn counters(&self) -> ApplianceCounters {
        self.counters
    }

    pub fn flows(&self) -> usize {
        self.by_key.len()
    }

    /// A 5-tuple flow's id: the next 16-bit value not in use (never 0).
    fn alloc_id(&mut self) -> FlowId {
        loop {
            self.next_alloc = self.next_alloc.wrapping_add(1).max(1);
            let id = FlowId(u32::from(self.next_alloc));
            if !self.by_id.contains_key(&id) {
                return id;
            }
        }
    }

    fn id_for(&mut self, key: FlowKey) -> FlowId {
        match key {
            FlowKey::CnTag(rpid) => FlowId(u32::from(rpid)),
            FlowKey::RoceQp(qp) => FlowId(qp),
            FlowKey::Ipv4 { .. } => self.alloc_id(),
        }
    }

    /// The slot for `key`, creating or recycling one; `None` when every slot is busy.
    fn slot_for(&mut self, now: Instant, key: FlowKey) -> Option<usize> {
        if let Some(&i) = self.by_key.get(&key) {
            return Some(i);
        }
        let id_taken = |s: &Self, id: FlowId| s.by_id.contains_key(&id);
        if self.slots.len() < self.cfg.max_flows {
            let id = self.id_for(key);
            if id_taken(self, id) {
                return None;
            }
            self.slots.push(Slot {
                key,
                id,
                queue: VecDeque::new(),
                queued_bytes: 0,
                pacer: rp::Pacer::starting_at(now),
                scheduled: false,
                last_active: now,
            });
            let i = self.slots.len() - 1;
            self.by_key.insert(key, i);
            self.by_id.insert(id, i);
            return Some(i);
        }
        // Full: recycle the least recently active idle flow.
        let victim = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.queue.is_empty() && !s.scheduled)
            .min_by_key(|(_, s)| s.last_active)
            .map(|(i, _)| i)?;
        let old = (self.slots[victim].key, self.slots[victim].id);
        self.by_key.remove(&old.0);
        self.by_id.remove(&old.1);
        let id = self.id_for(key);
        if id_taken(self, id) {
            self.by_key.insert(old.0, victim);
            self.by_id.insert(old.1, victim);
            return None;
        }
        self.counters.evictions += 1;
        let s = &mut self.slots[victim];
        s.key = key;
        s.id = id;
        s.pacer = rp::Pacer::starting_at(now);
        s.last_active = now;
        self.by_key.insert(key, victim);
        self.by_id.insert(id, victim);
        Some(victim)
    }

    /// A frame of `len` octets entered the inside port.
    pub fn on_inside(&mut self, now: Instant, key: FlowKey, len: u32, frame: F) -> Admitted<F> {
        let Some(i) = self.slot_for(now, key) else {
            self.counters.bypass_frames += 1;
            return Admitted::Bypass(frame);
        };
        let s = &mut self.slots[i];
        if s.queued_bytes + u64::from(len) > self.cfg.queue_bytes {
            self.counters.queue_drops += 1;
            return Admitted::Dropped(frame);
        }
        s.queue.push_back((len, frame));
        s.queued_bytes += u64::from(len);
        s.last_active = now;
        self.counters.queued_frames += 1;
        if !s.scheduled {
            // Idle flows keep no credit: the earliest release is now.
            s.pacer.forget_credit(now, Duration::ZERO);
            s.scheduled = true;
            self.wheel.insert(s.pacer.earliest(now), i);
        }
        Admitted::Queued(s.id)
    }

    /// The next frame due at `now` with its flow and length; `rate_of(flow)` is the flow's
    /// current RP rate.
    pub fn poll(
        &mut self,
        now: Instant,
        mut rate_of: impl FnMut(FlowId) -> Rate,
    ) -> Option<(FlowId, u32, F)> {
        let (_, i) = self.wheel.pop_due(now)?;
        let s = &mut self.slots[i];
        let Some((len, frame)) = s.queue.pop_front() else {
            // Cannot happen (a scheduled slot has frames); recover by unscheduling.
            s.scheduled = false;
            return None;
        };
        s.queued_bytes -= u64::from(len);
        s.last_active = now;
        let rate = rate_of(s.id);
        s.pacer.next_release(now, u64::from(len), rate, CATCH_UP);
        if s.queue.is_empty() {
            s.scheduled = false;
        } else if rate == Rate::ZERO {
            // A zero rate releases nothing more.
            self.wheel.insert(Instant::MAX, i);
        } else {
            self.wheel.insert(s.pacer.release_time(), i);
        }
        self.counters.sent_frames += 1;
        Some((s.id, len, frame))
    }

    /// The flow a CNM (CN-TAG RPID) or CNP (DestQP) names, if the table holds it; otherwise the
    /// feedback is counted and should be ignored.
    pub fn flow_for_feedback(&mut self, id: FlowId) -> Option<FlowId> {
        if self.by_id.contains_key(&id) {
            Some(id)
        } else {
            self.counters.unknown_feedback += 1;
            None
        }
    }

    /// The key of a flow (to add a CN-TAG for 5-tuple flows on the way out).
    pub fn key_of(&self, id: FlowId) -> Option<FlowKey> {
        self.by_id.get(&id).map(|&i| self.slots[i].key)
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.wheel.next_deadline()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(sport: u16) -> FlowKey {
        FlowKey::Ipv4 {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            protocol: 17,
            src_port: sport,
            dst_port: 9,
        }
    }

    #[test]
    fn classifies_and_paces_each_flow_at_its_rate() {
        let mut a = Appliance::new(ApplianceConfig::default()).unwrap();
        let t0 = Instant::from_nanos(1_000_000);
        for i in 0..100u32 {
            assert!(matches!(
                a.on_inside(t0, FlowKey::CnTag(7), 1000, i),
                Admitted::Queued(FlowId(7))
            ));
            assert!(matches!(
                a.on_inside(t0, FlowKey::RoceQp(0x123), 1000, 1000 + i),
                Admitted::Queued(FlowId(0x123))
            ));
        }
        // Flow 7 at 100 Mb/s (80 us per frame), QP 0x123 at 400 Mb/s (20 us).
        let rate = |f: FlowId| {
            if f == FlowId(7) {
                Rate::from_mbps(100)
            } else {
                Rate::from_mbps(400)
            }
        };
        let mut sent: HashMap<FlowId, Vec<u32>> = HashMap::new();
        let mut t = t0.as_nanos();
        while t < t0.as_nanos() + 2_000_000 {
            while let Some((f, _, frame)) = a.poll(Instant::from_nanos(t), rate) {
                sent.entry(f).or_default().push(frame);
            }
            t += 1_000;
        }
        // In 2 ms: 25 frames of flow 7 (t0, t0 + 80 us, ..., t0 + 1920 us), 100 of QP 0x123, in order.
        assert_eq!(sent[&FlowId(7)].len(), 25);
        assert_eq!(sent[&FlowId(0x123)].len(), 100);
        assert!(sent[&FlowId(7)].windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn full_table_recycles_idle_flows_then_bypasses() {
        let cfg = ApplianceConfig {
            max_flows: 2,
            ..ApplianceConfig::default()
        };
        let mut a = Appliance::new(cfg).unwrap();
        let t = Instant::from_nanos(10);
        let Admitted::Queued(f1) = a.on_inside(t, tuple(1), 100, 1) else {
            panic!()
        };
        assert!(matches!(
            a.on_inside(t, tuple(2), 100, 2),
            Admitted::Queued(_)
        ));
        // Both busy: the third flow bypasses.
        assert_eq!(a.on_inside(t, tuple(3), 100, 3), Admitted::Bypass(3));
        // Drain flow 1 (and 2): both idle; the third flow recycles the least recent.
        while a
            .poll(Instant::from_nanos(1_000_000), |_| Rate::from_gbps(1))
            .is_some()
        {}
        assert!(matches!(
            a.on_inside(Instant::from_nanos(2_000_000), tuple(3), 100, 4),
            Admitted::Queued(_)
        ));
        assert_eq!(a.counters().evictions, 1);
        assert_eq!(a.counters().bypass_frames, 1);
        assert_eq!(a.flows(), 2);
        // Feedback for an evicted or unknown flow is counted and ignored.
        let _ = f1;
        assert_eq!(a.flow_for_feedback(FlowId(999)), None);
        assert_eq!(a.counters().unknown_feedback, 1);
    }

    #[test]
    fn per_flow_queue_is_bounded() {
        let cfg = ApplianceConfig {
            queue_bytes: 2500,
            ..ApplianceConfig::default()
        };
        let mut a = Appliance::new(cfg).unwrap();
        let t = Instant::ZERO;
        assert!(matches!(
            a.on_inside(t, FlowKey::CnTag(1), 1000, 1),
            Admitted::Queued(_)
        ));
        assert!(matches!(
            a.on_inside(t, FlowKey::CnTag(1), 1000, 2),
            Admitted::Queued(_)
        ));
        assert_eq!(
            a.on_inside(t, FlowKey::CnTag(1), 1000, 3),
            Admitted::Dropped(3)
        );
        assert_eq!(a.counters().queue_drops, 1);
    }
}
