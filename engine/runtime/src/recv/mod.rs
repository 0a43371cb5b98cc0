//! The measuring half of `quench recv`: per-flow goodput, loss, reordering and duplicates from
//! the test header's sequence numbers, and one-way latency from its transmit timestamp.
//!
//! Sans-IO like the algorithm crates: the caller parses frames and passes meaning-level
//! [`Arrival`]s with the receive time it read once per burst. Nothing here reads a clock.
//!
//! Invariants:
//! - The flow table is bounded ([`RecvConfig::max_flows`]); arrivals of flows beyond it are
//!   counted in [`Receiver::overflow_frames`] and otherwise ignored (the first flows seen keep
//!   their slots: a measurement must not lose a flow it has been counting).
//! - Per flow, every arrival is exactly one of: in order, a jump ahead (the skipped sequence
//!   numbers become *missing*), a late arrival filling a missing number (*reordered*), a
//!   duplicate, or *too old* to tell (behind the duplicate window). Loss at any time is the count
//!   of numbers still missing.
//! - Latency is `rx - tx` in nanoseconds, recorded only for an arrival whose clock id
//!   ([`Arrival::clock`]) is the receiver's own ([`RecvConfig::clock`]): transmit and receive
//!   stamps then come from one `CLOCK_MONOTONIC`. An arrival on another clock (another machine,
//!   or a sender that did not say, id 0) is counted in `foreign_clock` and its latency refused;
//!   one stamped in the future of the receive clock is counted in `clock_skew` and not recorded.
//!   For a round trip ([`LatencyKind::Rtt`]) the receiver is the sender itself, reading frames
//!   reflected back, and the clock is the one it stamped them with.
use std::collections::HashMap;

use hdrhistogram::Histogram;
use units::{Duration, FlowId, Instant};

use quench_report::{
    latency_histogram, FlowSummary, LatencyKind, LatencySummary, Summary, MAX_LATENCY_NS,
};
use quench_wire::testhdr::SEQ_EPOCH_MASK;

pub mod runtime;
pub mod sink;
pub mod worker;

/// Sequence numbers remembered behind the highest one seen, to tell a late frame from a
/// duplicate. 1024 frames of 1500 octets is 12 ms at 1 Gb/s: far more than any reordering the
/// switch can cause (it reorders only across priorities).
const WINDOW: u64 = 1024;
const WINDOW_WORDS: usize = (WINDOW / 64) as usize;

/// One received test frame, as the parser hands it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    pub flow: FlowId,
    pub seq: u64,
    /// The sender's transmit timestamp.
    pub tx: Instant,
    /// The clock domain of `tx` (the test header's clock id; 0 = not said).
    pub clock: u32,
    /// Octets of the frame on the wire (Ethernet header to end of payload).
    pub len: u32,
}

/// Receiver limits and clock.
#[derive(Clone, Copy, Debug)]
pub struct RecvConfig {
    pub max_flows: usize,
    /// The receive clock's id (`quench_wire::time::clock_id`): latency is recorded only for arrivals
    /// stamped on it. 0 matches nothing.
    pub clock: u32,
    /// What the latency is: one way, or a round trip measured by the sender.
    pub kind: LatencyKind,
}

impl RecvConfig {
    /// A one-way receiver with the default flow table on clock `clock`.
    pub fn on_clock(clock: u32) -> Self {
        RecvConfig {
            max_flows: 4096,
            clock,
            kind: LatencyKind::OneWay,
        }
    }
}

