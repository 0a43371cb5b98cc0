//! Diagnostics of a poll loop, behind one hook: [`Probe::tick`] once per iteration with the
//! iteration's clock reading and what it did. What a loop reports is the probe's: the switch's
//! workers keep [`LoopGaps`] (histograms of the gaps after each kind of iteration, `quench
//! stats`), the sender's and the appliance's loops [`LoopStalls`] (the gaps over a threshold:
//! the time a pacer could not make up).
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use units::{Duration, Instant};

/// The one hook a poll loop calls per iteration.
pub trait Probe {
    /// An iteration that did `what` started at `at` (its clock reading).
    fn tick(&mut self, at: Instant, what: Iteration);
    /// The loop is about to wait, with nothing due before `until` (an idle loop waiting in the
    /// kernel for frames): a gap up to `until` is planned, not lost.
    fn planned(&mut self, _until: Instant) {}
}

/// What one iteration of a poll loop did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Iteration {
    /// Moved frames (received, forwarded, transmitted; housekeeping may have run too).
    Frames = 0,
    /// No frame, but periodic housekeeping ran (counters published, kernel counts read, MAC
    /// table aged).
    Housekeeping = 1,
    /// Nothing: the loop spun or gave its CPU up ([`crate::worker::Backoff`]).
    Idle = 2,
}

/// Buckets of the gap histograms: exact below 8 ns, then four per power of two (a bucket's
/// upper bound is at most 25 % above any value in it) up to 2^40 ns (18 minutes).
pub const GAP_BUCKETS: usize = 8 + 4 * 37;

pub fn gap_bucket(ns: u64) -> usize {
    if ns < 8 {
        return ns as usize;
    }
    let e = 63 - ns.leading_zeros() as usize;
    let sub = ((ns >> (e - 2)) & 3) as usize;
    (8 + (e - 3) * 4 + sub).min(GAP_BUCKETS - 1)
}

/// The smallest value above bucket `i` (what a percentile in it reports: an upper bound).
pub fn gap_bucket_end(i: usize) -> u64 {
    if i < 8 {
        return i as u64 + 1;
    }
    let (e, sub) = (3 + (i - 8) / 4, (i - 8) % 4);
    (4 + sub as u64 + 1) << (e - 2)
}

/// The gaps between a worker loop's successive clock readings (one per iteration), each
/// filed under what the earlier iteration did ([`Iteration`]): a gap after a `Frames`
/// iteration is the time from its receive to its transmit kick and housekeeping (plus any time
/// the worker was not running); after `Housekeeping`, what the periodic work cost; after
/// `Idle`, a spin or a yield, and how long the CPU went elsewhere. Where a forwarding latency
/// tail comes from the switch's loop, it shows here. Plain counts, owned by the worker; it
/// publishes them into [`LoopCounters`] with the other slow counters.
pub struct LoopGaps {
    last: Option<(Instant, Iteration)>,
    counts: [[u64; GAP_BUCKETS]; 3],
    max: [u64; 3],
}

impl Default for LoopGaps {
    fn default() -> Self {
        LoopGaps {
            last: None,
            counts: [[0; GAP_BUCKETS]; 3],
            max: [0; 3],
        }
    }
}

/// Files the gap since the previous iteration under what that one did.
impl Probe for LoopGaps {
    #[inline]
    fn tick(&mut self, at: Instant, what: Iteration) {
        if let Some((last, kind)) = self.last {
            let ns = (at - last).as_nanos();
            let k = kind as usize;
            self.counts[k][gap_bucket(ns)] += 1;
            self.max[k] = self.max[k].max(ns);
        }
        self.last = Some((at, what));
    }
}

impl LoopGaps {
    /// Copies the counts into `to` (relaxed stores: `to` has this writer only).
    pub fn publish(&self, to: &LoopCounters) {
        for k in 0..3 {
            for (c, v) in to.counts[k].iter().zip(&self.counts[k]) {
                c.store(*v, Ordering::Relaxed);
            }
            to.max[k].store(self.max[k], Ordering::Relaxed);
        }
    }
}

/// [`LoopGaps`] as published.
pub struct LoopCounters {
    counts: [[AtomicU64; GAP_BUCKETS]; 3],
    max: [AtomicU64; 3],
}

