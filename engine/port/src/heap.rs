//! Heap frames: buffers owned by the global allocator. They are `Send`, so they are what
//! ports without a device-shared pool (in-memory, AF_PACKET) hand out, and what a frame whose
//! own buffer cannot change core (an AF_XDP UMEM frame) is copied into to cross to another
//! worker ([`Carried`]). Dropping one frees it.
use std::mem::MaybeUninit;

use super::{Frame, RxStamp, MAX_FRAME};

/// A frame crossing to another worker's core ([`super::Frame::carry_into`],
/// [`super::Port::land`]): the received frame itself when its buffer may be freed from any
/// thread (a heap buffer, a DPDK mbuf of a multi-consumer pool), else a copy (an AF_XDP frame,
/// a frame the switch made): a small one in the crossing itself ([`Inline`]), landed in a
/// buffer of the landing port's own pool; a larger one on the heap. Dropping it frees the
/// buffer.
#[derive(Debug)]
pub enum Carried {
    Inline(Inline),
    Heap(HeapFrame),
    /// An mbuf: lands on a DPDK port without a copy.
    #[cfg(feature = "dpdk")]
    Dpdk(super::dpdk::DpdkFrame),
}

/// Octets a frame may have to cross as an [`Inline`] copy: what fills a crossing
/// (`switch::rings::Crossing`) to two cache lines with its metadata (checked by a test there).
/// A 64-octet frame with its metadata spans two lines either way; as an mbuf it moved about
/// four lines between cores (the mbuf's two header lines on the way, and back through the
/// pool), plus the slot.
pub const INLINE_MAX: usize = 88;

/// A copy of a frame of at most [`INLINE_MAX`] octets, held by value.
#[derive(Clone)]
pub struct Inline {
    len: u8,
    bytes: [u8; INLINE_MAX],
}

impl Inline {
    /// A copy of `bytes`, `None` above [`INLINE_MAX`].
    #[inline]
    pub fn copy_of(bytes: &[u8]) -> Option<Inline> {
        let mut i = Inline {
            len: u8::try_from(bytes.len()).ok()?,
            bytes: [0; INLINE_MAX],
        };
        i.bytes.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(i)
    }

    pub fn data(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for Inline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inline").field("len", &self.len).finish()
    }
}

impl Carried {
    /// A copy of `bytes`: inline up to [`INLINE_MAX`] octets, else on the heap (`None` above
    /// [`MAX_FRAME`]).
    pub fn copy_of(bytes: &[u8]) -> Option<Carried> {
        match Inline::copy_of(bytes) {
            Some(i) => Some(Carried::Inline(i)),
            None => HeapFrame::copy_of(bytes).map(Carried::Heap),
        }
    }

    /// [`copy_of`](Self::copy_of), written into `dst` (a crossing's place in a ring slot) and
    /// returned from there; `None`, with `dst` not written, when it could not be.
    #[inline]
    pub fn copy_into<'a>(
        bytes: &[u8],
        dst: &'a mut MaybeUninit<Carried>,
    ) -> Option<&'a mut Carried> {
        Some(dst.write(Carried::copy_of(bytes)?))
    }

    /// Starts loading what landing the frame reads first (an mbuf's header, see
    /// `DpdkFrame::prefetch`); an inline or heap frame needs nothing.
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
            Carried::Inline(i) => i.data(),
            Carried::Heap(f) => f.data(),
            #[cfg(feature = "dpdk")]
            Carried::Dpdk(f) => f.data(),
        }
    }
    fn data_mut(&mut self) -> &mut [u8] {
        match self {
            Carried::Inline(i) => i.data_mut(),
            Carried::Heap(f) => f.data_mut(),
            #[cfg(feature = "dpdk")]
            Carried::Dpdk(f) => f.data_mut(),
        }
    }
    fn set_len(&mut self, len: usize) -> usize {
        match self {
            Carried::Inline(i) => {
                let len = len.min(INLINE_MAX);
                let old = usize::from(i.len);
                if len > old {
                    i.bytes[old..len].fill(0);
                }
                i.len = len as u8;
                len
            }
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
    #[inline]
    fn carry_into(self, dst: &mut MaybeUninit<Carried>) -> Option<&mut Carried> {
        Some(dst.write(Carried::Heap(self)))
    }
    fn from_carried(frame: Carried) -> Result<HeapFrame, Carried> {
        match frame {
            Carried::Heap(f) => Ok(f),
            other => Err(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_copies_are_inline_and_large_ones_on_the_heap() {
        let Some(Carried::Inline(mut i)) = Carried::copy_of(&[7; INLINE_MAX]) else {
            panic!("a frame of INLINE_MAX octets is copied inline");
        };
        assert_eq!(i.data(), &[7; INLINE_MAX]);
        let mut c = Carried::Inline(i.clone());
        assert_eq!(c.set_len(3), 3);
        assert_eq!(c.set_len(INLINE_MAX + 10), INLINE_MAX);
        assert_eq!(c.data()[..3], [7, 7, 7]);
        assert!(c.data()[3..].iter().all(|&b| b == 0));
        i.len = 0;
        assert!(i.data().is_empty());
        assert!(
            matches!(Carried::copy_of(&[9; INLINE_MAX + 1]), Some(Carried::Heap(f)) if f.len() == INLINE_MAX + 1)
        );
        assert!(matches!(
            Carried::copy_of(&[1; 60]),
            Some(Carried::Inline(_))
        ));
        assert!(matches!(
            Carried::copy_of(&[1; 600]),
            Some(Carried::Heap(_))
        ));
        assert!(Carried::copy_of(&vec![0; MAX_FRAME + 1]).is_none());
    }

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
