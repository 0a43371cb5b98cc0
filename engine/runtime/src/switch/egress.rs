//! The worker's egress side: the ports it owns, the frames waiting for the device, and the
//! port frames as the switch core sees them ([`Classified`]).
use std::sync::Arc;

use cp::qcn::QcnFeedback;
use units::{Ecn, Instant};

use super::stats::{bump, PortCounters};
use quench_node::switch::core::{CnmSource, CoreFrame, NOT_ACCOUNTED};
use quench_node::switch::cp::{cnm_frame, CpHook};
use quench_node::switch::depth::DepthShare;
use quench_node::switch::queue::{Class, EgressQueue, QueueLimits, QueuedFrame, Shaper};
use quench_port::{Frame, Port, BURST, MAX_FRAME};
use quench_wire::ipv4;

/// The egress queue of a port of `quench switch`.
pub type Queue<F> = EgressQueue<Classified<F>, CpHook>;

/// A port frame with what classification learned about it, so no later layer walks its
/// headers again: where its IPv4 header starts, and the ingress port whose PFC account holds
/// it (set by the core).
pub struct Classified<F> {
    pub frame: F,
    /// Offset of a whole IPv4 header, 0 when the frame has none.
    l3: u16,
    ingress: u16,
}

impl<F: Frame> Classified<F> {
    /// `frame`, whose IPv4 header starts at `l3` (0: it has none).
    pub fn new(frame: F, l3: u16) -> Self {
        Classified {
            frame,
            l3,
            ingress: NOT_ACCOUNTED,
        }
    }

    /// `frame`, classified here (the worker classifies once, while routing, and uses
    /// [`new`](Self::new)).
    pub fn classify(frame: F) -> Self {
        let l3 = super::routing::classify(frame.data()).map_or(0, |m| m.l3);
        Classified::new(frame, l3)
    }

    fn ip(&self) -> Option<&[u8]> {
        (self.l3 != 0)
            .then(|| self.frame.data().get(usize::from(self.l3)..))
            .flatten()
    }
}

impl<F: Frame> QueuedFrame for Classified<F> {
    fn wire_len(&self) -> u32 {
        self.frame.len() as u32
    }
}

impl<F: Frame> CoreFrame for Classified<F> {
    type Cnm = Vec<u8>;

    fn ecn(&self) -> Option<Ecn> {
        ipv4::ecn(self.ip()?).ok()
    }

    fn set_ecn(&mut self, ecn: Ecn) {
        if self.l3 != 0 {
            if let Some(ip) = self.frame.data_mut().get_mut(usize::from(self.l3)..) {
                let _ = ipv4::set_ecn(ip, ecn);
            }
        }
    }

    fn ingress(&self) -> u16 {
        self.ingress
    }

    fn set_ingress(&mut self, port: u16) {
        self.ingress = port;
    }

    fn cnm(&self, src: &CnmSource, prio: u8, fb: &QcnFeedback) -> Option<Vec<u8>> {
        cnm_frame(self.frame.data(), src, prio, fb)
    }

    fn push_int_hop(&mut self, hop: u64) -> bool {
        self.l3 != 0
            && quench_wire::frame::stamp_int(self.frame.data_mut(), usize::from(self.l3), |b| {
                quench_wire::int::push_hop(b, hop)
            }) == Ok(true)
    }
}

/// A worker's handle on one port: the device queues it polls, and its own transmit queue
/// (the handle's queue 0: each worker opens the port with its own queues).
pub struct OwnedPort<P: Port> {
    pub port: P,
    /// Device queues this worker polls on it (indices into the handle's queues).
    pub rx_queues: Vec<u16>,
    /// This worker holds the port's egress (its queues live in the worker's switch core, and
    /// it transmits); when false the worker only receives on it and frames for it cross to
    /// the worker that does.
    pub egress: bool,
    /// Its egress queues' limits and congestion points, until the worker hands them to its
    /// switch core (then `None`).
    pub limits: QueueLimits,
    pub cp: Option<CpHook>,
    /// Its share of the port's depth with the other workers holding the port's egress (a
    /// congestion-point port held by several workers: `switch::depth`).
    pub depth: Option<DepthShare>,
    pub pacer: Option<Shaper>,
    pub counters: Arc<PortCounters>,
    /// Frames for the device: cut through or dequeued, and those it has not accepted yet (ring
    /// full), which go first next time.
    pub(super) pending: TxBurst<P::Frame>,
    /// Frames may skip an idle egress queue (off with PFC, whose accounting sees every
    /// dequeue; see `EgressQueue::pass_through`).
    pub cut_through: bool,
}

