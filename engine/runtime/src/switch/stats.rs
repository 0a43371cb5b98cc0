//! Live counters and the control plane.
//!
//! Each worker has its own counters for each port it holds (per-worker copies, merged when
//! read): each set is written by exactly one worker and read by the control-plane thread,
//! plain atomics with relaxed load + store on the writer side (no locked read-modify-write,
//! no locks, no cache line written by two cores on the hot path), relaxed loads on the reader
//! side, which sums the workers' copies.
//! The control plane ([`super::control`]) serves [`Registry::snapshot`] as JSON.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use quench_node::switch::queue::{ClassStats, CLASSES};
use quench_port::probe::{GapSummary, Iteration, LoopCounters};

use quench_wire::time::Clock;

/// Adds `v` to a counter that only the calling thread writes.
#[inline]
pub fn bump(c: &AtomicU64, v: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
}

/// Per-class queue counters as published.
#[derive(Default)]
pub struct ClassCounters {
    pub enq_pkts: AtomicU64,
    pub enq_bytes: AtomicU64,
    pub deq_pkts: AtomicU64,
    pub deq_bytes: AtomicU64,
    pub drop_pkts: AtomicU64,
    pub drop_bytes: AtomicU64,
    pub hook_drop_pkts: AtomicU64,
    pub depth_pkts: AtomicU64,
    pub depth_bytes: AtomicU64,
    pub max_depth_bytes: AtomicU64,
}

/// One port's counters, as one worker writes them (each worker has its own per port). Aligned to
/// 128 octets (two cache lines, for the adjacent-line prefetcher): the first counters change
/// every poll, and must not share a line with another worker's allocation.
#[derive(Default)]
#[repr(align(128))]
pub struct PortCounters {
    pub rx_pkts: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub tx_pkts: AtomicU64,
    pub tx_bytes: AtomicU64,
    /// Received frames dropped: malformed, MAC control consumed, or filtered (same port).
    pub rx_drops: AtomicU64,
    /// Frames for this port dropped before queueing: no buffer for a copy, cross-core ring full.
    pub tx_drops: AtomicU64,
    /// Frames received here and flooded.
    pub flooded: AtomicU64,
    /// Of those, frames to an individual (unicast) address the FDB did not hold: each copy went
    /// to every other port, to hosts it was not for.
    pub flooded_unicast: AtomicU64,
    pub classes: [ClassCounters; CLASSES],
    /// PFC (`switch::pfc`): PAUSE frames sent out of / received on this port, lossless frames
    /// from it dropped for want of headroom.
    pub pfc_sent: AtomicU64,
    pub pfc_received: AtomicU64,
    pub pfc_headroom_drops: AtomicU64,
    /// PFC watchdog: storms found on this port, PAUSE frames for a storming priority ignored.
    pub pfc_watchdog_storms: AtomicU64,
    pub pfc_watchdog_ignored: AtomicU64,
    /// Frames the kernel (DPDK: the device) dropped before this port's receive ring (ring full,
    /// no buffer), as the port last reported it.
    pub rx_kernel_drops: AtomicU64,
    /// Times the device refused a frame the switch sent, to be sent again
    /// ([`quench_port::PortStats::tx_refusals`]), as the port last reported it.
    pub tx_refusals: AtomicU64,
    /// Frames the kernel took from the switch and dropped unsent
    /// ([`quench_port::PortStats::tx_kernel_drops`]), as the port last reported it.
    pub tx_kernel_drops: AtomicU64,
    /// The kernel fast path ([`super::fastpath`]): frames and octets its program on this port
    /// redirected to another, and those other ports' programs redirected to this one, totals
    /// as last read. Not in `rx_*` / `tx_*` here; the snapshot adds them.
    pub fast_rx_pkts: AtomicU64,
    pub fast_rx_bytes: AtomicU64,
    pub fast_tx_pkts: AtomicU64,
    pub fast_tx_bytes: AtomicU64,
}

