//! Generator mode of `quench send`, sans-IO: which flow sends its next frame when.
//!
//! Each flow's schedule is the one pacer ([`rp::Pacer`], exact in fixed point), whose credit
//! bound is the catch-up bound below, shifted by PFC pauses and re-timed on rate changes.
//!
//! Each active flow has a release time for its next frame on the [`Wheel`]; a busy-polling
//! worker calls [`Generator::poll`] with the burst's `now` and the flows' current RP rates, gets
//! the frame to build ([`TxDesc`]), and reports it to its reaction point. The next release time
//! is the previous one plus the frame's serialisation time at the flow's current rate (STYLE.md
//! rule 10: the pacer returns a release time, the engine enforces it), so over any window the
//! flow sends at its RP rate, independent of how late the worker polls, as long as it keeps up.
//! A worker that falls behind catches up by at most [`PacingConfig::max_catch_up`] of sending
//! time; beyond that the lost time is forgotten instead of bursting. With
//! [`PacingConfig::catch_up_speed`] the frames owed leave at most that many times the flow's
//! rate (a peak rate over the committed one, as in a two-rate shaper) rather than back to back,
//! so a long catch-up bound does not turn a stall into a line-rate burst.
use units::{Duration, FlowId, Instant, Rate, PRIORITIES};

use super::flowgen::FlowStart;
use super::wheel::{Wheel, WheelError};

/// Pacing limits.
#[derive(Clone, Copy, Debug)]
pub struct PacingConfig {
    /// Octets of each generated frame on the wire (Ethernet header to end of payload).
    pub frame_len: u32,
    /// Wheel resolution.
    pub tick: Duration,
    /// How far behind `now` a release time may lag before it is pulled forward.
    pub max_catch_up: Duration,
    /// While behind its release times, a flow sends at most this many times its rate (`None`:
    /// as fast as the worker polls).
    pub catch_up_speed: Option<f64>,
}

impl Default for PacingConfig {
    fn default() -> Self {
        PacingConfig {
            frame_len: 1500,
            // 256 ns: a fifth of a 1500-octet frame at 10 Gb/s; 4096 slots = 1 ms horizon.
            tick: Duration::from_nanos(256),
            max_catch_up: Duration::from_micros(50),
            catch_up_speed: None,
        }
    }
}

/// One frame to build and send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxDesc {
    pub flow: FlowId,
    /// Index of the flow in [`Generator::flows`].
    pub index: usize,
    pub seq: u64,
    /// Octets of the frame on the wire.
    pub len: u32,
    /// The release time this frame was due at.
    pub release: Instant,
}

/// A generated flow.
#[derive(Clone, Debug)]
pub struct GenFlow {
    pub spec: FlowStart,
    /// Next sequence number (= frames sent).
    pub seq: u64,
    /// Payload octets still to send (`None` = unbounded).
    pub remaining: Option<u64>,
    pub started_at: Option<Instant>,
    pub finished_at: Option<Instant>,
    pub bytes_sent: u64,
    /// Sending time this flow gave up at the catch-up bound (see [`Generator::lag_dropped`]).
    pub lag_dropped: Duration,
    /// The release the flow waits for and the rate that set it (`None` before the first frame
    /// and after the last).
    pending: Option<Pending>,
    /// Bumped by [`Generator::retime`]; wheel entries of an older generation are stale.
    generation: u32,
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    /// When the wheel hands the flow back.
    at: Instant,
    rate: Rate,
    /// The flow's schedule (the one pacer): its release time is the next frame's place in it.
    /// Equal to `at`, except while the flow catches up at a bounded speed: then it lies before
    /// `at`, and the time between is owed.
    due: rp::Pacer,
    /// The schedule at the peak rate (with a catch-up speed): the earliest the next frame may
    /// leave.
    peak: rp::Pacer,
    /// The generator's pause clock for the flow's priority when `due` was last set: pause
    /// time accrued since then has not moved the schedule yet.
    pause_mark: Duration,
}

/// How long each priority has been paused (PFC), as the generator saw it at its looks: the
/// pause in force at one look (its end, from the worker's PAUSE state) counts up to the next.
/// A flow's schedule moves on by exactly the paused time since its last frame, so a pause that
/// covers part of the gap between two frames delays the second by that part, as a pacing audit
/// that gives paused time no rate expects.
#[derive(Clone, Copy, Debug, Default)]
struct PauseClock {
    paused: [Duration; PRIORITIES],
    /// The last look and, per priority, when the pause in force then ran out.
    look: Option<Instant>,
    until: [Option<Instant>; PRIORITIES],
}

impl PauseClock {
    fn advance(&mut self, now: Instant, paused_until: impl Fn(u8) -> Option<Instant>) {
        if let Some(last) = self.look {
            for (total, until) in self.paused.iter_mut().zip(self.until) {
                if let Some(end) = until.map(|u| u.min(now)).filter(|&e| e > last) {
                    *total = *total + (end - last);
                }
            }
        }
        for (p, until) in self.until.iter_mut().enumerate() {
            *until = paused_until(p as u8).filter(|&u| u > now);
        }
        self.look = Some(now);
    }

    fn of(&self, prio: u8) -> Duration {
        self.paused
            .get(usize::from(prio))
            .copied()
            .unwrap_or(Duration::ZERO)
    }

