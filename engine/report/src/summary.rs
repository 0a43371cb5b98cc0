//! The JSON summary of one receiver's run, and its text table.
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A machine-readable line's object: `value`'s fields with `"type": kind` added (a value that
/// is not an object goes under the key `kind`), so every JSON line says what it is.
pub fn tagged(kind: &str, value: serde_json::Value) -> serde_json::Value {
    let mut o = serde_json::Map::new();
    o.insert("type".into(), kind.into());
    match value {
        serde_json::Value::Object(m) => o.extend(m),
        other => {
            o.insert(kind.into(), other);
        }
    }
    serde_json::Value::Object(o)
}

/// Latency figures in nanoseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl LatencySummary {
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            mean_ns: h.mean(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        }
    }
}

/// What a report's latency measures.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LatencyKind {
    /// Receive time minus the sender's transmit stamp, on a clock both share (`quench recv`).
    #[default]
    OneWay,
    /// Round trip: the sender's receive time of a reflected frame (`quench recv --reflect`)
    /// minus its own transmit stamp (`quench send --out`).
    Rtt,
}

impl LatencyKind {
    /// How reports name it: `one-way latency`, `rtt`.
    pub fn label(self) -> &'static str {
        match self {
            LatencyKind::OneWay => "one-way latency",
            LatencyKind::Rtt => "rtt",
        }
    }
}

/// Where the receive times of a run came from: frames per source.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RxTimestamps {
    /// The NIC's hardware stamp (SO_TIMESTAMPING raw hardware).
    pub hardware: u64,
    /// The kernel's software stamp as the driver handed the frame up.
    pub software: u64,
    /// The kernel's clock as it copied the frame into the AF_PACKET ring.
    pub ring: u64,
    /// The poll loop's clock after the burst (AF_XDP, DPDK: no kernel stamp).
    pub poll_loop: u64,
}

impl RxTimestamps {
    /// The sources that stamped frames, best first, with their counts: `kernel software
    /// (1200 frames)`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = [
            ("kernel hardware", self.hardware),
            ("kernel software", self.software),
            ("kernel ring copy", self.ring),
            ("poll loop", self.poll_loop),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} ({n} frames)"))
        .collect();
        if parts.is_empty() {
            "none (no test frame)".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// One flow as the receiver saw it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlowSummary {
    pub flow: u32,
    pub frames: u64,
    pub bytes: u64,
    pub goodput_bps: f64,
    /// Sequence numbers skipped and never received.
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    pub too_old: u64,
    pub clock_skew: u64,
    /// Frames stamped on another clock than the receiver's (one-way latency refused).
    #[serde(default)]
    pub foreign_clock: u64,
    pub latency: LatencySummary,
}

/// A receiver's run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub duration_s: f64,
    pub flows: Vec<FlowSummary>,
    /// Jain's index over the flows' goodputs; `None` (JSON `null`) with no flow or no goodput
    /// (see [`jain_index`]).
    pub jain_index: Option<f64>,
    /// Octets of all flows x 8 / duration.
    pub aggregate_bps: f64,
    /// Frames of flows that found the flow table full.
    pub overflow_frames: u64,
    /// Frames that were not test frames (or failed to parse).
    pub other_frames: u64,
    /// CNPs the notification point sent.
    pub cnps_sent: u64,
    /// ECN codepoints seen on test frames: [not-ECT, ECT(1)/TCD-capable, ECT(0)/UE, CE].
    pub ecn: [u64; 4],
    /// All flows' latencies together.
    pub latency: LatencySummary,
    /// What `latency` measures.
    #[serde(default)]
    pub latency_kind: LatencyKind,
    /// Why there is no one-way figure for some or all frames (their sender's clock is not the
    /// receiver's); `None` when every frame shared the receiver's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way_refused: Option<String>,
    /// Where the receive times came from.
    #[serde(default)]
    pub rx_timestamps: RxTimestamps,
    /// Frames the kernel dropped before the receiver read them (its receive ring was full):
    /// lost on this host, not on the path. `None` when the port cannot tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_kernel_drops: Option<u64>,
}

/// Jain's fairness index of `xs` (Jain, Chiu and Hawe, DEC-TR-301, 1984, eq. 1):
/// (sum x)^2 / (n sum x^2), 1 for equal shares, 1/n when one of n takes everything.
///
/// `None` for an empty set or one whose shares are all zero: the formula is 0/0 there, and a
/// run in which no flow got through must not read as perfectly fair (an earlier copy returned
/// 1.0 for it). Every report (`quench recv`, `quench sim`, the tests) uses this one function.
pub fn jain_index(xs: &[f64]) -> Option<f64> {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || sq <= 0.0 {
        return None;
    }
    Some(sum * sum / (xs.len() as f64 * sq))
}

