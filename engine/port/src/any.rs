//! The closed set of port kinds the switch drives, as one enum: per-packet dispatch is a
//! `match`, never a `dyn` call. Frames of different kinds meet here; a frame of another kind is
//! copied once into a buffer of the transmitting port's kind.
#[cfg(feature = "dpdk")]
use super::dpdk::{DpdkFrame, DpdkPort};
use super::heap::{Carried, HeapFrame};
use super::mem::MemPort;
use super::packet::PacketPort;
use super::xdp::{XdpFrame, XdpPort};
use super::{Capabilities, Frame, Port, PortError, PortStats};

/// Any port quench can open.
pub enum AnyPort {
    Mem(MemPort),
    Packet(PacketPort),
    Xdp(XdpPort),
    /// DPDK ethdev (cargo feature `dpdk`).
    #[cfg(feature = "dpdk")]
    Dpdk(DpdkPort),
}

/// A frame from any port.
pub enum AnyFrame {
    Heap(HeapFrame),
    Xdp(XdpFrame),
    /// An mbuf; moves between DPDK ports without a copy.
    #[cfg(feature = "dpdk")]
    Dpdk(DpdkFrame),
}

impl Frame for AnyFrame {
    #[inline]
    fn data(&self) -> &[u8] {
        match self {
            AnyFrame::Heap(f) => f.data(),
            AnyFrame::Xdp(f) => f.data(),
            #[cfg(feature = "dpdk")]
            AnyFrame::Dpdk(f) => f.data(),
        }
    }
    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        match self {
            AnyFrame::Heap(f) => f.data_mut(),
            AnyFrame::Xdp(f) => f.data_mut(),
            #[cfg(feature = "dpdk")]
            AnyFrame::Dpdk(f) => f.data_mut(),
        }
    }
    fn set_len(&mut self, len: usize) -> usize {
        match self {
            AnyFrame::Heap(f) => f.set_len(len),
            AnyFrame::Xdp(f) => f.set_len(len),
            #[cfg(feature = "dpdk")]
            AnyFrame::Dpdk(f) => f.set_len(len),
        }
    }
    fn rx_stamp(&self) -> Option<super::RxStamp> {
        match self {
            AnyFrame::Heap(f) => f.rx_stamp(),
            AnyFrame::Xdp(f) => f.rx_stamp(),
            #[cfg(feature = "dpdk")]
            AnyFrame::Dpdk(f) => f.rx_stamp(),
        }
    }
    fn into_carried(self) -> Option<Carried> {
        match self {
            AnyFrame::Heap(f) => f.into_carried(),
            AnyFrame::Xdp(f) => f.into_carried(),
            #[cfg(feature = "dpdk")]
            AnyFrame::Dpdk(f) => f.into_carried(),
        }
    }
    #[inline]
    fn carry_into(self, dst: &mut std::mem::MaybeUninit<Carried>) -> Option<&mut Carried> {
        match self {
            AnyFrame::Heap(f) => f.carry_into(dst),
            AnyFrame::Xdp(f) => f.carry_into(dst),
            #[cfg(feature = "dpdk")]
            AnyFrame::Dpdk(f) => f.carry_into(dst),
        }
    }
}

impl AnyFrame {
    /// A `Send` copy, for crossing to another core.
    pub fn to_heap(&self) -> Option<HeapFrame> {
        match self {
            AnyFrame::Heap(f) => Some(f.clone()),
            AnyFrame::Xdp(f) => HeapFrame::copy_of(f.data()),
            #[cfg(feature = "dpdk")]
            AnyFrame::Dpdk(f) => HeapFrame::copy_of(f.data()),
        }
    }
}

/// Scratch vectors for converting bursts; kept per port so a burst allocates nothing.
#[derive(Default)]
pub struct Scratch {
    heap: Vec<HeapFrame>,
    xdp: Vec<XdpFrame>,
    #[cfg(feature = "dpdk")]
    dpdk: Vec<DpdkFrame>,
}

