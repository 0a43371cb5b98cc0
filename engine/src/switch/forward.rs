//! One worker's share of the switch: the run-to-completion loop body (DPDK l2fwd style).
//!
//! A [`Worker`] owns some of the switch's ports (every device queue it polls, and the egress
//! queues of those ports). One call to [`Worker::poll`] does bounded work:
//! 1. receive at most [`BURST`] frames per owned port queue; classify each (wire::ethernet::walk),
//!    learn its source, look up its destination, and queue it on the egress port (flooding
//!    copies it to every other port). A frame for a port another worker owns is copied into a
//!    `Send` heap frame and crosses on that worker's lock-free ring;
//! 2. take at most `BURST x 4` frames from its own inbound ring and learning notices;
//! 3. per owned port, dequeue what the pacer allows (at most [`BURST`]) and transmit;
//! 4. about every millisecond, publish counters; every second, age the MAC table.
//!
//! Every frame is forwarded or freed exactly once: frames are owned handles, and each path
//! either moves one into a queue / a transmit burst / a ring or drops it (freeing it) with a
//! counter.
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use units::{Duration, Instant};

use super::cp::CpHook;
use super::fdb::{self, Fdb, Lookup, PortIdx, DEFAULT_CAPACITY};
use super::pfc::{PauseChange, SwitchPfc};
use super::queue::{Class, EgressQueue, Pacer, QueueLimits};
use super::stats::{bump, PortCounters};
use crate::port::heap::HeapFrame;
use crate::port::{Frame, Port, BURST, MAX_FRAME};
use crate::wire::ethernet::{ethertype, walk};
use crate::wire::MacAddr;

/// A frame crossing to the worker that owns its egress port.
pub type Crossing = (PortIdx, Class, HeapFrame);
/// A learning notice for the other workers: this MAC is behind this port.
pub type Learned = (MacAddr, PortIdx);

/// Frames a cross-core ring holds (power of two).
pub const CROSS_RING: usize = 4096;

/// Links between workers: worker `w` pops `frames[w]` and `learned[w]`; everyone pushes.
pub struct Rings {
    pub frames: Vec<Arc<ArrayQueue<Crossing>>>,
    pub learned: Vec<Arc<ArrayQueue<Learned>>>,
}

impl Rings {
    pub fn new(workers: usize) -> Rings {
        Rings {
            frames: (0..workers)
                .map(|_| Arc::new(ArrayQueue::new(CROSS_RING)))
                .collect(),
            learned: (0..workers)
                .map(|_| Arc::new(ArrayQueue::new(CROSS_RING)))
                .collect(),
        }
    }
}

impl Clone for Rings {
    fn clone(&self) -> Self {
        Rings {
            frames: self.frames.clone(),
            learned: self.learned.clone(),
        }
    }
}

/// One owned port.
pub struct OwnedPort<P: Port> {
    pub port: P,
    /// Device queues this worker polls on it.
    pub rx_queues: Vec<u16>,
    /// Egress queues with the port's congestion point (`CpHook::default()`: none).
    pub egress: EgressQueue<P::Frame, CpHook>,
    pub pacer: Option<Pacer>,
    pub counters: Arc<PortCounters>,
    /// Frames for the device: cut through or dequeued, and those it has not accepted yet (ring
    /// full), which go first next time.
    pending: TxBurst<P::Frame>,
    /// Frames may skip an idle egress queue (off with PFC, whose accounting sees every
    /// dequeue; see `EgressQueue::pass_through`).
    pub cut_through: bool,
}

impl<P: Port> OwnedPort<P> {
    /// Queues a frame for egress in `class`. While the egress queue is idle and the pending
    /// transmit burst has room, it skips the queue (cut-through). A frame arriving at an empty
    /// queue starts a backlog: the pacer forgets idle credit beyond its burst then (not
    /// earlier, so a worker that was away while frames waited in the receive ring does not
    /// release them as a catch-up burst). Returns whether the frame was passed or queued (a
    /// refused frame is dropped here, freed; the queue counted it).
    pub fn enqueue(&mut self, now: Instant, class: Class, frame: P::Frame) -> bool {
        if self.may_cut_through(class, 1) {
            let len = frame.len() as u32;
            self.egress.count_passed(class, 1, u64::from(len));
            self.pending.push(frame, len);
            return true;
        }
        if self.egress.is_empty() {
            if let Some(p) = &mut self.pacer {
                p.on_idle(now);
            }
        }
        matches!(
            self.egress.enqueue(now, class, frame),
            crate::switch::queue::Enqueued::Queued
        )
    }

