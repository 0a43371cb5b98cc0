//! The links between the workers of a multi-worker switch: frames crossing to the worker that
//! owns their egress port, PFC frames for the worker that owns the port they arrived on, and
//! learning notices.
//!
//! Crossings go on a single-producer / single-consumer burst ring per ordered pair of workers
//! ([`spsc`]): a worker stages what it sends each other worker and pushes it a burst at a
//! time. A full ring refuses the rest; the pushing worker drops and counts it
//! (`Worker::cross_drops`), so no worker ever waits for another.
use std::mem::MaybeUninit;
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use super::spsc::{self, Consumer, Producer};
use quench_node::switch::fdb::PortIdx;
use quench_node::switch::queue::Class;
use quench_port::heap::Carried;
#[cfg(doc)]
use quench_port::Frame;
use quench_wire::pfc::PfcRepr;
use quench_wire::MacAddr;

/// Where a crossing goes and what it is; a frame's octets are the crossing's
/// ([`Crossing::frame`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(align(16))]
pub enum Head {
    /// A frame for egress port `egress` (owned by the receiving worker), of `class`, whose
    /// IPv4 header starts at `l3` (0: none), as classification found it. `ingress`: the port
    /// it was received on, whose PFC account it counts against; `None` for a flooded copy or a
    /// frame the switch made (never accounted).
    Frame {
        egress: PortIdx,
        class: Class,
        l3: u16,
        ingress: Option<PortIdx>,
    },
    /// A PFC frame received on `port`, for the worker holding that port's egress (the pauses
    /// it names stop that worker's queues).
    Pause { port: PortIdx, pdu: PfcRepr },
    /// What is left of a frame's crossing once its frame was taken
    /// ([`Crossing::take_frame`]).
    Empty,
}

/// What crosses to another worker: its [`Head`] at offset 0 and, for a frame, the frame
/// ([`Carried`]) at offset 32, in two whole cache lines (the slot of a ring). A moved frame's
/// handle (an mbuf pointer) sits in the first line with the head, so a crossing that moves its
/// frame reads one line of the producer's; a small frame copied in ([`Carried::Inline`]) fills
/// both, which the consumer reads and nothing else of the producer's core.
///
/// Made in its ring slot ([`write_frame`](Self::write_frame),
/// [`write_pause`](Self::write_pause)): the head is stored field by field and the frame by
/// [`Frame::carry_into`], never built on the stack and copied in (an enum of this size moved
/// by value was copied in 16-octet blocks from where narrower stores had just written it, a
/// store-forwarding stall per block). The frame starts 16-aligned, so the consumer's copies of
/// it out of the crossing move aligned blocks.
#[repr(C, align(64))]
pub struct Crossing {
    head: Head,
    /// Initialised if and only if `head` is a [`Head::Frame`].
    frame: MaybeUninit<Carried>,
}

impl Crossing {
    /// Writes a frame crossing into `slot`: `head` (a [`Head::Frame`]), and the frame that
    /// `carry` writes into the place it is given (returning it, as [`Frame::carry_into`]
    /// does). `None` (the slot left as it was) when `head` is not a frame's or `carry` wrote
    /// nothing.
    #[inline(always)]
    pub fn write_frame(
        slot: &mut MaybeUninit<Crossing>,
        head: Head,
        carry: impl FnOnce(&mut MaybeUninit<Carried>) -> Option<&mut Carried>,
    ) -> Option<&mut Crossing> {
        if !matches!(head, Head::Frame { .. }) {
            return None;
        }
        let p = slot.as_mut_ptr();
        // Safety: `p` points to the slot, valid for writes (`&mut`); `frame` is a
        // `MaybeUninit`, so a reference to it is valid whatever it holds.
        let frame = unsafe { &mut *std::ptr::addr_of_mut!((*p).frame) };
        let want = frame.as_ptr();
        // Only a reference into this very field shows that `carry` wrote it (safe code gets
        // one only from `MaybeUninit::write`).
        if !carry(frame).is_some_and(|f| std::ptr::eq(f, want)) {
            return None;
        }
        // Safety: `p` is valid for writes; the frame is initialised (checked above) and `head`
        // says so, which is the invariant that makes the whole `Crossing` initialised.
        unsafe {
            std::ptr::addr_of_mut!((*p).head).write(head);
            Some(slot.assume_init_mut())
        }
    }

    /// Writes a PAUSE crossing (a PFC frame received on `port`) into `slot`.
    #[inline]
    pub fn write_pause(
        slot: &mut MaybeUninit<Crossing>,
        port: PortIdx,
        pdu: PfcRepr,
    ) -> &mut Crossing {
        let p = slot.as_mut_ptr();
        // Safety: `p` is valid for writes; a `Head::Pause` has no frame, so the crossing is
        // initialised once its head is.
        unsafe {
            std::ptr::addr_of_mut!((*p).head).write(Head::Pause { port, pdu });
            slot.assume_init_mut()
        }
    }

