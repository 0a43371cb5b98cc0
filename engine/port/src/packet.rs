//! AF_PACKET ports with mmap'd TPACKET_V2 receive and transmit rings, for devices or kernels
//! without usable XDP.
//!
//! Receive copies each frame out of its ring slot into a [`HeapFrame`] and hands the slot back
//! to the kernel at once (a slot held in an egress queue would stall the ring, which the kernel
//! fills strictly in order). Transmit copies into the next free tx slot and kicks the kernel
//! with one `send` per burst. The socket bypasses the qdisc and ignores its own outgoing frames.
//!
//! Receive timestamps: the socket asks for SO_TIMESTAMPING receive stamps and the ring for the
//! NIC's raw hardware stamp (PACKET_TIMESTAMP), and where the device's hardware stamping is off
//! it is switched on for all received frames (SIOCSHWTSTAMP, keeping its transmit setting), as
//! ptp4l does; a device without it (veth) refuses and the ring carries the kernel's software
//! stamp. Each frame carries its stamp and says which kind it is ([`super::RxStamp`]).
//!
//! VLAN: the kernel may strip an 802.1Q tag into the ring header (`TP_STATUS_VLAN_VALID`); such
//! a tag is put back into the frame, so a port hands over frames as they were on the wire.
use std::sync::atomic::{fence, Ordering};

use super::heap::HeapFrame;
use super::{
    device_mac, if_index, Capabilities, Frame, Port, PortError, PortKind, PortStats, RxStamp,
    StampSource, MAX_FRAME,
};
use quench_wire::time::KernelStamps;

/// Ring geometry: 2 KiB slots, 64 KiB blocks (page multiple), 2048 slots per direction.
const SLOT: usize = 2048;
const BLOCK: usize = 64 * 1024;
const SLOTS: usize = 2048;
/// Frame data starts this far into a tx slot: TPACKET2_HDRLEN minus the sockaddr_ll the kernel
/// counts in it (packet(7): "data offset = TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)").
const TX_DATA: usize = 32;

/// Layout of `struct tpacket2_hdr` (linux/if_packet.h).
#[repr(C)]
struct Tp2Hdr {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_sec: u32,
    tp_nsec: u32,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
    tp_padding: [u8; 4],
}

const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
const TP_STATUS_TS_SOFTWARE: u32 = 1 << 29;
const TP_STATUS_TS_RAW_HARDWARE: u32 = 1 << 31;
/// linux/if_packet.h.
const PACKET_TIMESTAMP: libc::c_int = 17;
/// asm-generic/socket.h (SO_TIMESTAMPING_OLD: timespec stamps, all that a ring uses).
const SO_TIMESTAMPING: libc::c_int = 37;
/// linux/net_tstamp.h: enum hwtstamp_rx_filters.
const HWTSTAMP_FILTER_NONE: libc::c_int = 0;
const HWTSTAMP_FILTER_ALL: libc::c_int = 1;

/// `struct hwtstamp_config` (linux/net_tstamp.h).
#[repr(C)]
#[derive(Default)]
struct HwTstampConfig {
    flags: libc::c_int,
    tx_type: libc::c_int,
    rx_filter: libc::c_int,
}
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_SENDING: u32 = 2;
const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;
const TPACKET_V2: libc::c_int = 1;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_TX_RING: libc::c_int = 13;
const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
const PACKET_MR_PROMISC: libc::c_ushort = 1;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

#[repr(C)]
struct TpacketReq {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
}

/// An AF_PACKET port.
pub struct PacketPort {
    caps: Capabilities,
    fd: libc::c_int,
    ring: *mut u8,
    ring_len: usize,
    rx_next: usize,
    tx_next: usize,
    tx_pending: bool,
    /// Frames the kernel rejected from the tx ring (malformed), counted and skipped.
    pub tx_wrong_format: u64,
    /// Receive-ring drops read so far (the kernel resets its count on every read).
    rx_kernel_drops: u64,
    /// ENOBUFS answers from the ring's send: the device refused a frame, which the kernel put
    /// back (SEND_REQUEST) for the next send.
    tx_refusals: u64,
}

