//! The links between the workers of a multi-worker switch: frames crossing to the worker that
//! owns their egress port, PFC frames for the worker that owns the port they arrived on, and
//! learning notices.
//!
//! Crossings go on a single-producer / single-consumer burst ring per ordered pair of workers
//! ([`spsc`]): a worker stages what it sends each other worker and pushes it a burst at a
//! time. A full ring refuses the rest; the pushing worker drops and counts it
//! (`Worker::cross_drops`), so no worker ever waits for another.
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use super::fdb::PortIdx;
use super::queue::Class;
use super::spsc::{self, Consumer, Producer};
use crate::port::heap::Carried;
use crate::wire::pfc::PfcRepr;
use crate::wire::MacAddr;

/// What crosses to another worker. Aligned to a cache line so that a ring slot covers whole
/// lines: a crossing with a small frame copied in ([`Carried::Inline`]) is two lines, which
/// the consumer reads and nothing else of the producer's core.
#[derive(Debug)]
#[repr(align(64))]
pub enum Crossing {
    /// A frame for egress port `egress` (owned by the receiving worker), of `class`, whose
    /// IPv4 header starts at `l3` (0: none), as classification found it. `ingress`: the port
    /// it was received on, whose PFC account it counts against; `None` for a flooded copy or a
    /// frame the switch made (never accounted).
    Frame {
        egress: PortIdx,
        class: Class,
        l3: u16,
        ingress: Option<PortIdx>,
        frame: Carried,
    },
    /// A PFC frame received on `port`, for the worker holding that port's egress (the pauses
    /// it names stop that worker's queues).
    Pause { port: PortIdx, pdu: PfcRepr },
}

/// A learning notice for the other workers: this MAC is behind this port.
pub type Learned = (MacAddr, PortIdx);

/// Crossings a ring from one worker to another holds (power of two).
pub const CROSS_RING: usize = 4096;
/// Learning notices a worker's inbox holds.
const LEARNED_RING: usize = 4096;

/// One worker's links to the others: a single-producer / single-consumer burst ring
/// ([`spsc`]) for crossings to each other worker and one from each, and the learning-notice
/// inboxes (multi-producer: notices are rare, one per new or moved address).
pub struct Links {
    /// `to[w]`: the ring to worker `w` (`None`: this worker).
    pub(super) to: Vec<Option<Producer<Crossing>>>,
    /// The rings from the other workers.
    pub(super) from: Vec<Consumer<Crossing>>,
    /// `learned[w]`: worker `w`'s inbox of notices.
    pub(super) learned: Vec<Arc<ArrayQueue<Learned>>>,
}

/// The links of `workers` workers, one [`Links`] per worker in order.
pub fn links(workers: usize) -> Vec<Links> {
    let learned: Vec<Arc<ArrayQueue<Learned>>> = (0..workers)
        .map(|_| Arc::new(ArrayQueue::new(LEARNED_RING)))
        .collect();
    let mut all: Vec<Links> = (0..workers)
        .map(|_| Links {
            to: (0..workers).map(|_| None).collect(),
            from: Vec::new(),
            learned: learned.clone(),
        })
        .collect();
    for from in 0..workers {
        for to in (0..workers).filter(|&t| t != from) {
            let (p, c) = spsc::ring(CROSS_RING);
            all[from].to[to] = Some(p);
            all[to].from.push(c);
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::heap::INLINE_MAX;

    #[test]
    fn a_crossing_is_two_whole_cache_lines() {
        // INLINE_MAX is sized to this: a larger one would add a line to every slot.
        assert_eq!(std::mem::align_of::<Crossing>(), 64);
        assert_eq!(std::mem::size_of::<Crossing>(), 128);
        let frame = Carried::copy_of(&[0; INLINE_MAX]).unwrap();
        assert!(matches!(frame, Carried::Inline(_)));
    }
}
