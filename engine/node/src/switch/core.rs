//! The switch core: one sans-IO state machine for a switch's egress queues, their congestion
//! points (QCN CNMs, RED/ECN, TCD), PFC ingress accounting and the pauses each port received.
//! `quench switch`'s worker ([`super::forward`], real frames on AF_XDP / AF_PACKET / DPDK ports)
//! and the simulator's switch nodes (`sim::world`, packets in virtual time) both drive it; neither
//! keeps a copy of what it decides.
//!
//! Routing is the driver's: the worker's learning FDB and the simulator's ns-3 routes with ECMP
//! pick the egress port, the core takes the frame from there.
//!
//! # Call order (as quinn-proto's `Connection`)
//! - Inputs, each with the time: [`SwitchCore::handle_frame`] for a frame routed from an ingress
//!   port to an egress port (data or control class; flooded copies through
//!   [`SwitchCore::handle_flooded`]), [`SwitchCore::handle_pause`] for each priority a received
//!   PFC frame names, [`SwitchCore::handle_timeout`] (or [`SwitchCore::handle_port_timeout`]
//!   for one port) when [`SwitchCore::next_deadline`] has passed; a spurious timeout does nothing.
//! - Outputs: [`SwitchCore::poll_transmit`] for the next frame of a port whose link (and pacer)
//!   can take it; then [`SwitchCore::poll_event`] until `None` after every input and transmit:
//!   PAUSE / resume decisions to send out of a port, and CNMs to route back to the sampled
//!   frame's source (fed back as control frames with [`SwitchCore::handle_frame`]).
//!
//! The core never sees bytes it did not need: a frame is any [`CoreFrame`], which tells its
//! length, where its ECN field is (learned once, at classify) and how to answer it with a CNM.
//! Events are meaning-level ([`Event`]); the driver builds wire frames (`wire::pfc`,
//! `wire::cnm`) or simulated packets from them.
//!
//! Every frame handed in is queued or handed back to be freed, exactly once ([`Handled`]).
use std::collections::VecDeque;
use std::sync::Arc;

use cp::pfc::{PauseWatchdog, PausedState, PfcAction, PfcIngress, PfcProfile};
use cp::qcn::{QcnCp, QcnCpProfile, QcnFeedback};
use cp::red::{Mark, RedProfile};
use cp::tcd::{TcdCodepoint, TcdPort, TcdProfile};
use rand_xoshiro::Xoshiro256PlusPlus;
use units::{Ecn, Instant, Rate, PRIORITIES};

use super::queue::{
    Admit, Class, CongestionHook, EgressQueue, Enqueued, QueueEvent, QueueLimits, QueuedFrame,
};
use super::sampling::{SampleShare, SharedSampling};
use quench_wire::MacAddr;

/// The ingress of a frame no PFC account holds (lossy, flooded, control, or PFC off).
pub const NOT_ACCOUNTED: u16 = u16::MAX;

/// What the core needs of a frame. Implemented by the worker's classified port frames
/// ([`super::forward::Classified`]) and by the simulator's packets.
pub trait CoreFrame: QueuedFrame {
    /// What a CNM answering this frame is, for the driver to route (wire bytes, or a packet).
    type Cnm;
    /// The frame's ECN field; `None` when it has none (not IPv4).
    fn ecn(&self) -> Option<Ecn>;
    /// Rewrites the ECN field (a frame without one is left alone).
    fn set_ecn(&mut self, ecn: Ecn);
    /// The port whose PFC account holds this frame's octets ([`NOT_ACCOUNTED`]: none).
    fn ingress(&self) -> u16;
    fn set_ingress(&mut self, port: u16);
    /// The CNM answering this sampled frame of data priority `prio`; `None` when it cannot be
    /// built (counted).
    fn cnm(&self, src: &CnmSource, prio: u8, fb: &QcnFeedback) -> Option<Self::Cnm>;
    /// Pushes INT hop word `hop` (`rp::IntHop`) on the frame's INT header; `false` when the
    /// frame has none (`wire::int`). A frame type without INT headers keeps the default.
    fn push_int_hop(&mut self, hop: u64) -> bool {
        let _ = hop;
        false
    }
}