    fn paused_now(&self, prio: u8) -> bool {
        self.until
            .get(usize::from(prio))
            .is_some_and(Option::is_some)
    }
}

/// How far the peak-rate schedule may lag `now`: a worker loop takes tens of microseconds per
/// iteration, so at the peak rate several frames may have to leave in one; beyond this the
/// unused peak capacity is forgotten (what is owed stays owed on the flow's own schedule).
const PEAK_BURST: Duration = Duration::from_micros(200);

/// Generator-mode flows paced on a timing wheel. Call [`Generator::poll`] in a loop with the
/// burst's `now` until it returns `None`; [`Generator::next_deadline`] says when to look again.
pub struct Generator {
    cfg: PacingConfig,
    run_start: Instant,
    flows: Vec<GenFlow>,
    /// Index of the next flow in `flows` (sorted by start time) not yet started.
    next_start: usize,
    /// (flow index, the flow's generation when the entry was made).
    wheel: Wheel<(usize, u32)>,
    pause: PauseClock,
}

impl Generator {
    /// `schedule` sorted by start time (as [`super::flowgen::schedule`] returns it); start offsets
    /// count from `run_start`.
    pub fn new(
        cfg: PacingConfig,
        schedule: Vec<FlowStart>,
        run_start: Instant,
    ) -> Result<Self, WheelError> {
        let flows = schedule
            .into_iter()
            .map(|spec| GenFlow {
                remaining: spec.bytes,
                spec,
                seq: 0,
                started_at: None,
                finished_at: None,
                bytes_sent: 0,
                lag_dropped: Duration::ZERO,
                pending: None,
                generation: 0,
            })
            .collect();
        Ok(Generator {
            cfg,
            run_start,
            flows,
            next_start: 0,
            wheel: Wheel::new(cfg.tick, 4096)?,
            pause: PauseClock::default(),
        })
    }

    pub fn flows(&self) -> &[GenFlow] {
        &self.flows
    }

    /// Transmission time the flows were owed but gave up because the worker fell more than
    /// `max_catch_up` behind their release times (it was not running): what a pacing audit
    /// window that falls short lost to scheduling rather than to the pacer. Summed over the
    /// flows ([`GenFlow::lag_dropped`]).
    pub fn lag_dropped(&self) -> Duration {
        self.flows
            .iter()
            .fold(Duration::ZERO, |sum, f| sum + f.lag_dropped)
    }

    /// All flows have started and finished.
    pub fn done(&self) -> bool {
        self.next_start == self.flows.len() && self.wheel.is_empty()
    }

    fn start_due(&mut self, now: Instant) {
        while let Some(f) = self.flows.get_mut(self.next_start) {
            let at = self.run_start + f.spec.start;
            if at > now {
                break;
            }
            f.started_at = Some(at);
            // The first frame leaves when the worker first sees the flow: a flow owes nothing
            // for time before the loop ran (start-up, a stall across its start), which would
            // otherwise come out as a catch-up burst and count as lag given up.
            self.wheel.insert(now, (self.next_start, f.generation));
            self.next_start += 1;
        }
    }

    /// The next frame due at `now`, if any. `rate_of(flow)` is the flow's current RP rate (its
    /// `max_rate` when no RP limits it).
    pub fn poll(&mut self, now: Instant, rate_of: impl FnMut(FlowId) -> Rate) -> Option<TxDesc> {
        self.poll_unpaused(now, rate_of, |_| None)
    }

