//! Egress queueing for one output port: per-priority byte-bounded FIFOs, a strict-priority
//! scheduler with a control class above all data, per-priority PFC pause, a pacer for an
//! optional egress rate, and a hook where a congestion point (QCN, RED/ECN, PFC generation, TCD)
//! observes every enqueue and dequeue.
//!
//! No I/O, no clock reads, no threads: time comes in as `now`, and the frame is any handle that
//! reports its length ([`QueuedFrame`]). The real switch instantiates it with port frames and
//! busy-polls the pacer's release time; the virtual-time simulator instantiates it with its own
//! packet type and jumps its clock to [`Shaper::release_time`].
//!
//! # Classes and scheduling
//! - [`Class::Control`]: frames the switch originates or must never hold back (PFC PAUSE, QCN
//!   CNMs, LLDP). Strict priority over everything, never paused by PFC.
//! - [`Class::Data(p)`], `p` in `0..8`: the 802.1p priority (VLAN PCP, 0 for untagged frames).
//!   Higher `p` is served first (strict priority, as 802.1Q's default strict-priority
//!   transmission selection); a paused priority is skipped until resumed.
//!
//! # Call order
//! `enqueue(now, class, frame)` for each arriving frame; then, while the pacer allows
//! (`pacer.release_time() <= now`), `dequeue(now)` and `pacer.on_send(now, len)`.
//! `set_paused(p, bool)` whenever a PFC frame is received for priority `p`.
//!
//! # Congestion hook
//! [`CongestionHook::on_enqueue`] sees the frame (mutably, to mark ECN/TCD code points) and the
//! occupancy *before* it is added, and can refuse it; [`CongestionHook::on_dequeue`] sees it and
//! the occupancy *after* it left. A hook that must emit frames (QCN CNMs, PFC PAUSE) keeps them
//! and the engine drains them through [`EgressQueue::hook_mut`] into the control class.
use std::collections::VecDeque;

use units::{Duration, Instant, Rate, PRIORITIES};

use quench_port::Frame;

/// What a queued item must tell the queue: its length in octets on the wire.
pub trait QueuedFrame {
    fn wire_len(&self) -> u32;
}

impl<F: Frame> QueuedFrame for F {
    fn wire_len(&self) -> u32 {
        self.len() as u32
    }
}

/// A traffic class at one egress port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// Switch-originated / control frames: strict priority, never paused.
    Control,
    /// Data at 802.1p priority `0..8`.
    Data(u8),
}

impl Class {
    /// Data class for a PCP value; values above 7 are clamped (PCP is 3 bits on the wire).
    pub fn from_pcp(pcp: u8) -> Class {
        Class::Data(pcp.min(PRIORITIES as u8 - 1))
    }
    fn index(self) -> usize {
        match self {
            Class::Control => PRIORITIES,
            Class::Data(p) => (p as usize).min(PRIORITIES - 1),
        }
    }
}

/// The 8 data classes plus control.
pub const CLASSES: usize = PRIORITIES + 1;

/// What the congestion hook decides for an arriving frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    Accept,
    Drop,
}

/// Occupancy seen by the hook at an enqueue or dequeue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueEvent {
    pub now: Instant,
    pub class: Class,
    /// The frame's length in octets.
    pub frame_len: u32,
    /// Octets queued in this class (before an enqueue, after a dequeue), the other workers'
    /// queues of the port included ([`EgressQueue::set_others`]).
    pub class_bytes: u64,
    /// Octets queued in all classes of this port (same convention).
    pub port_bytes: u64,
}

/// Where a congestion point plugs into an egress queue. Both methods default to doing nothing,
/// so a hook implements only the events it needs.
pub trait CongestionHook<F> {
    /// A frame arrives; `ev` holds the occupancy before it is added. Return `Admit::Drop` to
    /// refuse it (it is then dropped and counted as a hook drop).
    fn on_enqueue(&mut self, ev: &QueueEvent, frame: &mut F) -> Admit {
        let _ = (ev, frame);
        Admit::Accept
    }
    /// A frame leaves for the wire; `ev` holds the occupancy after it left.
    fn on_dequeue(&mut self, ev: &QueueEvent, frame: &mut F) {
        let _ = (ev, frame);
    }
    /// Whether the hook must see every frame. One that need not lets an idle queue pass frames
    /// straight through ([`EgressQueue::pass_through`]).
    fn observes(&self) -> bool {
        true
    }
}