/// INT stamping at a port (ns-3 HPCC's `SwitchNode::SwitchNotifyDequeue` under `CC_MODE 3`):
/// each watched data frame leaving the port gets one hop of the time, the octets the port sent
/// before it, the octets queued at the port after it left, and the line rate, packed as
/// `rp::IntHop` packs them.
///
/// A hop can name five line rates (25, 50, 100, 200, 400 Gb/s, `IntHop::lineRateValues`). A
/// port of another rate R stamps the smallest of them at or above R, C, with its octets sent and
/// queued scaled by C / R: the utilisation a reaction point computes from a hop, `txRate / C +
/// qlen x maxRate / C / W` (`UpdateRateHp`), is then the one at R, since both terms scale alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntStamp {
    /// The rate stamped, C.
    pub coded: Rate,
    /// The port's line rate, R.
    pub line: Rate,
    /// `IntHop::multi` (config.txt's `INT_MULTI`): the units of octets sent and queued.
    pub multi: u32,
}

impl IntStamp {
    /// The stamp of a port of `line` rate; `None` above 400 Gb/s or at 0.
    pub fn new(line: Rate, multi: u32) -> Option<IntStamp> {
        let coded = ::rp::int::LINE_RATES[..5]
            .iter()
            .find(|&&r| r >= line.as_bps())
            .map(|&r| Rate::from_bps(r))?;
        (line.as_bps() > 0).then_some(IntStamp {
            coded,
            line,
            multi: multi.max(1),
        })
    }

    fn scale(&self, octets: u64) -> u64 {
        (u128::from(octets) * u128::from(self.coded.as_bps()) / u128::from(self.line.as_bps()))
            as u64
    }

    /// The hop word for a frame leaving at `now` after `tx_bytes` octets sent, `qlen` left.
    pub fn hop(&self, now: Instant, tx_bytes: u64, qlen: u64) -> u64 {
        let qlen = u32::try_from(self.scale(qlen)).unwrap_or(u32::MAX);
        ::rp::IntHop::new(
            now.as_nanos(),
            self.scale(tx_bytes),
            qlen,
            self.coded,
            self.multi,
        )
        .map_or(0, |h| h.0)
    }
}

/// Who sends a port's CNMs: the CPID's MAC and the CNMs' priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CnmSource {
    pub cp_mac: MacAddr,
    pub priority: u8,
}

/// Validated congestion points of one egress port (params -> profile: docs/style.md,
/// "Parameters, profiles, state").
#[derive(Clone, Debug)]
pub struct CpProfiles {
    /// Bit p set: data priority p is watched.
    pub prio_mask: u8,
    pub qcn: Option<QcnCpProfile>,
    pub red: Option<RedProfile>,
    pub tcd: Option<TcdProfile>,
    pub cnm: CnmSource,
}

impl CpProfiles {
    /// No congestion point (a plain port).
    pub fn none() -> CpProfiles {
        CpProfiles {
            prio_mask: 0,
            qcn: None,
            red: None,
            tcd: None,
            cnm: CnmSource {
                cp_mac: MacAddr::zero(),
                priority: quench_wire::cnm::DEFAULT_CNM_PRIORITY,
            },
        }
    }
}

/// Counters of one port's congestion points.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpCounters {
    /// QCN samples taken.
    pub qcn_samples: u64,
    /// CNMs built.
    pub cnms: u64,
    /// Frames whose ECN field a congestion point changed (RED or TCD).
    pub marks: u64,
    /// Frames marked CE by RED.
    pub ce_marks: u64,
    /// Frames TCD marked UE / CE.
    pub tcd_ue: u64,
    pub tcd_ce: u64,
    /// Watched data frames without an ECN field (passed unchanged).
    pub unparsed: u64,
    /// CNMs not built (the sampled frame's header could not be re-emitted).
    pub cnm_errors: u64,
    /// Watched data frames given an INT hop, and those that carried no INT header.
    pub int_stamps: u64,
    pub int_absent: u64,
}

