//! The host core, sans-IO: a host's flows, their reaction points, the one scheduler that says
//! which flow sends its next frame when, PFC's pause clock, and the receive side's notification
//! point. `quench send` (send/worker.rs) drives it on real ports; the sender appliance and the
//! simulator's hosts are to drive the same object.
//!
//! Method groups and call order (docs/style.md, "Sans-IO cores"), all with the caller's `now`,
//! one clock:
//! - flows: [`HostCore::add_flow`] (it starts at its spec's `start`, when its source has a
//!   frame), [`HostCore::wake`] after giving an idle source a frame, [`HostCore::remove_flow`];
//! - inputs: [`HostCore::handle_feedback`] (a CNM's QntzFb, a CNP, a UE, already parsed),
//!   [`HostCore::handle_pause`] (what the port's PFC state says for a priority),
//!   [`HostCore::handle_timeout`] once [`HostCore::next_deadline`] has passed (a spurious call
//!   does nothing), [`HostCore::set_cap`] (a flow's own limit);
//! - output: [`HostCore::poll_transmit`] in a loop with the burst's `now` until `None`: the
//!   next frame due (docs/style.md, "Pacing and deadlines": the core says when, the driver
//!   sends); the core has already charged it to the flow's reaction point and scheduled the
//!   flow's next frame;
//! - receive side: [`HostCore::handle_data`] per data frame received: the notification point's
//!   answer (a CNP or UE to send), if any.
//!
//! Scheduling. Each flow's schedule is the one pacer ([`rp::Pacer`], exact in fixed point); a
//! flow that has a frame waits on the timing wheel ([`Wheel`]) for its release time. The next
//! release is the previous one plus the frame's serialisation time at the flow's rate, so over
//! any window the flow sends at its RP rate however late the driver polls, as long as it keeps
//! up. A driver that falls behind catches up by at most [`PacingConfig::max_catch_up`] of
//! sending time; beyond that the lost time is forgotten (counted in [`Flow::lag_dropped`])
//! instead of bursting. With [`PacingConfig::catch_up_speed`] the frames owed leave at most that
//! many times the flow's rate (a peak rate over the committed one, as in a two-rate shaper).
//! With [`PacingConfig::retime`] (the wire's drivers), every change of a flow's rate (feedback,
//! a reaction-point timer, QCN's byte counter after a frame, a new cap) re-times the release the
//! flow waits for, rises included: a hardware rate limiter accrues credit at its current rate.
//! Without it (the simulator) a new rate spaces the flow's next frame, as the reference
//! implementations the simulator reproduces do. One spacing differs, ns-3 HPCC's NIC
//! ([`PacingConfig::spacing`]): whole-nanosecond gaps.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use rp::Spacing;
use units::{Duration, Ecn, FlowId, Instant, Rate, PRIORITIES};

use super::rp::{np_decide, Feedback, FlowRp, HostRp, Refused};
use crate::wheel::{Wheel, WheelError};

/// Pacing limits.
#[derive(Clone, Copy, Debug)]
pub struct PacingConfig {
    /// Wheel resolution (a power of two nanoseconds).
    pub tick: Duration,
    /// Wheel slots (a power of two); releases beyond `tick x wheel_slots` wait in a heap.
    pub wheel_slots: usize,
    /// How far behind `now` a release time may lag before it is pulled forward.
    pub max_catch_up: Duration,
    /// While behind its release times, a flow sends at most this many times its rate (`None`:
    /// as fast as the driver polls).
    pub catch_up_speed: Option<f64>,
    /// PFC pause time earns a flow nothing: its schedule moves on by the time its priority was
    /// paused since its last frame, so a pause that covers part of the gap between two frames
    /// delays the second by that part (what a pacing audit that gives paused time no rate
    /// expects: `quench send`). `false`: the schedule ignores pauses and a frame held by one
    /// leaves when it ends (ns-3 HPCC's `RdmaHw`, whose `m_nextAvail` PFC does not move: the
    /// simulator's hosts).
    pub pause_shifts_schedule: bool,
    /// How a flow's frames are spaced. [`Spacing::Exact`] (every driver but one): the exact
    /// schedule. [`Spacing::Ns3`] (the simulator under an ns-3 HPCC configuration,
    /// `sim::config::HostConfig::spacing`): ns-3's NIC arithmetic, each gap truncated to the
    /// nanosecond from the frame's own release ([`rp::Spacing::Ns3`] quotes it).
    pub spacing: Spacing,
    /// A rate change re-times the release the flow waits for (`true`: `quench send`, the
    /// appliance), or applies from the flow's next frame on (`false`: the simulator's hosts).
    /// `true` is what a hardware rate limiter does with the frame it holds: without it a flow
    /// cut deep by QCN (a 1500-octet frame at 5 Mb/s is 2.4 ms) sits out the whole interval
    /// after its reaction point has raised the rate again. `false` is what the references the
    /// simulator reproduces do: ns-3's DCQCN ("mlx", `CC_MODE 1`; seed 003's walk-through)
    /// assigns `qp->m_rate` in `cnp_received_mlx`, `CheckRateDecreaseMlx` and the three
    /// increase steps and never calls `RdmaHw::ChangeRate`, the one function that moves
    /// `m_nextAvail` (only HPCC's rate updates do), so the release already computed stands;
    /// the 802.1Qau pseudocode (seed 000) sets a rate limiter's `crate` and says nothing of a
    /// frame already timed.
    pub retime: bool,
}

impl Default for PacingConfig {
    fn default() -> Self {
        PacingConfig {
            // 256 ns: a fifth of a 1500-octet frame at 10 Gb/s; 4096 slots = 1 ms horizon.
            tick: Duration::from_nanos(256),
            wheel_slots: 4096,
            max_catch_up: Duration::from_micros(50),
            catch_up_speed: None,
            pause_shifts_schedule: true,
            spacing: Spacing::Exact,
            retime: true,
        }
    }
}

/// How far the peak-rate schedule may lag `now`: a driver's loop takes tens of microseconds per
/// iteration, so at the peak rate several frames may have to leave in one; beyond this the
/// unused peak capacity is forgotten (what is owed stays owed on the flow's own schedule).
const PEAK_BURST: Duration = Duration::from_micros(200);