    /// As [`Generator::poll`], but with PFC: `paused_until(prio)` is when the pause of `prio`
    /// in force at `now` runs out (`None`: not paused). A paused flow sends nothing and owes
    /// nothing for the pause (802.1Qbb stops the sender): its schedule moves on by the time
    /// its priority was paused since its last frame. What it owed from before (a stall) stays
    /// owed: the RP rate allowed it (a catch-up is bounded by `max_catch_up`, as after any
    /// stall).
    pub fn poll_unpaused(
        &mut self,
        now: Instant,
        mut rate_of: impl FnMut(FlowId) -> Rate,
        paused_until: impl Fn(u8) -> Option<Instant>,
    ) -> Option<TxDesc> {
        self.pause.advance(now, paused_until);
        self.start_due(now);
        let (release, index) = loop {
            let (release, (index, generation)) = self.wheel.pop_due(now)?;
            if generation != self.flows[index].generation {
                continue; // superseded by a retime
            }
            let prio = self.flows[index].spec.priority;
            let clock = self.pause.of(prio);
            if let Some(p) = self.flows[index].pending.as_mut() {
                let paused = clock - p.pause_mark;
                if paused > Duration::ZERO {
                    p.pause_mark = clock;
                    p.due.shift(paused);
                    p.peak.shift(paused);
                    p.at = release + paused;
                    self.wheel.insert(p.at, (index, generation));
                    continue;
                }
            }
            if self.pause.paused_now(prio) {
                // Looked at again one tick later; the clock counts the pause meanwhile.
                self.wheel.insert(now + self.cfg.tick, (index, generation));
                continue;
            }
            break (release, index);
        };
        let pause_mark = self.pause.of(self.flows[index].spec.priority);
        let f = &mut self.flows[index];
        let len = self.cfg.frame_len;
        let desc = TxDesc {
            flow: f.spec.flow,
            index,
            seq: f.seq,
            len,
            release,
        };
        f.seq += 1;
        f.bytes_sent += u64::from(len);
        if let Some(r) = f.remaining.as_mut() {
            *r = r.saturating_sub(u64::from(len));
            if *r == 0 {
                f.finished_at = Some(now);
                f.pending = None;
                return Some(desc);
            }
        }
        let rate = rate_of(f.spec.flow).min(f.spec.max_rate);
        // The frame's place in the schedule: where the flow's pacer says (what a stall owed
        // included), or the wheel's time for the first frame and after a retime moved it later.
        let mut due = match f.pending {
            Some(p) if p.due.release_time() <= release => p.due,
            _ => rp::Pacer::starting_at(release),
        };
        // The next frame's place: this one's plus its serialisation time at the flow's rate,
        // exact; lagging `now` by at most the catch-up bound (the excess is given up).
        due.next_release(now, u64::from(len), rate, Duration::MAX);
        f.lag_dropped = f.lag_dropped + due.forget_credit(now, self.cfg.max_catch_up);
        // A zero rate never releases again (as before any rate change; see `retime`).
        let next = if rate == Rate::ZERO {
            Instant::MAX
        } else {
            due.release_time()
        };
        let (at, peak) = match self.cfg.catch_up_speed {
            // A second schedule at `speed` times the rate, allowed to lag `now` by PEAK_BURST:
            // on schedule it never binds (it runs ahead of the flow's own); after a stall it
            // spaces the frames owed at the peak rate instead of sending them back to back.
            Some(speed) if speed > 0.0 => {
                let mut peak = f.pending.map_or(rp::Pacer::starting_at(now), |p| p.peak);
                let peak_rate = Rate::from_bps((rate.as_bps() as f64 * speed) as u64);
                peak.next_release(now, u64::from(len), peak_rate, PEAK_BURST);
                (next.max(peak.release_time()), peak)
            }
            _ => (next, due),
        };
        f.pending = Some(Pending {
            at,
            rate,
            due,
            peak,
            pause_mark,
        });
        self.wheel.insert(at, (index, f.generation));
        Some(desc)
    }

    /// The RP rate of the flow at `index` is now `rate`: if the flow waits for a release that
    /// an earlier rate set, the part of the frame's transmission time still ahead is re-timed
    /// at the new rate (`at' = now + (at - now) x old / new`), the credit earned so far being
    /// kept. A hardware rate limiter accrues credit at its current rate; without this, a flow
    /// cut deep by QCN (one 1500-octet frame at 5 Mb/s is 2.4 ms) would sit out the whole
    /// interval while its reaction point had long raised the rate again. A flow behind its
    /// schedule (catching up) keeps the octets it owes: the time owed is re-timed the same way.
    pub fn retime(&mut self, now: Instant, index: usize, rate: Rate) {
        let Some(f) = self.flows.get_mut(index) else {
            return;
        };
        let rate = rate.min(f.spec.max_rate);
        let Some(p) = f.pending else {
            return;
        };
        if p.rate == rate || rate.as_bps() == 0 || p.rate.as_bps() == 0 {
            return;
        }
        // Times ahead of `now` stretch by old / new; so do octets owed behind it (a flow
        // catching up owes the same octets at the new rate); a cut can stretch what is owed
        // past the catch-up bound: the excess is given up.
        let mut due = p.due;
        due.retime(now, p.rate, rate);
        f.lag_dropped = f.lag_dropped + due.forget_credit(now, self.cfg.max_catch_up);
        if p.at <= now {
            // Already due (typically a flow catching up after its worker stalled, reading the
            // feedback that came meanwhile): the wheel hands it back at the next poll, which
            // times the next frame from `due`. Rescaling `due` keeps what the flow earned at the
            // old rate; left in time units, a cut would have forgiven part of it (a halving,
            // half) and a rise inflated it.
            f.pending = Some(Pending { rate, due, ..p });
            return;
        }
        let at = rp::Pacer::starting_at(p.at).retime(now, p.rate, rate);
        f.generation = f.generation.wrapping_add(1);
        f.pending = Some(Pending { at, rate, due, ..p });
        self.wheel.insert(at, (index, f.generation));
    }

    /// [`Generator::retime`] for every flow, with `rate_of` as in [`Generator::poll`].
    pub fn retime_all(&mut self, now: Instant, mut rate_of: impl FnMut(FlowId) -> Rate) {
        for i in 0..self.flows.len() {
            if self.flows[i].pending.is_some() {
                let rate = rate_of(self.flows[i].spec.flow);
                self.retime(now, i, rate);
            }
        }
    }