/// Per-flow counters and histograms.
#[derive(Clone, Debug)]
pub struct FlowStats {
    pub flow: FlowId,
    pub frames: u64,
    pub bytes: u64,
    pub first_rx: Instant,
    pub last_rx: Instant,
    /// Sequence numbers skipped and not (yet) seen.
    pub missing: u64,
    /// Frames that arrived after a higher sequence number (filled a gap).
    pub reordered: u64,
    pub duplicates: u64,
    /// Frames further behind the highest sequence number than the window remembers, or of
    /// another epoch than the flow's first frame (a sender of the same flow id restarted).
    pub too_old: u64,
    /// Arrivals stamped later than the receive time (clocks disagree); not in the histogram.
    pub clock_skew: u64,
    /// Arrivals stamped on another clock than the receiver's: latency refused.
    pub foreign_clock: u64,
    /// Latencies larger than [`MAX_LATENCY_NS`], recorded as that value.
    pub clamped: u64,
    /// One-way latency in nanoseconds over the whole run.
    pub latency: Histogram<u64>,
    /// Latency since the last [`Receiver::take_interval`].
    pub interval_latency: Histogram<u64>,
    /// Frame lengths since the last [`Receiver::take_interval`]: count = frames, mean x count =
    /// octets exactly (lengths below 2048 are exact at 3 significant digits).
    pub interval_len: Histogram<u64>,
    /// Highest sequence number seen plus one (0 = nothing yet), counted within `epoch`.
    next: u64,
    /// The sequence numbers' epoch ([`SEQ_EPOCH_MASK`] bits), the first frame's; `None` before
    /// it.
    epoch: Option<u64>,
    /// Bit i of the window set = sequence number `next - 1 - i` has been seen.
    seen: [u64; WINDOW_WORDS],
}

impl FlowStats {
    fn new(flow: FlowId, now: Instant) -> Self {
        FlowStats {
            flow,
            frames: 0,
            bytes: 0,
            first_rx: now,
            last_rx: now,
            missing: 0,
            reordered: 0,
            duplicates: 0,
            too_old: 0,
            clock_skew: 0,
            foreign_clock: 0,
            clamped: 0,
            latency: latency_histogram(),
            interval_latency: latency_histogram(),
            interval_len: latency_histogram(),
            next: 0,
            epoch: None,
            seen: [0; WINDOW_WORDS],
        }
    }

    fn bit(&self, back: u64) -> bool {
        self.seen[(back / 64) as usize] & (1 << (back % 64)) != 0
    }

    fn set_bit(&mut self, back: u64) {
        self.seen[(back / 64) as usize] |= 1 << (back % 64);
    }

    /// Shifts the window by `by` positions (new numbers appear at position 0, unseen).
    fn shift(&mut self, by: u64) {
        if by >= WINDOW {
            self.seen = [0; WINDOW_WORDS];
            return;
        }
        let words = (by / 64) as usize;
        let bits = (by % 64) as u32;
        for i in (0..WINDOW_WORDS).rev() {
            let hi = if i >= words { self.seen[i - words] } else { 0 };
            let lo = if i > words {
                self.seen[i - words - 1]
            } else {
                0
            };
            self.seen[i] = if bits == 0 {
                hi
            } else {
                (hi << bits) | (lo >> (64 - bits))
            };
        }
    }

    fn on_seq(&mut self, seq: u64) {
        let epoch = *self.epoch.get_or_insert(seq & SEQ_EPOCH_MASK);
        if seq & SEQ_EPOCH_MASK != epoch {
            self.too_old += 1;
            return;
        }
        let seq = seq & !SEQ_EPOCH_MASK;
        if seq >= self.next {
            // In order (seq == next) or a jump ahead: everything between is missing for now.
            let gap = seq - self.next;
            self.missing += gap;
            self.shift(gap + 1);
            self.set_bit(0);
            self.next = seq + 1;
        } else {
            let back = self.next - 1 - seq;
            if back >= WINDOW {
                self.too_old += 1;
            } else if self.bit(back) {
                self.duplicates += 1;
            } else {
                self.set_bit(back);
                self.reordered += 1;
                self.missing = self.missing.saturating_sub(1);
            }
        }
    }

    /// Goodput in bits per second between the first and the last arrival (0 with < 2 frames).
    pub fn goodput_bps(&self) -> f64 {
        let span = self.last_rx.saturating_since(self.first_rx);
        if self.frames < 2 || span == Duration::ZERO {
            return 0.0;
        }
        // The first frame's octets arrived "at" first_rx: count the ones after it.
        let bytes = self.bytes.saturating_sub(self.bytes / self.frames);
        bytes as f64 * 8.0 / span.as_secs_f64()
    }

    /// Sequence numbers this flow has seen or skipped: the frames its sender sent, as far as the
    /// receiver can tell.
    pub fn expected(&self) -> u64 {
        self.next
    }