/// What a flow sends: its frames' lengths, one after the other. Frame building stays in the
/// driver; the core only needs lengths (static dispatch: the core is generic over it).
pub trait Source {
    /// What the driver gets with each frame ([`Transmit::item`]).
    type Item;
    /// Octets on the wire of the next frame, `None` while there is nothing to send.
    fn peek(&self) -> Option<u32>;
    /// Takes the frame [`Source::peek`] announced (called only after it returned `Some`).
    fn take(&mut self) -> Self::Item;
    /// [`Source::peek`] for a flow whose window bounds what it has in flight: `None` also
    /// while the window, at the flow's current rate (`rate()`, asked only by a source with a
    /// window), is full. The core asks this wherever it decides whether a flow has a frame;
    /// the driver [`HostCore::wake`]s the flow when an ACK may have opened the window.
    fn peek_within(&self, rate: impl FnOnce() -> Rate) -> Option<u32> {
        let _ = rate;
        self.peek()
    }
    /// The flow has frames for as long as the run lasts (a pacing audit compares what it sent
    /// with its RP rate; a flow that runs dry by design cannot be audited so).
    fn endless(&self) -> bool {
        false
    }
    /// The flow has frames waiting now and is audited for as long as it keeps some (a pacing
    /// audit leaves out a window in which the flow ran dry: [`Flow::ran_dry`]); by default
    /// [`Source::endless`].
    fn backlogged(&self) -> bool {
        self.endless()
    }
}

/// Generated traffic (`quench send`, the simulator's flows): frames of one length until the
/// flow's octets are sent (the last frame is a whole one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generated {
    pub frame_len: u32,
    /// Octets still to send (`None` = unbounded).
    pub remaining: Option<u64>,
}

impl Source for Generated {
    type Item = ();

    #[inline]
    fn peek(&self) -> Option<u32> {
        (self.remaining != Some(0)).then_some(self.frame_len)
    }

    #[inline]
    fn take(&mut self) {
        if let Some(r) = self.remaining.as_mut() {
            *r = r.saturating_sub(u64::from(self.frame_len));
        }
    }

    fn endless(&self) -> bool {
        self.remaining.is_none()
    }
}

/// A frame a [`Queued`] source holds: its octets, when it arrived, the frame.
type QueuedFrame<F> = (u32, Instant, F);

/// Frames waiting in a flow's own queue (the sender appliance), bounded in octets.
///
/// The oldest frame is held inline, in the flow's state, and only the frames behind it on the
/// heap: of a million flows most hold one frame or none at a time, and a frame whose flow's
/// state the driver asked the cache for ([`HostCore::prefetch`]) then costs no further line,
/// where a ring on the heap is one more miss that only starts once the flow's state has
/// arrived (its address is in it). The heap part is allocated when a flow first holds two
/// frames and kept while the flow lives. The bound is the driver's, given with each frame
/// ([`Queued::push`]): the same for all its flows, it would be four octets of each flow's hot
/// lines ([`Flow`]).
#[derive(Debug)]
pub struct Queued<F> {
    /// The oldest frame and when it arrived; `None` exactly when the queue is empty. Its
    /// octets are `head_len` (beside `bytes`, where a tuple would pad it to eight).
    head: Option<(Instant, F)>,
    /// The frames after it, oldest first (boxed: one word in the flow's state, whose four
    /// cache lines the inline frame would otherwise overflow; clippy's `box_collection` counts
    /// the extra allocation, made once per flow that ever holds two frames).
    #[allow(clippy::box_collection)]
    rest: Option<Box<VecDeque<QueuedFrame<F>>>>,
    /// Octets of the oldest frame (when there is one) and octets queued, 32 bits each: a
    /// flow's state is one of up to 1M the appliance touches at random, so every octet of its
    /// hot lines counts.
    head_len: u32,
    bytes: u32,
}

impl<F> Default for Queued<F> {
    fn default() -> Self {
        Queued::new()
    }
}

impl<F> Queued<F> {
    /// An empty queue.
    pub fn new() -> Self {
        Queued {
            head: None,
            rest: None,
            head_len: 0,
            bytes: 0,
        }
    }

    /// Queues `frame` of `len` octets that arrived at `arrived` if the queue then holds at most
    /// `limit` octets, else hands it back. Call [`HostCore::wake`] after queueing into an
    /// empty queue.
    pub fn push(&mut self, len: u32, arrived: Instant, frame: F, limit: u32) -> Result<(), F> {
        if u64::from(self.bytes) + u64::from(len) > u64::from(limit) {
            return Err(frame);
        }
        self.bytes += len;
        if self.head.is_none() {
            self.head = Some((arrived, frame));
            self.head_len = len;
        } else {
            self.rest
                .get_or_insert_with(Default::default)
                .push_back((len, arrived, frame));
        }
        Ok(())
    }

    /// Octets queued.
    pub fn bytes(&self) -> u64 {
        u64::from(self.bytes)
    }

    pub fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    /// Empties the queue (the flow is evicted), oldest first.
    pub fn drain(&mut self) -> impl Iterator<Item = QueuedFrame<F>> + '_ {
        self.bytes = 0;
        let rest = self.rest.iter_mut().flat_map(|r| r.drain(..));
        let len = self.head_len;
        let head = self.head.take().map(|(at, f)| (len, at, f));
        head.into_iter().chain(rest)
    }
}

impl<F> Source for Queued<F> {
    /// When the frame arrived, and the frame.
    type Item = (Instant, F);

    fn backlogged(&self) -> bool {
        self.head.is_some()
    }

    #[inline]
    fn peek(&self) -> Option<u32> {
        self.head.as_ref().map(|_| self.head_len)
    }

    #[inline]
    fn take(&mut self) -> (Instant, F) {
        let head = self
            .head
            .take()
            .expect("Source::take after Source::peek returned a frame");
        self.bytes -= self.head_len;
        if let Some((len, at, f)) = self.rest.as_mut().and_then(|r| r.pop_front()) {
            self.head = Some((at, f));
            self.head_len = len;
        }
        head
    }
}

/// What a flow is, as the core sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// The flow's id at its reaction point (QCN's limiters are keyed by it; unique among the
    /// core's flows).
    pub id: FlowId,
    /// 802.1p priority of its frames (PFC pauses them by it).
    pub priority: u8,
    /// The most it may send at (its configured rate, or the line rate).
    pub cap: Rate,
    /// When it starts.
    pub start: Instant,
}

/// A flow of the core: a slot index, valid until [`HostCore::remove_flow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowHandle(pub u32);

