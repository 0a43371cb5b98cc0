//! One worker's share of the switch: the run-to-completion loop body (DPDK l2fwd style).
//!
//! A [`Worker`] holds a handle on some of the switch's ports ([`OwnedPort`]: the device queues
//! it polls, and the transmit queue it feeds, its own). For each port it either holds the
//! port's egress (its egress queues live in the worker's [`SwitchCore`]; `OwnedPort::egress`)
//! or hands frames for that port to the worker that does. A port without a pacer and without
//! PFC has its egress on every worker that holds it: each worker queues and transmits on its
//! own device queue, so frames never change core (`switch::plan` decides who holds what). A
//! congestion point on such a port runs on each worker's queue and decides on the port's
//! depth, the worker's own plus the others' as published ([`depth`](quench_node::switch::depth): read
//! before receiving, published after transmitting). One call to
//! [`Worker::poll`] does bounded work, in this order:
//! 1. **rx -> route -> enqueue**: receive at most [`BURST`] frames per held receive queue;
//!    classify each once ([`routing`](super::routing)), learn its source, look up its
//!    destination, and hand it to the core for the egress port (flooding copies it to every
//!    other port). A frame for a port whose egress another worker holds crosses on that
//!    worker's lock-free ring ([`rings`](super::rings)): moved as it is when its buffer may
//!    change core (heap, DPDK mbuf), else copied ([`Frame::carry_into`]);
//! 2. take at most `BURST x 4` frames from its own inbound ring and learning notices;
//! 3. **tx**: the core's due timeouts (received pauses running out, PFC refreshes); per owned
//!    port, what the core's queues and the pacer release (at most [`BURST`]) goes to the
//!    device ([`egress`](super::egress)); the core's events (PAUSE frames, CNMs) are queued
//!    like received frames;
//! 4. **housekeeping**: about every millisecond, publish counters; every second, age the MAC
//!    table.
//!
//! PFC is the core's: the worker only parses received MAC Control frames and turns the core's
//! PFC decisions into PAUSE frames.
//!
//! Every frame is forwarded or freed exactly once: frames are owned handles, and each path
//! either moves one into a queue / a transmit burst / a ring or drops it (freeing it) with a
//! counter.
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use cp::pfc::{PfcAction, PfcProfile};
use rand_xoshiro::rand_core::SeedableRng;
use units::{Duration, Instant, Rate};

pub use super::egress::OwnedPort;
use super::egress::{transmit, Classified, TX_BURSTS};
use super::fastpath::FastPath;
pub use super::rings::{links, Crossing, Head, Learned, Links, CROSS_RING};
use super::routing::{classify, Dest, Run, SameHeaders};
use super::spsc::Producer;
use super::stats::bump;
use quench_node::switch::core::{CpProfiles, Event, Handled, SwitchCore};
use quench_node::switch::cp::CpHook;
use quench_node::switch::fdb::{self, Fdb, Lookup, PortIdx, DEFAULT_CAPACITY};
use quench_node::switch::queue::Class;
use quench_port::heap::Carried;
use quench_port::probe::{Iteration, LoopGaps, Probe};
use quench_port::{Frame, Port, BURST};
use quench_wire::pfc::{emit_frame, PfcRepr, FRAME_LEN};
use quench_wire::MacAddr;

/// Receive-side counts of one port, added to its counters once per poll.
#[derive(Default)]
struct RxCounts {
    pkts: u64,
    bytes: u64,
    drops: u64,
    flooded: u64,
    flooded_unicast: u64,
}

/// A worker's state. See the module docs.
pub struct Worker<P: Port> {
    pub id: usize,
    /// Indexed by global port index; `None` for ports other workers own.
    pub ports: Vec<Option<OwnedPort<P>>>,
    /// The egress queues of the owned ports, their congestion points, and PFC.
    pub core: SwitchCore<Classified<P::Frame>>,
    /// Owning worker of each global port.
    owner: Vec<usize>,
    links: Links,
    pub fdb: Fdb,
    rx: Vec<P::Frame>,
    /// The port [`Worker::receive`] reads first in its next poll: it moves on by one each
    /// poll, so no ingress port's burst is always queued behind another's.
    rx_first: usize,
    /// Scratch of `forward_burst`: the runs of one burst, and each frame's IPv4 offset.
    runs: Vec<Run>,
    l3: [u16; BURST],
    last_publish: Instant,
    last_kernel_drops: Instant,
    last_age: Instant,
    /// Its MAC table counters and loop gaps as published.
    counters: Arc<super::stats::WorkerCounters>,
    /// The loop's iteration gaps, published with the kernel counts.
    gaps: LoopGaps,
    /// Frames lost crossing to another worker (its ring full).
    pub cross_drops: u64,
    /// Per port: the source address of the PAUSE frames it sends.
    macs: Vec<MacAddr>,
    /// The kernel fast path, on the worker that programs it (worker 0).
    pub fast: Option<FastPath>,
}

/// The head of a crossing frame for port `e` (see [`Head::Frame`]).
#[inline(always)]
fn frame_head(e: usize, class: Class, l3: u16, ingress: Option<usize>) -> Head {
    Head::Frame {
        egress: e as PortIdx,
        class,
        l3,
        ingress: ingress.map(|i| i as PortIdx),
    }
}

/// Writes a crossing into `ring`, made in its slot by `write`
/// ([`spsc::Producer::stage_in`](super::spsc::Producer::stage_in)), published once a burst is
/// staged there (else at the end of the receive step and of the poll, `Worker::flush_all`).
/// False when it could not (the ring is full, `write` wrote nothing).
#[inline(always)]
fn stage(
    ring: &mut Producer<Crossing>,
    write: impl for<'a> FnOnce(&'a mut MaybeUninit<Crossing>) -> Option<&'a mut Crossing>,
) -> bool {
    if !ring.stage_in(write) {
        return false;
    }
    if ring.staged() >= BURST {
        ring.publish();
    }
    true
}

/// Crossings ahead of the one being landed whose frame buffers are prefetched.
const LAND_AHEAD: usize = 8;

/// Starts loading what landing the frame of crossing `c` reads first (a moved mbuf's header).
#[inline]
fn prefetch_frame(c: Option<&Crossing>) {
    if let Some(frame) = c.and_then(Crossing::frame) {
        frame.prefetch();
    }
}

/// How often counters are published and the MAC table swept.
const PUBLISH_EVERY: Duration = Duration::from_millis(1);
/// How often the ports' kernel drop counts are read (a system call per port and queue) and
/// the loop's gap histograms published.
const KERNEL_DROPS_EVERY: Duration = Duration::from_millis(100);
const AGE_EVERY: Duration = Duration::from_secs(1);

impl<P: Port> Worker<P> {
    /// Builds the worker's switch core from the ports it owns (their limits and congestion
    /// points).
    pub fn new(
        id: usize,
        mut ports: Vec<Option<OwnedPort<P>>>,
        owner: Vec<usize>,
        links: Links,
        fdb: Fdb,
        counters: Arc<super::stats::WorkerCounters>,
    ) -> Self {
        let n = ports.len();
        let mut core = SwitchCore::new(n);
        for (i, op) in ports.iter_mut().enumerate() {
            if let Some(op) = op.as_mut().filter(|op| op.egress) {
                let cp = op.cp.take().unwrap_or_else(|| {
                    CpHook::new(&CpProfiles::none(), SeedableRng::seed_from_u64(0))
                });
                // Pause quanta are bit times of the receiving port; `set_pfc` gives the rates.
                let rate = op.pacer.as_ref().map_or(Rate::from_gbps(100), |p| p.rate());
                core.attach(i, op.limits, cp, rate);
            }
        }
        Worker {
            id,
            ports,
            core,
            owner,
            links,
            fdb,
            rx: Vec::with_capacity(BURST),
            rx_first: 0,
            runs: Vec::with_capacity(BURST),
            l3: [0; BURST],
            last_publish: Instant::ZERO,
            last_kernel_drops: Instant::ZERO,
            last_age: Instant::ZERO,
            counters,
            gaps: LoopGaps::default(),
            cross_drops: 0,
            macs: (0..n)
                .map(|i| MacAddr(0x02, 0x71, 0x6e, 0xfe, 0, i as u8))
                .collect(),
            fast: None,
        }
    }