    /// Its head.
    #[inline]
    pub fn head(&self) -> Head {
        self.head
    }

    /// Its frame (`None` for a PAUSE crossing, or once taken).
    #[inline]
    pub fn frame(&self) -> Option<&Carried> {
        match self.head {
            // Safety: a frame's head means the frame is initialised (the type's invariant).
            Head::Frame { .. } => Some(unsafe { self.frame.assume_init_ref() }),
            Head::Pause { .. } | Head::Empty => None,
        }
    }

    /// Takes its frame out (`None` for a PAUSE crossing, or once taken), leaving the head
    /// [`Head::Empty`]: read where the crossing lies (its ring slot), the frame is the only
    /// part copied.
    #[inline]
    pub fn take_frame(&mut self) -> Option<Carried> {
        match self.head {
            Head::Frame { .. } => {
                self.head = Head::Empty;
                // Safety: initialised (the head was a frame's), read once: the head now says
                // there is no frame, so neither this nor the drop reads it again.
                Some(unsafe { self.frame.assume_init_read() })
            }
            Head::Pause { .. } | Head::Empty => None,
        }
    }
}

impl Drop for Crossing {
    fn drop(&mut self) {
        if let Head::Frame { .. } = self.head {
            // Safety: initialised (the head is a frame's), dropped once, here.
            unsafe { self.frame.assume_init_drop() };
        }
    }
}

impl std::fmt::Debug for Crossing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crossing")
            .field("head", &self.head)
            .field("frame", &self.frame())
            .finish()
    }
}

/// A notice for the other workers' MAC tables: `mac` is behind `port`. A learn (a new or moved
/// address) sets the entry; a sighting only renews an entry that is at `port` already
/// (`Fdb::refresh`): the kernel fast path's hits, which only the worker programming its table
/// reads, so that no worker's entry ages out while its host's frames bypass the workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Learned {
    pub mac: MacAddr,
    pub port: PortIdx,
    pub seen_only: bool,
}

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
    use quench_port::heap::INLINE_MAX;
    use quench_port::Frame;

    #[test]
    fn a_crossing_is_two_whole_cache_lines_and_drops_its_frame_once() {
        // INLINE_MAX is sized to this: a larger one would add a line to every slot.
        assert_eq!(std::mem::align_of::<Crossing>(), 64);
        assert_eq!(std::mem::size_of::<Crossing>(), 128);
        assert_eq!(std::mem::offset_of!(Crossing, frame), 32);
        let frame = Carried::copy_of(&[0; INLINE_MAX]).unwrap();
        assert!(matches!(frame, Carried::Inline(_)));
        let head = Head::Frame {
            egress: 1,
            class: Class::Data(3),
            l3: 14,
            ingress: Some(0),
        };
        let mut slot = MaybeUninit::uninit();
        let bytes: Vec<u8> = (0..70).collect();
        let c = Crossing::write_frame(&mut slot, head, |dst| {
            Some(dst.write(Carried::copy_of(&bytes)?))
        });
        assert!(c.is_some());
        // Safety: written just above.
        let c = unsafe { slot.assume_init() };
        assert_eq!(c.head(), head);
        assert_eq!(c.frame().map(|f| f.data()), Some(&bytes[..]));
        let mut c = c;
        let f = c.take_frame();
        assert_eq!(f.map(|f| f.data().to_vec()), Some(bytes.clone()));
        assert_eq!((c.head(), c.frame().is_none()), (Head::Empty, true));
        assert!(c.take_frame().is_none(), "taken once");
        // A carry that writes nothing, or not into the slot, leaves the slot unwritten; a
        // PAUSE head is not a frame's.
        let mut slot = MaybeUninit::uninit();
        assert!(Crossing::write_frame(&mut slot, head, |_| None).is_none());
        let leaked = Crossing::write_frame(&mut slot, head, |_| {
            Some(Box::leak(Box::new(Carried::copy_of(&bytes).unwrap())))
        });
        assert!(leaked.is_none());
        let pause = Head::Pause {
            port: 2,
            pdu: PfcRepr::pause(1, 5),
        };
        assert!(Crossing::write_frame(&mut slot, pause, |d| Some(
            d.write(Carried::copy_of(&bytes).unwrap())
        ))
        .is_none());
        let p = Crossing::write_pause(&mut slot, 2, PfcRepr::pause(1, 5));
        assert_eq!((p.head(), p.frame().is_none()), (pause, true));
        // A moved frame is dropped (freed) with its crossing, once.
        let big = vec![7u8; 1000];
        let mut slot = MaybeUninit::uninit();
        Crossing::write_frame(&mut slot, head, |d| Some(d.write(Carried::copy_of(&big)?))).unwrap();
        // Safety: written just above.
        let c = unsafe { slot.assume_init() };
        assert!(matches!(c.frame(), Some(Carried::Heap(_))));
        drop(c);
    }
}
