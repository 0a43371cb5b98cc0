//! ns-3 HPCC's queue-length monitor (`QLEN_MON_FILE`) and PFC log (`PFC_OUTPUT_FILE`).
//!
//! The HPCC scratch program samples, every `qlen_mon_interval` = 100 ns from `QLEN_MON_START`
//! until the first sample at or after `QLEN_MON_END`, the egress octets of every switch port
//! (all queues; only data queues are ever counted there, the control queue bypasses its
//! admission accounting) and adds one to a histogram bin per KB (`qlen / 1000`). Whenever the
//! sample time is a multiple of `qlen_dump_interval` = 100 ms it prints the cumulative
//! histograms:
//!
//! ```text
//! time: <ns>
//! <switch node id> <ifindex> <count at 0 KB> <count at 1 KB> ...
//! ```
//!
//! switches in increasing id, ports by ns-3 interface index (1-based: index 0 is the loopback
//! device). Sampling every 100 ns by event would cost ten million events per simulated second;
//! here the queue is piecewise constant between the changes the world reports, so each change
//! adds the number of sample instants the previous value covered (the same counts, exactly).
//!
//! The PFC log has one line per PFC frame a device receives, as ns-3's `QbbPfc` trace:
//! `<time ns> <node id> <node type: 0 host, 1 switch> <ifindex> <1 pause | 0 resume>`.

use std::fmt::Write as _;

use units::{Duration, Instant};

/// ns-3 `qlen_mon_interval`: 100 ns between samples.
pub const SAMPLE_EVERY: Duration = Duration::from_nanos(100);
/// ns-3 `qlen_dump_interval`: 100 ms between dumps.
pub const DUMP_EVERY: Duration = Duration::from_millis(100);

/// When to sample (`QLEN_MON_START`, `QLEN_MON_END`, in ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QlenWindow {
    pub start: Instant,
    pub end: Instant,
}

impl QlenWindow {
    /// The last sample instant: the first one at or after `end`.
    fn last_sample(&self) -> Instant {
        if self.end <= self.start {
            return self.start;
        }
        let span = (self.end - self.start).as_nanos();
        let k = span.div_ceil(SAMPLE_EVERY.as_nanos());
        self.start + Duration::from_nanos(k * SAMPLE_EVERY.as_nanos())
    }

    /// Sample instants in `[from, to)`.
    #[cfg(test)]
    fn samples_in(&self, from: Instant, to: Instant) -> u64 {
        self.samples_before(from, to, self.last_sample())
    }

    /// [`Self::samples_in`] with the last sample instant already known.
    fn samples_before(&self, from: Instant, to: Instant, last: Instant) -> u64 {
        let lo = from.max(self.start);
        let hi = to.min(last + Duration::from_nanos(1));
        if hi <= lo {
            return 0;
        }
        let step = SAMPLE_EVERY.as_nanos();
        // Index of the first sample >= lo and of the first sample >= hi.
        let first = (lo - self.start).as_nanos().div_ceil(step);
        let past = (hi - self.start).as_nanos().div_ceil(step);
        past - first
    }

    /// The first dump instant at or after `t` (a sample instant that is a multiple of
    /// [`DUMP_EVERY`]), if any sample falls there.
    pub fn next_dump(&self, t: Instant) -> Option<Instant> {
        let d = DUMP_EVERY.as_nanos();
        let mut at = t.max(self.start).as_nanos().div_ceil(d) * d;
        // A dump happens only at a sample instant.
        while at <= self.last_sample().as_nanos() {
            if (at - self.start.as_nanos()) % SAMPLE_EVERY.as_nanos() == 0 {
                return Some(Instant::from_nanos(at));
            }
            at += d;
        }
        None
    }
}

/// One switch port's histogram.
#[derive(Clone, Debug)]
struct PortHist {
    node: u32,
    ifindex: u32,
    /// Samples before this instant are counted.
    counted_to: Instant,
    /// The first sample instant at or after `counted_to`, and its index from the window's
    /// start: a change before it counts no sample and needs no division.
    next_at: Instant,
    next_idx: u64,
    cnt: Vec<u64>,
}

/// The queue-length monitor of every switch port.
#[derive(Clone, Debug)]
pub struct QlenMonitor {
    window: QlenWindow,
    /// `window.last_sample()`, computed once.
    last_sample: Instant,
    /// Indexed by the world's global port id; `None` for host ports.
    ports: Vec<Option<PortHist>>,
    out: String,
}