impl<P: Port> OwnedPort<P> {
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
            egress: true,
            limits,
            cp: None,
            depth: None,
            pacer: rate.map(|r| Shaper::new(r, Shaper::default_burst(r, MAX_FRAME as u64))),
            counters,
            pending: TxBurst {
                frames: Vec::with_capacity(BURST),
                bytes: 0,
            },
            cut_through: true,
        }
    }

    /// Whether `frames` frames of `class` may skip egress queue `q` now.
    #[inline]
    pub(super) fn may_cut_through(&self, q: &Queue<P::Frame>, class: Class, frames: usize) -> bool {
        self.cut_through
            && self.pacer.is_none()
            && self.pending.len() + frames <= BURST
            && q.may_pass(class)
    }

    /// Passes `frame` (`len` octets) straight to the transmit burst, after
    /// [`may_cut_through`](Self::may_cut_through) allowed it.
    pub(super) fn cut_through(&mut self, q: &mut Queue<P::Frame>, class: Class, frame: P::Frame) {
        let len = frame.len() as u32;
        q.count_passed(class, 1, u64::from(len));
        self.pending.push(frame, len);
    }

    /// Moves the first `count` frames of `frames` (`bytes` octets) to the transmit burst, after
    /// [`may_cut_through`](Self::may_cut_through) allowed the whole run. When they are all of
    /// `frames` and nothing is pending, the two vectors are swapped (no per-frame move at all).
    pub(super) fn cut_through_run(
        &mut self,
        q: &mut Queue<P::Frame>,
        class: Class,
        frames: &mut Vec<P::Frame>,
        count: usize,
        bytes: u64,
    ) {
        if self.pending.frames.is_empty() && count == frames.len() {
            std::mem::swap(&mut self.pending.frames, frames);
        } else {
            self.pending.frames.extend(frames.drain(..count));
        }
        self.pending.bytes += bytes;
        q.count_passed(class, count as u64, bytes);
    }

    /// A frame arrives at an empty queue and starts a backlog: the pacer forgets idle credit
    /// beyond its burst then (not earlier, so a worker that was away while frames waited in the
    /// receive ring does not release them as a catch-up burst).
    pub(super) fn on_backlog(&mut self, q: &Queue<P::Frame>, now: Instant) {
        if q.is_empty() {
            if let Some(p) = &mut self.pacer {
                p.on_idle(now);
            }
        }
    }

    /// Frees the frames waiting for the device; returns how many there were.
    pub(super) fn clear_pending(&mut self) -> usize {
        self.pending.clear()
    }
}

/// Frames to transmit, with the sum of their lengths kept as they are added, so counting the
/// octets sent reads no frame (reading each sent frame's length again was a tenth of the
/// forwarding loop on bench-dpdk).
pub(super) struct TxBurst<F> {
    frames: Vec<F>,
    bytes: u64,
}

impl<F: Frame> TxBurst<F> {
    pub(super) fn len(&self) -> usize {
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

/// Transmit bursts a port may send per poll: for an unpaced port of a multi-worker switch, one
/// for the frames received in the poll (cut through or queued), the rest for what other workers
/// handed over and what waits queued, so that a port fed by several workers drains as fast as
/// they fill it; for a paced port, what its shaper allows (on schedule about one frame a poll;
/// after its worker was away with a backlog, the time its serializer would have been sending
/// meanwhile, which a poll's receive of a burst from each ingress port must not outpace). A
/// lone worker's unpaced ports send one burst per poll.
pub(super) const TX_BURSTS: usize = 4;

/// Takes from `next` what the pacer allows, a burst at a time, and transmits, up to `bursts`
/// bursts while the device takes whole bursts. Returns frames sent. `next` is the switch core's
/// `poll_transmit` for this port.
pub(super) fn transmit<P: Port>(
    op: &mut OwnedPort<P>,
    now: Instant,
    idle: bool,
    bursts: usize,
    mut next: impl FnMut() -> Option<P::Frame>,
) -> usize {
    if let Some(p) = &mut op.pacer {
        if idle {
            p.on_idle(now);
        }
    }
    let mut sent = 0;
    for _ in 0..bursts {
        while op.pending.len() < BURST {
            if let Some(p) = &op.pacer {
                if !p.ready(now) {
                    break;
                }
            }
            let Some(f) = next() else {
                break;
            };
            let len = f.len() as u32;
            if let Some(p) = &mut op.pacer {
                p.on_send(now, len);
            }
            op.pending.push(f, len);
        }
        let want = op.pending.len();
        if want == 0 {
            break;
        }
        match op.pending.send(&mut op.port) {
            Ok((n, bytes)) => {
                sent += n;
                bump(&op.counters.tx_pkts, n as u64);
                bump(&op.counters.tx_bytes, bytes);
                if n < want || want < BURST {
                    break; // the device is full, or nothing more is waiting
                }
            }
            Err(freed) => {
                bump(&op.counters.tx_drops, freed as u64);
                break;
            }
        }
    }
    let _ = op.port.poll();
    sent
}