/// Moves `frames` into the typed scratch vector `dst`, converting with `conv` (frames it cannot
/// convert are dropped, i.e. freed, and counted), sends, and puts the unsent back.
fn send_typed<P: Port>(
    port: &mut P,
    queue: u16,
    frames: &mut Vec<AnyFrame>,
    dst: &mut Vec<P::Frame>,
    conv: impl Fn(&mut P, AnyFrame) -> Option<P::Frame>,
    back: impl Fn(P::Frame) -> AnyFrame,
) -> Result<(usize, u64), PortError> {
    let mut dropped = 0;
    dst.clear();
    for f in frames.drain(..) {
        match conv(port, f) {
            Some(f) => dst.push(f),
            None => dropped += 1,
        }
    }
    let r = port.tx_burst(queue, dst);
    frames.extend(dst.drain(..).map(back));
    r.map(|n| (n, dropped))
}

impl AnyPort {
    /// Like [`Port::tx_burst`], also returning frames dropped because no buffer of this port's
    /// kind was free for the copy.
    pub fn tx_burst_counted(
        &mut self,
        queue: u16,
        frames: &mut Vec<AnyFrame>,
        scratch: &mut Scratch,
    ) -> Result<(usize, u64), PortError> {
        match self {
            AnyPort::Mem(p) => {
                send_typed(p, queue, frames, &mut scratch.heap, to_heap, AnyFrame::Heap)
            }
            AnyPort::Packet(p) => {
                send_typed(p, queue, frames, &mut scratch.heap, to_heap, AnyFrame::Heap)
            }
            AnyPort::Xdp(p) => send_typed(
                p,
                queue,
                frames,
                &mut scratch.xdp,
                |p, f| match f {
                    AnyFrame::Xdp(f) => Some(f),
                    other => p.import(other.data()),
                },
                AnyFrame::Xdp,
            ),
            #[cfg(feature = "dpdk")]
            AnyPort::Dpdk(p) => send_typed(
                p,
                queue,
                frames,
                &mut scratch.dpdk,
                |p, f| match f {
                    AnyFrame::Dpdk(f) => Some(f),
                    other => p.import(other.data()),
                },
                AnyFrame::Dpdk,
            ),
        }
    }
}

fn to_heap<P>(_: &mut P, f: AnyFrame) -> Option<HeapFrame> {
    match f {
        AnyFrame::Heap(h) => Some(h),
        AnyFrame::Xdp(x) => HeapFrame::copy_of(x.data()),
        #[cfg(feature = "dpdk")]
        AnyFrame::Dpdk(x) => HeapFrame::copy_of(x.data()),
    }
}

impl Port for AnyPort {
    type Frame = AnyFrame;

    fn caps(&self) -> &Capabilities {
        match self {
            AnyPort::Mem(p) => p.caps(),
            AnyPort::Packet(p) => p.caps(),
            AnyPort::Xdp(p) => p.caps(),
            #[cfg(feature = "dpdk")]
            AnyPort::Dpdk(p) => p.caps(),
        }
    }

    fn rx_burst(
        &mut self,
        queue: u16,
        out: &mut Vec<AnyFrame>,
        max: usize,
    ) -> Result<usize, PortError> {
        // Receive straight into `out` through a typed view: the frames are wrapped in place.
        let start = out.len();
        let mut typed_heap = Vec::new();
        let mut typed_xdp = Vec::new();
        let n = match self {
            AnyPort::Mem(p) => p.rx_burst(queue, &mut typed_heap, max)?,
            AnyPort::Packet(p) => p.rx_burst(queue, &mut typed_heap, max)?,
            AnyPort::Xdp(p) => p.rx_burst(queue, &mut typed_xdp, max)?,
            #[cfg(feature = "dpdk")]
            AnyPort::Dpdk(p) => {
                let mut typed = Vec::new();
                let n = p.rx_burst(queue, &mut typed, max)?;
                out.extend(typed.into_iter().map(AnyFrame::Dpdk));
                n
            }
        };
        out.extend(typed_heap.into_iter().map(AnyFrame::Heap));
        out.extend(typed_xdp.into_iter().map(AnyFrame::Xdp));
        debug_assert_eq!(out.len() - start, n);
        Ok(n)
    }