    /// This flow's line of the run's summary.
    pub fn summary(&self) -> FlowSummary {
        FlowSummary {
            flow: self.flow.0,
            frames: self.frames,
            bytes: self.bytes,
            goodput_bps: self.goodput_bps(),
            lost: self.missing,
            reordered: self.reordered,
            duplicates: self.duplicates,
            too_old: self.too_old,
            clock_skew: self.clock_skew,
            foreign_clock: self.foreign_clock,
            latency: LatencySummary::of(&self.latency),
        }
    }
}

/// What an arrival did to the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accepted {
    /// Counted for a flow already in the table.
    Known,
    /// Counted for a flow that this arrival added to the table.
    New,
    /// The table is full: not counted (see [`Receiver::overflow_frames`]).
    Overflow,
}

/// Per-flow accounting for every test flow arriving at one receiver.
///
/// Call order: [`Receiver::on_arrival`] per frame, [`Receiver::take_interval`] once per
/// reporting interval (it resets the interval histograms), read [`Receiver::flows`] at the end.
pub struct Receiver {
    cfg: RecvConfig,
    flows: HashMap<FlowId, usize>,
    stats: Vec<FlowStats>,
    overflow_frames: u64,
    /// The last clock id seen that was not the receiver's, for the refusal's reason.
    foreign: Option<u32>,
}

impl Receiver {
    pub fn new(cfg: RecvConfig) -> Self {
        Receiver {
            cfg,
            flows: HashMap::new(),
            stats: Vec::new(),
            overflow_frames: 0,
            foreign: None,
        }
    }

    /// Counts one test frame received at `now`; returns what it did and the latency it recorded
    /// (nanoseconds), if any.
    pub fn on_arrival(&mut self, now: Instant, a: Arrival) -> (Accepted, Option<u64>) {
        let (idx, accepted) = match self.flows.get(&a.flow) {
            Some(&i) => (i, Accepted::Known),
            None if self.stats.len() < self.cfg.max_flows => {
                self.stats.push(FlowStats::new(a.flow, now));
                let i = self.stats.len() - 1;
                self.flows.insert(a.flow, i);
                (i, Accepted::New)
            }
            None => {
                self.overflow_frames += 1;
                return (Accepted::Overflow, None);
            }
        };
        let f = &mut self.stats[idx];
        f.frames += 1;
        f.bytes += u64::from(a.len);
        f.last_rx = now;
        f.on_seq(a.seq);
        let _ = f.interval_len.record(u64::from(a.len).max(1));
        if a.clock == 0 || a.clock != self.cfg.clock {
            f.foreign_clock += 1;
            self.foreign = Some(a.clock);
            return (accepted, None);
        }
        if a.tx > now {
            f.clock_skew += 1;
            (accepted, None)
        } else {
            let mut ns = (now - a.tx).as_nanos().max(1);
            if ns > MAX_LATENCY_NS {
                f.clamped += 1;
                ns = MAX_LATENCY_NS;
            }
            // Cannot fail: ns is within the histogram's bounds.
            let _ = f.latency.record(ns);
            let _ = f.interval_latency.record(ns);
            (accepted, Some(ns))
        }
    }

    /// Why some arrivals have no latency figure: their clock is not the receiver's. `None` when
    /// every arrival was on the receiver's clock.
    pub fn refusal(&self) -> Option<String> {
        let id = self.foreign?;
        let frames: u64 = self.stats.iter().map(|f| f.foreign_clock).sum();
        let whose = if id == 0 {
            "carry no clock id (their sender did not say which clock stamped them)".to_string()
        } else {
            format!(
                "were stamped on clock {id:#08x}, this receiver's is {:#08x} (another machine, \
                 boot or time namespace)",
                self.cfg.clock
            )
        };
        Some(format!(
            "{frames} frames {whose}: a one-way figure needs both ends on one clock; measure \
             the round trip instead (`quench recv --reflect` here, `quench send --out DIR` there)"
        ))
    }

    /// Flows in order of first arrival.
    pub fn flows(&self) -> &[FlowStats] {
        &self.stats
    }

    /// Frames of flows that found the table full.
    pub fn overflow_frames(&self) -> u64 {
        self.overflow_frames
    }

