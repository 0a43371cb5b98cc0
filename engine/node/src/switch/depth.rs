//! A congestion-point port's queue depth shared by the workers that hold its egress, so that
//! frames never change core for it (docs/design.md, "Switch runtime").
//!
//! Every worker holding such a port keeps its own egress queue on it (and its own device
//! transmit queue). What decides (QCN's Fb and sampling, RED/ECN, TCD, the tail-drop limit)
//! reads the port's depth per data priority: the worker's own, exact, plus the other
//! workers' as they last published them. Each worker publishes its depths in a cache line of
//! its own (relaxed stores, only what changed, once per poll, at its end) and reads the
//! others' lines once per poll, before it receives ([`DepthShare::refresh`]). Per poll that is
//! N - 1 line reads and at most one line write, against a crossing's line transfers per
//! frame; a queue that drains every poll (no congestion) publishes 0 each time, i.e. writes
//! nothing, and its readers keep its line cached. (Publishing after the receive step too made
//! every poll move the line twice: a few ns per frame on bench-dpdk's cp row, measured.)
//!
//! Staleness: a decision reads another worker's depth as that worker last published it,
//! before the reader's poll began. What the port as a whole lets through beyond an exact
//! threshold (its limit, RED's Kmin) is at most one poll's admissions per other worker (a
//! burst per receive queue it polls; nothing crosses to a shared port): take the worker whose
//! last admitting poll read the others last; every other worker's later admissions can only
//! be in the poll it was in at that read (a later poll would have read later), and that
//! worker's own admissions are bounded by what it read. A preempted worker makes its own view
//! older, not the bound larger.
//! The line's second half carries the octets each worker admitted per priority, for QCN's
//! port-wide sampling ([`super::sampling`]), published and read with the depths.
//! When the workers run one poll at a time in turn (tests step them so), every publish
//! precedes the next worker's read and each decision reads the port's exact depth.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use units::PRIORITIES;

/// One worker's depths of one port, per data priority: one cache line (8 x 8 octets), aligned
/// to 128 so that the adjacent-line prefetcher does not pair it with a neighbour's; the second
/// line of the 128 holds the octets it admitted per priority, for QCN's port-wide sampling
/// (`switch::sampling`; all 0, never written, on a port without it).
#[repr(align(128))]
#[derive(Default)]
struct Line {
    depth: [AtomicU64; PRIORITIES],
    admitted: [AtomicU64; PRIORITIES],
}

/// One port's per-worker depths (a line per worker slot).
pub struct SharedDepth {
    lines: Box<[Line]>,
}

impl SharedDepth {
    /// Depths for `workers` worker slots (slot = worker id), all 0.
    pub fn new(workers: usize) -> Arc<SharedDepth> {
        Arc::new(SharedDepth {
            lines: (0..workers.max(1)).map(|_| Line::default()).collect(),
        })
    }

    /// Worker `me`'s handle (its slot must be below the count given to [`new`](Self::new)).
    pub fn share(self: &Arc<Self>, me: usize) -> DepthShare {
        DepthShare {
            shared: self.clone(),
            me,
            published: [0; PRIORITIES],
            published_admitted: [0; PRIORITIES],
        }
    }
}

/// A worker's handle on a port's [`SharedDepth`]: its slot and what it last published.
pub struct DepthShare {
    shared: Arc<SharedDepth>,
    me: usize,
    published: [u64; PRIORITIES],
    published_admitted: [u64; PRIORITIES],
}

impl DepthShare {
    /// Publishes this worker's depths per data priority and the octets it admitted
    /// (`switch::sampling`; zeros where the port has no port-wide sampling); stores only those
    /// that changed (an unchanged line stays in the readers' caches).
    #[inline]
    pub fn publish(&mut self, depths: impl Fn(usize) -> u64, admitted: &[u64; PRIORITIES]) {
        let Some(line) = self.shared.lines.get(self.me) else {
            return;
        };
        for (p, (slot, last)) in line.depth.iter().zip(self.published.iter_mut()).enumerate() {
            let d = depths(p);
            if d != *last {
                *last = d;
                slot.store(d, Ordering::Relaxed);
            }
        }
        let lines = line.admitted.iter().zip(self.published_admitted.iter_mut());
        for ((slot, last), &a) in lines.zip(admitted) {
            if a != *last {
                *last = a;
                slot.store(a, Ordering::Relaxed);
            }
        }
    }

    /// The other workers' published depths and admitted octets, each summed per data
    /// priority.
    #[inline]
    pub fn refresh(&self, depths: &mut [u64; PRIORITIES], admitted: &mut [u64; PRIORITIES]) {
        *depths = [0; PRIORITIES];
        *admitted = [0; PRIORITIES];
        for (w, line) in self.shared.lines.iter().enumerate() {
            if w == self.me {
                continue;
            }
            for (o, d) in depths.iter_mut().zip(&line.depth) {
                *o += d.load(Ordering::Relaxed);
            }
            for (o, a) in admitted.iter_mut().zip(&line.admitted) {
                *o += a.load(Ordering::Relaxed);
            }
        }
    }

    /// Whether any other worker shares the port (a lone worker's handle reads nothing).
    pub fn is_shared(&self) -> bool {
        self.shared.lines.len() > 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_reads_the_sum_of_the_others_not_its_own() {
        let d = SharedDepth::new(3);
        let (mut a, mut b, c) = (d.share(0), d.share(1), d.share(2));
        let none = [0; PRIORITIES];
        a.publish(|p| 100 * p as u64, &[1; PRIORITIES]);
        b.publish(|p| if p == 3 { 7 } else { 0 }, &none);
        let (mut out, mut adm) = ([0; PRIORITIES], [0; PRIORITIES]);
        c.refresh(&mut out, &mut adm);
        assert_eq!(out[3], 307);
        assert_eq!(out[1], 100);
        assert_eq!(adm, [1; PRIORITIES]);
        a.refresh(&mut out, &mut adm);
        assert_eq!((out, adm), ([0, 0, 0, 7, 0, 0, 0, 0], none));
        // A later publish replaces the earlier one; unchanged priorities keep their values.
        a.publish(
            |p| if p == 3 { 1 } else { 100 * p as u64 },
            &[5; PRIORITIES],
        );
        c.refresh(&mut out, &mut adm);
        assert_eq!((out[3], out[2], adm[3]), (8, 200, 5));
        assert!(c.is_shared() && !SharedDepth::new(1).share(0).is_shared());
    }
}