    fn tx_burst(&mut self, queue: u16, frames: &mut Vec<AnyFrame>) -> Result<usize, PortError> {
        let mut scratch = Scratch::default();
        self.tx_burst_counted(queue, frames, &mut scratch)
            .map(|(n, _)| n)
    }

    fn alloc(&mut self, len: usize) -> Option<AnyFrame> {
        match self {
            AnyPort::Mem(p) => p.alloc(len).map(AnyFrame::Heap),
            AnyPort::Packet(p) => p.alloc(len).map(AnyFrame::Heap),
            AnyPort::Xdp(p) => p.alloc(len).map(AnyFrame::Xdp),
            #[cfg(feature = "dpdk")]
            AnyPort::Dpdk(p) => p.alloc(len).map(AnyFrame::Dpdk),
        }
    }

    fn import(&mut self, bytes: &[u8]) -> Option<AnyFrame> {
        match self {
            AnyPort::Mem(p) => p.import(bytes).map(AnyFrame::Heap),
            AnyPort::Packet(p) => p.import(bytes).map(AnyFrame::Heap),
            AnyPort::Xdp(p) => p.import(bytes).map(AnyFrame::Xdp),
            #[cfg(feature = "dpdk")]
            AnyPort::Dpdk(p) => p.import(bytes).map(AnyFrame::Dpdk),
        }
    }

    fn land(&mut self, frame: Carried) -> Option<AnyFrame> {
        match self {
            AnyPort::Mem(p) => p.land(frame).map(AnyFrame::Heap),
            AnyPort::Packet(p) => p.land(frame).map(AnyFrame::Heap),
            AnyPort::Xdp(p) => p.land(frame).map(AnyFrame::Xdp),
            #[cfg(feature = "dpdk")]
            AnyPort::Dpdk(p) => p.land(frame).map(AnyFrame::Dpdk),
        }
    }

    fn poll(&mut self) -> Result<(), PortError> {
        match self {
            AnyPort::Mem(p) => p.poll(),
            AnyPort::Packet(p) => p.poll(),
            AnyPort::Xdp(p) => p.poll(),
            #[cfg(feature = "dpdk")]
            AnyPort::Dpdk(p) => p.poll(),
        }
    }

    fn wait_handle(&self, out: &mut Vec<std::os::fd::RawFd>) {
        match self {
            AnyPort::Mem(p) => p.wait_handle(out),
            AnyPort::Packet(p) => p.wait_handle(out),
            AnyPort::Xdp(p) => p.wait_handle(out),
            #[cfg(feature = "dpdk")]
            AnyPort::Dpdk(p) => p.wait_handle(out),
        }
    }

    fn stats(&mut self) -> PortStats {
        match self {
            AnyPort::Mem(p) => p.stats(),
            AnyPort::Packet(p) => p.stats(),
            AnyPort::Xdp(p) => p.stats(),
            #[cfg(feature = "dpdk")]
            AnyPort::Dpdk(p) => p.stats(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem;

    #[test]
    fn any_port_moves_frames_between_mem_ports() {
        let (a, b) = mem::link("a", "b");
        let (mut a, mut b) = (AnyPort::Mem(a), AnyPort::Mem(b));
        let mut burst = vec![a.import(&[7; 60]).unwrap(), a.import(&[8; 64]).unwrap()];
        assert_eq!(a.tx_burst(0, &mut burst).unwrap(), 2);
        let mut got = Vec::new();
        assert_eq!(b.rx_burst(0, &mut got, 32).unwrap(), 2);
        assert_eq!(got[1].data(), &[8; 64][..]);
        assert_eq!(a.caps().name, "a");
    }
}