    /// The run's summary over `duration_s` seconds; `all` is the merged latency histogram.
    pub fn summary(&self, duration_s: f64, all: &Histogram<u64>) -> Summary {
        let flows = self.stats.iter().map(FlowStats::summary).collect();
        Summary {
            overflow_frames: self.overflow_frames,
            latency_kind: self.cfg.kind,
            one_way_refused: match self.cfg.kind {
                LatencyKind::OneWay => self.refusal(),
                // The sender's own clock stamped and received: never foreign.
                LatencyKind::Rtt => None,
            },
            ..Summary::of(flows, duration_s, all)
        }
    }

    /// Hands the interval histograms (latency, frame length) of every flow that received
    /// something since the last call to `f`, then clears them.
    pub fn take_interval(&mut self, mut f: impl FnMut(FlowId, &Histogram<u64>, &Histogram<u64>)) {
        for s in &mut self.stats {
            if s.interval_len.is_empty() {
                continue;
            }
            f(s.flow, &s.interval_latency, &s.interval_len);
            s.interval_latency.reset();
            s.interval_len.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CLOCK: u32 = 0x00ab_cdef;

    fn arr(flow: u32, seq: u64, tx_ns: u64) -> Arrival {
        Arrival {
            flow: FlowId(flow),
            seq,
            tx: Instant::from_nanos(tx_ns),
            clock: CLOCK,
            len: 1000,
        }
    }

    fn rx() -> Receiver {
        Receiver::new(RecvConfig::on_clock(CLOCK))
    }

    #[test]
    fn latency_only_on_a_shared_clock() {
        let mut r = rx();
        let t = Instant::from_nanos(50_000);
        assert_eq!(r.on_arrival(t, arr(1, 0, 10_000)).1, Some(40_000));
        let other = Arrival {
            clock: 0x12_3456,
            ..arr(1, 1, 10_000)
        };
        assert_eq!(r.on_arrival(t, other), (Accepted::Known, None));
        let unsaid = Arrival {
            clock: 0,
            ..arr(1, 2, 10_000)
        };
        assert_eq!(r.on_arrival(t, unsaid).1, None);
        let f = &r.flows()[0];
        assert_eq!((f.frames, f.foreign_clock, f.latency.len()), (3, 2, 1));
        let why = r.refusal().unwrap();
        assert!(why.starts_with("2 frames carry no clock id"), "{why}");
        let s = r.summary(1.0, &latency_histogram());
        assert_eq!(s.one_way_refused, Some(why));
        assert_eq!(s.flows[0].foreign_clock, 2);
        let mut r = rx();
        r.on_arrival(t, other);
        let why = r.refusal().unwrap();
        assert!(
            why.contains("clock 0x123456, this receiver's is 0xabcdef"),
            "{why}"
        );
        let mut rtt = Receiver::new(RecvConfig {
            kind: LatencyKind::Rtt,
            ..RecvConfig::on_clock(CLOCK)
        });
        rtt.on_arrival(t, arr(1, 0, 10_000));
        let s = rtt.summary(1.0, &latency_histogram());
        assert_eq!(
            (s.latency_kind, s.one_way_refused, s.flows[0].latency.count),
            (LatencyKind::Rtt, None, 1)
        );
    }

    #[test]
    fn in_order_gap_late_and_duplicate() {
        let mut r = rx();
        let t = Instant::from_nanos(1_000_000);
        for seq in [0, 1, 2, 5, 3, 3, 6] {
            r.on_arrival(t, arr(1, seq, 0));
        }
        let f = &r.flows()[0];
        assert_eq!(f.frames, 7);
        assert_eq!(f.expected(), 7);
        // 4 never came; 3 came late (reordered) then again (duplicate).
        assert_eq!(f.missing, 1);
        assert_eq!(f.reordered, 1);
        assert_eq!(f.duplicates, 1);
    }

    #[test]
    fn frames_count_within_the_first_frames_epoch() {
        let mut r = rx();
        let t = Instant::from_nanos(1_000_000);
        let epoch = 0xbeef << 48;
        for seq in [0, 1, 3] {
            r.on_arrival(t, arr(1, epoch | seq, 0));
        }
        // Another epoch: a restarted sender of the same flow id, not a jump of 2^48 frames.
        r.on_arrival(t, arr(1, (0xbef0 << 48) | 4, 0));
        let f = &r.flows()[0];
        assert_eq!((f.expected(), f.missing, f.too_old), (4, 1, 1));
    }

    #[test]
    fn far_behind_is_too_old_not_a_duplicate() {
        let mut r = rx();
        let t = Instant::ZERO;
        r.on_arrival(t, arr(1, 5000, 0));
        r.on_arrival(t, arr(1, 10, 0));
        let f = &r.flows()[0];
        assert_eq!((f.missing, f.too_old, f.reordered), (5000, 1, 0));
    }

    #[test]
    fn latency_goodput_and_skew() {
        let mut r = rx();
        // 11 frames of 1000 octets 8 us apart = 1 Gb/s; each took 20 us.
        for i in 0..11u64 {
            let now = 100_000 + i * 8_000;
            r.on_arrival(Instant::from_nanos(now), arr(7, i, now - 20_000));
        }
        r.on_arrival(Instant::from_nanos(200_000), arr(7, 11, 300_000));
        let f = &r.flows()[0];
        assert_eq!(f.clock_skew, 1);
        assert_eq!(f.latency.len(), 11);
        assert!(f
            .latency
            .equivalent(f.latency.value_at_quantile(0.5), 20_000));
        // 12 frames over 200-100 us: 11 000 octets after the first in 100 us = 0.88 Gb/s.
        assert!((f.goodput_bps() - 0.88e9).abs() < 1e3);
    }

    #[test]
    fn table_is_bounded() {
        let mut r = Receiver::new(RecvConfig {
            max_flows: 2,
            ..RecvConfig::on_clock(CLOCK)
        });
        assert_eq!(r.on_arrival(Instant::ZERO, arr(1, 0, 0)).0, Accepted::New);
        assert_eq!(r.on_arrival(Instant::ZERO, arr(2, 0, 0)).0, Accepted::New);
        assert_eq!(
            r.on_arrival(Instant::ZERO, arr(3, 0, 0)).0,
            Accepted::Overflow
        );
        assert_eq!(r.on_arrival(Instant::ZERO, arr(1, 1, 0)).0, Accepted::Known);
        assert_eq!(r.overflow_frames(), 1);
        assert_eq!(r.flows().len(), 2);
    }

    #[test]
    fn interval_histograms_reset() {
        let mut r = rx();
        r.on_arrival(Instant::from_nanos(10), arr(1, 0, 0));
        let mut seen = Vec::new();
        r.take_interval(|f, lat, len| seen.push((f, lat.len(), len.len(), len.mean())));
        assert_eq!(seen, vec![(FlowId(1), 1, 1, 1000.0)]);
        seen.clear();
        r.take_interval(|f, lat, len| seen.push((f, lat.len(), len.len(), len.mean())));
        assert!(seen.is_empty());
        assert_eq!(r.flows()[0].latency.len(), 1);
    }

    proptest! {
        /// Model check: any delivery order of any subset (with duplicates) of 0..n, within the
        /// window, ends with missing = numbers below the highest not delivered, and every frame
        /// classified once.
        #[test]
        fn sequence_accounting_matches_a_model(
            n in 1u64..600,
            picks in proptest::collection::vec((0u64..600, any::<bool>()), 1..800),
        ) {
            let mut r = rx();
            let mut delivered = std::collections::BTreeSet::new();
            let mut dups = 0u64;
            for (s, _) in &picks {
                let s = s % n;
                if !delivered.insert(s) { dups += 1; }
                r.on_arrival(Instant::ZERO, arr(1, s, 0));
            }
            let f = &r.flows()[0];
            let hi = *delivered.iter().next_back().unwrap();
            let missing = (0..=hi).filter(|s| !delivered.contains(s)).count() as u64;
            prop_assert_eq!(f.missing, missing);
            prop_assert_eq!(f.duplicates, dups);
            prop_assert_eq!(f.too_old, 0);
            prop_assert_eq!(f.expected(), hi + 1);
            prop_assert_eq!(f.frames, picks.len() as u64);
        }
    }
}