fn sockopt<T>(
    fd: libc::c_int,
    level: libc::c_int,
    name: libc::c_int,
    v: &T,
) -> std::io::Result<()> {
    // Safety: `v` points to a live T of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl PacketPort {
    /// Opens `ifname`: raw socket for all EtherTypes, promiscuous, TPACKET_V2 rings.
    pub fn open(ifname: &str) -> Result<PacketPort, PortError> {
        let ifindex = if_index(ifname)?;
        let open_err = |op: &'static str, e: std::io::Error| {
            if e.raw_os_error() == Some(libc::EPERM) && op == "mmap" {
                PortError::Memlock {
                    name: ifname.to_string(),
                    needed: (2 * SLOTS * SLOT) as u64,
                    limit: super::xdp::memlock_limit(),
                }
            } else {
                PortError::from_open(ifname, op, e)
            }
        };
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // Safety: plain syscall.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto as libc::c_int) };
        if fd < 0 {
            return Err(open_err(
                "socket(AF_PACKET)",
                std::io::Error::last_os_error(),
            ));
        }
        let mut port = PacketPort {
            caps: Capabilities {
                name: ifname.to_string(),
                kind: PortKind::Packet,
                rx_queues: 1,
                tx_queues: 1,
                max_frame: MAX_FRAME,
                zero_copy: false,
                mode: "tpacket_v2".into(),
                mac: device_mac(ifname),
            },
            fd,
            ring: std::ptr::null_mut(),
            ring_len: 0,
            rx_next: 0,
            tx_next: 0,
            tx_pending: false,
            tx_wrong_format: 0,
            rx_kernel_drops: 0,
            tx_refusals: 0,
        };
        let sol = libc::SOL_PACKET;
        sockopt(fd, sol, PACKET_VERSION, &TPACKET_V2).map_err(|e| open_err("PACKET_VERSION", e))?;
        let req = TpacketReq {
            tp_block_size: BLOCK as u32,
            tp_block_nr: (SLOTS * SLOT / BLOCK) as u32,
            tp_frame_size: SLOT as u32,
            tp_frame_nr: SLOTS as u32,
        };
        sockopt(fd, sol, PACKET_RX_RING, &req).map_err(|e| open_err("PACKET_RX_RING", e))?;
        sockopt(fd, sol, PACKET_TX_RING, &req).map_err(|e| open_err("PACKET_TX_RING", e))?;
        // Best effort: older kernels lack these; correctness does not depend on them (frames we
        // sent and see again are not addressed to this port's far side, they are just extra).
        let _ = sockopt(fd, sol, PACKET_QDISC_BYPASS, &1i32);
        let _ = sockopt(fd, sol, PACKET_IGNORE_OUTGOING, &1i32);
        let len = 2 * SLOTS * SLOT;
        // Safety: mapping the socket's rings (rx then tx) as the packet(7) ABI describes.
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED,
                fd,
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(open_err("mmap", std::io::Error::last_os_error()));
        }
        port.ring = ring as *mut u8;
        port.ring_len = len;
        // Safety: sockaddr_ll is plain old data; zeroed is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // Safety: `sll` is a valid sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                fd,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(open_err("bind", std::io::Error::last_os_error()));
        }
        // Safety: packet_mreq is plain old data.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = ifindex as i32;
        mreq.mr_type = PACKET_MR_PROMISC;
        sockopt(fd, sol, PACKET_ADD_MEMBERSHIP, &mreq).map_err(|e| open_err("promisc", e))?;
        // Best effort: without them the ring still stamps each frame as it copies it in.
        let rx_stamps = (libc::SOF_TIMESTAMPING_RX_SOFTWARE
            | libc::SOF_TIMESTAMPING_SOFTWARE
            | libc::SOF_TIMESTAMPING_RX_HARDWARE
            | libc::SOF_TIMESTAMPING_RAW_HARDWARE) as libc::c_int;
        let _ = sockopt(fd, libc::SOL_SOCKET, SO_TIMESTAMPING, &rx_stamps);
        let _ = sockopt(
            fd,
            sol,
            PACKET_TIMESTAMP,
            &(libc::SOF_TIMESTAMPING_RAW_HARDWARE as libc::c_int),
        );
        let _ = enable_hw_rx_stamps(fd, ifname);
        Ok(port)
    }

    fn slot(&self, tx: bool, i: usize) -> *mut u8 {
        let base = if tx { SLOTS * SLOT } else { 0 };
        // Safety: i < SLOTS, so the offset stays inside the mapping.
        unsafe { self.ring.add(base + i * SLOT) }
    }

    fn status(hdr: *mut u8) -> u32 {
        // Safety: `hdr` is a slot header inside the mapping; the status word is shared with
        // the kernel, so it is read atomically and followed by an acquire fence.
        let s = unsafe { (*(hdr as *const std::sync::atomic::AtomicU32)).load(Ordering::Relaxed) };
        fence(Ordering::Acquire);
        s
    }

    fn set_status(hdr: *mut u8, v: u32) {
        fence(Ordering::Release);
        // Safety: as in `status`.
        unsafe { (*(hdr as *const std::sync::atomic::AtomicU32)).store(v, Ordering::Relaxed) };
    }
}