/// The congestion points of one egress port, as its queue's hook: QCN at enqueue, then RED at
/// enqueue or dequeue (as its profile says), TCD at dequeue. The hook never drops: with PFC on
/// the switch must not lose data frames, and QCN, RED and TCD only signal.
///
/// RED and TCD on one priority: TCD alone writes the ECN field, RED is not applied. Source:
/// seed 004, section 4.1 and Table 1 (reference/tcd.md): with TCD the two bits are ternary code
/// points, "Switches mark CE whenever the port is in a congestion state" and 10 means
/// "undetermined encountered", not ECT(0). RED on top would mark CE at a port TCD finds
/// non-congested or undetermined (the victim flows TCD exists to spare), and would read UE
/// frames as ECN-capable and turn them CE.
#[derive(Debug)]
pub struct PortCp<C> {
    prio_mask: u8,
    // Boxed: a port without them stays a few cache lines (the simulator has many ports).
    qcn: Option<Box<(QcnCpProfile, [QcnCp; PRIORITIES])>>,
    red: Option<RedProfile>,
    tcd: Option<Box<(TcdProfile, [TcdPort; PRIORITIES])>>,
    cnm: CnmSource,
    rng: Xoshiro256PlusPlus,
    /// QCN's sampling state port-wide, when several workers' queues make the port
    /// ([`super::sampling`]); `None`: this queue's own `QcnCp`s sample.
    port_wide: Option<Box<SampleShare>>,
    /// CNMs built, waiting for [`SwitchCore::poll_event`].
    made: Vec<C>,
    counters: CpCounters,
    /// INT stamping, and the octets this queue sent (ns-3's `m_txBytes`, every frame).
    int: Option<IntStamp>,
    tx_bytes: u64,
    /// The time stamped on the last hop, and that frame's octets.
    int_last: (u64, u32),
}

impl<C> PortCp<C> {
    /// `rng` draws QCN's sampling jitter and RED's marking coin (seeded: runs replay).
    pub fn new(p: &CpProfiles, rng: Xoshiro256PlusPlus) -> Self {
        PortCp {
            prio_mask: p.prio_mask,
            qcn: p
                .qcn
                .as_ref()
                .map(|q| Box::new((q.clone(), std::array::from_fn(|_| QcnCp::new(q))))),
            red: p.red.clone(),
            tcd: p.tcd.as_ref().map(|t| {
                Box::new((
                    t.clone(),
                    std::array::from_fn(|_| TcdPort::new(t, Instant::ZERO)),
                ))
            }),
            cnm: p.cnm,
            rng,
            port_wide: None,
            made: Vec::new(),
            counters: CpCounters::default(),
            int: None,
            tx_bytes: 0,
            int_last: (0, 0),
        }
    }

    /// Stamps INT hops on the watched data frames ([`IntStamp`]).
    pub fn with_int(mut self, int: IntStamp) -> Self {
        self.int = Some(int);
        self
    }

    pub fn int(&self) -> Option<IntStamp> {
        self.int
    }

    pub fn counters(&self) -> CpCounters {
        self.counters
    }

    /// Makes this the congestion point of worker `worker`'s queue on a port several workers
    /// hold: its generator jumps to stream `worker` of its seed (xoshiro256++ `jump`, 2^128
    /// draws apart), so the workers' RED coins and QCN jitter are independent, and worker 0
    /// draws what the one-worker switch draws.
    pub fn for_worker(mut self, worker: usize) -> Self {
        for _ in 0..worker {
            self.rng.jump();
        }
        self
    }

    /// The port-wide QCN sampling state this congestion point would start with as the one
    /// congestion point of its port: its profile, and its generator as it is now (call it
    /// before [`with_shared_sampling`](Self::with_shared_sampling) and
    /// [`for_worker`](Self::for_worker)). `None` without QCN or in probability mode (a coin
    /// per frame has no counter to share; see `switch::sampling`).
    pub fn shared_sampling(&self) -> Option<Arc<SharedSampling>> {
        let (prof, _) = &**self.qcn.as_ref()?;
        prof.samples_by_octets()
            .then(|| SharedSampling::new(prof, self.rng.clone()))
    }

    /// Makes QCN sample port-wide with `shared` (made by
    /// [`shared_sampling`](Self::shared_sampling) of a congestion point like this one): its
    /// draws are then `shared`'s, stream 0 of the seed, so this congestion point's own
    /// generator (RED's coin) moves one stream on; [`for_worker`](Self::for_worker) after it
    /// gives worker w stream w + 1.
    pub fn with_shared_sampling(mut self, shared: &Arc<SharedSampling>) -> Self {
        if self.qcn.is_some() {
            self.port_wide = Some(Box::new(shared.share()));
            self.rng.jump();
        }
        self
    }