/// The hook of a plain switch: no congestion point.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHook;
impl<F> CongestionHook<F> for NoHook {
    fn observes(&self) -> bool {
        false
    }
}

/// Byte limits per class, validated once (params -> profile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueLimits {
    /// Octets each data class may hold.
    pub data_bytes: u64,
    /// Octets the control class may hold.
    pub control_bytes: u64,
}

impl Default for QueueLimits {
    /// 256 KiB per data class (about 170 full frames, a shallow data-centre switch buffer per
    /// port and priority), 64 KiB for control.
    fn default() -> Self {
        QueueLimits {
            data_bytes: 256 * 1024,
            control_bytes: 64 * 1024,
        }
    }
}

/// Counters of one class. Plain integers: the queue belongs to one worker; the worker
/// publishes copies for the control plane.
///
/// Layout: what every enqueue and dequeue changes (the first seven fields) shares one cache
/// line, the drop counters follow (`repr(C)`, aligned to a line), so a frame touches one line
/// of counters. The simulator's fat tree keeps thousands of these queues and reaches each
/// long after its last frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[repr(C, align(64))]
pub struct ClassStats {
    pub enq_pkts: u64,
    pub enq_bytes: u64,
    pub deq_pkts: u64,
    pub deq_bytes: u64,
    /// Current depth.
    pub depth_pkts: u64,
    pub depth_bytes: u64,
    /// Largest depth seen.
    pub max_depth_bytes: u64,
    /// Refused because the class was full (tail drop).
    pub drop_pkts: u64,
    pub drop_bytes: u64,
    /// Refused by the congestion hook.
    pub hook_drop_pkts: u64,
}

const _: () = assert!(std::mem::offset_of!(ClassStats, max_depth_bytes) < 64);

/// Outcome of [`EgressQueue::enqueue`]; a refused frame is handed back so the caller frees it
/// (by dropping) or reuses it.
#[derive(Debug)]
pub enum Enqueued<F> {
    Queued,
    TailDrop(F),
    HookDrop(F),
}

// `EgressQueue::queued` and `paused` are bit sets over the classes.
const _: () = assert!(CLASSES <= 16 && PRIORITIES <= 8);

/// The egress queues of one port. See the module docs.
pub struct EgressQueue<F, H = NoHook> {
    fifos: [VecDeque<F>; CLASSES],
    stats: [ClassStats; CLASSES],
    /// Bit `i` is set exactly when `fifos[i]` holds frames: the scheduler picks a class from
    /// this word and `paused` instead of looking at up to nine FIFOs (each its own line).
    queued: u16,
    /// Bit `p`: data priority `p` is paused.
    paused: u8,
    limits: QueueLimits,
    port_bytes: u64,
    /// Octets the other workers' queues of this port hold per data class, as they last
    /// published them (`switch::depth`); all 0 when this queue is the port's only one. The
    /// data limits and the hook's events count them with this queue's own, so every decision
    /// is on the port's whole queue; the stats stay this queue's own.
    others: [u64; PRIORITIES],
    others_sum: u64,
    hook: H,
}

impl<F: QueuedFrame> EgressQueue<F, NoHook> {
    pub fn new(limits: QueueLimits) -> Self {
        EgressQueue::with_hook(limits, NoHook)
    }
}

impl<F: QueuedFrame, H: CongestionHook<F>> EgressQueue<F, H> {
    pub fn with_hook(limits: QueueLimits, hook: H) -> Self {
        EgressQueue {
            fifos: std::array::from_fn(|_| VecDeque::new()),
            stats: [ClassStats::default(); CLASSES],
            queued: 0,
            paused: 0,
            limits,
            port_bytes: 0,
            others: [0; PRIORITIES],
            others_sum: 0,
            hook,
        }
    }

    /// The octets the other workers' queues of this port hold per data priority (read once
    /// per poll from their published depths); enqueue and dequeue decide on own + others.
    pub fn set_others(&mut self, others: &[u64; PRIORITIES]) {
        self.others = *others;
        self.others_sum = others.iter().sum();
    }