impl PortCounters {
    /// Publishes the port's own counts ([`quench_port::Port::stats`]), those it has.
    pub fn publish_kernel_counts(&self, port: &mut impl quench_port::Port) {
        let store = |c: &AtomicU64, v: Option<u64>| {
            if let Some(v) = v {
                c.store(v, Ordering::Relaxed);
            }
        };
        let s = port.stats();
        store(&self.rx_kernel_drops, s.rx_kernel_drops);
        store(&self.tx_kernel_drops, s.tx_kernel_drops);
        store(&self.tx_refusals, s.tx_refusals);
    }

    /// Publishes the port's PFC counters (owning worker, with the class counters).
    pub fn publish_pfc(&self, c: &quench_node::switch::core::PfcCounters) {
        self.pfc_sent.store(c.sent, Ordering::Relaxed);
        self.pfc_received.store(c.received, Ordering::Relaxed);
        self.pfc_headroom_drops
            .store(c.headroom_drops, Ordering::Relaxed);
        self.pfc_watchdog_storms
            .store(c.watchdog_storms, Ordering::Relaxed);
        self.pfc_watchdog_ignored
            .store(c.watchdog_ignored, Ordering::Relaxed);
    }

    /// Publishes the queue's own counters (called by the owning worker, about every ms).
    pub fn publish_classes(&self, stats: &[ClassStats; CLASSES]) {
        for (c, s) in self.classes.iter().zip(stats.iter()) {
            let st = |a: &AtomicU64, v| a.store(v, Ordering::Relaxed);
            st(&c.enq_pkts, s.enq_pkts);
            st(&c.enq_bytes, s.enq_bytes);
            st(&c.deq_pkts, s.deq_pkts);
            st(&c.deq_bytes, s.deq_bytes);
            st(&c.drop_pkts, s.drop_pkts);
            st(&c.drop_bytes, s.drop_bytes);
            st(&c.hook_drop_pkts, s.hook_drop_pkts);
            st(&c.depth_pkts, s.depth_pkts);
            st(&c.depth_bytes, s.depth_bytes);
            st(&c.max_depth_bytes, s.max_depth_bytes);
        }
    }
}

/// The workers' copies of one port's counters, added up (the largest queue depth seen is the
/// largest of theirs).
fn sum(cs: &[Arc<PortCounters>]) -> PortCounters {
    let out = PortCounters::default();
    let add = |to: &AtomicU64, from: &AtomicU64| {
        bump(to, from.load(Ordering::Relaxed));
    };
    for c in cs {
        add(&out.rx_pkts, &c.rx_pkts);
        add(&out.rx_bytes, &c.rx_bytes);
        add(&out.tx_pkts, &c.tx_pkts);
        add(&out.tx_bytes, &c.tx_bytes);
        add(&out.rx_drops, &c.rx_drops);
        add(&out.tx_drops, &c.tx_drops);
        add(&out.flooded, &c.flooded);
        add(&out.flooded_unicast, &c.flooded_unicast);
        add(&out.pfc_sent, &c.pfc_sent);
        add(&out.pfc_received, &c.pfc_received);
        add(&out.pfc_headroom_drops, &c.pfc_headroom_drops);
        add(&out.rx_kernel_drops, &c.rx_kernel_drops);
        add(&out.tx_refusals, &c.tx_refusals);
        add(&out.tx_kernel_drops, &c.tx_kernel_drops);
        add(&out.fast_rx_pkts, &c.fast_rx_pkts);
        add(&out.fast_rx_bytes, &c.fast_rx_bytes);
        add(&out.fast_tx_pkts, &c.fast_tx_pkts);
        add(&out.fast_tx_bytes, &c.fast_tx_bytes);
        for (o, q) in out.classes.iter().zip(&c.classes) {
            add(&o.enq_pkts, &q.enq_pkts);
            add(&o.enq_bytes, &q.enq_bytes);
            add(&o.deq_pkts, &q.deq_pkts);
            add(&o.deq_bytes, &q.deq_bytes);
            add(&o.drop_pkts, &q.drop_pkts);
            add(&o.drop_bytes, &q.drop_bytes);
            add(&o.hook_drop_pkts, &q.hook_drop_pkts);
            add(&o.depth_pkts, &q.depth_pkts);
            add(&o.depth_bytes, &q.depth_bytes);
            let m = q.max_depth_bytes.load(Ordering::Relaxed);
            o.max_depth_bytes.fetch_max(m, Ordering::Relaxed);
        }
    }
    out
}