    /// Once per poll, before receiving: the other workers' admitted octets per data priority,
    /// as published (`switch::depth`), for the port-wide sampling (nothing without it).
    pub fn set_others_admitted(&mut self, others: &[u64; PRIORITIES]) {
        if let Some(s) = &mut self.port_wide {
            s.refresh(others, self.prio_mask);
        }
    }

    /// The octets this worker's queue admitted per data priority, for the others (zeros
    /// without the port-wide sampling: nothing to publish).
    pub fn admitted(&self) -> &[u64; PRIORITIES] {
        const NONE: [u64; PRIORITIES] = [0; PRIORITIES];
        self.port_wide.as_ref().map_or(&NONE, |s| s.admitted())
    }

    fn watches(&self, class: Class) -> Option<u8> {
        match class {
            Class::Data(p) if self.prio_mask & (1 << p) != 0 => Some(p),
            _ => None,
        }
    }

    /// Egress priority `prio` was paused (TCD: an OFF period begins) or resumed.
    fn on_pause(&mut self, now: Instant, prio: u8, paused: bool) {
        if let Some(t) = &mut self.tcd {
            let (prof, ports) = &mut **t;
            if let Some(p) = ports.get_mut(usize::from(prio)) {
                if paused {
                    p.on_pause(prof, now);
                } else {
                    p.on_resume(now);
                }
            }
        }
    }

    fn set<F: CoreFrame>(&mut self, frame: &mut F, from: Ecn, to: Ecn) {
        if from != to {
            frame.set_ecn(to);
            self.counters.marks += 1;
        }
    }

    fn red<F: CoreFrame>(&mut self, queue_bytes: u64, enqueue: bool, frame: &mut F) {
        let Some(red) = &self.red else { return };
        if self.tcd.is_some() {
            return; // TCD owns the code points (see the type's doc).
        }
        let Some(ecn) = frame.ecn() else {
            self.counters.unparsed += 1;
            return;
        };
        let mark = if enqueue {
            red.on_enqueue(queue_bytes, ecn, &mut self.rng)
        } else {
            red.on_dequeue(queue_bytes, ecn, &mut self.rng)
        };
        let to = mark.apply(ecn);
        if mark == Mark::Ce && to != ecn {
            self.counters.ce_marks += 1;
        }
        self.set(frame, ecn, to);
    }

    fn tcd<F: CoreFrame>(&mut self, now: Instant, prio: u8, queue_bytes: u64, frame: &mut F) {
        let Some(t) = &mut self.tcd else {
            return;
        };
        let (prof, ports) = &mut **t;
        let Some(ecn) = frame.ecn() else {
            self.counters.unparsed += 1;
            return;
        };
        let cur = TcdCodepoint::from(ecn);
        let new = ports[usize::from(prio)].on_dequeue(prof, now, queue_bytes, cur);
        match (cur == new, new) {
            (false, TcdCodepoint::Ue) => self.counters.tcd_ue += 1,
            (false, TcdCodepoint::Ce) => self.counters.tcd_ce += 1,
            _ => {}
        }
        self.set(frame, ecn, new.into());
    }
}

impl<F: CoreFrame> CongestionHook<F> for PortCp<F::Cnm> {
    fn observes(&self) -> bool {
        self.qcn.is_some() || self.red.is_some() || self.tcd.is_some() || self.int.is_some()
    }

    fn on_enqueue(&mut self, ev: &QueueEvent, frame: &mut F) -> Admit {
        let Some(prio) = self.watches(ev.class) else {
            return Admit::Accept;
        };
        // Seed 000 line 151: the CP runs for each incoming frame, with the queue holding it.
        let q = ev.class_bytes + u64::from(ev.frame_len);
        if let Some(qcn) = &mut self.qcn {
            let (prof, cps) = &mut **qcn;
            let d = match &mut self.port_wide {
                Some(s) => s.on_frame(prof, prio, q, ev.frame_len),
                None => cps[usize::from(prio)].on_frame(prof, q, ev.frame_len, &mut self.rng),
            };
            if d.sampled {
                self.counters.qcn_samples += 1;
            }
            if let Some(fb) = d.feedback {
                match frame.cnm(&self.cnm, prio, &fb) {
                    Some(c) => {
                        self.made.push(c);
                        self.counters.cnms += 1;
                    }
                    None => self.counters.cnm_errors += 1,
                }
            }
        }
        self.red(q, true, frame);
        Admit::Accept
    }