    /// Octets the other workers' queues of class `i` hold (0 for control: each worker's
    /// control frames are its own).
    #[inline]
    fn others(&self, i: usize) -> u64 {
        self.others.get(i).copied().unwrap_or(0)
    }

    fn limit(&self, class: Class) -> u64 {
        match class {
            Class::Control => self.limits.control_bytes,
            Class::Data(_) => self.limits.data_bytes,
        }
    }

    /// Queues `frame` in `class`, unless the class is full or the hook refuses it.
    pub fn enqueue(&mut self, now: Instant, class: Class, mut frame: F) -> Enqueued<F> {
        let i = class.index();
        let len = frame.wire_len();
        let limit = self.limit(class);
        let others = self.others(i);
        let st = &mut self.stats[i];
        if st.depth_bytes + others + len as u64 > limit {
            st.drop_pkts += 1;
            st.drop_bytes += len as u64;
            return Enqueued::TailDrop(frame);
        }
        let ev = QueueEvent {
            now,
            class,
            frame_len: len,
            class_bytes: st.depth_bytes + others,
            port_bytes: self.port_bytes + self.others_sum,
        };
        if self.hook.on_enqueue(&ev, &mut frame) == Admit::Drop {
            self.stats[i].hook_drop_pkts += 1;
            return Enqueued::HookDrop(frame);
        }
        let st = &mut self.stats[i];
        st.enq_pkts += 1;
        st.enq_bytes += len as u64;
        st.depth_pkts += 1;
        st.depth_bytes += len as u64;
        st.max_depth_bytes = st.max_depth_bytes.max(st.depth_bytes);
        self.port_bytes += len as u64;
        self.fifos[i].push_back(frame);
        self.queued |= 1 << i;
        Enqueued::Queued
    }

    /// The class the scheduler serves next: control, then unpaused data from priority 7 down.
    #[inline]
    fn next_class(&self) -> Option<usize> {
        if self.queued & (1 << PRIORITIES) != 0 {
            return Some(PRIORITIES);
        }
        let ready = self.queued & !u16::from(self.paused);
        // The highest unpaused priority holding frames.
        (ready != 0).then(|| 15 - ready.leading_zeros() as usize)
    }

    /// Length of the frame [`dequeue`](Self::dequeue) would return, for the pacer.
    pub fn peek_len(&self) -> Option<u32> {
        self.next_class()
            .and_then(|i| self.fifos[i].front())
            .map(|f| f.wire_len())
    }

    /// Takes the next frame by strict priority, skipping paused priorities.
    pub fn dequeue(&mut self, now: Instant) -> Option<(Class, F)> {
        let i = self.next_class()?;
        let mut frame = self.fifos[i].pop_front()?;
        if self.fifos[i].is_empty() {
            self.queued &= !(1 << i);
        }
        let len = frame.wire_len() as u64;
        let st = &mut self.stats[i];
        st.deq_pkts += 1;
        st.deq_bytes += len;
        st.depth_pkts -= 1;
        st.depth_bytes -= len;
        self.port_bytes -= len;
        let class = if i == PRIORITIES {
            Class::Control
        } else {
            Class::Data(i as u8)
        };
        let ev = QueueEvent {
            now,
            class,
            frame_len: len as u32,
            class_bytes: st.depth_bytes + self.others(i),
            port_bytes: self.port_bytes + self.others_sum,
        };
        self.hook.on_dequeue(&ev, &mut frame);
        Some((class, frame))
    }

    /// PFC: stop (`true`) or resume (`false`) serving data priority `prio`.
    pub fn set_paused(&mut self, prio: u8, paused: bool) {
        if usize::from(prio) < PRIORITIES {
            if paused {
                self.paused |= 1 << prio;
            } else {
                self.paused &= !(1 << prio);
            }
        }
    }

    pub fn is_paused(&self, prio: u8) -> bool {
        usize::from(prio) < PRIORITIES && self.paused & (1 << prio) != 0
    }