impl QlenMonitor {
    /// `ports[i]` = `Some((node, ifindex))` for a switch port, `None` for a host's.
    pub fn new(window: QlenWindow, ports: &[Option<(u32, u32)>]) -> QlenMonitor {
        QlenMonitor {
            window,
            last_sample: window.last_sample(),
            ports: ports
                .iter()
                .map(|p| {
                    p.map(|(node, ifindex)| PortHist {
                        node,
                        ifindex,
                        counted_to: window.start,
                        next_at: window.start,
                        next_idx: 0,
                        cnt: Vec::new(),
                    })
                })
                .collect(),
            out: String::new(),
        }
    }

    /// Port `port` held `bytes` from where it was last counted until `now` (exclusive).
    pub fn advance(&mut self, port: u32, bytes: u64, now: Instant) {
        let (w, last) = (self.window, self.last_sample);
        let Some(Some(h)) = self.ports.get_mut(port as usize) else {
            return;
        };
        if now <= h.counted_to || h.counted_to > last {
            return;
        }
        if now <= h.next_at {
            // No sample instant in [counted_to, now).
            h.counted_to = now;
            return;
        }
        // Index of the first sample at or after `now` (or past the last one): the samples
        // in [counted_to, now) are those from `next_idx` up to it.
        let hi = now.min(last + Duration::from_nanos(1));
        let step = SAMPLE_EVERY.as_nanos();
        let past = (hi - w.start).as_nanos().div_ceil(step);
        let n = past - h.next_idx;
        debug_assert_eq!(n, w.samples_before(h.counted_to, now, last));
        h.counted_to = now;
        h.next_idx = past;
        h.next_at = w.start + Duration::from_nanos(past * step);
        if n > 0 {
            let kb = (bytes / 1000) as usize;
            if h.cnt.len() <= kb {
                h.cnt.resize(kb + 1, 0);
            }
            h.cnt[kb] += n;
        }
    }

    /// The dump at `at`: every port is counted through `at` (its own sample included) with
    /// `bytes(port)`, then the histograms are printed in ns-3's order.
    pub fn dump(&mut self, at: Instant, bytes: impl Fn(u32) -> u64) {
        for p in 0..self.ports.len() as u32 {
            self.advance(p, bytes(p), at + Duration::from_nanos(1));
        }
        let _ = writeln!(self.out, "time: {}", at.as_nanos());
        let mut order: Vec<&PortHist> = self.ports.iter().flatten().collect();
        order.sort_by_key(|h| (h.node, h.ifindex));
        for h in order {
            let _ = write!(self.out, "{} {}", h.node, h.ifindex);
            for c in &h.cnt {
                let _ = write!(self.out, " {c}");
            }
            self.out.push('\n');
        }
    }

    pub fn window(&self) -> QlenWindow {
        self.window
    }

    /// The file's text so far.
    pub fn text(&self) -> &str {
        &self.out
    }
}

/// One received PFC frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfcRecord {
    pub t: Instant,
    /// Global port id of the receiving device.
    pub port: u32,
    pub pause: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(start: u64, end: u64) -> QlenWindow {
        QlenWindow {
            start: Instant::from_nanos(start),
            end: Instant::from_nanos(end),
        }
    }

    #[test]
    fn sample_instants_are_counted_once() {
        let win = w(1000, 2000); // samples at 1000, 1100, ..., 2000: 11
        assert_eq!(win.samples_in(Instant::ZERO, Instant::MAX), 11);
        // Split anywhere, the pieces add up.
        let cut = Instant::from_nanos(1450);
        assert_eq!(
            win.samples_in(Instant::ZERO, cut) + win.samples_in(cut, Instant::MAX),
            11
        );
        assert_eq!(win.samples_in(Instant::ZERO, Instant::from_nanos(1100)), 1);
        assert_eq!(win.samples_in(Instant::ZERO, Instant::from_nanos(1101)), 2);
        // An end between samples: the first sample at or after it is the last.
        assert_eq!(w(0, 150).samples_in(Instant::ZERO, Instant::MAX), 3);
    }

    #[test]
    fn histogram_and_dump_in_ns3_format() {
        let win = w(0, 200_000_000);
        let mut m = QlenMonitor::new(win, &[Some((5, 2)), None, Some((4, 1))]);
        // Port 0: 2500 octets for the first 1 us (10 samples at 2 KB), then 0.
        m.advance(0, 2500, Instant::from_nanos(1000));
        assert_eq!(win.next_dump(Instant::ZERO), Some(Instant::ZERO));
        assert_eq!(
            win.next_dump(Instant::from_nanos(1)),
            Some(Instant::from_nanos(100_000_000))
        );
        m.dump(Instant::from_nanos(100_000_000), |_| 0);
        let per_port = 100_000_000 / 100 + 1;
        assert_eq!(
            m.text(),
            format!(
                "time: 100000000\n4 1 {per_port}\n5 2 {} 0 10\n",
                per_port - 10
            )
        );
        assert_eq!(win.next_dump(Instant::from_nanos(200_000_001)), None);
    }
}