    fn on_dequeue(&mut self, ev: &QueueEvent, frame: &mut F) {
        if let Some(prio) = self.watches(ev.class) {
            self.red(ev.class_bytes, false, frame);
            self.tcd(ev.now, prio, ev.class_bytes, frame);
            if let Some(int) = &self.int {
                // `PushHop(now, m_txBytes[ifIndex], GetNBytesTotal(), rate)`: the octets sent
                // before this frame, the port's whole queue after it left. A driver dequeues a
                // burst at one `now`; a frame leaves no sooner than the one before it has been
                // serialised at the line rate, so that is its time (two hops a reaction point
                // compares are never 0 ns apart: HPCC divides by the difference).
                let (last, last_len) = self.int_last;
                let t = (ev.now.as_nanos())
                    .max(last + int.line.tx_time(u64::from(last_len)).as_nanos());
                self.int_last = (t, ev.frame_len);
                let at = Instant::from_nanos(t);
                if frame.push_int_hop(int.hop(at, self.tx_bytes, ev.port_bytes)) {
                    self.counters.int_stamps += 1;
                } else {
                    self.counters.int_absent += 1;
                }
            }
        }
        self.tx_bytes += u64::from(ev.frame_len);
    }
}

/// What became of a frame handed to the core.
#[derive(Debug)]
pub enum Handled<F> {
    Queued,
    /// Refused; the frame is handed back for the driver to free (and count).
    Dropped(DropReason, F),
}

/// Why the core refused a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The switch's shared buffer is full.
    Buffer,
    /// PFC: the ingress (port, priority) has no headroom left (the one loss PFC allows).
    Headroom,
    /// The egress class is full (tail drop), or its hook refused it.
    Tail,
    /// No such egress port (or one another worker owns).
    NoPort,
}

/// A decision for the driver to carry out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<C> {
    /// Send a PFC frame out of `port` (towards the upstream that fills its ingress).
    Pfc { port: usize, action: PfcAction },
    /// A congestion point of egress `port` made a CNM; route it to the sampled frame's source.
    Cnm { port: usize, cnm: C },
}

/// PFC counters of one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfcCounters {
    /// PFC frames sent out of this port (XOFF and XON).
    pub sent: u64,
    /// Of those, XOFF (non-zero quanta).
    pub xoff_sent: u64,
    /// PFC frames received on this port (counted by the driver that parses them:
    /// [`SwitchCore::count_pfc_received`]).
    pub received: u64,
    /// Priorities a received PFC frame left paused.
    pub pauses_received: u64,
    /// Lossless frames from this port dropped for want of headroom.
    pub headroom_drops: u64,
    /// PFC watchdog: storms found on this port (a priority paused without a break for the
    /// detection time), and PAUSE frames for a storming priority not honoured.
    pub watchdog_storms: u64,
    pub watchdog_ignored: u64,
}

/// One egress port of the core.
struct CorePort<F: CoreFrame> {
    queue: EgressQueue<F, PortCp<F::Cnm>>,
    /// Pauses received on this port (cp::pfc).
    paused: PausedState,
    /// The PFC watchdog of those pauses, when PFC has one.
    watchdog: Option<PauseWatchdog>,
}

/// The switch core. See the module docs.
pub struct SwitchCore<F: CoreFrame> {
    /// Indexed by port; `None` for a port another worker owns.
    ports: Vec<Option<CorePort<F>>>,
    pfc: Option<(PfcProfile, PfcIngress)>,
    /// Shared buffer: octets of data frames queued, and the most there may be.
    used: u64,
    buffer: u64,
    events: VecDeque<Event<F::Cnm>>,
    counters: Vec<PfcCounters>,
}

impl<F: CoreFrame> SwitchCore<F> {
    /// A core of `ports` ports, none of them attached yet ([`attach`](Self::attach)).
    pub fn new(ports: usize) -> Self {
        SwitchCore {
            ports: (0..ports).map(|_| None).collect(),
            pfc: None,
            used: 0,
            buffer: u64::MAX,
            events: VecDeque::new(),
            counters: vec![PfcCounters::default(); ports],
        }
    }