    /// Whether `frames` frames of `class` may skip the egress queue now.
    fn may_cut_through(&self, class: Class, frames: usize) -> bool {
        self.cut_through
            && self.pacer.is_none()
            && self.pending.len() + frames <= BURST
            && self.egress.may_pass(class)
    }

    /// Queues the first `count` frames of `frames` (`bytes` octets in all), removing them, as
    /// [`enqueue`](Self::enqueue) would one by one. Returns how many were passed or queued.
    /// When the whole run may cut through it moves at once; when it is all of `frames` and
    /// nothing is pending, the two vectors are swapped (no per-frame move at all).
    pub fn enqueue_run(
        &mut self,
        now: Instant,
        class: Class,
        frames: &mut Vec<P::Frame>,
        count: usize,
        bytes: u64,
    ) -> usize {
        let count = count.min(frames.len());
        if !self.may_cut_through(class, count) {
            // Partly or not at all: frame by frame, which decides it for each.
            let mut queued = 0;
            for frame in frames.drain(..count) {
                queued += usize::from(self.enqueue(now, class, frame));
            }
            return queued;
        }
        if self.pending.frames.is_empty() && count == frames.len() {
            std::mem::swap(&mut self.pending.frames, frames);
        } else {
            self.pending.frames.extend(frames.drain(..count));
        }
        self.pending.bytes += bytes;
        self.egress.count_passed(class, count as u64, bytes);
        count
    }

    pub fn new(
        port: P,
        rx_queues: Vec<u16>,
        limits: QueueLimits,
        rate: Option<units::Rate>,
        counters: Arc<PortCounters>,
    ) -> Self {
        OwnedPort {
            port,
            rx_queues,
            egress: EgressQueue::with_hook(limits, CpHook::default()),
            pacer: rate.map(|r| Pacer::new(r, Pacer::default_burst(r, MAX_FRAME as u64))),
            counters,
            pending: TxBurst {
                frames: Vec::with_capacity(BURST),
                bytes: 0,
            },
            cut_through: true,
        }
    }
}

/// Frames to transmit, with the sum of their lengths kept as they are added, so counting the
/// octets sent reads no frame (reading each sent frame's length again was a tenth of the
/// forwarding loop on bench-dpdk).
struct TxBurst<F> {
    frames: Vec<F>,
    bytes: u64,
}

impl<F: Frame> TxBurst<F> {
    fn len(&self) -> usize {
        self.frames.len()
    }

    fn push(&mut self, frame: F, len: u32) {
        self.frames.push(frame);
        self.bytes += u64::from(len);
    }

    /// Frees every frame; returns how many there were.
    fn clear(&mut self) -> usize {
        let n = self.frames.len();
        self.frames.clear();
        self.bytes = 0;
        n
    }

    /// Hands the frames to transmit queue 0 of `port`; those it does not take stay, in order.
    /// Returns the frames and octets sent, or on a device error the frames freed.
    fn send<P: Port<Frame = F>>(&mut self, port: &mut P) -> Result<(usize, u64), usize> {
        match port.tx_burst(0, &mut self.frames) {
            Ok(n) => {
                let left: u64 = self.frames.iter().map(|f| f.len() as u64).sum();
                let sent = self.bytes - left;
                self.bytes = left;
                Ok((n, sent))
            }
            Err(_) => Err(self.clear()),
        }
    }
}

/// What classification found out about a frame.
struct Meta {
    /// Destination and source addresses as forwarding-table keys ([`fdb::key`]).
    dst: u64,
    src: u64,
    class: Class,
    /// MAC control (PAUSE/PFC) is link-local: consumed, never forwarded.
    mac_control: bool,
    /// Where the payload after the final EtherType starts.
    payload_offset: usize,
}

