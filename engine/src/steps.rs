//! The switch worker's loop split into steps by the clock, for finding where a received frame
//! waits before its transmit kick (docs/design.md, "Switch runtime", its diagnostics). Built
//! only with the `step-clock` feature; without it every call here is an empty
//! inline function, so the default build's loop has no stamp at all.
//!
//! Per loop iteration that moved frames, from the worker's thread (a thread-local, so that the
//! port's kick can stamp itself without the worker threading a handle through every port):
//! - `wait`: the iteration before it, when that one was idle: a frame made visible during it
//!   waits for the rest of it;
//! - `receive`: the iteration's start to the end of its receive step (rx rings read, frames
//!   classified, routed, cut through or queued);
//! - `to_kick`: from there to the first transmit kick's system call (crossings, the core's
//!   events, the ports' transmit before it, the descriptors written);
//! - `kick`: that system call (in AF_XDP copy mode the whole veth transmit);
//! - `after_kick`: from its return to the iteration's end (ring upkeep, events, housekeeping).
//!
//! And per idle iteration its length, kept time-weighted as well: the share of the idle
//! loop's time spent in iterations longer than a bound is the chance that a frame arriving
//! while the worker idles finds it in one that long.
//!
//! Call order per iteration: [`begin`], [`received`], then the port's [`kick_enter`] /
//! [`kick_exit`] (only the first pair of an iteration counts), then [`end`]. [`start`] once
//! in the worker's thread before its loop (it copies the loop's clock), [`report`] after it
//! (one line; `None` without the feature).

#[cfg(feature = "step-clock")]
mod imp {
    use std::cell::RefCell;

    use units::Instant;

    use crate::switch::stats::{gap_bucket, gap_bucket_end, gap_summary, GAP_BUCKETS};
    use crate::time::Clock;

    const STEPS: [&str; 5] = ["wait", "receive", "to_kick", "kick", "after_kick"];
    /// Idle-iteration lengths whose share of the idle time is reported.
    const IDLE_BOUNDS_NS: [u64; 5] = [1_000, 2_000, 5_000, 10_000, 20_000];

    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Phase {
        /// The iteration has moved no frame (yet).
        Idle,
        /// Frames received; no kick yet.
        Received,
        /// In the kick's system call.
        Kicking,
        /// The kick returned.
        Kicked,
    }

    struct State {
        clock: Clock,
        start: Instant,
        /// The previous iteration's start and whether it was idle.
        prev: Option<(Instant, bool)>,
        /// When the current step started.
        mark: Instant,
        phase: Phase,
        counts: [[u64; GAP_BUCKETS]; 5],
        max: [u64; 5],
        idle_counts: [u64; GAP_BUCKETS],
        idle_ns: [u64; GAP_BUCKETS],
    }

    thread_local! {
        static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
    }

    fn with(f: impl FnOnce(&mut State)) {
        STATE.with(|s| {
            if let Some(s) = s.borrow_mut().as_mut() {
                f(s)
            }
        })
    }

    impl State {
        fn record(&mut self, step: usize, ns: u64) {
            self.counts[step][gap_bucket(ns)] += 1;
            self.max[step] = self.max[step].max(ns);
        }

        /// Ends the current step at the clock's reading now.
        fn lap(&mut self, step: usize) {
            let now = self.clock.now();
            self.record(step, (now - self.mark).as_nanos());
            self.mark = now;
        }
    }

    pub fn start(clock: &Clock) {
        STATE.with(|s| {
            *s.borrow_mut() = Some(State {
                clock: *clock,
                start: Instant::ZERO,
                prev: None,
                mark: Instant::ZERO,
                phase: Phase::Idle,
                counts: [[0; GAP_BUCKETS]; 5],
                max: [0; 5],
                idle_counts: [0; GAP_BUCKETS],
                idle_ns: [0; GAP_BUCKETS],
            })
        });
    }

    #[inline]
    pub fn begin(now: Instant) {
        with(|s| {
            s.start = now;
            s.mark = now;
            s.phase = Phase::Idle;
        })
    }