    /// A worker owning every port (the single-worker switch, and tests).
    pub fn single(ports: Vec<OwnedPort<P>>, ageing: Duration) -> Self {
        let n = ports.len();
        Worker::new(
            0,
            ports.into_iter().map(Some).collect(),
            vec![0; n],
            links(1)
                .pop()
                .unwrap_or_else(|| unreachable!("links(1) makes one")),
            Fdb::new(ageing, DEFAULT_CAPACITY),
            Arc::new(Default::default()),
        )
    }

    /// Turns PFC on (single-worker switches only: a frame's octets count against its ingress
    /// port while it sits in any egress queue). `rates[i]` is port i's speed, for the quanta of
    /// PAUSE frames it receives (802.1Qbb: bit times of the receiving port); `macs[i]` its
    /// address, the source of the PAUSE frames it sends. Every lossless frame must then go
    /// through the queues (its octets return to the ingress account when it is dequeued), so
    /// cut-through is off.
    pub fn set_pfc(&mut self, profile: PfcProfile, rates: &[Rate], macs: &[MacAddr]) {
        for (i, op) in self.ports.iter_mut().enumerate() {
            if let Some(op) = op {
                op.cut_through = false;
                if let Some(&r) = rates.get(i) {
                    self.core.set_pause_rate(i, r);
                }
            }
        }
        for (slot, m) in self.macs.iter_mut().zip(macs) {
            *slot = *m;
        }
        self.core.set_pfc(profile);
    }

    /// Queues `frame` (IPv4 header at `l3`, 0: none) for egress port `e`: straight to the
    /// transmit burst while the queue is idle and the burst has room (cut-through), else
    /// through the core; a port whose egress another worker holds gets it on that worker's
    /// ring. `ingress`: the port it was received on, `None` for a flooded copy or a frame the
    /// switch made (never PFC-accounted). Returns whether it was passed or queued here (a
    /// refused frame is freed here; the core or the queue counted it).
    fn enqueue(
        &mut self,
        now: Instant,
        ingress: Option<usize>,
        e: usize,
        class: Class,
        frame: P::Frame,
        l3: u16,
    ) -> bool {
        let (Some(Some(op)), Some(q)) = (self.ports.get_mut(e), self.core.queue_mut(e)) else {
            self.cross_run(e, class, ingress, std::iter::once((frame, l3)));
            return false;
        };
        if op.may_cut_through(q, class, 1) {
            op.cut_through(q, class, frame);
            return true;
        }
        op.on_backlog(q, now);
        let frame = Classified::new(frame, l3);
        let r = match ingress {
            Some(i) => self.core.handle_frame(now, i, e, class, frame),
            None => self.core.handle_flooded(now, e, class, frame),
        };
        matches!(r, Handled::Queued)
    }

    /// Queues a copy of `bytes` for egress port `e`, as [`enqueue`](Self::enqueue) does
    /// (PAUSE frames, CNMs, flooded copies). A port that cannot take the copy (no buffer)
    /// counts a transmit drop.
    fn enqueue_copy(&mut self, now: Instant, e: usize, class: Class, bytes: &[u8], l3: u16) {
        match self.ports.get_mut(e) {
            Some(Some(op)) if op.egress => match op.port.import(bytes) {
                Some(f) => {
                    self.enqueue(now, None, e, class, f, l3);
                }
                None => bump(&op.counters.tx_drops, 1),
            },
            _ => self.cross_bytes(e, class, l3, bytes),
        }
    }

    /// Carries out the core's decisions: PAUSE frames out of their ports, CNMs toward their
    /// destination (the sampled frame's source), both in the strict-priority control class.
    fn handle_events(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(ev) = self.core.poll_event() {
            match ev {
                Event::Pfc { port, action } => {
                    let pdu = match action {
                        PfcAction::Pause { prio, quanta } => PfcRepr::pause(1 << prio, quanta),
                        PfcAction::Resume { prio } => PfcRepr::resume(1 << prio),
                    };
                    let mut buf = [0u8; FRAME_LEN];
                    let src = self.macs.get(port).copied().unwrap_or(MacAddr::zero());
                    if emit_frame(src, &pdu, &mut buf).is_ok() {
                        self.enqueue_copy(now, port, Class::Control, &buf, 0);
                    }
                }
                Event::Cnm { cnm, .. } => {
                    let Some(h) = cnm.first_chunk::<12>() else {
                        continue;
                    };
                    if let Lookup::Port(e) = self.fdb.lookup_key(now, fdb::header_keys(h).0) {
                        self.enqueue_copy(now, e as usize, Class::Control, &cnm, 0);
                        n += 1;
                    }
                }
            }
        }
        n
    }

    /// Hands frames (each with its IPv4 offset) for port `e` in `class`, received on
    /// `ingress`, to the ring of the worker holding that port's egress, in order: one look-up
    /// of the ring for the run, then each frame written into its slot as itself
    /// ([`Frame::carry_into`]: moved when its buffer may change core, else copied). A frame
    /// that cannot cross is freed and counted.
    #[inline(always)]
    fn cross_run(
        &mut self,
        e: usize,
        class: Class,
        ingress: Option<usize>,
        frames: impl Iterator<Item = (P::Frame, u16)>,
    ) {
        let ring = self
            .owner
            .get(e)
            .and_then(|&w| self.links.to.get_mut(w))
            .and_then(Option::as_mut);
        let Some(ring) = ring else {
            // The owner's counters belong to the owner (single writer): count it here.
            self.cross_drops += frames.count() as u64;
            return;
        };
        for (frame, l3) in frames {
            let head = frame_head(e, class, l3, ingress);
            if !stage(ring, |slot| {
                Crossing::write_frame(slot, head, |dst| frame.carry_into(dst))
            }) {
                self.cross_drops += 1;
            }
        }
    }

    /// Hands a copy of `bytes` (a flooded copy, a PAUSE frame, a CNM) for port `e` to the ring
    /// of the worker holding that port's egress, as [`cross_run`](Self::cross_run) does a
    /// received frame.
    fn cross_bytes(&mut self, e: usize, class: Class, l3: u16, bytes: &[u8]) {
        let head = frame_head(e, class, l3, None);
        match self.owner.get(e) {
            Some(&w) => self.send_to(w, |slot| {
                Crossing::write_frame(slot, head, |dst| Carried::copy_into(bytes, dst))
            }),
            None => self.cross_drops += 1,
        }
    }