/// Reads what the switch needs from a frame's L2 headers; `None` for a malformed frame.
#[inline]
fn classify(frame: &[u8]) -> Option<Meta> {
    let l2 = walk(frame).ok()?;
    let (dst, src) = fdb::header_keys(frame.get(..12)?.try_into().ok()?);
    // CNMs travel back to the reaction point ahead of data, like the frames the switch
    // originates: strict priority (issue 4: "control frames strict priority").
    let class = if l2.ethertype == ethertype::CNM {
        Class::Control
    } else {
        Class::from_pcp(l2.priority())
    };
    Some(Meta {
        dst,
        src,
        class,
        mac_control: l2.ethertype == ethertype::MAC_CONTROL,
        payload_offset: l2.payload_offset,
    })
}

/// Where a received frame goes, decided before any frame of its burst moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dest {
    /// Malformed, filtered (its egress is its ingress) or MAC control without PFC: freed, and
    /// counted as a receive drop.
    Drop,
    /// MAC control with PFC on: consumed by PFC; its PDU starts at this offset.
    MacControl(u16),
    /// Known unicast to this port.
    Port(PortIdx, Class),
    /// Group or unknown destination: to every other port.
    Flood(Class),
}

/// The L2 headers of the frame just routed, when routing a frame with the same headers next
/// would change nothing and give the same destination: classification reads nothing beyond
/// them, learning its source is a no-op (the FDB's learn memo covers it) and so the table, and
/// with it the lookup, is as it was. Frames of a flow arrive back to back, so most frames of a
/// burst are routed by comparing their first 32 octets, masked to the header length, with
/// these, instead of walking the headers and consulting the table (that was two thirds of the
/// first pass on bench-dpdk).
struct SameHeaders {
    words: [u128; 2],
    masks: [u128; 2],
}

impl SameHeaders {
    /// The octets `16 * w .. 16 * (w + 1)` of a frame, if it has them.
    #[inline]
    fn word(data: &[u8], w: usize) -> Option<u128> {
        let chunk = data.get(16 * w..)?.first_chunk::<16>()?;
        Some(u128::from_le_bytes(*chunk))
    }

    /// `data`'s first `len` octets; `None` if they do not fit in 32 octets (every header stack
    /// `walk` accepts fits) or the frame ends inside the words they occupy.
    fn new(data: &[u8], len: usize) -> Option<SameHeaders> {
        if len > 32 {
            return None;
        }
        // Little-endian: octet k of a word is bits 8k..8k+8.
        let mask = |from: usize| match len.saturating_sub(from) {
            0 => 0,
            k if k >= 16 => u128::MAX,
            k => (1u128 << (8 * k)) - 1,
        };
        let masks = [mask(0), mask(16)];
        let second = if masks[1] == 0 {
            0
        } else {
            Self::word(data, 1)? & masks[1]
        };
        Some(SameHeaders {
            words: [Self::word(data, 0)? & masks[0], second],
            masks,
        })
    }

    /// Whether `data` starts with the same headers. Untagged headers (14 octets) take one
    /// 16-octet compare; the second word is read only for longer stacks.
    #[inline]
    fn matches(&self, data: &[u8]) -> bool {
        let first = Self::word(data, 0).is_some_and(|w| w & self.masks[0] == self.words[0]);
        first
            && (self.masks[1] == 0
                || Self::word(data, 1).is_some_and(|w| w & self.masks[1] == self.words[1]))
    }
}

/// Consecutive frames of a burst with one destination.
#[derive(Clone, Copy)]
struct Run {
    dest: Dest,
    frames: usize,
    bytes: u64,
}

/// Receive-side counts of one port, added to its counters once per poll.
#[derive(Default)]
struct RxCounts {
    pkts: u64,
    bytes: u64,
    drops: u64,
    flooded: u64,
}