impl Default for LoopCounters {
    fn default() -> Self {
        LoopCounters {
            counts: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            max: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl LoopCounters {
    /// The gaps after iterations that did `what`.
    pub fn summary(&self, what: Iteration) -> GapSummary {
        let k = what as usize;
        let counts: Vec<u64> = self.counts[k]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        gap_summary(&counts, self.max[k].load(Ordering::Relaxed))
    }
}

/// Percentiles of a gap histogram (`counts` per [`gap_bucket`]) whose largest gap was `max`.
pub fn gap_summary(counts: &[u64], max: u64) -> GapSummary {
    let n: u64 = counts.iter().sum();
    let at = |q: f64| {
        // The smallest bucket holding the ceil(q x n)-th gap.
        let rank = ((q * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        counts
            .iter()
            .position(|&c| {
                seen += c;
                seen >= rank
            })
            .map_or(0, gap_bucket_end)
    };
    GapSummary {
        iterations: n,
        // A bucket's end may pass the largest gap seen: never report above it.
        p50_ns: at(0.5).min(max),
        p99_ns: at(0.99).min(max),
        p999_ns: at(0.999).min(max),
        max_ns: max,
    }
}

/// Percentiles of one kind of loop gap (bucket upper bounds: at most 25 % above the gap).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct GapSummary {
    pub iterations: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

/// Gaps between a poll loop's iterations longer than a threshold: time the loop was not running
/// (descheduled, a slow system call). A pacer catches up at most its `max_catch_up` of such a
/// gap, so on a shared CPU this, not the pacer, is what a short pacing window mostly lost.
#[derive(Debug)]
pub struct LoopStalls {
    threshold: Duration,
    last: Option<Instant>,
    /// The end of a wait the loop planned ([`Probe::planned`]): the gap to the next tick
    /// is measured from there, not from the last tick.
    planned: Option<Instant>,
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
            planned: None,
            total: Duration::ZERO,
            count: 0,
            longest: Duration::ZERO,
        }
    }

    /// The gap length over which a gap counts as a stall.
    pub fn threshold(&self) -> Duration {
        self.threshold
    }
}

/// Counts the gap since the previous iteration (from the end of a planned wait, if later) when
/// it is over the threshold.
impl Probe for LoopStalls {
    #[inline]
    fn tick(&mut self, now: Instant, _what: Iteration) {
        if let Some(last) = self.last {
            let from = self.planned.take().map_or(last, |p| p.min(now).max(last));
            let gap = now - from;
            if gap > self.threshold {
                self.total = self.total + gap;
                self.count += 1;
            }
            self.longest = self.longest.max(gap);
        }
        self.last = Some(now);
    }

    fn planned(&mut self, until: Instant) {
        self.planned = Some(until);
    }
}

/// `N loop gaps over T us, X ms in all, longest Y ms`, as the reports print it.
impl std::fmt::Display for LoopStalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} loop gaps over {} us, {:.1} ms in all, longest {:.1} ms",
            self.count,
            self.threshold.as_nanos() / 1000,
            self.total.as_nanos() as f64 / 1e6,
            self.longest.as_nanos() as f64 / 1e6
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_stalls_sum_only_the_gaps_over_the_threshold() {
        let mut s = LoopStalls::new(Duration::from_micros(50));
        for us in [0, 10, 100, 120, 5_000, 5_049] {
            s.tick(Instant::from_nanos(us * 1_000), Iteration::Frames);
        }
        // Gaps 10, 90, 20, 4880, 49 us: two over 50 us.
        assert_eq!(s.count, 2);
        assert_eq!(s.total, Duration::from_micros(90 + 4_880));
        assert_eq!(s.longest, Duration::from_micros(4_880));
        // A planned wait until 15 ms: woken at 12 ms (a frame), no stall; overslept to 15.2
        // ms, a stall of 0.2 ms; the plan holds for one gap only (60 us more: a stall).
        let mut s = LoopStalls::new(Duration::from_micros(50));
        s.tick(Instant::from_nanos(10_000_000), Iteration::Frames);
        s.planned(Instant::from_nanos(15_000_000));
        s.tick(Instant::from_nanos(12_000_000), Iteration::Frames);
        assert_eq!(s.count, 0);
        s.planned(Instant::from_nanos(15_000_000));
        s.tick(Instant::from_nanos(15_200_000), Iteration::Frames);
        assert_eq!(s.count, 1);
        s.tick(Instant::from_nanos(15_260_000), Iteration::Frames);
        assert_eq!(s.count, 2);
        assert_eq!(s.total, Duration::from_micros(200 + 60));
        assert_eq!(s.longest, Duration::from_micros(200));
    }

    #[test]
    fn a_gap_bucket_ends_above_the_gap_and_within_a_quarter_of_it() {
        let mut prev = 0;
        for ns in (0..5000u64).chain((12..40).map(|e| (1u64 << e) + 12345 % (1 << e))) {
            let b = gap_bucket(ns);
            assert!(b >= prev || ns < 5000, "buckets rise with the gap");
            prev = b;
            let end = gap_bucket_end(b);
            assert!(end > ns, "{ns} ns: bucket {b} ends at {end}");
            assert!(
                end as f64 <= ns as f64 * 1.25 + 1.0,
                "{ns} ns: bucket {b} ends at {end}"
            );
            if b > 0 {
                assert!(
                    gap_bucket_end(b - 1) <= ns,
                    "{ns} ns above bucket {}",
                    b - 1
                );
            }
        }
        assert_eq!(gap_bucket(u64::MAX), GAP_BUCKETS - 1);
    }

    #[test]
    fn each_gap_is_filed_under_what_the_iteration_before_it_did() {
        let mut g = LoopGaps::default();
        let t = |us: u64| Instant::from_nanos(us * 1000);
        // 200 frame iterations 2 us apart, then a 500 us stall after the last one, idle
        // iterations 1 us apart, one housekeeping iteration that took 40 us.
        let mut now = 0;
        for _ in 0..200 {
            g.tick(t(now), Iteration::Frames);
            now += 2;
        }
        now += 498;
        g.tick(t(now), Iteration::Housekeeping);
        now += 40;
        for _ in 0..10 {
            g.tick(t(now), Iteration::Idle);
            now += 1;
        }
        let c = LoopCounters::default();
        g.publish(&c);
        let f = c.summary(Iteration::Frames);
        assert_eq!((f.iterations, f.max_ns), (200, 500_000));
        assert!((2000..=2500).contains(&f.p50_ns), "{f:?}");
        assert!((2000..=2500).contains(&f.p99_ns), "{f:?}");
        assert_eq!(f.p999_ns, 500_000, "the 99.9th of 200 gaps is the largest");
        let h = c.summary(Iteration::Housekeeping);
        assert_eq!((h.iterations, h.max_ns, h.p50_ns), (1, 40_000, 40_000));
        let i = c.summary(Iteration::Idle);
        assert_eq!((i.iterations, i.max_ns), (9, 1000));
    }
}
