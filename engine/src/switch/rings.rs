//! The links between the workers of a multi-worker switch: frames crossing to the worker that
//! owns their egress port, and learning notices.
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use super::fdb::PortIdx;
use super::queue::Class;
use crate::port::heap::HeapFrame;
use crate::wire::MacAddr;

/// A frame crossing to the worker that owns its egress port.
/// With the frame, where its IPv4 header starts (0: none), as classification found it.
pub type Crossing = (PortIdx, Class, u16, HeapFrame);
/// A learning notice for the other workers: this MAC is behind this port.
pub type Learned = (MacAddr, PortIdx);

/// Frames a cross-core ring holds (power of two).
pub const CROSS_RING: usize = 4096;

/// Links between workers: worker `w` pops `frames[w]` and `learned[w]`; everyone pushes.
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

impl Clone for Rings {
    fn clone(&self) -> Self {
        Rings {
            frames: self.frames.clone(),
            learned: self.learned.clone(),
        }
    }
}