/// A worker's state. See the module docs.
pub struct Worker<P: Port> {
    pub id: usize,
    /// Indexed by global port index; `None` for ports other workers own.
    pub ports: Vec<Option<OwnedPort<P>>>,
    /// Owning worker of each global port.
    owner: Vec<usize>,
    rings: Rings,
    pub fdb: Fdb,
    rx: Vec<P::Frame>,
    /// Scratch of `forward_burst`: the runs of one burst.
    runs: Vec<Run>,
    last_publish: Instant,
    last_kernel_drops: Instant,
    last_age: Instant,
    fdb_entries: Arc<std::sync::atomic::AtomicU64>,
    /// Frames lost crossing to another worker (its ring full).
    pub cross_drops: u64,
    /// PFC generation and honouring (single-worker switches only; see `switch::pfc`); set
    /// with [`Worker::set_pfc`].
    pfc: Option<SwitchPfc>,
    /// Scratch: data priorities dequeued by one `transmit`, and pause changes to apply.
    dequeued: Vec<u8>,
    changes: Vec<PauseChange>,
}

/// How often counters are published and the MAC table swept.
const PUBLISH_EVERY: Duration = Duration::from_millis(1);
/// How often the ports' kernel drop counts are read (a system call per port and queue).
const KERNEL_DROPS_EVERY: Duration = Duration::from_millis(100);
const AGE_EVERY: Duration = Duration::from_secs(1);

impl<P: Port> Worker<P> {
    pub fn new(
        id: usize,
        ports: Vec<Option<OwnedPort<P>>>,
        owner: Vec<usize>,
        rings: Rings,
        fdb: Fdb,
        fdb_entries: Arc<std::sync::atomic::AtomicU64>,
    ) -> Self {
        Worker {
            id,
            ports,
            owner,
            rings,
            fdb,
            rx: Vec::with_capacity(BURST),
            runs: Vec::with_capacity(BURST),
            last_publish: Instant::ZERO,
            last_kernel_drops: Instant::ZERO,
            last_age: Instant::ZERO,
            fdb_entries,
            cross_drops: 0,
            pfc: None,
            dequeued: Vec::with_capacity(BURST),
            changes: Vec::new(),
        }
    }

    /// A worker owning every port (the single-worker switch, and tests).
    pub fn single(ports: Vec<OwnedPort<P>>, ageing: Duration) -> Self {
        let n = ports.len();
        Worker::new(
            0,
            ports.into_iter().map(Some).collect(),
            vec![0; n],
            Rings::new(1),
            Fdb::new(ageing, DEFAULT_CAPACITY),
            Arc::new(Default::default()),
        )
    }

    /// Turns PFC on: every lossless frame must then go through the queues (its octets return to
    /// the ingress account when it is dequeued), so cut-through is off.
    pub fn set_pfc(&mut self, pfc: SwitchPfc) {
        for op in self.ports.iter_mut().flatten() {
            op.cut_through = false;
        }
        self.pfc = Some(pfc);
    }

    /// Queues `frame` for egress port `e` (local queue or the owner's ring). Returns whether
    /// it was queued here.
    fn deliver(&mut self, now: Instant, e: usize, class: Class, frame: P::Frame) -> bool {
        match self.ports.get_mut(e) {
            Some(Some(op)) => op.enqueue(now, class, frame),
            Some(None) => {
                self.cross(e, class, frame.data());
                false
            }
            None => false,
        }
    }

    /// Applies pause changes (received PAUSE frames, expiries) to the egress queues and their
    /// congestion points (TCD's ON/OFF periods).
    fn apply_pauses(&mut self, now: Instant) {
        for c in std::mem::take(&mut self.changes) {
            if let Some(Some(op)) = self.ports.get_mut(c.port) {
                op.egress.set_paused(c.prio, c.paused);
                if c.paused {
                    op.egress.hook_mut().on_pause(now, c.prio);
                } else {
                    op.egress.hook_mut().on_resume(now, c.prio);
                }
            }
        }
    }