/// Turns on the device's hardware receive stamps when they are off (SIOCGHWTSTAMP /
/// SIOCSHWTSTAMP, needs CAP_NET_ADMIN), keeping its transmit setting; `Err` when the device has
/// none (veth: EOPNOTSUPP) or we may not change it.
fn enable_hw_rx_stamps(fd: libc::c_int, ifname: &str) -> std::io::Result<()> {
    let ioctl = |req: libc::c_ulong, cfg: &mut HwTstampConfig| {
        // Safety: ifreq is plain old data; zeroed is valid.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in ifr
            .ifr_name
            .iter_mut()
            .zip(ifname.bytes().take(libc::IFNAMSIZ - 1))
        {
            *d = s as libc::c_char;
        }
        ifr.ifr_ifru.ifru_data = (cfg as *mut HwTstampConfig).cast();
        // Safety: `ifr` names the device and points at `cfg`, a live hwtstamp_config borrowed
        // for the duration of the call.
        if unsafe { libc::ioctl(fd, req as _, &mut ifr as *mut libc::ifreq) } < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    let mut cfg = HwTstampConfig::default();
    ioctl(libc::SIOCGHWTSTAMP, &mut cfg)?;
    if cfg.rx_filter != HWTSTAMP_FILTER_NONE {
        return Ok(());
    }
    cfg.rx_filter = HWTSTAMP_FILTER_ALL;
    ioctl(libc::SIOCSHWTSTAMP, &mut cfg)
}

/// The receive stamp of a ring slot with status `status` and time `sec`.`nsec`, converted with
/// `k` (read once for the burst).
fn slot_stamp(status: u32, sec: u32, nsec: u32, k: &KernelStamps) -> RxStamp {
    let source = if status & TP_STATUS_TS_RAW_HARDWARE != 0 {
        StampSource::Hardware
    } else if status & TP_STATUS_TS_SOFTWARE != 0 {
        StampSource::Software
    } else {
        StampSource::Ring
    };
    let ns = u64::from(sec) * 1_000_000_000 + u64::from(nsec);
    RxStamp {
        at: k.to_shared(ns),
        source,
    }
}

impl Drop for PacketPort {
    fn drop(&mut self) {
        // Safety: we own the mapping and the fd; neither is used after this.
        unsafe {
            if !self.ring.is_null() {
                libc::munmap(self.ring as *mut libc::c_void, self.ring_len);
            }
            libc::close(self.fd);
        }
    }
}

impl PacketPort {
    /// The frames the kernel dropped for want of ring room since the port was opened
    /// ([`PortStats::rx_kernel_drops`]).
    fn rx_kernel_drops(&mut self) -> Option<u64> {
        // struct tpacket_stats (TPACKET_V2): packets, drops; reading it resets both.
        let mut st = [0u32; 2];
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // Safety: `st` and `len` are valid for writes of `len` octets; the fd is ours.
        let rc = unsafe {
            libc::getsockopt(
                self.fd,
                libc::SOL_PACKET,
                PACKET_STATISTICS,
                st.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return None;
        }
        self.rx_kernel_drops += u64::from(st[1]);
        Some(self.rx_kernel_drops)
    }
}

impl Port for PacketPort {
    type Frame = HeapFrame;

    fn caps(&self) -> &Capabilities {
        &self.caps
    }

    fn wait_handle(&self, out: &mut Vec<std::os::fd::RawFd>) {
        // packet_poll (net/packet/af_packet.c): with an rx ring, readable once the kernel has
        // handed a frame slot to user space.
        out.push(self.fd);
    }

    fn rx_burst(
        &mut self,
        _queue: u16,
        out: &mut Vec<HeapFrame>,
        max: usize,
    ) -> Result<usize, PortError> {
        let mut n = 0;
        let mut clocks = None;
        while n < max {
            let hdr = self.slot(false, self.rx_next);
            let status = Self::status(hdr);
            if status & TP_STATUS_USER == 0 {
                break;
            }
            // Read after the frame is in the ring, so no frame's age comes out negative.
            let k = *clocks.get_or_insert_with(KernelStamps::read);
            // Safety: the slot is ours (TP_STATUS_USER) until we set it back to KERNEL; the
            // header and the frame it describes lie inside the slot.
            let frame = unsafe {
                let h = &*(hdr as *const Tp2Hdr);
                let stamp = Some(slot_stamp(status, h.tp_sec, h.tp_nsec, &k));
                let len = (h.tp_snaplen as usize).min(SLOT - h.tp_mac as usize);
                let data = std::slice::from_raw_parts(hdr.add(h.tp_mac as usize), len);
                if status & TP_STATUS_VLAN_VALID != 0 && data.len() >= 12 {
                    let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                        h.tp_vlan_tpid
                    } else {
                        0x8100
                    };
                    let mut v = Vec::with_capacity(len + 4);
                    v.extend_from_slice(&data[..12]);
                    v.extend_from_slice(&tpid.to_be_bytes());
                    v.extend_from_slice(&h.tp_vlan_tci.to_be_bytes());
                    v.extend_from_slice(&data[12..]);
                    HeapFrame::copy_of(&v)
                } else {
                    HeapFrame::copy_of(data)
                }
                .map(|f| f.with_stamp(stamp))
            };
            Self::set_status(hdr, TP_STATUS_KERNEL);
            self.rx_next = (self.rx_next + 1) % SLOTS;
            if let Some(f) = frame {
                out.push(f);
                n += 1;
            }
        }
        Ok(n)
    }

    fn tx_burst(&mut self, _queue: u16, frames: &mut Vec<HeapFrame>) -> Result<usize, PortError> {
        let mut sent = 0;
        for f in frames.iter() {
            let hdr = self.slot(true, self.tx_next);
            let status = Self::status(hdr);
            if status == TP_STATUS_WRONG_FORMAT {
                self.tx_wrong_format += 1;
            } else if status != TP_STATUS_AVAILABLE {
                break; // ring full: the rest stay with the caller
            }
            let data = f.data();
            let len = data.len().min(SLOT - TX_DATA);
            // Safety: the slot is ours (AVAILABLE); TX_DATA + len <= SLOT.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), hdr.add(TX_DATA), len);
                (*(hdr as *mut Tp2Hdr)).tp_len = len as u32;
            }
            Self::set_status(hdr, TP_STATUS_SEND_REQUEST);
            self.tx_next = (self.tx_next + 1) % SLOTS;
            sent += 1;
        }
        frames.drain(..sent);
        if sent > 0 {
            self.tx_pending = true;
            self.poll()?;
        }
        Ok(sent)
    }

    fn alloc(&mut self, len: usize) -> Option<HeapFrame> {
        HeapFrame::zeroed(len)
    }

    fn stats(&mut self) -> PortStats {
        let tx_queued = (0..SLOTS)
            .filter(|&i| {
                let s = Self::status(self.slot(true, i));
                s == TP_STATUS_SEND_REQUEST || s == TP_STATUS_SENDING
            })
            .count();
        PortStats {
            rx_kernel_drops: self.rx_kernel_drops(),
            tx_refusals: Some(self.tx_refusals),
            tx_kernel_drops: None,
            tx_queued: Some(tx_queued),
        }
    }

    fn poll(&mut self) -> Result<(), PortError> {
        if self.tx_pending {
            // Safety: a zero-length send on a socket with a tx ring transmits the slots marked
            // SEND_REQUEST; no buffer is read.
            let rc = unsafe { libc::send(self.fd, std::ptr::null(), 0, libc::MSG_DONTWAIT) };
            if rc >= 0 {
                self.tx_pending = false;
            } else {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    // The refused frame and those after it stay SEND_REQUEST for the next send.
                    Some(libc::ENOBUFS) => self.tx_refusals += 1,
                    Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                    _ => {
                        return Err(PortError::Io {
                            name: self.caps.name.clone(),
                            op: "send",
                            source: e,
                        })
                    }
                }
            }
        }
        Ok(())
    }
}

// Safety: the port owns its fd and mapping exclusively; moving it to another thread moves that
// ownership (it is never shared: `Port` methods take `&mut self`).
unsafe impl Send for PacketPort {}