    /// Octets queued in all classes.
    pub fn port_bytes(&self) -> u64 {
        self.port_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// Cut-through: when nothing is queued, the hook need not see frames and `class` is not
    /// paused, `pkts` frames of `bytes` octets in all may skip the FIFO (the caller sends them
    /// at once); they are counted as enqueued and dequeued. Returns false when they must be
    /// queued. Why: with an empty queue the scheduler would hand each frame straight back, and
    /// the FIFO round trip was a third of the forwarding loop's time (perf on
    /// scripts/bench/bench-dpdk.sh). Passing a run of frames at once is the same as passing them one
    /// by one: nothing here changes whether the next one may pass.
    pub fn pass_through(&mut self, class: Class, pkts: u64, bytes: u64) -> bool {
        if !self.may_pass(class) {
            return false;
        }
        self.count_passed(class, pkts, bytes);
        true
    }

    /// Whether frames of `class` may skip the FIFO now (see [`pass_through`](Self::pass_through)).
    #[inline]
    pub fn may_pass(&self, class: Class) -> bool {
        if self.port_bytes != 0 || self.hook.observes() {
            return false;
        }
        match class {
            Class::Data(p) => !self.is_paused(p),
            Class::Control => true,
        }
    }

    /// Counts `pkts` frames of `bytes` octets that skipped the FIFO after
    /// [`may_pass`](Self::may_pass) allowed it: as enqueued and dequeued.
    pub fn count_passed(&mut self, class: Class, pkts: u64, bytes: u64) {
        let st = &mut self.stats[class.index()];
        st.enq_pkts += pkts;
        st.enq_bytes += bytes;
        st.deq_pkts += pkts;
        st.deq_bytes += bytes;
    }

    /// Counters per class: indices `0..8` are data priorities, index 8 is control.
    pub fn stats(&self) -> &[ClassStats; CLASSES] {
        &self.stats
    }

    pub fn hook(&self) -> &H {
        &self.hook
    }

    pub fn hook_mut(&mut self) -> &mut H {
        &mut self.hook
    }

    /// Removes every queued frame (at shutdown), returning how many there were; they are
    /// dropped, i.e. freed.
    pub fn clear(&mut self) -> usize {
        let mut n = 0;
        for (fifo, st) in self.fifos.iter_mut().zip(self.stats.iter_mut()) {
            n += fifo.len();
            fifo.clear();
            st.depth_pkts = 0;
            st.depth_bytes = 0;
        }
        self.queued = 0;
        self.port_bytes = 0;
        n
    }
}

/// Paces a port's egress to a configured rate with the one pacer ([`rp::Pacer`]): says when the
/// next frame may leave; the engine enforces it (docs/style.md, "Pacing and deadlines") by
/// busy-polling its clock, the simulator by jumping its virtual clock.
///
/// Each frame of `len` octets advances the release time by exactly `len * 8 / rate` seconds
/// (no rounding accumulates). The pacer's credit bound is used twice:
/// - an idle port (queue empty: [`Shaper::on_idle`]) keeps at most `burst` of unused credit, so
///   a long-idle port does not release a long burst;
/// - a backlogged port whose worker was late (descheduled, a slow transmit) may catch up at
///   most `max_lag`; beyond that the credit is lost. This keeps the long-run rate exact on a
///   busy machine without letting an arbitrarily old debt turn into a line-rate burst.
#[derive(Clone, Debug)]
pub struct Shaper {
    rate: Rate,
    burst: Duration,
    max_lag: Duration,
    pacer: rp::Pacer,
}

/// Default catch-up bound for a backlogged port (see [`Shaper`]).
pub const DEFAULT_MAX_LAG: Duration = Duration::from_millis(100);

impl Shaper {
    /// A shaper at `rate` (must be non-zero) keeping at most `burst` of idle credit and
    /// catching up at most [`DEFAULT_MAX_LAG`].
    pub fn new(rate: Rate, burst: Duration) -> Shaper {
        Shaper {
            rate,
            burst,
            max_lag: DEFAULT_MAX_LAG.max(burst),
            pacer: rp::Pacer::new(),
        }
    }