impl Summary {
    /// Summarises `flows` over a run of `duration_s` seconds; `all` is the merged latency
    /// histogram. The receiver's counters (ECN, CNPs, other frames, overflow) are the caller's
    /// to fill in.
    pub fn of(flows: Vec<FlowSummary>, duration_s: f64, all: &Histogram<u64>) -> Self {
        let rates: Vec<f64> = flows.iter().map(|f| f.goodput_bps).collect();
        let bytes: u64 = flows.iter().map(|f| f.bytes).sum();
        Summary {
            duration_s,
            jain_index: jain_index(&rates),
            aggregate_bps: if duration_s > 0.0 {
                bytes as f64 * 8.0 / duration_s
            } else {
                0.0
            },
            flows,
            latency: LatencySummary::of(all),
            ..Summary::default()
        }
    }

    /// A text table of the flows and the totals.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let us = |ns: u64| ns as f64 / 1e3;
        let _ = writeln!(
            s,
            "{:>6} {:>10} {:>12} {:>8} {:>8} {:>10} {:>10} {:>10}",
            "flow", "frames", "Mb/s", "lost", "reord", "p50 us", "p99 us", "p99.9 us"
        );
        if self.latency_kind == LatencyKind::Rtt {
            let _ = writeln!(
                s,
                "(round trip: frames reflected back to the sender; p = rtt)"
            );
        }
        // The flows with the most octets, in flow order.
        let keys: Vec<u64> = self.flows.iter().map(|f| f.bytes).collect();
        let (shown, rest) = crate::top(&keys, crate::TOP);
        for f in shown.iter().map(|&i| &self.flows[i]) {
            let _ = writeln!(
                s,
                "{:>6} {:>10} {:>12.1} {:>8} {:>8} {:>10.1} {:>10.1} {:>10.1}",
                f.flow,
                f.frames,
                f.goodput_bps / 1e6,
                f.lost,
                f.reordered,
                us(f.latency.p50_ns),
                us(f.latency.p99_ns),
                us(f.latency.p999_ns)
            );
        }
        if rest > 0 {
            let _ = writeln!(
                s,
                "{} of {} flows shown, those with the most octets; {rest} more in summary.json",
                shown.len(),
                self.flows.len()
            );
        }
        let _ = writeln!(
            s,
            "total {:.1} Mb/s over {:.1} s, Jain {}, CNPs sent {}, ECN [not-ECT {} ECT1 {} ECT0 {} CE {}], {} p50/p99/p99.9 {:.1}/{:.1}/{:.1} us",
            self.aggregate_bps / 1e6,
            self.duration_s,
            self.jain_index
                .map_or_else(|| "n/a".to_string(), |j| format!("{j:.3}")),
            self.cnps_sent,
            self.ecn[0],
            self.ecn[1],
            self.ecn[2],
            self.ecn[3],
            self.latency_kind.label(),
            us(self.latency.p50_ns),
            us(self.latency.p99_ns),
            us(self.latency.p999_ns)
        );
        let _ = writeln!(s, "receive timestamps: {}", self.rx_timestamps.describe());
        if let Some(why) = &self.one_way_refused {
            let _ = writeln!(s, "one-way latency refused: {why}");
        }
        if let Some(d) = self.rx_kernel_drops.filter(|&d| d > 0) {
            let _ = writeln!(
                s,
                "frames dropped by the kernel before the receiver read them: {d}"
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_of_equal_unequal_and_empty_sets() {
        assert_eq!(jain_index(&[1.0, 1.0, 1.0]), Some(1.0));
        assert_eq!(jain_index(&[1.0, 0.0]), Some(0.5));
        assert_eq!(jain_index(&[3.0, 0.0, 0.0]), Some(1.0 / 3.0));
        // 0/0: undefined, not "perfectly fair".
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None);
    }

    #[test]
    fn a_run_without_flows_has_no_jain_index() {
        let s = Summary::of(Vec::new(), 1.0, &crate::latency_histogram());
        assert_eq!(s.jain_index, None);
        assert!(s.table().contains("Jain n/a"), "{}", s.table());
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"jain_index\":null"), "{json}");
        let back: Summary = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
    }
}