    /// Queues the PAUSE frames PFC decided, in the control class of their ports.
    fn send_pauses(&mut self, now: Instant) {
        let Some(pfc) = self.pfc.as_mut() else { return };
        for (port, bytes) in pfc.take_frames() {
            if let Some(Some(op)) = self.ports.get_mut(port) {
                match op.port.import(&bytes) {
                    Some(f) => {
                        op.enqueue(now, Class::Control, f);
                    }
                    None => bump(&op.counters.tx_drops, 1),
                }
            }
        }
    }

    /// Copies a frame onto the ring of the worker owning port `e`.
    fn cross(&mut self, e: usize, class: Class, data: &[u8]) {
        let ok = match (HeapFrame::copy_of(data), self.owner.get(e)) {
            (Some(h), Some(&w)) => self.rings.frames[w].push((e as PortIdx, class, h)).is_ok(),
            _ => false,
        };
        if !ok {
            // The owner's counters belong to the owner (single writer): count it here.
            self.cross_drops += 1;
        }
    }

    /// One iteration of the loop at time `now`. Returns the number of frames moved (0 = idle).
    pub fn poll(&mut self, now: Instant) -> usize {
        let mut work = 0;
        let nports = self.ports.len();
        // 1. Receive, classify, learn, forward.
        for i in 0..nports {
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
        }
        // 2. Frames and learning notices from other workers (bounded); a lone worker has none.
        let alone = self.rings.frames.len() == 1;
        for _ in 0..if alone { 0 } else { 4 * BURST } {
            let Some((e, class, h)) = self.rings.frames[self.id].pop() else {
                break;
            };
            if let Some(Some(op)) = self.ports.get_mut(e as usize) {
                match op.port.import(h.data()) {
                    Some(f) => {
                        op.enqueue(now, class, f);
                    }
                    None => bump(&op.counters.tx_drops, 1),
                }
            }
            work += 1;
        }
        for _ in 0..if alone { 0 } else { 4 * BURST } {
            let Some((mac, port)) = self.rings.learned[self.id].pop() else {
                break;
            };
            self.fdb.learn(now, mac, port);
        }
        // 3. PFC: pauses that ran out, refreshes, and the PAUSE frames decided so far; then
        // transmit what the pacers allow, returning dequeued lossless octets to their ingress.
        if let Some(pfc) = self.pfc.as_mut() {
            pfc.on_timeout(now, &mut self.changes);
            if !self.changes.is_empty() {
                self.apply_pauses(now);
            }
        }
        self.send_pauses(now);
        for e in 0..nports {
            let Some(op) = self.ports[e].as_mut() else {
                continue;
            };
            let mut dq = std::mem::take(&mut self.dequeued);
            work += transmit(op, now, self.pfc.is_some().then_some(&mut dq));
            if let Some(pfc) = self.pfc.as_mut() {
                for &prio in &dq {
                    pfc.dequeued(now, e, prio);
                }
            }
            dq.clear();
            self.dequeued = dq;
        }
        self.send_pauses(now);
        // 3b. Frames the congestion points made (CNMs) go out like received frames, toward
        // their DA, in the strict-priority control class.
        for i in 0..nports {
            let Some(op) = self.ports[i].as_mut() else {
                continue;
            };
            if !op.egress.hook().has_control() {
                continue;
            }
            let made: Vec<Vec<u8>> = op.egress.hook_mut().take_control().collect();
            for bytes in made {
                let dst = fdb::header_keys(bytes[..12].try_into().unwrap_or(&[0; 12])).0;
                if let Lookup::Port(e) = self.fdb.lookup_key(now, dst) {
                    match self.ports.get_mut(e as usize) {
                        Some(Some(op)) => match op.port.import(&bytes) {
                            Some(f) => drop(op.egress.enqueue(now, Class::Control, f)),
                            None => bump(&op.counters.tx_drops, 1),
                        },
                        Some(None) => self.cross(e as usize, Class::Control, &bytes),
                        None => {}
                    }
                    work += 1;
                }
            }
        }
        // 4. Housekeeping.
        if now - self.last_kernel_drops >= KERNEL_DROPS_EVERY {
            self.last_kernel_drops = now;
            for op in self.ports.iter_mut().flatten() {
                op.counters.publish_kernel_counts(&mut op.port);
            }
        }
        if now - self.last_publish >= PUBLISH_EVERY {
            self.last_publish = now;
            for (e, op) in self.ports.iter().enumerate() {
                let Some(op) = op else { continue };
                op.counters.publish_classes(op.egress.stats());
                if let Some(c) = self.pfc.as_ref().and_then(|p| p.counters.get(e)) {
                    op.counters.publish_pfc(c);
                }
            }
            self.fdb_entries
                .store(self.fdb.len() as u64, Ordering::Relaxed);
        }
        if now - self.last_age >= AGE_EVERY {
            self.last_age = now;
            self.fdb.age(now);
        }
        work
    }