    #[inline]
    pub fn received(frames: usize) {
        with(|s| {
            if frames == 0 {
                return;
            }
            s.lap(1);
            s.phase = Phase::Received;
            if let Some((t, true)) = s.prev {
                let ns = (s.start - t).as_nanos();
                s.record(0, ns);
            }
        })
    }

    /// Ends step `step` and moves on to phase `to`, when the iteration is in phase `from`.
    #[inline]
    fn advance(from: Phase, step: usize, to: Phase) {
        with(|s| {
            if s.phase == from {
                s.lap(step);
                s.phase = to;
            }
        })
    }

    #[inline]
    pub fn kick_enter() {
        advance(Phase::Received, 2, Phase::Kicking)
    }

    #[inline]
    pub fn kick_exit() {
        advance(Phase::Kicking, 3, Phase::Kicked)
    }

    #[inline]
    pub fn end() {
        with(|s| {
            let idle = s.phase == Phase::Idle;
            if s.phase == Phase::Kicked {
                s.lap(4);
            }
            if let Some((t, true)) = s.prev {
                let ns = (s.start - t).as_nanos();
                let b = gap_bucket(ns);
                s.idle_counts[b] += 1;
                s.idle_ns[b] += ns;
            }
            s.prev = Some((s.start, idle));
        })
    }

    pub fn report() -> Option<String> {
        STATE.with(|s| {
            let s = s.borrow();
            let s = s.as_ref()?;
            let mut out =
                String::from("steps of iterations that moved frames, us p50/p99/p99.9/max:");
            for (k, name) in STEPS.iter().enumerate() {
                let g = gap_summary(&s.counts[k], s.max[k]);
                out += &format!(
                    " {name} {} x {:.1}/{:.1}/{:.1}/{:.1},",
                    g.iterations,
                    g.p50_ns as f64 / 1e3,
                    g.p99_ns as f64 / 1e3,
                    g.p999_ns as f64 / 1e3,
                    g.max_ns as f64 / 1e3
                );
            }
            out.pop();
            let total: u64 = s.idle_ns.iter().sum();
            out += "; share of idle time in idle iterations over";
            for bound in IDLE_BOUNDS_NS {
                // A bucket counts when all of it lies above the bound (its start is above the
                // previous bucket's end).
                let above: u64 = (0..GAP_BUCKETS)
                    .filter(|&b| b > 0 && gap_bucket_end(b - 1) > bound)
                    .map(|b| s.idle_ns[b])
                    .sum();
                out += &format!(
                    " {} us {:.3} %,",
                    bound / 1_000,
                    100.0 * above as f64 / total.max(1) as f64
                );
            }
            out.pop();
            Some(out)
        })
    }
}

#[cfg(not(feature = "step-clock"))]
mod imp {
    use units::Instant;

    use crate::time::Clock;

    #[inline(always)]
    pub fn start(_: &Clock) {}
    #[inline(always)]
    pub fn begin(_: Instant) {}
    #[inline(always)]
    pub fn received(_: usize) {}
    #[inline(always)]
    pub fn kick_enter() {}
    #[inline(always)]
    pub fn kick_exit() {}
    #[inline(always)]
    pub fn end() {}
    pub fn report() -> Option<String> {
        None
    }
}

pub use imp::{begin, end, kick_enter, kick_exit, received, report, start};

#[cfg(all(test, feature = "step-clock"))]
mod tests {
    use super::*;
    use crate::time::Clock;
    use units::Duration;

    /// One idle iteration, then one that moved frames and kicked twice: every step is filed
    /// once (the second kick is upkeep's, not the frame's), the wait only after the idle one.
    #[test]
    fn an_iteration_with_frames_files_each_step_once() {
        let clock = Clock::monotonic();
        start(&clock);
        let t0 = clock.now();
        begin(t0);
        received(0);
        end();
        begin(t0 + Duration::from_micros(1));
        received(2);
        kick_enter();
        kick_exit();
        kick_enter();
        kick_exit();
        end();
        begin(t0 + Duration::from_micros(2));
        received(0);
        end();
        let r = report().unwrap();
        for step in [
            "wait 1 x",
            "receive 1 x",
            "to_kick 1 x",
            "kick 1 x",
            "after_kick 1 x",
        ] {
            assert!(r.contains(step), "{step} not in {r}");
        }
    }
}
