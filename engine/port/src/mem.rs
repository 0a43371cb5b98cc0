//! In-memory ports: bounded lock-free queues instead of a device. Used by tests, by the
//! simulator's glue, and to run `quench switch` without privileges.
//!
//! [`link`] makes two ports joined like a cable; [`MemPort::with_peer`] makes a port whose far
//! end is a [`MemPeer`] the test drives by hand.
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use super::heap::HeapFrame;
use super::{Capabilities, Port, PortError, PortKind, MAX_FRAME};
use quench_wire::MacAddr;

/// Frames a direction of an in-memory link holds before transmit reports "ring full".
pub const MEM_RING: usize = 4096;

type Ring = Arc<ArrayQueue<HeapFrame>>;

/// One end of an in-memory link. `Send`, so a test can hand it to a worker thread.
pub struct MemPort {
    caps: Capabilities,
    rx: Ring,
    tx: Ring,
}

/// The far end of a [`MemPort`]: inject frames into its receive side, collect what it sent.
#[derive(Clone)]
pub struct MemPeer {
    to_port: Ring,
    from_port: Ring,
}

fn caps(name: &str, mac: Option<MacAddr>) -> Capabilities {
    Capabilities {
        name: name.to_string(),
        kind: PortKind::Mem,
        rx_queues: 1,
        tx_queues: 1,
        max_frame: MAX_FRAME,
        zero_copy: true,
        mode: "mem".to_string(),
        mac,
    }
}

/// Two ports joined back to back: what one transmits the other receives.
pub fn link(a: &str, b: &str) -> (MemPort, MemPort) {
    let ab: Ring = Arc::new(ArrayQueue::new(MEM_RING));
    let ba: Ring = Arc::new(ArrayQueue::new(MEM_RING));
    (
        MemPort {
            caps: caps(a, None),
            rx: ba.clone(),
            tx: ab.clone(),
        },
        MemPort {
            caps: caps(b, None),
            rx: ab,
            tx: ba,
        },
    )
}

impl MemPort {
    /// A port and the handle that plays the wire on its far side.
    pub fn with_peer(name: &str) -> (MemPort, MemPeer) {
        let to_port: Ring = Arc::new(ArrayQueue::new(MEM_RING));
        let from_port: Ring = Arc::new(ArrayQueue::new(MEM_RING));
        (
            MemPort {
                caps: caps(name, None),
                rx: to_port.clone(),
                tx: from_port.clone(),
            },
            MemPeer { to_port, from_port },
        )
    }
}

impl MemPeer {
    /// Puts a copy of `bytes` on the port's receive side; false when it is full or too long.
    pub fn send(&self, bytes: &[u8]) -> bool {
        match HeapFrame::copy_of(bytes) {
            Some(f) => self.to_port.push(f).is_ok(),
            None => false,
        }
    }
    /// The next frame the port transmitted, if any.
    pub fn recv(&self) -> Option<Vec<u8>> {
        self.from_port.pop().map(HeapFrame::into_vec)
    }
    /// Everything the port transmitted so far.
    pub fn drain(&self) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| self.recv()).collect()
    }
}

impl Port for MemPort {
    type Frame = HeapFrame;

    fn caps(&self) -> &Capabilities {
        &self.caps
    }

    fn rx_burst(
        &mut self,
        _queue: u16,
        out: &mut Vec<HeapFrame>,
        max: usize,
    ) -> Result<usize, PortError> {
        let mut n = 0;
        while n < max {
            match self.rx.pop() {
                Some(f) => {
                    out.push(f);
                    n += 1;
                }
                None => break,
            }
        }
        Ok(n)
    }

    fn tx_burst(&mut self, _queue: u16, frames: &mut Vec<HeapFrame>) -> Result<usize, PortError> {
        // This port is the ring's only producer, so the free space seen here can only grow
        // before the pushes below (the consumer pops concurrently).
        let room = self.tx.capacity() - self.tx.len();
        let n = room.min(frames.len());
        for f in frames.drain(..n) {
            // Cannot fail (see above); were it to, the frame would be dropped, i.e. freed.
            let _ = self.tx.push(f);
        }
        Ok(n)
    }

    fn alloc(&mut self, len: usize) -> Option<HeapFrame> {
        HeapFrame::zeroed(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Frame;

    #[test]
    fn linked_ports_carry_frames_both_ways_in_order() {
        let (mut a, mut b) = link("a", "b");
        let mut burst: Vec<HeapFrame> = (0..5u8)
            .map(|i| HeapFrame::copy_of(&[i; 60]).unwrap())
            .collect();
        assert_eq!(a.tx_burst(0, &mut burst).unwrap(), 5);
        assert!(burst.is_empty());
        let mut got = Vec::new();
        assert_eq!(b.rx_burst(0, &mut got, 3).unwrap(), 3);
        assert_eq!(b.rx_burst(0, &mut got, 32).unwrap(), 2);
        let firsts: Vec<u8> = got.iter().map(|f| f.data()[0]).collect();
        assert_eq!(firsts, vec![0, 1, 2, 3, 4]);
        assert_eq!(b.tx_burst(0, &mut got).unwrap(), 5);
        let mut back = Vec::new();
        assert_eq!(a.rx_burst(0, &mut back, 32).unwrap(), 5);
    }

    #[test]
    fn full_ring_keeps_the_rest_in_order() {
        let (mut p, peer) = MemPort::with_peer("p");
        let mut burst: Vec<HeapFrame> = (0..MEM_RING + 3)
            .map(|i| HeapFrame::copy_of(&(i as u32).to_be_bytes()).unwrap())
            .collect();
        assert_eq!(p.tx_burst(0, &mut burst).unwrap(), MEM_RING);
        assert_eq!(burst.len(), 3);
        assert_eq!(burst[0].data(), &(MEM_RING as u32).to_be_bytes());
        assert_eq!(peer.recv().unwrap(), 0u32.to_be_bytes());
        assert_eq!(p.tx_burst(0, &mut burst).unwrap(), 1);
        assert!(peer.send(&[9; 64]));
        let mut got = Vec::new();
        assert_eq!(p.rx_burst(0, &mut got, 8).unwrap(), 1);
        assert_eq!(got[0].len(), 64);
    }
}