    /// Forwards the first `n` (at most [`BURST`]) frames of `rx`, received on port `i`, in two
    /// passes (DPDK l2fwd style): first every frame's headers are read and its source learned
    /// and destination looked up, in frame order, which groups the burst into runs of
    /// consecutive frames with one destination; then the frames move, in order, a run for one
    /// egress queue at once. Nothing the second pass does touches the forwarding table, so the
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
        // half the first pass on bench-dpdk).
        let mut run = Run {
            dest: Dest::Drop,
            frames: 0,
            bytes: 0,
        };
        // Set only right after a frame was routed and counted in the open run, so a frame with
        // the same headers belongs to that run too.
        let mut same: Option<SameHeaders> = None;
        for f in &rx[..n] {
            let data = f.data();
            let len = data.len() as u64;
            if same.as_ref().is_some_and(|s| s.matches(data)) {
                run.frames += 1;
                run.bytes += len;
                continue;
            }
            let (dest, again) = self.route(now, i, data);
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
        // Each run takes its frames from the front of `rx`.
        for r in &runs {
            match r.dest {
                Dest::Port(e, class) if !self.is_lossless(class) => {
                    self.deliver_run(now, e as usize, class, rx, r.frames, r.bytes);
                }
                d => {
                    for frame in rx.drain(..r.frames.min(rx.len())) {
                        self.act(now, i, d, frame, c);
                    }
                }
            }
        }
        self.runs = runs;
    }

    /// Pass one for a frame received on port `i`: classification, learning, lookup. Also
    /// returns the length of the headers that decided it when routing a frame with the same
    /// headers right after this one would change nothing and give the same answer (see
    /// [`SameHeaders`]).
    #[inline]
    fn route(&mut self, now: Instant, i: usize, data: &[u8]) -> (Dest, Option<usize>) {
        let Some(meta) = classify(data) else {
            return (Dest::Drop, None); // malformed
        };
        if meta.mac_control {
            // Link-local, never forwarded: PFC reads it, otherwise it is dropped.
            let d = match self.pfc {
                Some(_) => Dest::MacControl(meta.payload_offset as u16),
                None => Dest::Drop,
            };
            return (d, None);
        }
        let port = i as PortIdx;
        if self.fdb.learn_key(now, meta.src, port) {
            for (w, ring) in self.rings.learned.iter().enumerate() {
                if w != self.id {
                    let _ = ring.push((fdb::mac(meta.src), port));
                }
            }
        }
        let d = match self.fdb.lookup_key(now, meta.dst) {
            Lookup::Port(e) if e as usize == i => Dest::Drop, // filtered
            Lookup::Port(e) => Dest::Port(e, meta.class),
            Lookup::Flood => Dest::Flood(meta.class),
        };
        let again = self.fdb.learn_is_noop(now, meta.src, port);
        (d, again.then_some(meta.payload_offset))
    }

    /// Whether frames of `class` are PFC-accounted one by one.
    fn is_lossless(&self, class: Class) -> bool {
        match (&self.pfc, class) {
            (Some(pfc), Class::Data(p)) => pfc.is_lossless(p),
            _ => false,
        }
    }