    /// Port `port` is this core's: its egress queues with their limits and congestion points,
    /// and `rate`, the speed PAUSE quanta received on it are measured in (802.1Qbb: bit times
    /// of the receiving port).
    pub fn attach(&mut self, port: usize, limits: QueueLimits, cp: PortCp<F::Cnm>, rate: Rate) {
        if let Some(slot) = self.ports.get_mut(port) {
            *slot = Some(CorePort {
                queue: EgressQueue::with_hook(limits, cp),
                paused: PausedState::new(rate),
                watchdog: self.pfc.as_ref().and_then(|(p, _)| p.watchdog()),
            });
        }
    }

    /// The speed of port `port`, which PAUSE quanta received on it are measured in.
    pub fn set_pause_rate(&mut self, port: usize, rate: Rate) {
        if let Some(Some(p)) = self.ports.get_mut(port) {
            p.paused = PausedState::new(rate);
        }
    }

    /// Replaces port `port`'s congestion points (its queue must be empty).
    pub fn set_cp(&mut self, port: usize, limits: QueueLimits, cp: PortCp<F::Cnm>) {
        if let Some(Some(p)) = self.ports.get_mut(port) {
            p.queue = EgressQueue::with_hook(limits, cp);
        }
    }

    /// Turns PFC on with `profile` (its `ports` must cover this core's ports).
    pub fn set_pfc(&mut self, profile: PfcProfile) {
        let ingress = PfcIngress::new(&profile);
        for p in self.ports.iter_mut().flatten() {
            p.watchdog = profile.watchdog();
        }
        self.pfc = Some((profile, ingress));
    }

    /// The switch's shared buffer (ns-3 HPCC's `buffer_size`): a data frame that would take
    /// the queued octets of all ports above `bytes` is dropped.
    pub fn set_buffer(&mut self, bytes: u64) {
        self.buffer = bytes;
    }

    pub fn pfc_on(&self) -> bool {
        self.pfc.is_some()
    }

    /// Whether frames of `class` are PFC-accounted one by one.
    pub fn is_lossless(&self, class: Class) -> bool {
        match (&self.pfc, class) {
            (Some((prof, _)), Class::Data(p)) => prof.is_lossless(p),
            _ => false,
        }
    }

    pub fn queue(&self, port: usize) -> Option<&EgressQueue<F, PortCp<F::Cnm>>> {
        self.ports.get(port)?.as_ref().map(|p| &p.queue)
    }

    /// The queue of `port`, for a driver's cut-through (`may_pass`, `count_passed`) and stats.
    pub fn queue_mut(&mut self, port: usize) -> Option<&mut EgressQueue<F, PortCp<F::Cnm>>> {
        self.ports.get_mut(port)?.as_mut().map(|p| &mut p.queue)
    }

    pub fn pfc_counters(&self, port: usize) -> PfcCounters {
        self.counters.get(port).copied().unwrap_or_default()
    }

    /// Octets PFC accounts to (ingress port, priority).
    pub fn held(&self, ingress: usize, prio: u8) -> u64 {
        self.pfc
            .as_ref()
            .and_then(|(_, ing)| ing.account(ingress as u16, prio))
            .map_or(0, |a| a.held())
    }

    /// Octets of data frames queued in all ports (the shared buffer's use).
    pub fn buffer_used(&self) -> u64 {
        self.used
    }

    #[inline]
    fn act(&mut self, port: usize, action: Option<PfcAction>) {
        let Some(action) = action else { return };
        if let Some(c) = self.counters.get_mut(port) {
            c.sent += 1;
            if matches!(action, PfcAction::Pause { quanta, .. } if quanta > 0) {
                c.xoff_sent += 1;
            }
        }
        self.events.push_back(Event::Pfc { port, action });
    }

    #[inline]
    fn release(&mut self, now: Instant, ingress: u16, prio: u8, len: u64) {
        if ingress == NOT_ACCOUNTED {
            return;
        }
        if let Some((prof, ing)) = &mut self.pfc {
            if let Ok(a) = ing.on_dequeue(prof, now, ingress, prio, len) {
                self.act(usize::from(ingress), a);
            }
        }
    }