/// One frame to send.
#[derive(Debug, PartialEq, Eq)]
pub struct Transmit<T> {
    pub handle: FlowHandle,
    pub id: FlowId,
    /// The flow's frame number (0, 1, ...).
    pub seq: u64,
    /// Octets on the wire.
    pub len: u32,
    /// The release time this frame was due at.
    pub release: Instant,
    pub item: T,
}

/// Why [`HostCore::add_flow`] refused a flow.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AddFlowError {
    #[error("flow {0} is already held by this host")]
    Duplicate(FlowId),
}

/// A flow: what it is, what it sends, its reaction point and its schedule, its counters.
///
/// Laid out in the order written (`repr(C)`): first what a frame of a flow whose frame leaves
/// at once, or on its schedule, reads and writes (the hot lines: with the sender appliance's
/// pooled frames, the first three lines of its [`Slot`], which [`HostCore::prefetch`] asks
/// for), then what only starts, pauses with a catch-up speed, lost sending time, reaction-point
/// timers and DCQCN read (the cold line, with the slot's generation, read when a flow goes on
/// the wheel or comes off it). At a million flows each line a frame touches is a miss, and a
/// line written is also a line written back (docs/design.md, "Sender appliance").
#[derive(Debug)]
#[repr(C)]
pub struct Flow<S> {
    pub source: S,
    pub spec: FlowSpec,
    /// Frames sent (the next frame's number).
    pub seq: u64,
    /// Octets sent.
    pub bytes_sent: u64,
    /// When its source last ran dry ([`UNSET`]: it has a frame, or never had one):
    /// [`Flow::finished_at`].
    finished: Instant,
    /// The release the flow waits for or last had, and the rate that set it, when
    /// `has_pending` (not before the first frame): [`Flow::pending`].
    pending: Pending,
    /// How many times its source ran dry (a queued source between bursts). 32 bits, wrapping:
    /// a pacing audit compares two counts one window apart, never 2^32 runs.
    pub ran_dry: u32,
    has_pending: bool,
    /// An entry of the slot's current generation is on the wheel.
    scheduled: bool,
    /// `started` is set.
    has_started: bool,
    // The cold line.
    /// When it started ([`UNSET`]: not yet): [`Flow::started_at`].
    started: Instant,
    /// Sending time this flow gave up at the catch-up bound.
    pub lag_dropped: Duration,
    /// The reaction-point timer deadline the timer heap holds for it ([`NO_TIMER`]: none).
    timer_at: Instant,
    rp: FlowRp,
    /// The schedule at the peak rate (with a catch-up speed, [`PacingConfig::catch_up_speed`]):
    /// the earliest the next frame may leave; read and written only with one.
    peak: rp::Pacer,
}

/// `Flow::timer_at` of a flow whose reaction point has no timer armed. This and the other
/// sentinels instead of `Option`s keep a flow's hot part in three cache lines (test
/// `a_queued_flow_fits_in_three_cache_lines`): an `Option<Instant>` takes 16 octets, an
/// `Option<Pending>` 8 more than the flag beside `scheduled`.
const NO_TIMER: Instant = Instant::MAX;

/// `Flow::started` and `Flow::finished` of a flow that has not: no flow starts or runs dry at
/// `Instant::MAX`, the end of time.
const UNSET: Instant = Instant::MAX;

impl<S> Flow<S> {
    /// The flow's reaction-point state.
    pub fn rp(&self) -> &FlowRp {
        &self.rp
    }

    /// When it started (`None`: not yet).
    pub fn started_at(&self) -> Option<Instant> {
        (self.started != UNSET).then_some(self.started)
    }

    /// When its source last ran dry (for a generated flow of a given size: when it finished);
    /// `None` while it has a frame, and before its first.
    pub fn finished_at(&self) -> Option<Instant> {
        (self.finished != UNSET).then_some(self.finished)
    }

    fn pending(&self) -> Option<Pending> {
        self.has_pending.then_some(self.pending)
    }