    /// When [`Generator::poll`] may next return a frame.
    pub fn next_deadline(&self) -> Option<Instant> {
        let start = self
            .flows
            .get(self.next_start)
            .map(|f| self.run_start + f.spec.start);
        match (start, self.wheel.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Gaps between a poll loop's iterations longer than a threshold: time the loop was not running
/// (descheduled, a slow system call). A pacer catches up at most its `max_catch_up` of such a
/// gap, so on a shared CPU this, not the pacer, is what a short pacing window mostly lost.
#[derive(Debug)]
pub struct LoopStalls {
    threshold: Duration,
    last: Option<Instant>,
    /// Summed length of the gaps over the threshold.
    pub total: Duration,
    /// How many gaps were over the threshold.
    pub count: u64,
    /// The longest gap seen.
    pub longest: Duration,
}

impl LoopStalls {
    pub fn new(threshold: Duration) -> Self {
        LoopStalls {
            threshold,
            last: None,
            total: Duration::ZERO,
            count: 0,
            longest: Duration::ZERO,
        }
    }

    /// The gap length over which a gap counts as a stall.
    pub fn threshold(&self) -> Duration {
        self.threshold
    }

    /// Call once per loop iteration with the iteration's clock reading.
    pub fn tick(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let gap = now - last;
            if gap > self.threshold {
                self.total = self.total + gap;
                self.count += 1;
            }
            self.longest = self.longest.max(gap);
        }
        self.last = Some(now);
    }
}

/// Checks a running sender against its reaction points: per long-running flow and per window
/// (100 ms), the octets it sent against the integral of the flow's RP rate over the window.
/// Issue 5's target is within 1 % per window.
#[derive(Debug, Default)]
pub struct PaceAudit {
    window: Duration,
    /// A gap between samples longer than this is a stall of the worker's loop.
    stall: Duration,
    /// The open window saw such a gap.
    gap_in_window: bool,
    /// Per flow without a size (the only ones audited: a sized flow ends mid-window by
    /// design): (its index, octets sent and time given up at the window start, bits the RP
    /// rate allowed so far).
    open: Vec<(usize, u64, Duration, f64)>,
    window_start: Option<Instant>,
    last_sample: Option<Instant>,
    /// `sent / allowed - 1` of each closed window of each flow.
    pub deviations: Vec<f64>,
    /// For each of `deviations`: a stall touched the window. The worker's loop stopped for
    /// longer than `stall` in it (a gap across the window's end counts to the window it ends),
    /// or the flow gave up sending time at the catch-up bound in it (making up a stall from
    /// the window before).
    pub stalled: Vec<bool>,
}

impl PaceAudit {
    /// Windows of `window`; loop gaps over `stall` (the pacer's catch-up bound) are stalls.
    pub fn new(window: Duration, stall: Duration) -> Self {
        PaceAudit {
            window,
            stall,
            ..Default::default()
        }
    }

    /// Call on every loop iteration, before the iteration changes any rate: integrates each
    /// long flow's `rate_of` since the last call and closes the window when it is over. Every
    /// call, because a worker changes rates at its iterations' times: the rate read now held
    /// since the last one (sampling every 100 us instead charged each cut or rise to up to
    /// 100 us before it happened).
    pub fn sample(&mut self, now: Instant, g: &Generator, mut rate_of: impl FnMut(FlowId) -> Rate) {
        let Some(last) = self.last_sample else {
            self.restart(now, g);
            return;
        };
        self.gap_in_window |= now - last > self.stall;
        let dt = (now - last).as_secs_f64();
        self.last_sample = Some(now);
        let flows = g.flows();
        for (i, _, _, allowed) in &mut self.open {
            let f = &flows[*i];
            *allowed += rate_of(f.spec.flow).min(f.spec.max_rate).as_bps() as f64 * dt;
        }
        let Some(start) = self.window_start.filter(|&w| now - w >= self.window) else {
            return;
        };
        for &(i, sent0, lag0, allowed) in &self.open {
            let f = &flows[i];
            // Only flows that ran the whole window.
            if allowed > 0.0 && f.started_at.is_some_and(|s| s <= start) {
                let sent = (f.bytes_sent - sent0) as f64 * 8.0;
                self.deviations.push(sent / allowed - 1.0);
                self.stalled
                    .push(self.gap_in_window || f.lag_dropped > lag0);
            }
        }
        self.restart(now, g);
    }

    fn restart(&mut self, now: Instant, g: &Generator) {
        self.window_start = Some(now);
        self.last_sample = Some(now);
        self.gap_in_window = false;
        self.open = g
            .flows()
            .iter()
            .enumerate()
            .filter(|(_, f)| f.spec.bytes.is_none())
            .map(|(i, f)| (i, f.bytes_sent, f.lag_dropped, 0.0))
            .collect();
    }

    /// The largest |deviation| over all closed windows.
    pub fn max_abs(&self) -> Option<f64> {
        self.deviations.iter().map(|d| d.abs()).reduce(f64::max)
    }

    /// The share of windows within `tol` (e.g. 0.01).
    pub fn within(&self, tol: f64) -> Option<f64> {
        share_within(self.deviations.iter().copied(), tol)
    }

    /// The deviations of the windows no stall touched: the pacer's own error, apart from the
    /// CPU being taken away.
    pub fn unstalled(&self) -> impl Iterator<Item = f64> + Clone + '_ {
        self.deviations
            .iter()
            .zip(&self.stalled)
            .filter(|(_, &g)| !g)
            .map(|(&d, _)| d)
    }
}

/// The share of `devs` within `tol` (`None` if there are none).
pub fn share_within(devs: impl Iterator<Item = f64> + Clone, tol: f64) -> Option<f64> {
    let n = devs.clone().count();
    (n > 0).then(|| devs.filter(|d| d.abs() <= tol).count() as f64 / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(id: u32, start_ms: u64, bytes: Option<u64>, rate: Rate) -> FlowStart {
        FlowStart {
            flow: FlowId(id),
            start: Duration::from_millis(start_ms),
            destination: crate::wire::MacAddr(2, 0, 0, 0, 0, 1),
            priority: 3,
            max_rate: rate,
            bytes,
        }
    }

    /// Drives the generator with a worker that polls every `step` ns, returns per-flow frame
    /// times.
    fn run(
        g: &mut Generator,
        until_ns: u64,
        step: u64,
        rate: impl Fn(FlowId, u64) -> Rate,
    ) -> Vec<TxDesc> {
        let mut out = Vec::new();
        let mut t = 0;
        while t <= until_ns {
            let now = Instant::from_nanos(t);
            while let Some(d) = g.poll(now, |f| rate(f, t)) {
                assert!(d.release <= now, "released early");
                out.push(d);
            }
            t += step;
        }
        out
    }

    /// One unbounded flow of at most 1 Gb/s from time 0, paced as `cfg` says.
    fn one_gbps_flow(cfg: PacingConfig) -> Generator {
        Generator::new(
            cfg,
            vec![flow(1, 0, None, Rate::from_gbps(1))],
            Instant::ZERO,
        )
        .unwrap()
    }

    /// One 1500-octet frame at 10 Mb/s is 1.2 ms; at 1 Gb/s, 12 us.
    fn one_frame_then(rate: Rate) -> (Generator, Instant) {
        let mut g = one_gbps_flow(PacingConfig::default());
        let t0 = Instant::ZERO;
        assert!(g.poll(t0, |_| rate).is_some());
        assert!(g.poll(t0, |_| rate).is_none());
        (g, t0)
    }

    #[test]
    fn a_rate_increase_brings_the_pending_release_forward_keeping_the_credit() {
        let (mut g, t0) = one_frame_then(Rate::from_mbps(10));
        // 300 us in, a quarter of the frame's 1.2 ms is earned; the other 900 us at 10 Mb/s are
        // 9 us at 1 Gb/s.
        let t1 = t0 + Duration::from_micros(300);
        g.retime(t1, 0, Rate::from_gbps(1));
        assert!(g
            .poll(t1 + Duration::from_nanos(8_900), |_| Rate::from_gbps(1))
            .is_none());
        let d = g
            .poll(t1 + Duration::from_micros(10), |_| Rate::from_gbps(1))
            .unwrap();
        assert_eq!(d.release, t1 + Duration::from_micros(9));
        assert_eq!(d.seq, 1);
        // The entry the old rate made (at 1.2 ms) is stale: at 1 Gb/s from 309 us on, exactly
        // the frames the rate allows follow, no extra one.
        let mut sent = 0;
        let mut t = t1 + Duration::from_micros(10);
        while t <= t0 + Duration::from_micros(1_500) {
            while g.poll(t, |_| Rate::from_gbps(1)).is_some() {
                sent += 1;
            }
            t += Duration::from_micros(1);
        }
        // Frames 2.. at 309 + 12 k us up to 1500 us: k = 1..=99.
        assert_eq!(sent, 99);
    }

    #[test]
    fn a_rate_decrease_pushes_the_pending_release_back() {
        let (mut g, t0) = one_frame_then(Rate::from_gbps(1));
        // 6 us of the 12 us left at 1 Gb/s are 12 us at 500 Mb/s.
        let t1 = t0 + Duration::from_micros(6);
        g.retime(t1, 0, Rate::from_mbps(500));
        assert!(g
            .poll(t0 + Duration::from_micros(13), |_| Rate::from_mbps(500))
            .is_none());
        let d = g
            .poll(t0 + Duration::from_micros(19), |_| Rate::from_mbps(500))
            .unwrap();
        assert_eq!(d.release, t1 + Duration::from_micros(12));
        // The same rate again, a release already due, a zero rate: nothing moves.
        let (mut g, t0) = one_frame_then(Rate::from_gbps(1));
        g.retime(t0 + Duration::from_micros(3), 0, Rate::from_gbps(1));
        g.retime(t0 + Duration::from_micros(20), 0, Rate::from_mbps(1));
        g.retime(t0 + Duration::from_micros(3), 0, Rate::ZERO);
        // (Due at the first 256 ns wheel tick at or after 12 us.)
        let d = g
            .poll(t0 + Duration::from_micros(13), |_| Rate::from_gbps(1))
            .unwrap();
        assert_eq!(d.release, t0 + Duration::from_micros(12));
    }

    #[test]
    fn paced_rate_follows_the_rp_rate_within_1_percent_per_100ms() {
        let cfg = PacingConfig::default();
        let mut g = Generator::new(
            cfg,
            vec![flow(1, 0, None, Rate::from_gbps(1))],
            Instant::ZERO,
        )
        .unwrap();
        // The RP rate changes every 100 ms: 1 Gb/s, 300 Mb/s, 733 Mb/s; the worker polls every
        // 3 us (late by up to 3 us for each frame).
        let rp = |_: FlowId, t: u64| match t / 100_000_000 {
            0 => Rate::from_gbps(1),
            1 => Rate::from_mbps(300),
            _ => Rate::from_mbps(733),
        };
        let sent = run(&mut g, 300_000_000, 3_000, rp);
        for (w, want) in [(0u64, 1e9), (1, 300e6), (2, 733e6)] {
            let bytes: u64 = sent
                .iter()
                .filter(|d| d.release.as_nanos() / 100_000_000 == w)
                .map(|d| u64::from(d.len))
                .sum();
            let got = bytes as f64 * 8.0 / 0.1;
            assert!(
                (got / want - 1.0).abs() < 0.01,
                "window {w}: {got} vs {want}"
            );
        }
        // Sequence numbers are consecutive.
        assert!(sent.iter().enumerate().all(|(i, d)| d.seq == i as u64));
    }

    #[test]
    fn sized_flows_start_on_time_and_finish() {
        let mut g = Generator::new(
            PacingConfig::default(),
            vec![
                flow(1, 0, Some(15_000), Rate::from_gbps(1)),
                flow(2, 1, Some(3_000), Rate::from_gbps(1)),
            ],
            Instant::from_nanos(1_000),
        )
        .unwrap();
        let sent = run(&mut g, 5_000_000, 1_000, |_, _| Rate::from_gbps(1));
        let f2: Vec<_> = sent.iter().filter(|d| d.flow == FlowId(2)).collect();
        assert_eq!(f2.len(), 2);
        assert!(f2[0].release >= Instant::from_nanos(1_001_000));
        assert_eq!(sent.iter().filter(|d| d.flow == FlowId(1)).count(), 10);
        assert!(g.done());
        assert!(g.flows().iter().all(|f| f.finished_at.is_some()));
        assert_eq!(g.next_deadline(), None);
    }

    #[test]
    fn a_stalled_worker_does_not_burst_more_than_the_catch_up() {
        let mut g = one_gbps_flow(PacingConfig::default());
        assert!(g.poll(Instant::ZERO, |_| Rate::from_gbps(1)).is_some());
        // The worker stalls 10 ms, then drains: at most catch-up / 12 us + 2 frames.
        let n =
            std::iter::from_fn(|| g.poll(Instant::from_nanos(10_000_000), |_| Rate::from_gbps(1)))
                .count();
        assert!(n <= 50_000 / 12_000 + 2, "{n}");
        // What the flow could not catch up is counted: 10 ms behind, 50 us allowed, less the
        // frames the bound let through.
        let dropped = g.lag_dropped().as_nanos();
        let expected = 10_000_000 - 50_000 - 12_000;
        assert!(
            dropped.abs_diff(expected) <= 12_000 * n as u64,
            "{dropped} vs {expected}"
        );
    }

    #[test]
    fn loop_stalls_sum_only_the_gaps_over_the_threshold() {
        let mut s = LoopStalls::new(Duration::from_micros(50));
        for us in [0, 10, 100, 120, 5_000, 5_049] {
            s.tick(Instant::from_nanos(us * 1_000));
        }
        // Gaps 10, 90, 20, 4880, 49 us: two over 50 us.
        assert_eq!(s.count, 2);
        assert_eq!(s.total, Duration::from_micros(90 + 4_880));
        assert_eq!(s.longest, Duration::from_micros(4_880));
    }

    #[test]
    fn a_paused_priority_sends_nothing_and_resumes_without_a_burst() {
        let cfg = PacingConfig::default();
        let mut a = flow(1, 0, None, Rate::from_mbps(100));
        a.priority = 3;
        let mut b = flow(2, 0, None, Rate::from_mbps(100));
        b.priority = 5;
        let mut g = Generator::new(cfg, vec![a, b], Instant::ZERO).unwrap();
        // Priority 3 paused from 0 to 10 ms; the worker polls every 10 us for 20 ms.
        let mut sent = Vec::new();
        let mut t = 0u64;
        while t <= 20_000_000 {
            let now = Instant::from_nanos(t);
            while let Some(d) = g.poll_unpaused(
                now,
                |_| Rate::from_gbps(1),
                |p| (p == 3 && t < 10_000_000).then(|| Instant::from_nanos(10_000_000)),
            ) {
                sent.push((t, d));
            }
            t += 10_000;
        }
        let of = |id: u32, from: u64, to: u64| {
            sent.iter()
                .filter(|(t, d)| d.flow == FlowId(id) && (from..to).contains(t))
                .count()
        };
        // 100 Mb/s of 1500-octet frames: 8333 frames/s, ~83 per 10 ms.
        assert_eq!(of(1, 0, 10_000_000), 0);
        assert!(
            (82..=85).contains(&of(2, 0, 10_000_000)),
            "{}",
            of(2, 0, 10_000_000)
        );
        // After the pause: back at its rate, no catch-up of the 10 ms it missed.
        let after = of(1, 10_000_000, 20_000_001);
        assert!((82..=86).contains(&after), "{after}");
        let firsts: Vec<u64> = sent
            .iter()
            .filter(|(_, d)| d.flow == FlowId(1))
            .map(|(t, _)| *t)
            .take(3)
            .collect();
        assert!(
            firsts[2] - firsts[0] >= 200_000,
            "burst after resume: {firsts:?}"
        );
    }

    /// Drives [`one_gbps_flow`] with a worker that polls every 5 us up to `until_ns`, except
    /// while it is off the CPU (`stall`), sending at `sent_mbps` while the audit charges the RP
    /// rate `allowed_mbps`. The audit samples before each poll, as quench send's loop does.
    fn audited(
        until_ns: u64,
        stall: std::ops::Range<u64>,
        sent_mbps: u64,
        allowed_mbps: u64,
    ) -> PaceAudit {
        let (sent, allowed) = (Rate::from_mbps(sent_mbps), Rate::from_mbps(allowed_mbps));
        let mut g = one_gbps_flow(PacingConfig::default());
        let mut audit = PaceAudit::new(Duration::from_millis(100), Duration::from_micros(50));
        let mut t = 0u64;
        while t <= until_ns {
            if !stall.contains(&t) {
                let now = Instant::from_nanos(t);
                audit.sample(now, &g, |_| allowed);
                while g.poll(now, |_| sent).is_some() {}
            }
            t += 5_000;
        }
        audit
    }

    /// PFC pausing a 250 Mb/s flow (one 1500-octet frame per 48 us) for `pause_us` of every
    /// `period_us` over 300 ms, with a worker polling every microsecond and the audit charging
    /// no rate while paused, as quench send's does. Returns (frames sent, the audit).
    fn pfc_cycles(period_us: u64, pause_us: u64) -> (u64, PaceAudit) {
        let rate = Rate::from_mbps(250);
        let mut f = flow(1, 0, None, rate);
        f.priority = 3;
        let mut g = Generator::new(PacingConfig::default(), vec![f], Instant::ZERO).unwrap();
        let mut audit = PaceAudit::new(Duration::from_millis(100), Duration::from_micros(50));
        let (period, pause) = (period_us * 1000, pause_us * 1000);
        let until =
            |t: u64| (t % period < pause).then(|| Instant::from_nanos(t - t % period + pause));
        let mut n = 0;
        for t in (0..300_000_000u64).step_by(1_000) {
            let now = Instant::from_nanos(t);
            audit.sample(
                now,
                &g,
                |_| if until(t).is_some() { Rate::ZERO } else { rate },
            );
            while g
                .poll_unpaused(now, |_| rate, |p| until(t).filter(|_| p == 3))
                .is_some()
            {
                n += 1;
            }
        }
        (n, audit)
    }

    #[test]
    fn pauses_shorter_than_a_frame_gap_delay_the_next_frame_by_their_overlap() {
        // Pauses of 250, 100 and 20 us start and end between two frames: a schedule moved
        // only by the pauses a due frame ran into sent 15 %, 8 % and 20 % more than the rate
        // allows over the unpaused time (1 ms pauses: 0.8 %).
        for (period, pause) in [(500, 250), (500, 100), (60, 20), (2_000, 1_000)] {
            let (n, audit) = pfc_cycles(period, pause);
            let unpaused = 0.3 * (1.0 - pause as f64 / period as f64);
            let allowed = 250e6 * unpaused / 8.0 / 1500.0;
            assert!(
                (n as f64 - allowed).abs() <= 1.0,
                "{period}/{pause} us: {n} vs {allowed}"
            );
            assert_eq!(audit.deviations.len(), 2, "{period}/{pause}");
            assert!(
                audit.max_abs().unwrap() < 0.002,
                "{period}/{pause}: {:?}",
                audit.deviations
            );
        }
    }

    #[test]
    fn pace_audit_compares_sent_octets_with_the_rp_rate_integral() {
        // RP at 400 Mb/s for 1 s.
        let audit = audited(1_000_000_000, 0..0, 400, 400);
        assert!(audit.deviations.len() >= 9, "{:?}", audit.deviations);
        assert!(audit.max_abs().unwrap() < 0.01, "{:?}", audit.deviations);
        // A sender that falls short (it sends at 400 while its RP allows 500) is caught.
        let audit = audited(500_000_000, 0..0, 400, 500);
        let d = audit.max_abs().unwrap();
        assert!((d - 0.2).abs() < 0.01, "{d}");
    }

    #[test]
    fn pace_audit_marks_the_windows_a_stall_cost_sending_time() {
        // RP at 400 Mb/s for 500 ms; the worker is off the CPU from 250 to 253 ms.
        let audit = audited(500_000_000, 250_000_000..253_000_000, 400, 400);
        // Windows start at 0, 100, ... ms; the third lost 3 ms less the 50 us bound: -2.95 %.
        assert_eq!(audit.stalled, [false, false, true, false, false]);
        assert!(
            (audit.deviations[2] + 0.0295).abs() < 0.002,
            "{:?}",
            audit.deviations
        );
        let clean: Vec<f64> = audit.unstalled().collect();
        assert_eq!(clean.len(), 4);
        assert!(clean.iter().all(|d| d.abs() < 0.002), "{clean:?}");
        assert_eq!(share_within(audit.unstalled(), 0.01), Some(1.0));
        assert_eq!(audit.within(0.01), Some(0.8));
    }

    /// Polls `g` every microsecond over the first 30 ms except during `stall`, with the RP at
    /// 1 Gb/s and priority 3 paused during `paused`; returns the times frames left.
    fn drive_with_stall(
        g: &mut Generator,
        stall: std::ops::Range<u64>,
        paused: std::ops::Range<u64>,
    ) -> Vec<u64> {
        let (rate, end) = (Rate::from_gbps(1), 30_000_000);
        let mut sent = Vec::new();
        let mut t = 0u64;
        while t < end {
            if !stall.contains(&t) {
                let now = Instant::from_nanos(t);
                while g
                    .poll_unpaused(
                        now,
                        |_| rate,
                        |p| {
                            (p == 3 && paused.contains(&t)).then(|| Instant::from_nanos(paused.end))
                        },
                    )
                    .is_some()
                {
                    sent.push(t);
                }
            }
            t += 1_000;
        }
        sent
    }

    /// [`one_gbps_flow`] with a catch-up bound of `max_catch_up_ms` and `catch_up_speed`.
    fn catching_up(max_catch_up_ms: u64, catch_up_speed: Option<f64>) -> Generator {
        one_gbps_flow(PacingConfig {
            max_catch_up: Duration::from_millis(max_catch_up_ms),
            catch_up_speed,
            ..PacingConfig::default()
        })
    }

    #[test]
    fn a_bounded_catch_up_speed_makes_up_a_stall_without_a_burst() {
        let mut g = catching_up(10, Some(2.0));
        // 1 Gb/s, 1500-octet frames: one per 12 us. The worker is off the CPU from 5 to 8 ms.
        let sent = drive_with_stall(&mut g, 5_000_000..8_000_000, 0..0);
        // Everything owed was sent: 30 ms at 1 Gb/s is 2500 frames.
        assert!((2499..=2501).contains(&sent.len()), "{}", sent.len());
        // ... but not at once: at most PEAK_BURST's worth at the first poll after the stall
        // (200 us at 2x: 33 frames), and never more than twice the rate over any 1 ms after.
        let at = |t: u64| sent.iter().filter(|&&s| s == t).count();
        assert!(at(8_000_000) <= 34, "{} frames at once", at(8_000_000));
        let in_ms = |t: u64| {
            sent.iter()
                .filter(|&&s| (t..t + 1_000_000).contains(&s))
                .count()
        };
        let busiest = (8_000..29_000).map(|k| in_ms(k * 1_000)).max().unwrap();
        assert!(busiest <= 2 * 84 + 34, "{busiest} frames in 1 ms");
        // The 3 ms owed took about 3 ms more at 2x: caught up by ~11.2 ms, on schedule after.
        let by = |t: u64| sent.iter().filter(|&&s| s < t).count();
        assert!(
            (1000..=1005).contains(&by(12_000_000)),
            "{}",
            by(12_000_000)
        );
        assert_eq!(g.lag_dropped(), Duration::ZERO);

        // Without a bound on the speed the same stall comes out as one burst.
        let mut g = catching_up(10, None);
        let sent = drive_with_stall(&mut g, 5_000_000..8_000_000, 0..0);
        let burst = sent.iter().filter(|&&t| t == 8_000_000).count();
        assert!(burst >= 249, "{burst} frames at once");
    }

    #[test]
    fn octets_owed_across_a_stall_survive_a_rate_cut_read_after_it() {
        // The worker is off the CPU from 5 to 8 ms with its RP at 500 Mb/s; the CNM that
        // arrived meanwhile is read at 8 ms and halves the rate. The 3 ms owed are 187,500
        // octets at the rate they were earned at; they stay owed at the new one (as credit
        // in a token bucket would), not 3 ms at 250 Mb/s (half of them).
        for cut_first in [true, false] {
            let mut g = catching_up(10, None);
            let mut audit = PaceAudit::new(Duration::from_millis(100), Duration::from_micros(50));
            let mut t = 0u64;
            let mut cut = false;
            while t <= 100_000_000 {
                if !(5_000_000..8_000_000).contains(&t) {
                    let now = Instant::from_nanos(t);
                    let rate = |_: FlowId| Rate::from_mbps(if cut { 250 } else { 500 });
                    audit.sample(now, &g, rate);
                    if t >= 8_000_000 && !cut {
                        cut = true;
                        // The worker retimes on the CNM before or after polling (a frame may
                        // already be due at the old rate).
                        if !cut_first {
                            g.poll(now, |_| Rate::from_mbps(500));
                        }
                        g.retime(now, 0, Rate::from_mbps(250));
                    }
                    let rate = |_: FlowId| Rate::from_mbps(if cut { 250 } else { 500 });
                    while g.poll(now, rate).is_some() {}
                }
                t += 2_000;
            }
            assert_eq!(audit.deviations.len(), 1);
            assert!(
                audit.max_abs().unwrap() < 0.002,
                "cut first {cut_first}: {:?}",
                audit.deviations
            );
        }
    }

    #[test]
    fn what_a_stall_owed_stays_owed_through_a_pause() {
        let mut g = catching_up(10, None);
        // Off the CPU from 5 to 8 ms, then paused from 8 to 13 ms: by 30 ms the flow has sent
        // the 25 ms it was not paused for (2083 frames of 12 us), the stall's 3 ms included.
        let sent = drive_with_stall(&mut g, 5_000_000..8_000_000, 8_000_000..13_000_000);
        assert!((2082..=2085).contains(&sent.len()), "{}", sent.len());
        assert!(sent.iter().all(|t| !(5_000_000..13_000_000).contains(t)));
        assert_eq!(g.lag_dropped(), Duration::ZERO);
    }

    #[test]
    fn a_pause_is_not_owed_even_with_a_long_catch_up_bound() {
        let mut g = catching_up(20, Some(2.0));
        // Paused from 5 to 15 ms: by 30 ms the flow has sent 20 ms worth, not 30.
        let sent = drive_with_stall(&mut g, 0..0, 5_000_000..15_000_000);
        assert!((1665..=1670).contains(&sent.len()), "{}", sent.len());
        let after = sent
            .iter()
            .filter(|&&t| (15_000_000..16_000_000).contains(&t))
            .count();
        assert!(
            after <= 85,
            "{after} frames in the first ms after the pause"
        );
    }
}