    /// A frame received on `ingress` was routed to `egress` in `class`. Data frames count
    /// against the shared buffer and, at a lossless priority, against PFC's (ingress,
    /// priority) account until they leave.
    #[inline]
    pub fn handle_frame(
        &mut self,
        now: Instant,
        ingress: usize,
        egress: usize,
        class: Class,
        mut frame: F,
    ) -> Handled<F> {
        frame.set_ingress(NOT_ACCOUNTED);
        let Class::Data(prio) = class else {
            return self.enqueue(now, egress, class, frame);
        };
        let len = u64::from(frame.wire_len());
        if self.used + len > self.buffer {
            return Handled::Dropped(DropReason::Buffer, frame);
        }
        if let Some((prof, ing)) = &mut self.pfc {
            if prof.is_lossless(prio) {
                // A port or priority outside the profile is not ours to account.
                if let Ok(d) = ing.on_enqueue(prof, now, ingress as u16, prio, len) {
                    self.act(ingress, d.action);
                    if !d.admitted {
                        if let Some(c) = self.counters.get_mut(ingress) {
                            c.headroom_drops += 1;
                        }
                        return Handled::Dropped(DropReason::Headroom, frame);
                    }
                    frame.set_ingress(ingress as u16);
                }
            }
        }
        self.enqueue(now, egress, class, frame)
    }

    /// A copy of a flooded frame (unknown or group destination) for `egress`: queued like a
    /// routed frame but never PFC-accounted (PFC protects unicast traffic, and a copy per port
    /// would count one arrival several times).
    pub fn handle_flooded(
        &mut self,
        now: Instant,
        egress: usize,
        class: Class,
        mut frame: F,
    ) -> Handled<F> {
        frame.set_ingress(NOT_ACCOUNTED);
        let len = u64::from(frame.wire_len());
        if matches!(class, Class::Data(_)) && self.used + len > self.buffer {
            return Handled::Dropped(DropReason::Buffer, frame);
        }
        self.enqueue(now, egress, class, frame)
    }

    #[inline]
    fn enqueue(&mut self, now: Instant, egress: usize, class: Class, frame: F) -> Handled<F> {
        let Some(Some(p)) = self.ports.get_mut(egress) else {
            let (ingress, len) = (frame.ingress(), u64::from(frame.wire_len()));
            if let Class::Data(prio) = class {
                self.release(now, ingress, prio, len);
            }
            return Handled::Dropped(DropReason::NoPort, frame);
        };
        let len = u64::from(frame.wire_len());
        let r = match p.queue.enqueue(now, class, frame) {
            Enqueued::Queued => {
                if matches!(class, Class::Data(_)) {
                    self.used += len;
                }
                Handled::Queued
            }
            Enqueued::TailDrop(f) | Enqueued::HookDrop(f) => {
                // The PFC account counted it; it never left: give it back.
                if let Class::Data(prio) = class {
                    self.release(now, f.ingress(), prio, len);
                }
                Handled::Dropped(DropReason::Tail, f)
            }
        };
        self.take_cnms(egress);
        r
    }

    #[inline]
    fn take_cnms(&mut self, port: usize) {
        if let Some(Some(p)) = self.ports.get_mut(port) {
            let made = &mut p.queue.hook_mut().made;
            if !made.is_empty() {
                self.events
                    .extend(made.drain(..).map(|cnm| Event::Cnm { port, cnm }));
            }
        }
    }

    /// The next frame `port` sends (strict priority, paused priorities skipped); the driver
    /// calls it when the link and its pacer can take one.
    #[inline]
    pub fn poll_transmit(&mut self, now: Instant, port: usize) -> Option<(Class, F)> {
        let p = self.ports.get_mut(port)?.as_mut()?;
        let (class, frame) = p.queue.dequeue(now)?;
        if let Class::Data(prio) = class {
            let len = u64::from(frame.wire_len());
            self.used = self.used.saturating_sub(len);
            self.release(now, frame.ingress(), prio, len);
        }
        Some((class, frame))
    }

    /// The next decision to carry out (PFC frames to send, CNMs to route).
    #[inline]
    pub fn poll_event(&mut self) -> Option<Event<F::Cnm>> {
        self.events.pop_front()
    }

