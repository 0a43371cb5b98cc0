//! Heap frames: buffers owned by the global allocator. They are `Send`, so they are what
//! crosses between cores and what ports without a device-shared pool (in-memory, AF_PACKET)
//! hand out. Dropping one frees it.
use super::{Frame, MAX_FRAME};

/// A frame in a heap buffer of at most [`MAX_FRAME`] octets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeapFrame {
    buf: Vec<u8>,
}

impl HeapFrame {
    /// A zeroed frame of `len` octets, `None` above [`MAX_FRAME`].
    pub fn zeroed(len: usize) -> Option<HeapFrame> {
        (len <= MAX_FRAME).then(|| HeapFrame { buf: vec![0; len] })
    }

    /// A copy of `bytes`, `None` above [`MAX_FRAME`].
    pub fn copy_of(bytes: &[u8]) -> Option<HeapFrame> {
        (bytes.len() <= MAX_FRAME).then(|| HeapFrame {
            buf: bytes.to_vec(),
        })
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
