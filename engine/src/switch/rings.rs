//! The links between the workers of a multi-worker switch: frames crossing to the worker that
//! owns their egress port, PFC frames for the worker that owns the port they arrived on, and
//! learning notices.
//!
//! Every link is a bounded lock-free multi-producer queue (crossbeam's `ArrayQueue`, one
//! compare-and-swap per push and per pop) that one worker, its owner, pops: `frames[w]` and
//! `learned[w]` are worker `w`'s inboxes, every other worker pushes into them. A full inbox
//! refuses the push; the pushing worker drops and counts the item (`Worker::cross_drops`), so
//! no worker ever waits for another.
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use super::fdb::PortIdx;
use super::queue::Class;
use crate::port::heap::Carried;
use crate::wire::pfc::PfcRepr;
use crate::wire::MacAddr;

/// What crosses to another worker.
#[derive(Debug)]
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

/// Items a cross-core ring holds (power of two).
pub const CROSS_RING: usize = 4096;

/// Links between workers: worker `w` pops `frames[w]` and `learned[w]`; everyone pushes.
#[derive(Clone)]
pub struct Rings {
    pub frames: Vec<Arc<ArrayQueue<Crossing>>>,
    pub learned: Vec<Arc<ArrayQueue<Learned>>>,
}

impl Rings {
    pub fn new(workers: usize) -> Rings {
        Rings {
            frames: (0..workers)
                .map(|_| Arc::new(ArrayQueue::new(CROSS_RING)))
                .collect(),
            learned: (0..workers)
                .map(|_| Arc::new(ArrayQueue::new(CROSS_RING)))
                .collect(),
        }
    }
}