    /// Whether [`poll_event`](Self::poll_event) has something.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// A PFC frame received on `port` names `prio` with `quanta` (0: resume). Returns whether
    /// `prio` is paused now.
    pub fn handle_pause(&mut self, now: Instant, port: usize, prio: u8, quanta: u16) -> bool {
        let Some(Some(p)) = self.ports.get_mut(port) else {
            return false;
        };
        let honour = match &mut p.watchdog {
            Some(w) if quanta > 0 => w.on_pause_frame(now, prio),
            _ => true,
        };
        if !honour {
            if let Some(c) = self.counters.get_mut(port) {
                c.watchdog_ignored += 1;
            }
            return false;
        }
        p.paused.on_pause_frame(now, prio, quanta);
        let paused = p.paused.is_paused(now, prio);
        if paused {
            if let Some(c) = self.counters.get_mut(port) {
                c.pauses_received += 1;
            }
        }
        Self::set_paused(p, now, prio, paused);
        paused
    }

    /// Counts a PFC frame received on `port` (before its priorities go to
    /// [`handle_pause`](Self::handle_pause)).
    pub fn count_pfc_received(&mut self, port: usize) {
        if let Some(c) = self.counters.get_mut(port) {
            c.received += 1;
        }
    }

    fn set_paused(p: &mut CorePort<F>, now: Instant, prio: u8, paused: bool) {
        if p.queue.is_paused(prio) == paused {
            return;
        }
        p.queue.set_paused(prio, paused);
        p.queue.hook_mut().on_pause(now, prio, paused);
        if let Some(w) = &mut p.watchdog {
            if paused {
                w.on_paused(now, prio);
            } else {
                w.on_resumed(prio);
            }
        }
    }

    /// When `port`'s earliest received pause runs out.
    pub fn port_deadline(&self, port: usize) -> Option<Instant> {
        let p = self.ports.get(port)?.as_ref()?;
        let wd = p.watchdog.as_ref().and_then(PauseWatchdog::next_deadline);
        p.paused.next_deadline().into_iter().chain(wd).min()
    }

    /// Ends `port`'s pauses that ran out by `now`; returns them as a bit mask (0: spurious).
    pub fn handle_port_timeout(&mut self, now: Instant, port: usize) -> u8 {
        let Some(Some(p)) = self.ports.get_mut(port) else {
            return 0;
        };
        let mut expired = p.paused.on_timeout(now);
        // PFC watchdog: a storm's pause ends now, and its PAUSE frames are not honoured until
        // it is over.
        if let Some(t) = p.watchdog.as_mut().map(|w| w.on_timeout(now)) {
            if let Some(c) = self.counters.get_mut(port) {
                c.watchdog_storms += u64::from(t.storms.count_ones());
            }
            for prio in 0..PRIORITIES as u8 {
                if t.storms & (1 << prio) != 0 {
                    p.paused.on_pause_frame(now, prio, 0);
                }
            }
            expired |= t.storms;
        }
        for prio in 0..PRIORITIES as u8 {
            if expired & (1 << prio) != 0 {
                Self::set_paused(p, now, prio, false);
            }
        }
        expired
    }

    /// When PFC must re-send a PAUSE (refresh mode).
    pub fn pfc_deadline(&self) -> Option<Instant> {
        self.pfc.as_ref().and_then(|(_, ing)| ing.next_deadline())
    }

    /// Runs PFC's due refreshes (refresh mode).
    pub fn handle_pfc_timeout(&mut self, now: Instant) {
        while self.pfc_deadline().is_some_and(|t| t <= now) {
            let Some((prof, ing)) = &mut self.pfc else {
                return;
            };
            let Some(f) = ing.poll_timeout(prof, now) else {
                break;
            };
            self.act(usize::from(f.port), Some(f.action));
        }
    }

    /// The earliest deadline of the core: received pauses running out, PFC refreshes.
    pub fn next_deadline(&self) -> Option<Instant> {
        (0..self.ports.len())
            .filter_map(|p| self.port_deadline(p))
            .chain(self.pfc_deadline())
            .min()
    }

    /// Runs everything due at `now` (a spurious call does nothing).
    pub fn handle_timeout(&mut self, now: Instant) {
        for port in 0..self.ports.len() {
            if self.port_deadline(port).is_some_and(|t| t <= now) {
                self.handle_port_timeout(now, port);
            }
        }
        self.handle_pfc_timeout(now);
    }

    /// Frees every queued frame (at shutdown); returns how many there were.
    pub fn clear(&mut self) -> usize {
        self.used = 0;
        self.ports
            .iter_mut()
            .flatten()
            .map(|p| p.queue.clear())
            .sum()
    }
}