    /// Writes a crossing into the ring to worker `w`, made in its slot by `write`
    /// ([`stage`]). What cannot cross (the ring is full, `write` wrote nothing) is freed, with
    /// `write`, and counted.
    #[inline(always)]
    fn send_to(
        &mut self,
        w: usize,
        write: impl for<'a> FnOnce(&'a mut MaybeUninit<Crossing>) -> Option<&'a mut Crossing>,
    ) {
        let staged = match self.links.to.get_mut(w) {
            Some(Some(ring)) => stage(ring, write),
            _ => false,
        };
        if !staged {
            self.cross_drops += 1;
        }
    }

    /// The depths of the ports whose egress this worker shares with others
    /// ([`depth`](quench_node::switch::depth)): `read`, the others' as published, into the queues'
    /// decisions (once per poll, before receiving); else this worker's own are published (what
    /// changed since the last publish; once per poll, after transmitting: a queue that drains
    /// every poll then publishes nothing and its line stays in the readers' caches).
    #[inline]
    fn share_depths(&mut self, read: bool) {
        for (e, op) in self.ports.iter_mut().enumerate() {
            let Some(share) = op.as_mut().and_then(|op| op.depth.as_mut()) else {
                continue;
            };
            let Some(q) = self.core.queue_mut(e) else {
                continue;
            };
            if read {
                let (mut depths, mut admitted) = ([0; units::PRIORITIES], [0; units::PRIORITIES]);
                share.refresh(&mut depths, &mut admitted);
                q.set_others(&depths);
                q.hook_mut().set_others_admitted(&admitted);
            } else {
                let st = q.stats();
                share.publish(|p| st[p].depth_bytes, q.hook().admitted());
            }
        }
    }

    /// Tells every other worker that `mac` is behind `port` ([`Learned`]); a full inbox loses
    /// the notice (that worker learns the address from its next frame, flooding meanwhile).
    fn notify(&self, mac: MacAddr, port: PortIdx, seen_only: bool) {
        for (w, ring) in self.links.learned.iter().enumerate() {
            if w != self.id {
                let _ = ring.push(Learned {
                    mac,
                    port,
                    seen_only,
                });
            }
        }
    }

    /// Publishes what is staged for every other worker.
    fn flush_all(&mut self) {
        for ring in self.links.to.iter_mut().flatten() {
            ring.publish();
        }
    }

    /// One iteration of the loop at time `now`. Returns the number of frames moved (0 = idle).
    pub fn poll(&mut self, now: Instant) -> usize {
        self.share_depths(true);
        let mut work = self.receive(now);
        if let Some(f) = self.fast.as_mut().filter(|f| f.has_dirty()) {
            // Before the next receive: the kernel table follows every learn and move.
            f.sync_dirty(now, &self.fdb);
        }
        self.flush_all();
        work += self.take_crossings(now);
        work += self.transmit(now);
        self.share_depths(false);
        self.flush_all();
        let house = self.housekeeping(now);
        self.gaps.tick(
            now,
            if work > 0 {
                Iteration::Frames
            } else if house {
                Iteration::Housekeeping
            } else {
                Iteration::Idle
            },
        );
        work
    }

    /// When this worker next has work that no received frame announces: the release of a port
    /// whose egress holds frames (its shaper's release time; at once without a shaper), a PFC
    /// timer, and, with other workers, at once (their crossings come on rings the kernel
    /// cannot wait on). `None`: only a frame received can give it work, so its loop may wait
    /// in the kernel ([`quench_port::worker::RxWait`]) for as long as it likes.
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        if !self.links.from.is_empty() {
            return Some(now);
        }
        let egress = self.ports.iter().enumerate().filter_map(|(e, op)| {
            let op = op.as_ref().filter(|op| op.egress)?;
            let queued = self.core.queue(e).is_some_and(|q| !q.is_empty());
            if !queued && op.pending.len() == 0 {
                return None;
            }
            Some(op.pacer.as_ref().map_or(now, |p| p.release_time().max(now)))
        });
        egress.chain(self.core.next_deadline()).min()
    }

    /// The wait handles of every port it polls ([`Port::wait_handle`]).
    pub fn wait_handle(&self) -> Vec<std::os::fd::RawFd> {
        let mut fds = Vec::new();
        for op in self.ports.iter().flatten() {
            op.port.wait_handle(&mut fds);
        }
        fds
    }

    /// 1. Receive, classify, learn, route, enqueue.
    ///
    /// The ports are read in turn from `rx_first`, which moves on by one each poll: a poll
    /// queues each port's burst behind the bursts of the ports read before it, so with a fixed
    /// order the later ports' frames would always meet the queue the earlier ones just grew,
    /// and a congestion point sampling them (QCN's Fb weighs the queue's growth) would hold
    /// the later ports' flows to less. A real switch interleaves its ports' arrivals frame by
    /// frame.
    fn receive(&mut self, now: Instant) -> usize {
        let mut work = 0;
        let n = self.ports.len();
        let first = self.rx_first;
        self.rx_first = if first + 1 >= n { 0 } else { first + 1 };
        for k in 0..n {
            let i = if first + k >= n {
                first + k - n
            } else {
                first + k
            };
            let Some(op) = self.ports[i].as_mut() else {
                continue;
            };
            let mut rx = std::mem::take(&mut self.rx);
            let mut c = RxCounts::default();
            for qi in 0..op.rx_queues.len() {
                let q = op.rx_queues[qi];
                if op.port.rx_burst(q, &mut rx, BURST).is_err() {
                    c.drops += 1;
                }
            }
            while !rx.is_empty() {
                let n = rx.len().min(BURST);
                self.forward_burst(now, i, &mut rx, n, &mut c);
            }
            self.rx = rx;
            work += c.pkts as usize;
            let Some(op) = self.ports[i].as_ref() else {
                continue;
            };
            // Re-borrowed rather than an `Arc` clone held across the burst: the clone's locked
            // increment and decrement cost more than this whole per-port bookkeeping.
            let counters = &op.counters;
            bump(&counters.rx_pkts, c.pkts);
            bump(&counters.rx_bytes, c.bytes);
            bump(&counters.rx_drops, c.drops);
            bump(&counters.flooded, c.flooded);
            bump(&counters.flooded_unicast, c.flooded_unicast);
        }
        work
    }

    /// 2. Frames and learning notices from other workers (bounded); a lone worker has none.
    ///
    /// Crossings are read in place from the ring slots ([`spsc::Burst`](super::spsc::Burst)).
    fn take_crossings(&mut self, now: Instant) -> usize {
        if self.links.from.is_empty() {
            return 0;
        }
        // Out of `self` while its bursts are read, so that each crossing is handled with
        // `&mut self`; put back below (a move of the vector, not of its rings).
        let mut from = std::mem::take(&mut self.links.from);
        let mut room = 4 * BURST;
        let mut work = 0;
        for ring in &mut from {
            let mut burst = ring.read_burst(room);
            room -= burst.len();
            work += burst.len();
            // The frames' buffers were last written on the sending core: their loads are issued
            // `LAND_AHEAD` crossings before a frame is landed, so they overlap with the work on
            // the frames before it.
            for k in 0..LAND_AHEAD {
                prefetch_frame(burst.peek(k));
            }
            while burst.next_with(|c| self.take_crossing(now, c)).is_some() {
                prefetch_frame(burst.peek(LAND_AHEAD - 1));
            }
        }
        self.links.from = from;
        for _ in 0..4 * BURST {
            let Some(n) = self.links.learned[self.id].pop() else {
                break;
            };
            if n.seen_only {
                self.fdb.refresh(now, fdb::key(n.mac), n.port);
            } else if self.fdb.learn(now, n.mac, n.port) {
                if let Some(f) = self.fast.as_mut() {
                    f.learned(fdb::key(n.mac));
                }
            }
        }
        work
    }

    /// One crossing from another worker: a frame for an egress port this worker holds (landed
    /// on the port and queued as a received one), or a PFC frame for one.
    #[inline]
    fn take_crossing(&mut self, now: Instant, c: &mut Crossing) {
        match c.head() {
            Head::Frame {
                egress,
                class,
                l3,
                ingress,
            } => {
                let e = usize::from(egress);
                let landed = match (self.ports.get_mut(e), c.take_frame()) {
                    (Some(Some(op)), Some(frame)) => op.port.land(frame).ok_or(Some(op)),
                    _ => Err(None),
                };
                match landed {
                    Ok(f) => {
                        self.enqueue(now, ingress.map(usize::from), e, class, f, l3);
                    }
                    // No buffer for the copy on this port.
                    Err(Some(op)) => bump(&op.counters.tx_drops, 1),
                    Err(None) => self.cross_drops += 1,
                }
            }
            Head::Pause { port, pdu } => self.pause(now, usize::from(port), &pdu),
            Head::Empty => {}
        }
    }

    /// 3. The core's due timeouts and decisions, then what each port may send.
    fn transmit(&mut self, now: Instant) -> usize {
        // Without PFC no pause is ever received (MAC Control is dropped) nor refreshed.
        if self.core.pfc_on() && self.core.next_deadline().is_some_and(|t| t <= now) {
            self.core.handle_timeout(now);
        }
        let mut work = self.handle_events(now);
        let lone = self.links.from.is_empty();
        for e in 0..self.ports.len() {
            let Some(op) = self.ports[e].as_mut() else {
                continue;
            };
            if !op.egress {
                // Received on only: its receive rings still want refilling.
                let _ = op.port.poll();
                continue;
            }
            let core = &mut self.core;
            let idle = core.queue(e).map_or(true, |q| q.is_empty());
            // A paced port sends what its shaper allows, up to TX_BURSTS bursts: after its
            // worker was away with a backlog, the shaper's credit is the time the port's
            // serializer would have been sending meanwhile, and the rings hold what arrived
            // meanwhile, a burst from each port a poll; one transmit burst a poll left the
            // difference queued at every poll until they were empty.
            let bursts = if lone && op.pacer.is_none() {
                1
            } else {
                TX_BURSTS
            };
            work += transmit(op, now, idle, bursts, || {
                core.poll_transmit(now, e).map(|(_, f)| f.frame)
            });
        }
        work + self.handle_events(now)
    }

    /// 4. Counters and the MAC table. Returns whether any of it was due.
    fn housekeeping(&mut self, now: Instant) -> bool {
        let mut did = false;
        if now - self.last_kernel_drops >= KERNEL_DROPS_EVERY {
            self.last_kernel_drops = now;
            did = true;
            for op in self.ports.iter_mut().flatten() {
                op.counters.publish_kernel_counts(&mut op.port);
            }
            self.publish_fast();
            self.gaps.publish(&self.counters.loops);
        }
        if now - self.last_publish >= PUBLISH_EVERY {
            did = true;
            self.last_publish = now;
            for (e, op) in self.ports.iter().enumerate() {
                let Some(op) = op else { continue };
                if let Some(q) = self.core.queue(e) {
                    op.counters.publish_classes(q.stats());
                }
                if self.core.pfc_on() {
                    op.counters.publish_pfc(&self.core.pfc_counters(e));
                }
            }
            let fc = &self.counters;
            fc.entries.store(self.fdb.len() as u64, Ordering::Relaxed);
            fc.refused.store(self.fdb.stats().full, Ordering::Relaxed);
        }
        if now - self.last_age >= AGE_EVERY {
            self.last_age = now;
            did = true;
            match self.fast.as_mut() {
                Some(f) => {
                    // Hosts seen only by the kernel fast path are refreshed before the sweep (in
                    // every worker's table), and what the sweep removes leaves the kernel table
                    // after it.
                    let hits = f.refresh(now, &mut self.fdb);
                    self.fdb.age(now);
                    f.sync_all(now, &self.fdb);
                    for (k, port) in hits {
                        self.notify(fdb::mac(k), port, true);
                    }
                }
                None => {
                    self.fdb.age(now);
                }
            }
        }
        did
    }

    /// Publishes the kernel fast path's counts into the ports' counters.
    fn publish_fast(&mut self) {
        if let Some(f) = self.fast.as_mut() {
            f.publish();
        }
    }

    /// Forwards the first `n` (at most [`BURST`]) frames of `rx`, received on port `i`, in two
    /// sweeps (DPDK l2fwd style): first every frame's headers are read and its source learned
    /// and destination looked up, in frame order, which groups the burst into runs of
    /// consecutive frames with one destination; then the frames move, in order, a run for one
    /// egress queue at once. Nothing the second sweep does touches the forwarding table, so the
    /// answers are those of frame-by-frame processing; what the split buys is a tight first
    /// loop over headers and one egress decision per run instead of per frame (per-frame
    /// enqueue was a fifth of the loop on bench-dpdk).
    fn forward_burst(
        &mut self,
        now: Instant,
        i: usize,
        rx: &mut Vec<P::Frame>,
        n: usize,
        c: &mut RxCounts,
    ) {
        // Kept in the worker, so a burst allocates nothing.
        let mut runs = std::mem::take(&mut self.runs);
        runs.clear();
        // The open run lives in locals, not in `runs`: counting into the vector's last element
        // made every frame wait for the previous frame's store (a store-to-load chain that was
        // half the first sweep on bench-dpdk).
        let mut run = Run {
            dest: Dest::Drop,
            frames: 0,
            bytes: 0,
        };
        // Set only right after a frame was routed and counted in the open run, so a frame with
        // the same headers belongs to that run too (and has the same IPv4 offset).
        let mut same: Option<SameHeaders> = None;
        let mut l3 = 0;
        for (k, f) in rx[..n].iter().enumerate() {
            let data = f.data();
            let len = data.len() as u64;
            if same.as_ref().is_some_and(|s| s.matches(data)) {
                self.l3[k] = l3;
                run.frames += 1;
                run.bytes += len;
                continue;
            }
            let (dest, again, at) = self.route(now, i, data);
            l3 = at;
            self.l3[k] = l3;
            same = again.and_then(|hl| SameHeaders::new(data, hl));
            if run.frames > 0 && run.dest != dest {
                runs.push(run);
                run.frames = 0;
                run.bytes = 0;
            }
            run.dest = dest;
            run.frames += 1;
            run.bytes += len;
        }
        if run.frames > 0 {
            runs.push(run);
        }
        c.pkts += n as u64;
        c.bytes += runs.iter().map(|r| r.bytes).sum::<u64>();
        // Each run takes its frames from the front of `rx`; `k` is the first one's index.
        let mut k = 0;
        for r in &runs {
            let count = r.frames.min(rx.len());
            match r.dest {
                Dest::Port(e, class) => {
                    self.deliver_run(now, i, e as usize, class, rx, k, count, r.bytes)
                }
                d => {
                    for (j, frame) in rx.drain(..count).enumerate() {
                        self.act(now, i, d, frame, self.l3[k + j], c);
                    }
                }
            }
            k += count;
        }
        self.runs = runs;
    }

    /// Pass one for a frame received on port `i`: classification, learning, lookup. Also
    /// returns the length of the headers that decided it when routing a frame with the same
    /// headers right after this one would change nothing and give the same answer (see
    /// [`SameHeaders`]), and where its IPv4 header starts (0: none).
    #[inline]
    fn route(&mut self, now: Instant, i: usize, data: &[u8]) -> (Dest, Option<usize>, u16) {
        let Some(meta) = classify(data) else {
            return (Dest::Drop, None, 0); // malformed
        };
        if meta.mac_control {
            // Link-local, never forwarded: PFC reads it, otherwise it is dropped.
            let d = if self.core.pfc_on() {
                Dest::MacControl(meta.payload_offset as u16)
            } else {
                Dest::Drop
            };
            return (d, None, 0);
        }
        let port = i as PortIdx;
        if self.fdb.learn_key(now, meta.src, port) {
            if let Some(f) = self.fast.as_mut() {
                f.learned(meta.src);
            }
            self.notify(fdb::mac(meta.src), port, false);
        }
        let d = match self.fdb.lookup_key(now, meta.dst) {
            Lookup::Port(e) if e as usize == i => Dest::Drop, // filtered
            Lookup::Port(e) => Dest::Port(e, meta.class),
            Lookup::Flood => Dest::Flood(meta.class),
        };
        let again = self.fdb.learn_is_noop(now, meta.src, port);
        (d, again.then_some(meta.payload_offset), meta.l3)
    }

    /// A PFC frame received on port `i`: its pauses stop (or resume) `i`'s egress, here or at
    /// the worker holding it.
    fn pause(&mut self, now: Instant, i: usize, pfc: &PfcRepr) {
        if self.core.queue(i).is_none() {
            let w = self.owner.get(i).copied().unwrap_or(self.id);
            let pdu = *pfc;
            self.send_to(w, |slot| {
                Some(Crossing::write_pause(slot, i as PortIdx, pdu))
            });
            return;
        }
        self.core.count_pfc_received(i);
        for p in 0..units::PRIORITIES as u8 {
            if pfc.enabled(usize::from(p)) {
                self.core
                    .handle_pause(now, i, p, pfc.quanta[usize::from(p)]);
            }
        }
    }

    /// Pass two for one frame received on port `i`, routed to `d` (not a port: see
    /// [`deliver_run`](Self::deliver_run)); its IPv4 header starts at `l3`.
    fn act(&mut self, now: Instant, i: usize, d: Dest, frame: P::Frame, l3: u16, c: &mut RxCounts) {
        match d {
            Dest::Drop => c.drops += 1, // freed here
            Dest::MacControl(at) => {
                // A PFC frame stops or resumes this port's egress priorities; legacy 802.3x
                // PAUSE and malformed PDUs change nothing.
                let pdu = frame.data().get(usize::from(at)..).unwrap_or(&[]);
                if let Ok(pfc) = PfcRepr::parse(pdu) {
                    self.pause(now, i, &pfc);
                }
            }
            Dest::Port(e, class) => {
                self.enqueue(now, Some(i), e as usize, class, frame, l3);
            }
            Dest::Flood(class) => {
                c.flooded += 1;
                // A unicast DA floods only while unlearned (individual: I/G bit 0, 802 8.2).
                if frame.data().first().is_some_and(|b| b & 1 == 0) {
                    c.flooded_unicast += 1;
                }
                self.flood(now, i, class, frame, l3);
            }
        }
    }

    /// Queues the first `count` frames of `frames` (`bytes` octets; the first one's IPv4
    /// offset is `self.l3[k]`), removing them, for egress port `e` in `class`: at once when the
    /// whole run may cut through or crosses to the worker holding the egress, else one by one.
    #[allow(clippy::too_many_arguments)]
    fn deliver_run(
        &mut self,
        now: Instant,
        i: usize,
        e: usize,
        class: Class,
        frames: &mut Vec<P::Frame>,
        k: usize,
        count: usize,
        bytes: u64,
    ) {
        match (self.ports.get_mut(e), self.core.queue_mut(e)) {
            (Some(Some(op)), Some(q)) if op.may_cut_through(q, class, count) => {
                op.cut_through_run(q, class, frames, count, bytes);
                return;
            }
            // Another worker holds the egress: the run crosses at once.
            (Some(Some(_)), None) => {
                let l3 = self.l3;
                let run = frames.drain(..count).zip(l3[k..].iter().copied());
                self.cross_run(e, class, Some(i), run);
                return;
            }
            _ => {}
        }
        for (j, frame) in frames.drain(..count).enumerate() {
            self.enqueue(now, Some(i), e, class, frame, self.l3[k + j]);
        }
    }

    /// Copies `frame` to every port but `from`; the last copy is the frame itself.
    fn flood(&mut self, now: Instant, from: usize, class: Class, frame: P::Frame, l3: u16) {
        let n = self.ports.len();
        let Some(last) = (0..n).rev().find(|&e| e != from) else {
            return; // a one-port switch: nowhere to flood; the frame is freed
        };
        for e in (0..n).filter(|&e| e != from && e != last) {
            self.enqueue_copy(now, e, class, frame.data(), l3);
        }
        self.enqueue(now, None, last, class, frame, l3);
    }

    /// Stops: frees every queued and pending frame, publishes final counters.
    pub fn shutdown(&mut self) -> usize {
        let mut freed = 0;
        for (e, op) in self.ports.iter_mut().enumerate() {
            let Some(op) = op else { continue };
            if let Some(q) = self.core.queue(e) {
                op.counters.publish_classes(q.stats());
            }
            op.counters.publish_kernel_counts(&mut op.port);
            freed += op.clear_pending();
            let _ = op.port.poll();
        }
        self.publish_fast();
        self.gaps.publish(&self.counters.loops);
        freed + self.core.clear()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::stats::PortCounters;
    use quench_node::switch::queue::QueueLimits;
    use quench_port::mem::{MemPeer, MemPort};

    const A: MacAddr = MacAddr(2, 0, 0, 0, 0, 0xa);
    const B: MacAddr = MacAddr(2, 0, 0, 0, 0, 0xb);
    const C: MacAddr = MacAddr(2, 0, 0, 0, 0, 0xc);
    const PFC_DST: MacAddr = MacAddr(0x01, 0x80, 0xc2, 0, 0, 1);

    fn frame(dst: MacAddr, src: MacAddr, pcp: Option<u8>, tag: u8) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&dst.octets());
        f.extend_from_slice(&src.octets());
        if let Some(p) = pcp {
            f.extend_from_slice(&[0x81, 0x00, p << 5, 1]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        f.resize(60, tag);
        f
    }

    fn switch(n: usize, rate: Option<units::Rate>) -> (Worker<MemPort>, Vec<MemPeer>) {
        let mut ports = Vec::new();
        let mut peers = Vec::new();
        for i in 0..n {
            let (p, peer) = MemPort::with_peer(&format!("p{i}"));
            ports.push(OwnedPort::new(
                p,
                vec![0],
                QueueLimits::default(),
                if i == n - 1 { rate } else { None },
                Arc::new(PortCounters::default()),
            ));
            peers.push(peer);
        }
        (Worker::single(ports, Duration::from_secs(10)), peers)
    }

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn floods_unknown_then_forwards_learned_intact() {
        let (mut sw, peers) = switch(3, None);
        let f1 = frame(B, A, None, 1);
        peers[0].send(&f1);
        sw.poll(t(1));
        assert_eq!(peers[1].drain(), vec![f1.clone()]);
        assert_eq!(peers[2].drain(), vec![f1]);
        assert!(peers[0].drain().is_empty());
        // B answers: A is known, so only port 0 gets it.
        let f2 = frame(A, B, None, 2);
        peers[1].send(&f2);
        sw.poll(t(2));
        assert_eq!(peers[0].drain(), vec![f2]);
        assert!(peers[2].drain().is_empty());
        // Counted at the port the flooded frame came in on; a group DA floods uncounted.
        let uc = |sw: &Worker<_>, i: usize| {
            let c = &sw.ports[i].as_ref().unwrap().counters;
            (
                c.flooded.load(Ordering::Relaxed),
                c.flooded_unicast.load(Ordering::Relaxed),
            )
        };
        assert_eq!((uc(&sw, 0), uc(&sw, 1)), ((1, 1), (0, 0)));
        peers[1].send(&frame(
            MacAddr(0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
            B,
            None,
            3,
        ));
        sw.poll(t(3));
        assert_eq!(uc(&sw, 1), (1, 0));
    }

    #[test]
    fn learned_entries_age_out() {
        let (mut sw, peers) = switch(3, None);
        peers[0].send(&frame(C, A, None, 1));
        sw.poll(t(1));
        for p in &peers {
            p.drain();
        }
        peers[1].send(&frame(A, B, None, 2));
        sw.poll(t(2));
        assert_eq!(peers[0].drain().len(), 1);
        assert!(peers[2].drain().is_empty());
        // 10 s ageing: at 11.5 s A is gone, so B's next frame floods.
        peers[1].send(&frame(A, B, None, 3));
        sw.poll(t(11_500));
        assert_eq!(peers[0].drain().len(), 1);
        assert_eq!(peers[2].drain().len(), 1);
    }

    #[test]
    fn higher_pcp_leaves_first_under_shaping() {
        // Egress to port 2 at 1 Mbit/s: a 60-octet frame takes 480 us, so frames queue.
        let (mut sw, peers) = switch(3, Some(units::Rate::from_mbps(1)));
        sw.fdb.add_static(C, 2);
        for i in 0..4u8 {
            peers[0].send(&frame(C, A, Some(1), 10 + i));
        }
        for i in 0..4u8 {
            peers[1].send(&frame(C, B, Some(6), 20 + i));
        }
        let mut now = t(1);
        let mut out = Vec::new();
        for _ in 0..50 {
            sw.poll(now);
            out.extend(peers[2].drain());
            now += Duration::from_micros(500);
        }
        let tags: Vec<u8> = out.iter().map(|f| f[59]).collect();
        // The first frame leaves at once (idle credit), then priority 6 drains before 1.
        assert_eq!(tags.len(), 8);
        assert_eq!(&tags[tags.len() - 3..], &[11, 12, 13]);
        let first_low = tags.iter().position(|&t| t < 20 && t != tags[0]).unwrap();
        assert!(
            tags[..first_low].iter().filter(|&&t| t >= 20).count() >= 3,
            "{tags:?}"
        );
    }

    #[test]
    fn malformed_and_mac_control_are_dropped_and_counted() {
        let (mut sw, peers) = switch(2, None);
        peers[0].send(&[1, 2, 3]);
        let mut pause = frame(PFC_DST, A, None, 0);
        pause[12] = 0x88;
        pause[13] = 0x08;
        peers[0].send(&pause);
        sw.poll(t(1));
        assert!(peers[1].drain().is_empty());
        let c = &sw.ports[0].as_ref().unwrap().counters;
        assert_eq!(c.rx_drops.load(Ordering::Relaxed), 2);
        assert_eq!(c.rx_pkts.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_mixed_burst_keeps_each_egress_in_order_with_exact_counters() {
        let (mut sw, peers) = switch(3, None);
        sw.fdb.add_static(B, 1);
        sw.fdb.add_static(C, 2);
        let d = MacAddr(2, 0, 0, 0, 0, 0xd); // unknown: flooded
        let dsts = [B, C, B, B, C, d, B, MacAddr::broadcast()];
        for (k, &dst) in dsts.iter().enumerate() {
            peers[0].send(&frame(dst, A, None, k as u8));
        }
        sw.poll(t(1));
        let tags = |p: &MemPeer| p.drain().iter().map(|f| f[59]).collect::<Vec<_>>();
        assert_eq!(tags(&peers[1]), vec![0, 2, 3, 5, 6, 7]);
        assert_eq!(tags(&peers[2]), vec![1, 4, 5, 7]);
        assert!(peers[0].drain().is_empty());
        let c = &sw.ports[0].as_ref().unwrap().counters;
        assert_eq!(c.rx_pkts.load(Ordering::Relaxed), 8);
        assert_eq!(c.rx_bytes.load(Ordering::Relaxed), 8 * 60);
        assert_eq!(c.flooded.load(Ordering::Relaxed), 2);
        sw.poll(t(2)); // publishes
        for (e, n) in [(1, 6u64), (2, 4)] {
            let out = &sw.ports[e].as_ref().unwrap().counters;
            let q = &out.classes[0];
            assert_eq!(q.enq_pkts.load(Ordering::Relaxed), n);
            assert_eq!(q.deq_bytes.load(Ordering::Relaxed), n * 60);
            assert_eq!(out.tx_pkts.load(Ordering::Relaxed), n);
        }
    }

    #[test]
    fn a_move_within_a_burst_is_seen_by_the_next_frame() {
        let (mut sw, peers) = switch(3, None);
        peers[0].send(&frame(C, A, None, 1));
        peers[1].send(&frame(C, B, None, 2));
        sw.poll(t(1));
        for p in &peers {
            p.drain();
        }
        // One burst on port 0: to B (on port 1); from B, which moves B to port 0 (and is
        // filtered: A is on port 0 too); to B again, now filtered.
        peers[0].send(&frame(B, A, None, 3));
        peers[0].send(&frame(A, B, None, 4));
        peers[0].send(&frame(B, A, None, 5));
        sw.poll(t(2));
        assert_eq!(
            peers[1].drain().iter().map(|f| f[59]).collect::<Vec<_>>(),
            vec![3]
        );
        assert!(peers[2].drain().is_empty());
        let c = &sw.ports[0].as_ref().unwrap().counters;
        assert_eq!(c.rx_drops.load(Ordering::Relaxed), 2);
        assert_eq!(sw.fdb.stats().moved, 1);
    }

    /// A 1 Gbit/s egress (1500-octet frames: 12 us each) fed at its rate by two ports, with a
    /// backlog of 20 frames; the worker is away for 1.2 ms (100 frames of the port's time)
    /// while both ports' frames wait in their receive rings. Returns the egress queue's depth
    /// in frames after each of the first polls after the stop, and the frames sent in all.
    fn after_a_stop() -> (Vec<u64>, usize) {
        const LEN: usize = 1500;
        let (mut sw, peers) = switch(3, Some(units::Rate::from_gbps(1)));
        sw.fdb.add_static(C, 2);
        let big = |src, tag| {
            let mut f = frame(C, src, None, tag);
            f.resize(LEN, tag);
            f
        };
        let start = t(1);
        let mut now = start;
        for i in 0..20u8 {
            peers[0].send(&big(A, i));
        }
        let (mut sent, mut depth) = (0, Vec::new());
        let stop = (t(5), t(5) + Duration::from_micros(1_200));
        let mut next_in = now;
        while now < t(10) {
            // Each port sends a frame every 24 us: 1 Gbit/s together.
            while next_in <= now {
                peers[0].send(&big(A, 1));
                peers[1].send(&big(B, 2));
                next_in += Duration::from_micros(24);
            }
            if !(stop.0..stop.1).contains(&now) {
                sw.poll(now);
                sent += peers[2].drain().len();
                if now >= stop.1 && depth.len() < 4 {
                    let q = sw.core.queue(2).unwrap();
                    depth.push(q.port_bytes() / LEN as u64);
                }
            }
            now += Duration::from_micros(2);
        }
        (depth, sent)
    }

    #[test]
    fn a_paced_port_makes_up_the_time_its_worker_was_away_while_it_held_a_backlog() {
        // A 1 Gbit/s serializer does not stop when the switch's CPU does: the port's shaper
        // kept the 1.2 ms as credit (it held a backlog), and the first poll after the stop reads
        // a burst from each port's ring (64 frames) and sends what the credit allows. One
        // transmit burst per poll left 32 of the 64 queued at each poll until the rings were
        // empty: [50, 54, 22, 18] frames (a stop of a few ms on the testbed grew the 1 Gbit/s
        // port's queue by hundreds of KB and dropped). Now [0, 33, 33, 33]: what the rings
        // still held after the first poll met an empty queue, which keeps a burst's credit,
        // not the stop's (`OwnedPort::on_backlog`: a ring's frames carry no arrival time).
        let (depth, sent) = after_a_stop();
        assert!(depth.iter().all(|&d| d <= 34), "{depth:?}");
        // Never above the port's rate: 9 ms at 1 Gbit/s is 750 frames of 12 us.
        assert!((725..=751).contains(&sent), "{sent}");
    }

    #[test]
    fn a_run_longer_than_the_transmit_burst_room_queues_the_rest_in_order() {
        // Two ingress ports, 20 frames each for port 2 in one poll: the first 20 cut through,
        // 12 more fill the transmit burst, the last 8 wait in the queue behind them.
        let (mut sw, peers) = switch(3, None);
        sw.fdb.add_static(C, 2);
        for k in 0..20u8 {
            peers[0].send(&frame(C, A, None, k));
            peers[1].send(&frame(C, B, None, 100 + k));
        }
        sw.poll(t(1));
        let first = peers[2].drain();
        assert_eq!(first.len(), BURST);
        assert_eq!(sw.core.queue(2).unwrap().stats()[0].depth_pkts, 8);
        sw.poll(t(2));
        let mut tags: Vec<u8> = first.iter().map(|f| f[59]).collect();
        tags.extend(peers[2].drain().iter().map(|f| f[59]));
        let want: Vec<u8> = (0..20).chain(100..120).collect();
        assert_eq!(tags, want);
        let st = sw.core.queue(2).unwrap().stats()[0];
        assert_eq!((st.enq_pkts, st.deq_pkts, st.depth_pkts), (40, 40, 0));
        assert_eq!(st.enq_bytes, 40 * 60);
    }

    #[test]
    fn more_than_a_burst_received_at_once_is_forwarded_in_order() {
        // Two receive queues polled (the same ring twice): 40 frames arrive in one poll and
        // are forwarded a burst at a time; what the transmit burst cannot hold waits queued.
        let (mut sw, peers) = switch(2, None);
        sw.ports[0].as_mut().unwrap().rx_queues = vec![0, 0];
        sw.fdb.add_static(B, 1);
        for k in 0..40u8 {
            peers[0].send(&frame(B, A, None, k));
        }
        sw.poll(t(1));
        sw.poll(t(2));
        let tags: Vec<u8> = peers[1].drain().iter().map(|f| f[59]).collect();
        assert_eq!(tags, (0..40).collect::<Vec<u8>>());
        let c = &sw.ports[1].as_ref().unwrap().counters;
        assert_eq!(c.tx_pkts.load(Ordering::Relaxed), 40);
        assert_eq!(c.tx_bytes.load(Ordering::Relaxed), 40 * 60);
    }

    #[test]
    fn same_headers_cover_exactly_the_header_octets() {
        let f = frame(B, A, None, 1);
        let same = SameHeaders::new(&f, 14).unwrap();
        // Another payload: the same headers.
        assert!(same.matches(&frame(B, A, None, 2)));
        // Any header octet differs: not the same.
        for k in 0..14 {
            let mut g = f.clone();
            g[k] ^= 0x10;
            assert!(!same.matches(&g), "octet {k}");
        }
        // A tagged frame's TCI is part of its headers (18 octets).
        let t3 = frame(B, A, Some(3), 1);
        let tagged = SameHeaders::new(&t3, 18).unwrap();
        assert!(tagged.matches(&frame(B, A, Some(3), 9)));
        assert!(!tagged.matches(&frame(B, A, Some(5), 1)));
        assert!(!tagged.matches(&f));
        // A frame ending inside the words the headers occupy never matches, nor is memoised;
        // headers longer than 32 octets are never memoised.
        assert!(same.matches(&f[..16]));
        assert!(!same.matches(&f[..15]));
        assert!(SameHeaders::new(&f[..15], 14).is_none());
        assert!(tagged.matches(&t3[..32]));
        assert!(!tagged.matches(&t3[..31]));
        assert!(SameHeaders::new(&t3[..31], 18).is_none());
        assert!(SameHeaders::new(&f, 33).is_none());
        let long = SameHeaders::new(&f, 32).unwrap();
        assert!(long.matches(&f));
        let mut g = f.clone();
        g[31] ^= 1;
        assert!(!long.matches(&g));
    }

    #[test]
    fn a_burst_of_one_flow_is_classified_per_frame() {
        // Same addresses throughout; priority, EtherType and the table decide per frame.
        let (mut sw, peers) = switch(3, None);
        sw.fdb.add_static(C, 2);
        let mut pause = frame(PFC_DST, A, None, 0);
        pause[12] = 0x88;
        pause[13] = 0x08;
        let burst = [
            frame(C, A, None, 1),
            frame(C, A, Some(6), 2),
            frame(C, A, Some(6), 3),
            frame(C, A, Some(1), 4),
            pause.clone(),
            pause,
            frame(C, A, None, 5),
            frame(C, A, None, 6),
        ];
        for f in &burst {
            peers[0].send(f);
        }
        sw.poll(t(1));
        let out: Vec<u8> = peers[2].drain().iter().map(|f| f[f.len() - 1]).collect();
        assert_eq!(out, vec![1, 2, 3, 4, 5, 6]);
        let st = sw.core.queue(2).unwrap().stats();
        assert_eq!([st[0].enq_pkts, st[1].enq_pkts, st[6].enq_pkts], [3, 1, 2]);
        let c = &sw.ports[0].as_ref().unwrap().counters;
        assert_eq!(c.rx_drops.load(Ordering::Relaxed), 2); // the PAUSE frames
    }

    #[test]
    fn a_full_table_counts_every_frame_it_cannot_learn() {
        // Learning into a full table is not a no-op (it is counted), so no frame of the burst
        // skips it.
        let (mut sw, peers) = switch(2, None);
        sw.fdb = Fdb::new(Duration::from_secs(10), 1);
        sw.fdb.add_static(B, 1);
        for k in 0..3 {
            peers[0].send(&frame(B, A, None, k));
        }
        sw.poll(t(1));
        assert_eq!(peers[1].drain().len(), 3);
        assert_eq!(sw.fdb.stats().full, 3);
    }

    /// A switch of `n` ports with PFC on priority 3 (static thresholds), the last port's
    /// egress at `rate`.
    fn pfc_switch(n: usize, rate: units::Rate) -> (Worker<MemPort>, Vec<MemPeer>) {
        let (mut sw, peers) = switch(n, Some(rate));
        let params = cp::pfc::PfcParams {
            ports: n as u16,
            lossless_priorities: vec![3],
            threshold: cp::pfc::ThresholdMode::Static,
            xoff_bytes: 600,
            xon_bytes: 300,
            headroom_bytes: 1200,
            link_rate: rate,
            ..Default::default()
        };
        let profile = cp::pfc::PfcProfile::new(&params).unwrap();
        let rates = vec![rate; n];
        sw.set_pfc(profile, &rates, &[]);
        (sw, peers)
    }

    /// (class-enable vector, quanta of priority 3) of a PFC frame, or None.
    fn pfc_of(f: &[u8]) -> Option<(u8, u16)> {
        (f[..6] == [0x01, 0x80, 0xc2, 0, 0, 1] && f[12..16] == [0x88, 0x08, 0x01, 0x01])
            .then(|| (f[17], u16::from_be_bytes([f[18 + 6], f[18 + 7]])))
    }

    #[test]
    fn pfc_pauses_the_ingress_above_xoff_and_resumes_below_xon() {
        // Egress to port 2 at 1 Mbit/s: a 60-octet frame takes 480 us, so frames from port 0
        // wait and count against (port 0, priority 3).
        let (mut sw, peers) = pfc_switch(3, units::Rate::from_mbps(1));
        sw.fdb.add_static(C, 2);
        for k in 0..20u8 {
            peers[0].send(&frame(C, A, Some(3), k));
        }
        sw.poll(t(1));
        // One burst of 60-octet frames is accounted before any leaves: the 11th crosses XOFF
        // (660 > 600) and PAUSEs; the headroom (1200) takes the rest of the 20.
        let up = peers[0].drain();
        let pauses: Vec<_> = up.iter().filter_map(|f| pfc_of(f)).collect();
        assert_eq!(pauses, vec![(1 << 3, cp::pfc::QUANTA_MAX)], "{up:?}");
        assert_eq!(sw.core.pfc_counters(0).sent, 1);
        assert_eq!(sw.core.pfc_counters(0).headroom_drops, 0);
        assert!(sw.core.held(0, 3) > 600);
        // Draining below XON (300 octets: 5 frames) sends the resume (quanta 0), once.
        let mut now = t(1);
        let mut resumes = Vec::new();
        for _ in 0..60 {
            now += Duration::from_micros(500);
            sw.poll(now);
            resumes.extend(peers[0].drain().iter().filter_map(|f| pfc_of(f)));
        }
        assert_eq!(resumes, vec![(1 << 3, 0)]);
        assert_eq!(sw.core.held(0, 3), 0);
        // Every data frame arrived, none lost.
        assert_eq!(peers[2].drain().len(), 20);
    }

    #[test]
    fn pfc_headroom_overflow_is_the_only_loss_and_is_counted() {
        let (mut sw, peers) = pfc_switch(3, units::Rate::from_mbps(1));
        sw.fdb.add_static(C, 2);
        // One burst (32 frames) at once: XOFF 600 + headroom 1200 hold 30; 2 are dropped.
        for k in 0..BURST as u8 {
            peers[0].send(&frame(C, A, Some(3), k));
        }
        sw.poll(t(1));
        let c = sw.core.pfc_counters(0);
        assert_eq!(c.headroom_drops, 2);
        // A lossy priority is not accounted and not paused.
        peers[1].send(&frame(C, B, Some(1), 99));
        sw.poll(t(1));
        assert_eq!(sw.core.held(1, 1), 0);
    }

    #[test]
    fn a_received_pause_stops_that_priority_until_its_quanta_run_out() {
        // 1 Mbit/s: one quantum is 512 us; 4 quanta pause priority 3 for 2.048 ms.
        let (mut sw, peers) = pfc_switch(3, units::Rate::from_mbps(1));
        sw.fdb.add_static(C, 2);
        let mut pause = vec![0u8; 60];
        let src = quench_wire::MacAddr::new(2, 0, 0, 0, 0, 0xc);
        let pdu = quench_wire::pfc::PfcRepr::pause(1 << 3, 4);
        quench_wire::pfc::emit_frame(src, &pdu, &mut pause).unwrap();
        peers[2].send(&pause);
        sw.poll(t(1));
        assert!(sw.core.queue(2).unwrap().is_paused(3));
        peers[0].send(&frame(C, A, Some(3), 1));
        peers[0].send(&frame(C, A, Some(5), 2));
        sw.poll(t(1) + Duration::from_micros(1));
        // Priority 5 is not paused; 3 waits.
        let out = peers[2].drain();
        assert_eq!(out.iter().map(|f| f[59]).collect::<Vec<_>>(), vec![2]);
        sw.poll(t(1) + Duration::from_micros(2047));
        assert!(peers[2].drain().is_empty());
        sw.poll(t(1) + Duration::from_micros(2048));
        assert_eq!(
            peers[2].drain().iter().map(|f| f[59]).collect::<Vec<_>>(),
            vec![1]
        );
        assert!(!sw.core.queue(2).unwrap().is_paused(3));
        // A resume (quanta 0) ends a pause at once.
        quench_wire::pfc::emit_frame(
            src,
            &quench_wire::pfc::PfcRepr::pause(1 << 3, 0xFFFF),
            &mut pause,
        )
        .unwrap();
        peers[2].send(&pause);
        sw.poll(t(10));
        assert!(sw.core.queue(2).unwrap().is_paused(3));
        quench_wire::pfc::emit_frame(src, &quench_wire::pfc::PfcRepr::resume(1 << 3), &mut pause)
            .unwrap();
        peers[2].send(&pause);
        sw.poll(t(11));
        assert!(!sw.core.queue(2).unwrap().is_paused(3));
        assert_eq!(sw.core.pfc_counters(2).received, 3);
    }

    /// A host on port 2 sends frames from 1,000 distinct forged source MACs: the table stays at
    /// its capacity, the static entry and the entries learned before the flood stay, known
    /// flows stay unicast, and every frame whose source could not be learned is counted.
    #[test]
    fn a_source_mac_flood_fills_the_table_only_to_its_bound() {
        let (mut sw, peers) = switch(3, None);
        sw.fdb = Fdb::new(Duration::from_secs(10), 64);
        sw.fdb.add_static(C, 2);
        peers[0].send(&frame(B, A, None, 1));
        peers[1].send(&frame(A, B, None, 2));
        sw.poll(t(1));
        for p in &peers {
            p.drain();
        }
        let forged = 1_000u32;
        let mut now = t(2);
        for k in 0..forged {
            let [_, _, hi, lo] = k.to_be_bytes();
            peers[2].send(&frame(A, MacAddr(2, 0xee, 0, 0, hi, lo), None, 3));
            if k % 16 == 15 {
                // Known flows between the forged bursts: each must reach only its port.
                peers[0].send(&frame(B, A, None, 4));
                peers[1].send(&frame(A, B, None, 5));
                peers[0].send(&frame(C, A, None, 6));
                now += Duration::from_micros(10);
                sw.poll(now);
                let to_b = peers[1].drain();
                assert_eq!(to_b.iter().map(|f| f[59]).collect::<Vec<_>>(), vec![4]);
                let to_c = peers[2].drain();
                assert_eq!(to_c.iter().map(|f| f[59]).collect::<Vec<_>>(), vec![6]);
                // Port 0 (A) gets the forged frames and B's, never a flood of its own.
                assert!(peers[0].drain().iter().all(|f| f[59] == 3 || f[59] == 5));
            }
        }
        sw.poll(now + Duration::from_micros(10));
        // C (static), A and B, and forged sources up to the capacity.
        assert_eq!(sw.fdb.len(), 64);
        let s = sw.fdb.stats();
        assert_eq!(s.learned, 2 + 61);
        assert_eq!(s.full, u64::from(forged) - 61);
        assert_eq!(sw.fdb.lookup(now, C), Lookup::Port(2));
        assert_eq!(sw.fdb.lookup(now, A), Lookup::Port(0));
        assert_eq!(sw.fdb.lookup(now, B), Lookup::Port(1));
        // Published for the control plane (`quench stats`: fdb_refused).
        sw.poll(now + PUBLISH_EVERY + PUBLISH_EVERY);
        assert_eq!(sw.counters.refused.load(Ordering::Relaxed), s.full);
        assert_eq!(sw.counters.entries.load(Ordering::Relaxed), 64);
    }

    /// A host on port 2 sends 4,000 PFC frames pausing priority 3 for the longest time: only
    /// (port 2, priority 3) stops, its waiting frames are bounded by the ingress's XOFF and
    /// headroom (the overflow dropped and counted), other priorities to port 2 and every
    /// other port keep flowing, and every PFC frame is counted.
    #[test]
    fn a_pause_storm_stops_only_its_port_and_priority_and_is_counted() {
        let (mut sw, peers) = pfc_switch(3, units::Rate::from_gbps(1));
        sw.fdb.add_static(A, 0);
        sw.fdb.add_static(B, 1);
        sw.fdb.add_static(C, 2);
        let mut pause = vec![0u8; 60];
        let pdu = quench_wire::pfc::PfcRepr::pause(1 << 3, cp::pfc::QUANTA_MAX);
        quench_wire::pfc::emit_frame(C, &pdu, &mut pause).unwrap();
        let storm = 4_000u32;
        let mut now = t(1);
        let (mut to_b, mut to_c5, mut to_a) = (0, 0, 0);
        for k in 0..storm {
            peers[2].send(&pause);
            if k % 8 == 7 {
                peers[0].send(&frame(C, A, Some(3), 1)); // stuck behind the storm
                peers[0].send(&frame(C, A, Some(5), 2)); // another priority
                peers[1].send(&frame(A, B, Some(3), 3)); // another port, same priority
                peers[2].send(&frame(B, C, Some(3), 4)); // from the storming host itself
                now += Duration::from_micros(20);
                sw.poll(now);
                to_c5 += peers[2].drain().iter().filter(|f| f[59] == 2).count();
                to_a += peers[0].drain().iter().filter(|f| f[59] == 3).count();
                to_b += peers[1].drain().iter().filter(|f| f[59] == 4).count();
                assert!(sw.core.held(0, 3) <= 600 + 1200, "{}", sw.core.held(0, 3));
            }
        }
        let rounds = (storm / 8) as usize;
        assert_eq!((to_c5, to_a, to_b), (rounds, rounds, rounds));
        let q = sw.core.queue(2).unwrap();
        assert!(q.is_paused(3));
        assert!((0..8).filter(|&p| p != 3).all(|p| !q.is_paused(p)));
        assert!((0..2).all(|p| (0..8).all(|pr| !sw.core.queue(p).unwrap().is_paused(pr))));
        // Nothing of priority 3 left for port 2; what did not fit was dropped and counted.
        assert_eq!(q.stats()[3].deq_pkts, 0);
        let c = sw.core.pfc_counters(2);
        assert_eq!(c.received, u64::from(storm));
        let held = q.stats()[3].depth_pkts;
        let dropped = sw.core.pfc_counters(0).headroom_drops + q.stats()[3].drop_pkts;
        assert_eq!(held + dropped, rounds as u64);
        assert!(dropped > 0);
    }
}
