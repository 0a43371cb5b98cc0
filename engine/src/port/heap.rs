//! Heap frames: buffers owned by the global allocator. They are `Send`, so they are what
//! ports without a device-shared pool (in-memory, AF_PACKET) hand out, and what a frame whose
//! own buffer cannot change core (an AF_XDP UMEM frame) is copied into to cross to another
//! worker ([`Carried`]). Dropping one frees it.
use super::{Frame, RxStamp, MAX_FRAME};

/// A frame crossing to another worker's core ([`super::Port::carry`], [`super::Port::land`]):
/// the received frame itself when its buffer may be freed from any thread (a heap buffer, a
/// DPDK mbuf of a multi-consumer pool), else a heap copy. Dropping it frees the buffer.
#[derive(Debug)]
pub enum Carried {
    Heap(HeapFrame),
    /// An mbuf: lands on a DPDK port without a copy.
    #[cfg(feature = "dpdk")]
    Dpdk(super::dpdk::DpdkFrame),
}

impl Carried {
    /// A heap copy of `bytes` (`None` above [`MAX_FRAME`]).
    pub fn copy_of(bytes: &[u8]) -> Option<Carried> {
        HeapFrame::copy_of(bytes).map(Carried::Heap)
    }

    /// Starts loading what landing the frame reads first (an mbuf's header, see
    /// `DpdkFrame::prefetch`); a heap frame needs nothing.
    pub fn prefetch(&self) {
        #[cfg(feature = "dpdk")]
        if let Carried::Dpdk(f) = self {
            f.prefetch();
        }
    }
}

impl Frame for Carried {
    fn data(&self) -> &[u8] {
        match self {
            Carried::Heap(f) => f.data(),
            #[cfg(feature = "dpdk")]
            Carried::Dpdk(f) => f.data(),
        }
    }
    fn data_mut(&mut self) -> &mut [u8] {
        match self {
            Carried::Heap(f) => f.data_mut(),
            #[cfg(feature = "dpdk")]
            Carried::Dpdk(f) => f.data_mut(),
        }
    }
    fn set_len(&mut self, len: usize) -> usize {
        match self {
            Carried::Heap(f) => f.set_len(len),
            #[cfg(feature = "dpdk")]
            Carried::Dpdk(f) => f.set_len(len),
        }
    }
}

/// A frame in a heap buffer of at most [`MAX_FRAME`] octets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeapFrame {
    buf: Vec<u8>,
    /// When the kernel received it (AF_PACKET ports), if it said.
    stamp: Option<RxStamp>,
}

impl HeapFrame {
    /// A zeroed frame of `len` octets, `None` above [`MAX_FRAME`].
    pub fn zeroed(len: usize) -> Option<HeapFrame> {
        (len <= MAX_FRAME).then(|| HeapFrame {
            buf: vec![0; len],
            stamp: None,
        })
    }

    /// A copy of `bytes`, `None` above [`MAX_FRAME`].
    pub fn copy_of(bytes: &[u8]) -> Option<HeapFrame> {
        (bytes.len() <= MAX_FRAME).then(|| HeapFrame {
            buf: bytes.to_vec(),
            stamp: None,
        })
    }

    /// The same frame with its kernel receive time.
    pub fn with_stamp(self, stamp: Option<RxStamp>) -> HeapFrame {
        HeapFrame { stamp, ..self }
    }

    /// The buffer, for callers that keep frames as plain bytes.
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
}

impl Frame for HeapFrame {
    fn data(&self) -> &[u8] {
        &self.buf
    }
    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
    fn set_len(&mut self, len: usize) -> usize {
        self.buf.resize(len.min(MAX_FRAME), 0);
        self.buf.len()
    }
    fn rx_stamp(&self) -> Option<RxStamp> {
        self.stamp
    }
    fn into_carried(self) -> Option<Carried> {
        Some(Carried::Heap(self))
    }
    fn from_carried(frame: Carried) -> Result<HeapFrame, Carried> {
        match frame {
            Carried::Heap(f) => Ok(f),
            #[allow(unreachable_patterns)] // without DPDK, Heap is the only kind
            other => Err(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_frames_are_bounded() {
        assert!(HeapFrame::zeroed(MAX_FRAME + 1).is_none());
        let mut f = HeapFrame::copy_of(&[1, 2, 3]).unwrap();
        assert_eq!(f.len(), 3);
        assert_eq!(f.set_len(10_000), MAX_FRAME);
        assert_eq!(f.set_len(2), 2);
        assert_eq!(f.data(), &[1, 2]);
    }
}