    /// Pass two for one frame received on port `i`, routed to `d`, unless it is part of a run
    /// ([`deliver_run`](Self::deliver_run)).
    fn act(&mut self, now: Instant, i: usize, d: Dest, frame: P::Frame, c: &mut RxCounts) {
        match d {
            Dest::Drop => c.drops += 1, // freed here
            Dest::MacControl(at) => {
                // A PFC frame stops or resumes this port's egress priorities.
                if let Some(pfc) = self.pfc.as_mut() {
                    let pdu = frame.data().get(usize::from(at)..).unwrap_or(&[]);
                    let ch = pfc.on_mac_control(now, i, pdu);
                    self.changes.extend(ch);
                    self.apply_pauses(now);
                }
            }
            Dest::Port(e, class) => {
                let Class::Data(prio) = class else {
                    self.deliver(now, e as usize, class, frame);
                    return;
                };
                if !self.is_lossless(class) {
                    self.deliver(now, e as usize, class, frame);
                    return;
                }
                let len = frame.len() as u32;
                if let Some(pfc) = self.pfc.as_mut() {
                    if !pfc.admit(now, i, prio, len) {
                        return; // no headroom: dropped (freed), counted by PFC
                    }
                }
                let queued = self.deliver(now, e as usize, class, frame);
                if let Some(pfc) = self.pfc.as_mut() {
                    pfc.placed(now, i, e as usize, prio, len, queued);
                }
            }
            Dest::Flood(class) => {
                c.flooded += 1;
                self.flood(now, i, class, frame);
            }
        }
    }

    /// Queues the first `count` frames of `frames` (`bytes` octets), removing them, for egress
    /// port `e` in `class` (the owner's ring for a port of another worker).
    fn deliver_run(
        &mut self,
        now: Instant,
        e: usize,
        class: Class,
        frames: &mut Vec<P::Frame>,
        count: usize,
        bytes: u64,
    ) {
        let count = count.min(frames.len());
        match self.ports.get_mut(e) {
            Some(Some(op)) => {
                op.enqueue_run(now, class, frames, count, bytes);
            }
            Some(None) => {
                for frame in frames.drain(..count) {
                    self.cross(e, class, frame.data());
                }
            }
            None => drop(frames.drain(..count)),
        }
    }

    /// Copies `frame` to every port but `from`; the last copy is the frame itself.
    fn flood(&mut self, now: Instant, from: usize, class: Class, frame: P::Frame) {
        let n = self.ports.len();
        let Some(last) = (0..n).rev().find(|&e| e != from) else {
            return; // a one-port switch: nowhere to flood; the frame is freed
        };
        for e in (0..n).filter(|&e| e != from && e != last) {
            match self.ports[e].as_mut() {
                Some(op) => match op.port.import(frame.data()) {
                    Some(c) => {
                        op.enqueue(now, class, c);
                    }
                    None => bump(&op.counters.tx_drops, 1),
                },
                None => self.cross(e, class, frame.data()),
            }
        }
        self.deliver(now, last, class, frame);
    }

    /// Stops: frees every queued and pending frame, publishes final counters.
    pub fn shutdown(&mut self) -> usize {
        let mut freed = 0;
        for op in self.ports.iter_mut().flatten() {
            op.counters.publish_classes(op.egress.stats());
            op.counters.publish_kernel_counts(&mut op.port);
            freed += op.egress.clear() + op.pending.clear();
            let _ = op.port.poll();
        }
        freed
    }
}