    /// Default idle credit for `rate`: the time of two maximum frames, and at least 20 us.
    pub fn default_burst(rate: Rate, max_frame: u64) -> Duration {
        let two = rate.tx_time(2 * max_frame);
        if two > Duration::from_micros(20) {
            two
        } else {
            Duration::from_micros(20)
        }
    }

    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// When the next frame may leave.
    #[inline]
    pub fn release_time(&self) -> Instant {
        self.pacer.release_time()
    }

    /// True when a frame may leave at `now`.
    #[inline]
    pub fn ready(&self, now: Instant) -> bool {
        self.pacer.ready(now)
    }

    /// The queue is empty at `now`: drop idle credit beyond `burst`.
    #[inline]
    pub fn on_idle(&mut self, now: Instant) {
        self.pacer.forget_credit(now, self.burst);
    }

    /// Accounts a frame of `len` octets sent at `now`.
    #[inline]
    pub fn on_send(&mut self, now: Instant, len: u32) {
        self.pacer
            .next_release(now, u64::from(len), self.rate, self.max_lag);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq)]
    struct Pkt(u32, u32); // (id, len)
    impl QueuedFrame for Pkt {
        fn wire_len(&self) -> u32 {
            self.1
        }
    }

    fn t(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    #[test]
    fn pass_through_only_when_idle_unpaused_and_unobserved() {
        let mut q: EgressQueue<Pkt> = EgressQueue::new(QueueLimits::default());
        assert!(q.pass_through(Class::Data(3), 1, 100));
        assert_eq!((q.stats()[3].enq_pkts, q.stats()[3].deq_pkts), (1, 1));
        assert_eq!(q.stats()[3].depth_bytes, 0);
        // A run of frames counts each of them.
        assert!(q.pass_through(Class::Data(3), 3, 180));
        assert_eq!((q.stats()[3].enq_pkts, q.stats()[3].deq_bytes), (4, 280));
        // A backlog: frames must queue behind it.
        assert!(matches!(
            q.enqueue(t(0), Class::Data(1), Pkt(1, 60)),
            Enqueued::Queued
        ));
        assert!(!q.pass_through(Class::Data(3), 1, 100));
        assert!(q.dequeue(t(1)).is_some());
        // A paused priority queues; another passes.
        q.set_paused(3, true);
        assert!(!q.pass_through(Class::Data(3), 1, 100));
        assert!(q.pass_through(Class::Data(2), 1, 100));
        // A hook that observes (a congestion point) sees every frame: never bypassed.
        struct Watch;
        impl CongestionHook<Pkt> for Watch {}
        let mut w = EgressQueue::with_hook(QueueLimits::default(), Watch);
        assert!(!w.pass_through(Class::Data(0), 1, 60));
    }

    #[test]
    fn strict_priority_control_first_and_pause_skips() {
        let mut q = EgressQueue::new(QueueLimits::default());
        q.enqueue(t(0), Class::Data(0), Pkt(1, 100));
        q.enqueue(t(0), Class::Data(5), Pkt(2, 100));
        q.enqueue(t(0), Class::Control, Pkt(3, 64));
        q.enqueue(t(0), Class::Data(5), Pkt(4, 100));
        q.set_paused(5, true);
        let order: Vec<u32> = std::iter::from_fn(|| q.dequeue(t(1)).map(|(_, p)| p.0)).collect();
        assert_eq!(order, vec![3, 1]);
        assert_eq!(q.port_bytes(), 200);
        q.set_paused(5, false);
        let order: Vec<u32> = std::iter::from_fn(|| q.dequeue(t(2)).map(|(_, p)| p.0)).collect();
        assert_eq!(order, vec![2, 4]);
        assert!(q.is_empty());
    }

    #[test]
    fn byte_limit_tail_drops_and_counts() {
        let limits = QueueLimits {
            data_bytes: 250,
            control_bytes: 64,
        };
        let mut q = EgressQueue::new(limits);
        assert!(matches!(
            q.enqueue(t(0), Class::Data(1), Pkt(1, 100)),
            Enqueued::Queued
        ));
        assert!(matches!(
            q.enqueue(t(0), Class::Data(1), Pkt(2, 100)),
            Enqueued::Queued
        ));
        assert!(matches!(
            q.enqueue(t(0), Class::Data(1), Pkt(3, 100)),
            Enqueued::TailDrop(Pkt(3, 100))
        ));
        // Another class has its own budget.
        assert!(matches!(
            q.enqueue(t(0), Class::Data(2), Pkt(4, 100)),
            Enqueued::Queued
        ));
        let s = q.stats()[1];
        assert_eq!(
            (s.enq_pkts, s.drop_pkts, s.drop_bytes, s.depth_bytes),
            (2, 1, 100, 200)
        );
        assert_eq!(q.peek_len(), Some(100));
    }

    /// A hook that drops above a threshold and records what it saw.
    struct Threshold {
        max: u64,
        seen: Vec<(bool, u64, u64)>,
    }
    impl CongestionHook<Pkt> for Threshold {
        fn on_enqueue(&mut self, ev: &QueueEvent, _f: &mut Pkt) -> Admit {
            self.seen.push((true, ev.class_bytes, ev.port_bytes));
            if ev.port_bytes >= self.max {
                Admit::Drop
            } else {
                Admit::Accept
            }
        }
        fn on_dequeue(&mut self, ev: &QueueEvent, f: &mut Pkt) {
            f.0 += 1000; // a hook may rewrite the frame (ECN marking)
            self.seen.push((false, ev.class_bytes, ev.port_bytes));
        }
    }

    #[test]
    fn hook_sees_occupancy_and_can_drop() {
        let hook = Threshold {
            max: 150,
            seen: vec![],
        };
        let mut q = EgressQueue::with_hook(QueueLimits::default(), hook);
        assert!(matches!(
            q.enqueue(t(0), Class::Data(0), Pkt(1, 100)),
            Enqueued::Queued
        ));
        assert!(matches!(
            q.enqueue(t(0), Class::Data(3), Pkt(2, 100)),
            Enqueued::Queued
        ));
        assert!(matches!(
            q.enqueue(t(0), Class::Data(3), Pkt(3, 100)),
            Enqueued::HookDrop(_)
        ));
        assert_eq!(
            q.dequeue(t(1)).map(|(c, p)| (c, p.0)),
            Some((Class::Data(3), 1002))
        );
        assert_eq!(
            q.hook().seen,
            vec![
                (true, 0, 0),
                (true, 0, 100),
                (true, 100, 200),
                (false, 0, 100)
            ]
        );
        assert_eq!(q.stats()[3].hook_drop_pkts, 1);
    }

    proptest::proptest! {
        /// Model-based: random enqueues, dequeues and pauses keep the byte accounting exact,
        /// never exceed a limit, and never serve a paused priority.
        #[test]
        fn accounting_invariants(ops in proptest::collection::vec((0u8..4, 0u8..9, 1u32..1600), 1..300)) {
            let limits = QueueLimits { data_bytes: 5000, control_bytes: 3000 };
            let mut q = EgressQueue::new(limits);
            let mut model_bytes = 0u64;
            for (i, (op, class, len)) in ops.into_iter().enumerate() {
                let class = if class == 8 { Class::Control } else { Class::Data(class) };
                match op {
                    0 | 1 => {
                        if let Enqueued::Queued = q.enqueue(t(0), class, Pkt(i as u32, len)) {
                            model_bytes += len as u64;
                        }
                    }
                    2 => {
                        let peek = q.peek_len();
                        let got = q.dequeue(t(0));
                        proptest::prop_assert_eq!(peek, got.as_ref().map(|(_, p)| p.1));
                        if let Some((c, p)) = got {
                            if let Class::Data(pr) = c { proptest::prop_assert!(!q.is_paused(pr)); }
                            model_bytes -= p.1 as u64;
                        }
                    }
                    _ => {
                        if let Class::Data(p) = class { q.set_paused(p, !q.is_paused(p)); }
                    }
                }
                proptest::prop_assert_eq!(q.port_bytes(), model_bytes);
                let sum: u64 = q.stats().iter().map(|s| s.depth_bytes).sum();
                proptest::prop_assert_eq!(sum, model_bytes);
                for (k, s) in q.stats().iter().enumerate() {
                    let lim = if k == 8 { 3000 } else { 5000 };
                    proptest::prop_assert!(s.depth_bytes <= lim);
                }
            }
        }
    }
}