/// Static facts about a port, for the snapshot.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PortInfo {
    pub name: String,
    pub iface: String,
    pub kind: String,
    pub mode: String,
    pub worker: usize,
    pub rate_bps: Option<u64>,
}

/// A worker's MAC table and loop as published (written by that worker only; aligned as
/// [`PortCounters`]).
#[derive(Default)]
#[repr(align(128))]
pub struct WorkerCounters {
    /// Entries, static ones included.
    pub entries: AtomicU64,
    /// Frames whose source address was not learned because the table was full.
    pub refused: AtomicU64,
    /// The worker's loop iteration gaps ([`quench_port::probe::LoopGaps`]).
    pub loops: LoopCounters,
}

/// A worker's loop as the snapshot shows it ([`quench_port::probe::LoopGaps`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WorkerSnapshot {
    /// Gaps after iterations that moved frames: receive to transmit kick, plus housekeeping.
    pub frames: GapSummary,
    /// Gaps after iterations that only did periodic housekeeping.
    pub housekeeping: GapSummary,
    /// Gaps after idle iterations (spin or yield).
    pub idle: GapSummary,
}

/// Everything the control plane reports.
pub struct Registry {
    pub info: Vec<PortInfo>,
    /// Per port, each worker's counters for it (summed in the snapshot).
    pub counters: Vec<Vec<Arc<PortCounters>>>,
    /// Each worker's MAC table counters and loop gaps.
    pub workers: Vec<Arc<WorkerCounters>>,
    pub clock: Clock,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassSnapshot {
    /// `0`..`7` for data priorities, `ctl` for control.
    pub class: String,
    #[serde(flatten)]
    pub counters: ClassStats,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PortSnapshot {
    #[serde(flatten)]
    pub info: PortInfo,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub rx_drops: u64,
    pub tx_drops: u64,
    pub queue_drops: u64,
    pub flooded: u64,
    /// Unicast frames received here and flooded for want of an FDB entry for their DA.
    #[serde(default)]
    pub flooded_unicast: u64,
    pub queue_depth_bytes: u64,
    pub queues: Vec<ClassSnapshot>,
    #[serde(default)]
    pub pfc_pauses_sent: u64,
    #[serde(default)]
    pub pfc_pauses_received: u64,
    #[serde(default)]
    pub pfc_headroom_drops: u64,
    /// PFC watchdog: storms found, PAUSE frames ignored during them.
    #[serde(default)]
    pub pfc_watchdog_storms: u64,
    #[serde(default)]
    pub pfc_watchdog_ignored: u64,
    /// Frames dropped by the kernel before the port's receive ring (AF_XDP: rx ring full or
    /// no fill buffer; AF_PACKET: ring full; DPDK: the device's `imissed`): the switch never
    /// saw them.
    #[serde(default)]
    pub rx_kernel_drops: u64,
    /// Times the device refused a frame the switch sent (AF_PACKET: ENOBUFS; a veth whose peer
    /// is down or whose backlog is full). The frame is sent again: backpressure, not loss.
    #[serde(default)]
    pub tx_refusals: u64,
    /// Frames the kernel took from the switch and dropped unsent (AF_XDP copy mode: the
    /// device refused them): lost after the queues, never counted by them.
    #[serde(default)]
    pub tx_kernel_drops: u64,
    /// Of `rx_pkts` / `rx_bytes` and `tx_pkts` / `tx_bytes`: the frames the kernel fast path
    /// forwarded (`quench switch`, on by default), counted by its XDP program, never seen
    /// by a worker or a queue.
    #[serde(default)]
    pub fast_rx_pkts: u64,
    #[serde(default)]
    pub fast_rx_bytes: u64,
    #[serde(default)]
    pub fast_tx_pkts: u64,
    #[serde(default)]
    pub fast_tx_bytes: u64,
}

/// The control plane's answer to `stats`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Snapshot {
    /// Engine time of the snapshot (ns since start): rates are deltas over this.
    pub uptime_ns: u64,
    /// The largest worker table (each worker learns every address).
    pub fdb_entries: u64,
    /// Frames whose source address a full table could not learn, all workers.
    #[serde(default)]
    pub fdb_refused: u64,
    pub ports: Vec<PortSnapshot>,
    /// Each worker's loop gaps.
    #[serde(default)]
    pub workers: Vec<WorkerSnapshot>,
}

impl Registry {
    pub fn snapshot(&self) -> Snapshot {
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let ports = self
            .info
            .iter()
            .zip(&self.counters)
            .map(|(info, cs)| {
                let c = &sum(cs);
                let queues: Vec<ClassSnapshot> = c
                    .classes
                    .iter()
                    .enumerate()
                    .map(|(i, q)| ClassSnapshot {
                        class: if i == CLASSES - 1 {
                            "ctl".into()
                        } else {
                            i.to_string()
                        },
                        counters: ClassStats {
                            enq_pkts: ld(&q.enq_pkts),
                            enq_bytes: ld(&q.enq_bytes),
                            deq_pkts: ld(&q.deq_pkts),
                            deq_bytes: ld(&q.deq_bytes),
                            drop_pkts: ld(&q.drop_pkts),
                            drop_bytes: ld(&q.drop_bytes),
                            hook_drop_pkts: ld(&q.hook_drop_pkts),
                            depth_pkts: ld(&q.depth_pkts),
                            depth_bytes: ld(&q.depth_bytes),
                            max_depth_bytes: ld(&q.max_depth_bytes),
                        },
                    })
                    .collect();
                PortSnapshot {
                    info: info.clone(),
                    rx_pkts: ld(&c.rx_pkts) + ld(&c.fast_rx_pkts),
                    rx_bytes: ld(&c.rx_bytes) + ld(&c.fast_rx_bytes),
                    tx_pkts: ld(&c.tx_pkts) + ld(&c.fast_tx_pkts),
                    tx_bytes: ld(&c.tx_bytes) + ld(&c.fast_tx_bytes),
                    rx_drops: ld(&c.rx_drops),
                    tx_drops: ld(&c.tx_drops),
                    queue_drops: queues
                        .iter()
                        .map(|q| q.counters.drop_pkts + q.counters.hook_drop_pkts)
                        .sum(),
                    flooded: ld(&c.flooded),
                    flooded_unicast: ld(&c.flooded_unicast),
                    queue_depth_bytes: queues.iter().map(|q| q.counters.depth_bytes).sum(),
                    queues,
                    pfc_pauses_sent: ld(&c.pfc_sent),
                    pfc_pauses_received: ld(&c.pfc_received),
                    pfc_headroom_drops: ld(&c.pfc_headroom_drops),
                    pfc_watchdog_storms: ld(&c.pfc_watchdog_storms),
                    pfc_watchdog_ignored: ld(&c.pfc_watchdog_ignored),
                    rx_kernel_drops: ld(&c.rx_kernel_drops),
                    tx_refusals: ld(&c.tx_refusals),
                    tx_kernel_drops: ld(&c.tx_kernel_drops),
                    fast_rx_pkts: ld(&c.fast_rx_pkts),
                    fast_rx_bytes: ld(&c.fast_rx_bytes),
                    fast_tx_pkts: ld(&c.fast_tx_pkts),
                    fast_tx_bytes: ld(&c.fast_tx_bytes),
                }
            })
            .collect();
        Snapshot {
            uptime_ns: self.clock.now().as_nanos(),
            fdb_entries: self
                .workers
                .iter()
                .map(|f| ld(&f.entries))
                .max()
                .unwrap_or(0),
            fdb_refused: self.workers.iter().map(|f| ld(&f.refused)).sum(),
            ports,
            workers: self
                .workers
                .iter()
                .map(|w| WorkerSnapshot {
                    frames: w.loops.summary(Iteration::Frames),
                    housekeeping: w.loops.summary(Iteration::Housekeeping),
                    idle: w.loops.summary(Iteration::Idle),
                })
                .collect(),
        }
    }
}