/// Dequeues what the pacer allows (at most one burst) and transmits. Returns frames sent.
/// With `dequeued`, the priority of each data frame dequeued is appended to it (PFC accounting).
fn transmit<P: Port>(
    op: &mut OwnedPort<P>,
    now: Instant,
    mut dequeued: Option<&mut Vec<u8>>,
) -> usize {
    if let Some(p) = &mut op.pacer {
        if op.egress.is_empty() {
            p.on_idle(now);
        }
    }
    while op.pending.len() < BURST {
        if let Some(p) = &op.pacer {
            if !p.ready(now) {
                break;
            }
        }
        let Some((class, f)) = op.egress.dequeue(now) else {
            break;
        };
        if let (Some(d), Class::Data(p)) = (dequeued.as_deref_mut(), class) {
            d.push(p);
        }
        let len = f.len() as u32;
        if let Some(p) = &mut op.pacer {
            p.on_send(now, len);
        }
        op.pending.push(f, len);
    }
    let mut sent = 0;
    if op.pending.len() != 0 {
        match op.pending.send(&mut op.port) {
            Ok((n, bytes)) => {
                sent = n;
                bump(&op.counters.tx_pkts, n as u64);
                bump(&op.counters.tx_bytes, bytes);
            }
            Err(freed) => bump(&op.counters.tx_drops, freed as u64),
        }
    }
    let _ = op.port.poll();
    sent
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::mem::{MemPeer, MemPort};

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
        assert_eq!(
            sw.ports[2].as_ref().unwrap().egress.stats()[0].depth_pkts,
            8
        );
        sw.poll(t(2));
        let mut tags: Vec<u8> = first.iter().map(|f| f[59]).collect();
        tags.extend(peers[2].drain().iter().map(|f| f[59]));
        let want: Vec<u8> = (0..20).chain(100..120).collect();
        assert_eq!(tags, want);
        let st = sw.ports[2].as_ref().unwrap().egress.stats()[0];
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
        let st = sw.ports[2].as_ref().unwrap().egress.stats();
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
        sw.set_pfc(SwitchPfc::new(profile, &rates, &[]));
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
        assert_eq!(sw.pfc.as_ref().unwrap().counters[0].sent, 1);
        assert_eq!(sw.pfc.as_ref().unwrap().counters[0].headroom_drops, 0);
        assert!(sw.pfc.as_ref().unwrap().held(0, 3) > 600);
        // Draining below XON (300 octets: 5 frames) sends the resume (quanta 0), once.
        let mut now = t(1);
        let mut resumes = Vec::new();
        for _ in 0..60 {
            now += Duration::from_micros(500);
            sw.poll(now);
            resumes.extend(peers[0].drain().iter().filter_map(|f| pfc_of(f)));
        }
        assert_eq!(resumes, vec![(1 << 3, 0)]);
        assert_eq!(sw.pfc.as_ref().unwrap().held(0, 3), 0);
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
        let c = sw.pfc.as_ref().unwrap().counters[0];
        assert_eq!(c.headroom_drops, 2);
        // A lossy priority is not accounted and not paused.
        peers[1].send(&frame(C, B, Some(1), 99));
        sw.poll(t(1));
        assert_eq!(sw.pfc.as_ref().unwrap().held(1, 1), 0);
    }

    #[test]
    fn a_received_pause_stops_that_priority_until_its_quanta_run_out() {
        // 1 Mbit/s: one quantum is 512 us; 4 quanta pause priority 3 for 2.048 ms.
        let (mut sw, peers) = pfc_switch(3, units::Rate::from_mbps(1));
        sw.fdb.add_static(C, 2);
        let mut pause = vec![0u8; 60];
        let src = crate::wire::MacAddr::new(2, 0, 0, 0, 0, 0xc);
        let pdu = crate::wire::pfc::PfcRepr::pause(1 << 3, 4);
        crate::wire::pfc::emit_frame(src, &pdu, &mut pause).unwrap();
        peers[2].send(&pause);
        sw.poll(t(1));
        assert!(sw.ports[2].as_ref().unwrap().egress.is_paused(3));
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
        assert!(!sw.ports[2].as_ref().unwrap().egress.is_paused(3));
        // A resume (quanta 0) ends a pause at once.
        crate::wire::pfc::emit_frame(
            src,
            &crate::wire::pfc::PfcRepr::pause(1 << 3, 0xFFFF),
            &mut pause,
        )
        .unwrap();
        peers[2].send(&pause);
        sw.poll(t(10));
        assert!(sw.ports[2].as_ref().unwrap().egress.is_paused(3));
        crate::wire::pfc::emit_frame(src, &crate::wire::pfc::PfcRepr::resume(1 << 3), &mut pause)
            .unwrap();
        peers[2].send(&pause);
        sw.poll(t(11));
        assert!(!sw.ports[2].as_ref().unwrap().egress.is_paused(3));
        assert_eq!(sw.pfc.as_ref().unwrap().counters[2].received, 3);
    }
}