    fn set_pending(&mut self, p: Option<Pending>) {
        self.has_pending = p.is_some();
        if let Some(p) = p {
            self.pending = p;
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Pending {
    /// When the wheel hands the flow back.
    at: Instant,
    rate: Rate,
    /// The flow's schedule (the one pacer): its release time is the next frame's place in it.
    /// Equal to `at`, except while the flow catches up at a bounded speed: then it lies before
    /// `at`, and the time between is owed.
    due: rp::Pacer,
    /// The pause clock of the flow's priority when `due` was last set: pause time accrued
    /// since then has not moved the schedule yet.
    pause_mark: Duration,
}

impl Pending {
    /// Moves the schedule (its release, the pacer's and, `peak`, the peak schedule's places)
    /// on by the pause time the flow's priority accrued since [`Pending::pause_mark`], `clock`
    /// being that priority's pause clock now, and marks `clock`. Returns the time moved (zero:
    /// nothing changes, `peak` is not touched).
    fn move_past_pause(&mut self, clock: Duration, peak: &mut rp::Pacer) -> Duration {
        let paused = clock - self.pause_mark;
        if paused > Duration::ZERO {
            self.pause_mark = clock;
            self.due.shift(paused);
            peak.shift(paused);
            self.at += paused;
        }
        paused
    }
}

/// How long each priority has been paused (PFC). A flow's schedule moves on by exactly the
/// paused time since its last frame, so a pause that covers part of the gap between two frames
/// delays the second by that part, as a pacing audit that gives paused time no rate expects.
#[derive(Clone, Copy, Debug, Default)]
struct PauseClock {
    paused: [Duration; PRIORITIES],
    /// The last look and, per priority, when the pause in force then runs out.
    look: Option<Instant>,
    until: [Option<Instant>; PRIORITIES],
}

impl PauseClock {
    /// Counts the pauses in force since the last look up to `now`. A look no later than the
    /// last (each frame of a burst after the first: the driver's one `now`) changes nothing.
    #[inline]
    fn advance(&mut self, now: Instant) {
        match self.look {
            Some(l) if l >= now => {}
            Some(last) => self.count(last, now),
            None => self.look = Some(now),
        }
    }

    /// [`PauseClock::advance`] from the last look, `last`, to the later `now`.
    #[inline(never)]
    fn count(&mut self, last: Instant, now: Instant) {
        for (total, until) in self.paused.iter_mut().zip(self.until.iter_mut()) {
            if let Some(end) = until.map(|u| u.min(now)).filter(|&e| e > last) {
                *total = *total + (end - last);
            }
            *until = until.filter(|&u| u > now);
        }
        self.look = Some(now);
    }

    fn set(&mut self, now: Instant, prio: u8, until: Option<Instant>) {
        self.advance(now);
        if let Some(u) = self.until.get_mut(usize::from(prio)) {
            *u = until.filter(|&t| t > now);
        }
    }

    fn of(&self, prio: u8) -> Duration {
        self.paused
            .get(usize::from(prio))
            .copied()
            .unwrap_or(Duration::ZERO)
    }

    /// Whether `prio` is paused at `now` (no earlier than the last look).
    fn paused_at(&self, now: Instant, prio: u8) -> bool {
        self.until
            .get(usize::from(prio))
            .copied()
            .flatten()
            .is_some_and(|u| now < u)
    }

    /// Whether `prio` was paused at the last look.
    fn paused_now(&self, prio: u8) -> bool {
        self.until
            .get(usize::from(prio))
            .is_some_and(Option::is_some)
    }
}

/// Aligned to a cache line, the flow first (its hot lines at the slot's start, [`Flow`]), the
/// generation after it (read only when the flow goes on the wheel or comes off it).
#[repr(C, align(64))]
struct Slot<S> {
    flow: Option<Flow<S>>,
    /// Bumped when the flow's release is re-timed and when the slot is emptied: wheel and
    /// start entries of an older generation are stale.
    generation: u32,
}

/// A host: its flows with their reaction points and schedules, its notification point.
pub struct HostCore<S> {
    cfg: PacingConfig,
    rp: HostRp,
    np: Option<np::Np>,
    slots: Vec<Slot<S>>,
    free: Vec<u32>,
    ids: HashMap<FlowId, u32>,
    /// (release time, slot, generation) of flows waiting for their release time.
    wheel: Wheel<(Instant, u32, u32)>,
    /// Flows not started yet: (start, slot, generation).
    starts: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    /// Per-flow reaction-point timers: (deadline, slot); an entry whose flow's `timer_at`
    /// differs is stale.
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    pause: PauseClock,
    /// Per priority, the flows (slot, generation) whose release came while it was paused: back
    /// on the wheel when the pause ends.
    parked: [Vec<(u32, u32)>; PRIORITIES],
    /// [`Spacing::Ns3`] only: ns-3's NIC round-robin among its queue pairs
    /// (`RdmaEgressQueue::GetNextQindex`).
    rr: RoundRobin,
}

/// ns-3 HPCC's choice among the queue pairs whose `m_nextAvail` has come: "for (qIndex = 1;
/// qIndex <= fcount; qIndex++){ uint32_t idx = (qIndex + m_rrlast) % fcount; ..." over the QPs in
/// the order they were created (qbb-net-device.cc), i.e. the first due flow created after the
/// last one served, wrapping around; not the earliest release.
#[derive(Default)]
struct RoundRobin {
    /// Per slot, the flow's creation rank on this host.
    rank: Vec<u64>,
    next_rank: u64,
    /// The rank of the flow served last.
    last: u64,
    /// Scratch: the due flows of one pick (release, slot).
    due: Vec<(Instant, u32)>,
}

impl<S: Source> HostCore<S> {
    /// A host whose flows react as `rp` says and whose receive side answers as `np` says
    /// (`None`: no notification point).
    pub fn new(cfg: PacingConfig, rp: HostRp, np: Option<np::Np>) -> Result<Self, WheelError> {
        Ok(HostCore {
            cfg,
            rp,
            np,
            slots: Vec::new(),
            free: Vec::new(),
            ids: HashMap::new(),
            wheel: Wheel::new(cfg.tick, cfg.wheel_slots)?,
            parked: Default::default(),
            starts: BinaryHeap::new(),
            timers: BinaryHeap::new(),
            pause: PauseClock::default(),
            rr: RoundRobin::default(),
        })
    }

    /// Makes room for `n` flows at once, their states on huge pages
    /// ([`quench_port::cache::advise_huge_pages`]): for a driver with a large flow table whose flows
    /// are touched at random (the sender appliance). The slots never move afterwards as long as
    /// the core holds at most `n` flows. If the address space cannot be had at once, nothing is
    /// reserved and the slots grow with the flows, on normal pages.
    pub fn reserve_flows(&mut self, n: usize) {
        let more = n.saturating_sub(self.slots.len());
        if self.slots.try_reserve_exact(more).is_ok() {
            quench_port::cache::advise_huge_pages(&self.slots);
        }
    }

    /// Octets one flow's slot takes in the core's array (its state and generation, aligned to
    /// a cache line), whether it holds a flow or not.
    pub const fn bytes_per_slot() -> usize {
        std::mem::size_of::<Slot<S>>()
    }

    /// The cache lines at the start of a flow's slot that hold its hot part ([`Flow`]): what a
    /// frame that leaves at once or on its schedule reads and writes.
    pub const fn hot_lines() -> usize {
        // `Option<Flow>` keeps its flag in a niche of the flow (it is no larger), so the flow
        // starts the slot.
        let at = std::mem::offset_of!(Slot<S>, flow) + std::mem::offset_of!(Flow<S>, started);
        at.div_ceil(64)
    }

    pub fn config(&self) -> &PacingConfig {
        &self.cfg
    }

    /// The host's reaction points.
    pub fn host_rp(&self) -> &HostRp {
        &self.rp
    }

    /// Adds a flow that starts at `spec.start` (at once if that has passed) with `source`.
    pub fn add_flow(&mut self, spec: FlowSpec, source: S) -> Result<FlowHandle, AddFlowError> {
        if self.ids.contains_key(&spec.id) {
            return Err(AddFlowError::Duplicate(spec.id));
        }
        let flow = Flow {
            source,
            spec,
            seq: 0,
            bytes_sent: 0,
            finished: UNSET,
            pending: Pending::default(),
            ran_dry: 0,
            has_pending: false,
            scheduled: false,
            has_started: false,
            started: UNSET,
            lag_dropped: Duration::ZERO,
            timer_at: NO_TIMER,
            rp: self.rp.new_flow(),
            peak: rp::Pacer::default(),
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize].flow = Some(flow);
                i
            }
            None => {
                self.slots.push(Slot {
                    flow: Some(flow),
                    generation: 0,
                });
                (self.slots.len() - 1) as u32
            }
        };
        self.ids.insert(spec.id, i);
        if self.cfg.spacing == Spacing::Ns3 {
            let rr = &mut self.rr;
            if rr.rank.len() <= i as usize {
                rr.rank.resize(i as usize + 1, 0);
            }
            rr.next_rank += 1;
            rr.rank[i as usize] = rr.next_rank;
        }
        let generation = self.slots[i as usize].generation;
        self.starts.push(Reverse((spec.start, i, generation)));
        self.arm(i);
        Ok(FlowHandle(i))
    }

    /// Removes a flow; returns it (its source may still hold frames).
    pub fn remove_flow(&mut self, h: FlowHandle) -> Option<Flow<S>> {
        let slot = self.slots.get_mut(h.0 as usize)?;
        let flow = slot.flow.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.ids.remove(&flow.spec.id);
        self.free.push(h.0);
        Some(flow)
    }

    pub fn flow(&self, h: FlowHandle) -> Option<&Flow<S>> {
        self.slots.get(h.0 as usize)?.flow.as_ref()
    }

    /// Asks the cache for the flow's hot lines ([`HostCore::hot_lines`]) ahead of a call that
    /// will touch them ([`quench_port::cache::prefetch`]): for a driver that looks a burst of flows
    /// up first.
    #[inline]
    pub fn prefetch(&self, h: FlowHandle) {
        if let Some(s) = self.slots.get(h.0 as usize) {
            quench_port::cache::prefetch(s, Self::hot_lines());
        }
    }

    /// The flow's source, to give it frames (then [`HostCore::wake`]).
    pub fn source_mut(&mut self, h: FlowHandle) -> Option<&mut S> {
        Some(&mut self.slots.get_mut(h.0 as usize)?.flow.as_mut()?.source)
    }

    /// The flow whose reaction-point id is `id`.
    pub fn find(&self, id: FlowId) -> Option<FlowHandle> {
        self.ids.get(&id).map(|&i| FlowHandle(i))
    }

    /// How many flows the core holds.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The flows held, in slot order.
    pub fn flows(&self) -> impl Iterator<Item = (FlowHandle, &Flow<S>)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((FlowHandle(i as u32), s.flow.as_ref()?)))
    }

    /// The rate the flow may send at now: its RP rate, at most its cap (zero for no flow).
    pub fn rate(&self, h: FlowHandle) -> Rate {
        self.flow(h)
            .map_or(Rate::ZERO, |f| self.rp.rate(&f.rp, f.spec.id, f.spec.cap))
    }

    /// The flow's schedule lies before `t`: it still owes frames that came due before then
    /// (a driver that polled at `t` and released every due frame leaves nothing owed from
    /// before `t`). PFC pause time counted by `t`'s poll is not owed: the schedule moves on by
    /// it. `false` for no flow, one that has not sent yet, and one idle without a frame (it
    /// owes nothing for the idle time: [`HostCore::wake`]).
    pub fn owes_from_before(&self, h: FlowHandle, t: Instant) -> bool {
        let Some((f, p)) = self
            .flow(h)
            .filter(|f| f.scheduled)
            .and_then(|f| Some((f, f.pending()?)))
        else {
            return false;
        };
        let (mut p, mut peak) = (p, f.peak);
        p.move_past_pause(self.pause.of(f.spec.priority), &mut peak);
        p.due.release_time() < t
    }

    /// Sending time the flows gave up at the catch-up bound (the driver was not running).
    pub fn lag_dropped(&self) -> Duration {
        self.flows()
            .fold(Duration::ZERO, |sum, (_, f)| sum + f.lag_dropped)
    }

    /// Every flow has started and none has a frame scheduled.
    pub fn done(&self) -> bool {
        self.starts.is_empty() && self.flows().all(|(_, f)| !f.scheduled)
    }

    /// The flow's source has a frame again: the flow waits for its release (a flow idle past
    /// its last release time owes nothing for the idle time and has no credit from it).
    pub fn wake(&mut self, now: Instant, h: FlowHandle) {
        if let Some(at) = self.ready(now, h) {
            self.schedule(at, h.0);
        }
    }

    /// Puts slot `i`'s flow on the wheel for `at` under the slot's current generation.
    #[inline]
    fn schedule(&mut self, at: Instant, i: u32) {
        let generation = self.slots[i as usize].generation;
        self.wheel.push(at, (at, i, generation));
    }

    /// [`HostCore::wake`], and when the flow's frame is the one [`HostCore::poll_transmit`]
    /// would hand out next, that frame, taken now exactly as `poll_transmit(now)` would take it
    /// (the wheel entry is neither made nor popped). That is when the flow owes no wait (idle
    /// past its last release time, its release is `now`), its priority is not paused, and the
    /// wheel holds nothing for its slot of `now` or an earlier one: the wheel releases by slot,
    /// then in insertion order ([`Wheel`]), so an entry put in now would come out first.
    /// Not with [`Spacing::Ns3`], whose pick among due flows is a round-robin. For a driver
    /// that hands frames to idle flows one at a time (the sender appliance); the frame leaves
    /// at its release time instead of at the start of the wheel's next slot.
    pub fn wake_and_transmit(&mut self, now: Instant, h: FlowHandle) -> Option<Transmit<S::Item>> {
        let at = self.ready(now, h)?;
        let prio = self.slots[h.0 as usize].flow.as_ref()?.spec.priority;
        self.pause.advance(now);
        if at > now
            || self.cfg.spacing == Spacing::Ns3
            || self.pause.paused_now(prio)
            || self.wheel.holds_by(at)
        {
            self.schedule(at, h.0);
            return None;
        }
        self.transmit(now, at, h.0)
    }

    /// A flow whose source has a frame again is scheduled: when it may release (its pending
    /// release, or `now` for a flow idle past it), for the caller to put it on the wheel or
    /// transmit; `None` if it already waits, has not started or has nothing.
    fn ready(&mut self, now: Instant, h: FlowHandle) -> Option<Instant> {
        let f = self.slots.get_mut(h.0 as usize)?.flow.as_mut()?;
        let rp = &self.rp;
        if f.scheduled
            || !f.has_started
            || f.source
                .peek_within(|| rp.rate(&f.rp, f.spec.id, f.spec.cap))
                .is_none()
        {
            return None;
        }
        f.finished = UNSET;
        let at = match f.pending() {
            Some(p) if p.at > now => p.at,
            _ => {
                f.set_pending(None);
                now
            }
        };
        f.scheduled = true;
        Some(at)
    }

    /// Feedback for the flow: drives its reaction point and re-times its pending release at
    /// the rate that results (a cut pushes it back, a rise brings it forward).
    pub fn handle_feedback(
        &mut self,
        now: Instant,
        h: FlowHandle,
        fb: Feedback,
    ) -> Result<(), Refused> {
        let Some(f) = self
            .slots
            .get_mut(h.0 as usize)
            .and_then(|s| s.flow.as_mut())
        else {
            return Err(Refused::NotOurs);
        };
        let r = self.rp.on_feedback(&mut f.rp, f.spec.id, now, fb);
        self.arm(h.0);
        self.retime(now, h.0);
        r
    }

    /// ns-3 HPCC's `RdmaHw::ChangeRate`, which HPCC's and HPCC-PINT's rate updates call (DCQCN,
    /// TIMELY and DCTCP assign the rate and leave the release): the flow's pending release
    /// moves by the change of a `len`-octet frame's serialisation time from `old` to `new`,
    /// each truncated to the nanosecond (`m_nextAvail += new_sendingTime - sendingTime`),
    /// earlier or later, and a scheduled flow waits for the moved release
    /// (`QbbNetDevice::UpdateNextAvail`).
    pub fn move_release(&mut self, now: Instant, h: FlowHandle, old: Rate, new: Rate, len: u32) {
        if old == new || old == Rate::ZERO || new == Rate::ZERO {
            return;
        }
        let Some(slot) = self.slots.get_mut(h.0 as usize) else {
            return;
        };
        let Some(f) = slot.flow.as_mut() else {
            return;
        };
        let Some(mut p) = f.pending() else {
            return;
        };
        let gap = |r: Rate| {
            let ns = u128::from(len) * 8_000_000_000 / u128::from(r.as_bps());
            u64::try_from(ns).unwrap_or(u64::MAX)
        };
        let (was, is) = (gap(old), gap(new));
        if is >= was {
            let d = Duration::from_nanos(is - was);
            p.due.shift(d);
            p.at += d;
        } else {
            let d = was - is;
            p.due.shift_back(Duration::from_nanos(d));
            p.at = Instant::from_nanos(p.at.as_nanos().saturating_sub(d));
        }
        let (scheduled, at) = (f.scheduled, p.at);
        f.set_pending(Some(p));
        if scheduled {
            slot.generation = slot.generation.wrapping_add(1);
            let at = at.max(now);
            self.wheel.push(at, (at, h.0, slot.generation));
        }
    }

    /// The PFC pause of `prio` runs until `until` (`None`: not paused; `Instant::MAX`: until
    /// lifted), as of `now`. A paused flow sends nothing (802.1Qbb stops the sender) and, with
    /// [`PacingConfig::pause_shifts_schedule`], owes nothing for the pause.
    pub fn handle_pause(&mut self, now: Instant, prio: u8, until: Option<Instant>) {
        self.pause.set(now, prio, until);
        self.unpark(now);
    }

    /// A PFC (802.1Qbb) frame this sender received on its link, whose speed is `link_rate`:
    /// every priority the frame names is paused for its quanta (0: resumed; timed by
    /// [`cp::pfc::pause_end`]) and holds its releases until then ([`HostCore::handle_pause`]).
    /// The core's pause clock is the one record of the pause: [`HostCore::paused`] reads it.
    pub fn handle_pfc(&mut self, now: Instant, link_rate: Rate, pfc: &quench_wire::pfc::PfcRepr) {
        for prio in 0..PRIORITIES as u8 {
            if pfc.enabled(usize::from(prio)) {
                let until = cp::pfc::pause_end(now, pfc.quanta[usize::from(prio)], link_rate);
                self.handle_pause(now, prio, until);
            }
        }
    }

    /// Whether PFC pauses `prio` at `now` (no earlier than the core's last call with a time:
    /// the clock forgets a pause once a call's `now` has passed its end).
    pub fn paused(&self, now: Instant, prio: u8) -> bool {
        self.pause.paused_at(now, prio)
    }

    /// The priorities PFC pauses at `now` (bit n = priority n), as [`HostCore::paused`].
    pub fn paused_mask(&self, now: Instant) -> u8 {
        (0..PRIORITIES as u8)
            .filter(|&p| self.paused(now, p))
            .fold(0, |m, p| m | 1 << p)
    }

    /// Flows parked on a priority whose pause has ended go back on the wheel, due now (their
    /// schedule then moves on by the pause, if [`PacingConfig::pause_shifts_schedule`]).
    fn unpark(&mut self, now: Instant) {
        for (prio, parked) in self.parked.iter_mut().enumerate() {
            if !parked.is_empty() && !self.pause.paused_now(prio as u8) {
                for e in parked.drain(..) {
                    self.wheel.push(now, (now, e.0, e.1));
                }
            }
        }
    }

    /// The flow's own limit is now `cap`; its pending release is re-timed.
    pub fn set_cap(&mut self, now: Instant, h: FlowHandle, cap: Rate) {
        if let Some(f) = self
            .slots
            .get_mut(h.0 as usize)
            .and_then(|s| s.flow.as_mut())
        {
            f.spec.cap = cap;
            self.retime(now, h.0);
        }
    }

    /// Runs the reaction points' timers due at `now` and re-times the flows whose rate they
    /// changed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.rp.host_deadline().is_some_and(|t| t <= now) {
            // QCN's pool: only flows with a limiter before or after have a rate below their cap.
            let mut touched: Vec<FlowId> = self.rp.limited_flows().collect();
            self.rp.on_host_timeout(now);
            touched.extend(self.rp.limited_flows());
            for id in touched {
                if let Some(&i) = self.ids.get(&id) {
                    self.retime(now, i);
                }
            }
        }
        while let Some(&Reverse((at, i))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(f) = self
                .slots
                .get_mut(i as usize)
                .and_then(|s| s.flow.as_mut())
                .filter(|f| f.timer_at == at)
            else {
                continue;
            };
            f.timer_at = NO_TIMER;
            self.rp.on_flow_timeout(&mut f.rp, now);
            self.arm(i);
            self.retime(now, i);
        }
    }

    /// When the core next has something to do: a flow's start or release, a reaction-point
    /// timer (an entry made stale by a later change may make this early: the call then does
    /// nothing).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.next_release()
            .into_iter()
            .chain(self.next_timer())
            .min()
    }

    /// When [`HostCore::poll_transmit`] may next have a frame: a flow's start or release, or
    /// the end of a pause that holds flows (the part of [`HostCore::next_deadline`] without the
    /// reaction points' timers).
    pub fn next_release(&self) -> Option<Instant> {
        let pauses = self
            .parked
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.is_empty())
            .filter_map(|(prio, _)| self.pause.until[prio])
            .filter(|&u| u != Instant::MAX);
        [
            self.starts.peek().map(|r| r.0 .0),
            self.wheel.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .chain(pauses)
        .min()
    }

    /// When a reaction point's timer is next due (the part of [`HostCore::next_deadline`] that
    /// [`HostCore::handle_timeout`] serves).
    pub fn next_timer(&self) -> Option<Instant> {
        [self.timers.peek().map(|r| r.0 .0), self.rp.host_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// A data frame of `flow` with ECN codepoint `ecn` arrived: the notification point's
    /// answer to send back (a CNP or a UE), if any.
    pub fn handle_data(&mut self, now: Instant, flow: FlowId, ecn: Ecn) -> Option<Feedback> {
        np_decide(&mut self.np, now, flow, ecn)
    }

    /// The next frame due at `now`, if any: already charged to its flow's reaction point, and
    /// the flow's next frame scheduled.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit<S::Item>> {
        self.pause.advance(now);
        self.unpark(now);
        self.start_due(now);
        let (release, i) = self.pop_due(now)?;
        self.transmit(now, release, i)
    }

    /// Takes slot `i`'s next frame, due at `release`, at `now`: charges it to the flow's
    /// reaction point and schedules the flow's next frame.
    fn transmit(&mut self, now: Instant, release: Instant, i: u32) -> Option<Transmit<S::Item>> {
        let pause_mark = {
            let f = self.slots[i as usize].flow.as_ref()?;
            self.pause.of(f.spec.priority)
        };
        let f = self.slots[i as usize].flow.as_mut()?;
        let rp = &self.rp;
        let len = f
            .source
            .peek_within(|| rp.rate(&f.rp, f.spec.id, f.spec.cap))?;
        let item = f.source.take();
        let tx = Transmit {
            handle: FlowHandle(i),
            id: f.spec.id,
            seq: f.seq,
            len,
            release,
            item,
        };
        f.seq += 1;
        f.bytes_sent += u64::from(len);
        let rate = self.rp.rate(&f.rp, f.spec.id, f.spec.cap);
        let more = f.source.peek_within(|| rate).is_some();
        // The frame's place in the schedule: where the flow's pacer says (what a stall owed
        // included, what a retime made of it), or the wheel's time for a flow's first frame and
        // the first after it idled past its release ([`HostCore::wake`] clears the schedule).
        // The wheel's time is not the schedule's: a rise re-times the octets a flow owes, due
        // before `now`, to less time than the wheel entry's, which stays where it was
        // (`retime`); restarting from that entry would give the flow the difference at the
        // new rate, octets beyond its rate's integral.
        let mut due = match f.pending() {
            Some(p) => p.due,
            None => rp::Pacer::starting_at(release),
        };
        // This frame's place lags `now` by at most the catch-up bound (the excess is given up);
        // the next frame's place is this one's plus its serialisation time at the flow's rate,
        // exact. With a zero bound a late frame pushes the schedule (a NIC that earns nothing
        // while it cannot send: the simulator's hosts).
        let lost = due.forget_credit(now, self.cfg.max_catch_up);
        if lost > Duration::ZERO {
            f.lag_dropped = f.lag_dropped + lost;
        }
        due.next_release_spaced(now, u64::from(len), rate, Duration::MAX, self.cfg.spacing);
        // A zero rate never releases again (until a retime at a rate that is not zero).
        let next = if rate == Rate::ZERO {
            Instant::MAX
        } else {
            due.release_time()
        };
        let at = match self.cfg.catch_up_speed {
            // A second schedule at `speed` times the rate, allowed to lag `now` by PEAK_BURST:
            // on schedule it never binds (it runs ahead of the flow's own); after a stall it
            // spaces the frames owed at the peak rate instead of sending them back to back.
            Some(speed) if speed > 0.0 => {
                let mut peak = if f.has_pending {
                    f.peak
                } else {
                    rp::Pacer::starting_at(now)
                };
                let peak_rate = Rate::from_bps((rate.as_bps() as f64 * speed) as u64);
                peak.next_release(now, u64::from(len), peak_rate, PEAK_BURST);
                f.peak = peak;
                next.max(peak.release_time())
            }
            _ => next,
        };
        f.set_pending(Some(Pending {
            at,
            rate,
            due,
            pause_mark,
        }));
        if !more {
            f.scheduled = false;
            f.finished = now;
            f.ran_dry = f.ran_dry.wrapping_add(1);
        }
        self.rp
            .on_tx(&mut f.rp, f.spec.id, now, u64::from(len), more);
        if more {
            self.schedule(at, i);
        }
        self.arm(i);
        // QCN's byte counter may just have raised the rate the next release was timed with.
        self.retime(now, i);
        Some(tx)
    }

    /// Flows whose start has come go on the wheel at `now`: a flow owes nothing for time before
    /// the driver first saw it (start-up, a stall across its start), which would otherwise come
    /// out as a catch-up burst and count as lag given up.
    fn start_due(&mut self, now: Instant) {
        while let Some(&Reverse((at, i, generation))) = self.starts.peek() {
            if at > now {
                break;
            }
            self.starts.pop();
            let slot = &mut self.slots[i as usize];
            if slot.generation != generation {
                continue;
            }
            let Some(f) = slot.flow.as_mut() else {
                continue;
            };
            f.started = at;
            f.has_started = true;
            let rp = &self.rp;
            if f.source
                .peek_within(|| rp.rate(&f.rp, f.spec.id, f.spec.cap))
                .is_some()
            {
                f.scheduled = true;
                self.wheel.push(now, (now, i, generation));
            }
        }
    }

    /// The next flow whose release is due and whose priority is not paused: its release time
    /// and slot. Flows a pause held move their schedule on by the pause. Among several due
    /// flows: the earliest release, or with [`Spacing::Ns3`] ns-3's round-robin ([`RoundRobin`]).
    fn pop_due(&mut self, now: Instant) -> Option<(Instant, u32)> {
        if self.cfg.spacing != Spacing::Ns3 {
            return self.pop_due_earliest(now);
        }
        // Every due flow, the round-robin pick, the others back on the wheel at their release
        // times (still due).
        let mut due = std::mem::take(&mut self.rr.due);
        due.clear();
        while let Some(d) = self.pop_due_earliest(now) {
            due.push(d);
        }
        let (last, rank) = (self.rr.last, &self.rr.rank);
        let k = (0..due.len()).min_by_key(|&k| {
            let r = rank[due[k].1 as usize];
            (r <= last, r)
        });
        let pick = k.map(|k| due.swap_remove(k));
        for &(release, i) in &due {
            let generation = self.slots[i as usize].generation;
            self.wheel.push(release, (release, i, generation));
        }
        self.rr.due = due;
        let pick = pick?;
        self.rr.last = self.rr.rank[pick.1 as usize];
        Some(pick)
    }

    fn pop_due_earliest(&mut self, now: Instant) -> Option<(Instant, u32)> {
        loop {
            let (release, i, generation) = self.wheel.pop_due(now)?;
            let slot = &mut self.slots[i as usize];
            if generation != slot.generation {
                continue; // superseded by a retime, or the flow was removed
            }
            let Some(f) = slot.flow.as_mut() else {
                continue;
            };
            let prio = f.spec.priority;
            let clock = self.pause.of(prio);
            if self.pause.paused_now(prio) {
                // Back on the wheel when the pause ends; the clock counts it meanwhile.
                self.parked[usize::from(prio)].push((i, generation));
                continue;
            }
            if f.has_pending && self.cfg.pause_shifts_schedule {
                let Flow { pending, peak, .. } = &mut *f;
                if pending.move_past_pause(clock, peak) > Duration::ZERO {
                    self.wheel.push(pending.at, (pending.at, i, generation));
                    continue;
                }
            }
            let rp = &self.rp;
            if f.source
                .peek_within(|| rp.rate(&f.rp, f.spec.id, f.spec.cap))
                .is_none()
            {
                // Its queue was emptied under it (an eviction's drain), or its window closed:
                // idle until woken.
                f.scheduled = false;
                continue;
            }
            return Some((release, i));
        }
    }

    /// Puts the flow's reaction-point timer deadline on the timer heap if it changed. Only
    /// DCQCN's flows have timers of their own (`HostRp::new_flow`): with any other reaction
    /// point a flow's deadline is never set, and its cold line is not read.
    fn arm(&mut self, i: u32) {
        if !matches!(self.rp, HostRp::Dcqcn(_)) {
            return;
        }
        let Some(f) = self.slots[i as usize].flow.as_mut() else {
            return;
        };
        let d = HostRp::flow_deadline(&f.rp).unwrap_or(NO_TIMER);
        if d != f.timer_at {
            f.timer_at = d;
            if d != NO_TIMER {
                self.timers.push(Reverse((d, i)));
            }
        }
    }

    /// The flow's rate may have changed: if it waits for a release that an earlier rate set,
    /// the part of the frame's transmission time still ahead is re-timed at the new rate
    /// (`at' = now + (at - now) x old / new`), the credit earned so far being kept. Without
    /// this, a flow cut deep by QCN (one 1500-octet frame at 5 Mb/s is 2.4 ms) would sit out the
    /// whole interval while its reaction point had long raised the rate again. A flow behind
    /// its schedule (catching up) keeps the octets it owes: the time owed is re-timed the same
    /// way. PFC pause time since the flow's last frame is not owed (it is not sending time):
    /// the schedule first moves on by it, as [`HostCore::poll_transmit`] would move it, and
    /// only then is re-timed; a paused flow's reaction point keeps changing its rate (QCN's
    /// and DCQCN's timers run, feedback for frames sent before the pause arrives).
    /// Without [`PacingConfig::retime`] nothing is re-timed: the new rate spaces the flow's next
    /// frame.
    fn retime(&mut self, now: Instant, i: u32) {
        if !self.cfg.retime {
            return;
        }
        self.pause.advance(now);
        let slot = &mut self.slots[i as usize];
        let Some(f) = slot.flow.as_mut() else {
            return;
        };
        let Some(mut p) = f.pending() else {
            return;
        };
        let rate = self.rp.rate(&f.rp, f.spec.id, f.spec.cap);
        if p.rate == rate || rate.as_bps() == 0 || p.rate.as_bps() == 0 {
            return;
        }
        if self.cfg.pause_shifts_schedule {
            p.move_past_pause(self.pause.of(f.spec.priority), &mut f.peak);
        }
        // Times ahead of `now` stretch by old / new; so do octets owed behind it (a flow
        // catching up owes the same octets at the new rate); a cut can stretch what is owed
        // past the catch-up bound: the excess is given up.
        let mut due = p.due;
        due.retime(now, p.rate, rate);
        let lost = due.forget_credit(now, self.cfg.max_catch_up);
        if lost > Duration::ZERO {
            f.lag_dropped = f.lag_dropped + lost;
        }
        if !f.scheduled {
            // Idle (no frame): no wheel entry; [`HostCore::wake`] waits for `at`, the
            // schedule's next release (and the peak schedule's, which no rate re-times).
            let at = match self.cfg.catch_up_speed {
                Some(speed) if speed > 0.0 => due.release_time().max(f.peak.release_time()),
                _ => due.release_time(),
            };
            f.set_pending(Some(Pending { at, rate, due, ..p }));
            return;
        }
        if p.at <= now {
            // Already due (typically a flow catching up after its driver stalled, reading the
            // feedback that came meanwhile): the wheel hands it back at the next poll, which
            // times the next frame from `due`. Rescaling `due` keeps what the flow earned at
            // the old rate; left in time units, a cut would have forgiven part of it (a
            // halving, half) and a rise inflated it.
            f.set_pending(Some(Pending { rate, due, ..p }));
            return;
        }
        let at = rp::Pacer::starting_at(p.at).retime(now, p.rate, rate);
        slot.generation = slot.generation.wrapping_add(1);
        f.set_pending(Some(Pending { at, rate, due, ..p }));
        self.wheel.push(at, (at, i, slot.generation));
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
pub(crate) mod tests;
