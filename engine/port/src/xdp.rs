//! AF_XDP ports through xsk-rs (libxdp).
//!
//! # Pools and zero-copy forwarding
//! A worker makes one [`XdpPool`] (one UMEM) and opens all its AF_XDP ports on it: a frame
//! received on one port is transmitted on another by moving its descriptor, no copy. An
//! [`XdpFrame`] owns one UMEM frame; dropping it puts the frame back on the pool's free list.
//! Frames hold an `Rc` of the pool, so they are `!Send` and cannot leave the worker.
//!
//! # Modes
//! `XdpMode::Auto` tries native (driver) mode with zero-copy, then native with copy, then
//! generic (SKB) mode with copy. veth supports native mode in copy mode only. Every device queue
//! gets its own socket (all on the one UMEM, each with its own fill and completion rings).
//!
//! # Program lifecycle
//! libxdp loads its default redirect program when the first socket binds and removes it when
//! the last socket on the device is deleted (on drop, so a clean stop detaches it). There is one
//! program per device: it redirects a frame to `xsks_map[rx_queue_index]`, and every socket
//! bound to a queue of the device, on any UMEM, inserts itself at its queue's index (libxdp
//! `__xsk_setup_xdp_prog`: look the program up, attach it if absent, insert the socket; the
//! program's refcount counts the sockets). Several workers each open their own queues of one
//! device, so a process-wide table ([`DEVICES`]) counts this process's open ports per device:
//! it serialises socket set-up (libxdp's look-up-else-attach is not atomic: two threads both
//! attach and the second fails EEXIST/EBUSY), and it tells our own program in use from a stale
//! one. A process killed without cleanup leaves the program attached and the next attach fails;
//! so the first open of a device in a process looks at what is attached: a libxdp AF_XDP
//! program whose owner (recorded in a pid file) is no longer alive is stale and removed;
//! anything else is an attach conflict, reported with the program id, unless the caller forces
//! the replacement. quench's own program (the kernel fast path, [`super::kfp`]) is handled the
//! same way: the port attaches it itself ([`XdpOptions::program`]), libxdp is told not to load
//! its own (`XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD`), and the last close detaches it.
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::num::NonZeroU32;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Mutex, MutexGuard};

use xsk_rs::config::{
    BindFlags, FrameSize, Interface, LibxdpFlags, QueueSize, SocketConfig, UmemConfig, XdpFlags,
};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue, Umem};

use super::{
    device_mac, device_queues, if_index, Capabilities, Frame, Port, PortError, PortKind, PortStats,
};

/// UMEM chunk sizes: the kernel's minimum (a page holds two) and, for an MTU whose frames do
/// not fit it, a page (the largest chunk of an aligned UMEM: xdp_umem_reg in net/xdp/xdp_umem.c
/// takes a power of two from 2048 to PAGE_SIZE).
const CHUNK_SMALL: u32 = 2048;
const CHUNK_PAGE: u32 = 4096;
/// Ring sizes (fill, completion, rx, tx) per socket.
const RING: u32 = 2048;
/// Headroom the kernel keeps in front of a received frame in each chunk (XDP_PACKET_HEADROOM):
/// a chunk holds a frame of at most its size less this (copy mode drops longer ones,
/// `__xsk_rcv`'s `len > frame_size` in net/xdp/xsk.c).
const HEADROOM: usize = 256;
/// What an MTU's frame adds to it: the Ethernet header and two 4-octet tags (VLAN, CN-TAG or
/// QinQ), as [`super::MAX_FRAME`] does for 1500.
const L2_OVERHEAD: u32 = 14 + 8;

/// How to attach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// Native with zero-copy, else native copy, else generic.
    #[default]
    Auto,
    /// Native (driver) mode only.
    Native,
    /// Generic (SKB) mode only.
    Generic,
}

struct PoolInner {
    umem: Umem,
    free: RefCell<Vec<FrameDesc>>,
    /// Largest frame a chunk holds (chunk size less [`HEADROOM`]).
    frame_cap: usize,
}

extern "C" {
    /// libbpf's log hook (linked in through libxdp-sys, which does not bind it). The argument
    /// is a `libbpf_print_fn_t`; NULL silences libbpf.
    fn libbpf_set_print(f: *const libc::c_void) -> *const libc::c_void;
}

/// One worker's UMEM and its free list. Cheap to clone (an `Rc`).
#[derive(Clone)]
pub struct XdpPool(Rc<PoolInner>);

impl XdpPool {
    /// A UMEM of `frames` frames of 2 KiB (locked memory: `frames * 2048` octets): frames of
    /// MTU 1500 with two tags.
    pub fn new(frames: u32) -> Result<XdpPool, PortError> {
        XdpPool::for_mtu(frames, 1500)
    }

    /// The chunk size whose frames hold an MTU of `mtu` octets with [`L2_OVERHEAD`]: 2048 up
    /// to MTU 1770, a page (4096) up to 3818; above, an error naming the MTU (a frame that
    /// spans chunks needs AF_XDP multi-buffer, which quench does not use).
    pub fn chunk_for_mtu(mtu: u32) -> Result<u32, PortError> {
        let need = mtu as usize + L2_OVERHEAD as usize + HEADROOM;
        [CHUNK_SMALL, CHUNK_PAGE]
            .into_iter()
            .find(|&c| need <= c as usize)
            .ok_or_else(|| PortError::Unsupported {
                name: "umem".into(),
                what: format!(
                    "MTU {mtu}: an AF_XDP chunk holds a frame of at most {} octets (MTU {})",
                    CHUNK_PAGE as usize - HEADROOM,
                    CHUNK_PAGE - HEADROOM as u32 - L2_OVERHEAD
                ),
            })
    }

    /// A UMEM of `frames` frames, each a chunk that holds a frame of MTU `mtu`
    /// ([`XdpPool::chunk_for_mtu`]; locked memory: `frames` times the chunk).
    pub fn for_mtu(frames: u32, mtu: u32) -> Result<XdpPool, PortError> {
        let chunk = XdpPool::chunk_for_mtu(mtu)?;
        // libxdp/libbpf narrate program loading on stderr ("No bpffs found", ...); quench
        // reports what it got through Capabilities and its own errors instead.
        // Safety: setting a print callback to none (NULL) is always allowed.
        unsafe {
            libxdp_sys::libxdp_set_print(None);
            libbpf_set_print(std::ptr::null());
        }
        let config = UmemConfig::builder()
            .frame_size(FrameSize::new(chunk).map_err(|e| unsupported("umem", e))?)
            .fill_queue_size(QueueSize::new(RING).map_err(|e| unsupported("umem", e))?)
            .comp_queue_size(QueueSize::new(RING).map_err(|e| unsupported("umem", e))?)
            .build()
            .map_err(|e| unsupported("umem", e))?;
        let n = NonZeroU32::new(frames.max(1)).unwrap_or(NonZeroU32::MIN);
        let (umem, descs) = Umem::new(config, n, false).map_err(|e| {
            let needed = frames as u64 * chunk as u64;
            // The kernel charges a UMEM's pages to RLIMIT_MEMLOCK and answers ENOBUFS when
            // they do not fit (xdp_umem_account_pages); older kernels said ENOMEM or EPERM.
            match io_errno(&e) {
                Some(libc::ENOBUFS) | Some(libc::ENOMEM) | Some(libc::EPERM)
                | Some(libc::EAGAIN) => PortError::Memlock {
                    name: "umem".into(),
                    needed,
                    limit: memlock_limit(),
                },
                _ => PortError::Io {
                    name: "umem".into(),
                    op: "create UMEM",
                    source: std::io::Error::other(error_chain(&e)),
                },
            }
        })?;
        Ok(XdpPool(Rc::new(PoolInner {
            umem,
            free: RefCell::new(descs),
            frame_cap: chunk as usize - HEADROOM,
        })))
    }

    /// Largest frame one of this pool's chunks holds, octets.
    pub fn frame_cap(&self) -> usize {
        self.0.frame_cap
    }

    /// Frames currently free.
    pub fn free_frames(&self) -> usize {
        self.0.free.borrow().len()
    }

    fn take(&self, n: usize, out: &mut Vec<FrameDesc>) {
        let mut free = self.0.free.borrow_mut();
        let k = n.min(free.len());
        let at = free.len() - k;
        out.extend(free.drain(at..));
    }

    fn put(&self, descs: &[FrameDesc]) {
        self.0.free.borrow_mut().extend_from_slice(descs);
    }

    fn frame(&self, desc: FrameDesc) -> XdpFrame {
        XdpFrame {
            desc,
            pool: self.clone(),
        }
    }
}

/// An owned UMEM frame. Dropping it returns it to its pool.
pub struct XdpFrame {
    desc: FrameDesc,
    pool: XdpPool,
}

impl XdpFrame {
    /// Hands the descriptor to the kernel: the pool gets it back through the completion ring,
    /// not through `Drop`.
    fn into_desc(self) -> FrameDesc {
        let me = std::mem::ManuallyDrop::new(self);
        // Safety: `me` is never used or dropped again, so reading the pool handle out of it
        // moves it exactly once (its Rc count stays balanced).
        let _pool = unsafe { std::ptr::read(&me.pool) };
        me.desc
    }
}

impl Drop for XdpFrame {
    fn drop(&mut self) {
        self.pool.put(std::slice::from_ref(&self.desc));
    }
}

impl Frame for XdpFrame {
    fn data(&self) -> &[u8] {
        // Safety: `desc` came from this pool's UMEM; we own the frame (it is neither on a fill
        // nor a tx ring), so the kernel does not write it while we read.
        unsafe { self.pool.0.umem.data(&self.desc).contents() }
    }
    fn data_mut(&mut self) -> &mut [u8] {
        // Safety: as in `data`; `&mut self` makes this the only access in userspace.
        unsafe {
            let d = self.pool.0.umem.data_mut(&mut self.desc);
            let len = d.contents().len();
            let p = d.contents().as_ptr() as *mut u8;
            // The DataMut borrow ends here but the region stays ours while `self` is borrowed.
            std::slice::from_raw_parts_mut(p, len)
        }
    }
    fn set_len(&mut self, len: usize) -> usize {
        let len = len.min(self.pool.frame_cap());
        // Safety: as in `data_mut`.
        unsafe {
            self.pool
                .0
                .umem
                .data_mut(&mut self.desc)
                .cursor()
                .set_pos(len)
        };
        len
    }
}

struct XskQueue {
    tx: TxQueue,
    rx: RxQueue,
    fq: FillQueue,
    cq: CompQueue,
    /// Frames on the tx ring not yet completed.
    in_flight: u32,
    /// Frames the kernel took off the tx ring and then dropped (see [`XskQueue::wake`]).
    tx_drops: u64,
}

impl XskQueue {
    /// Kicks the kernel to send what is on the tx ring (copy mode sends in this call). An
    /// EBUSY answer means the device refused a frame and the kernel dropped it: it completes
    /// the descriptor as if sent (xsk_generic_xmit, "SKB completed but not sent") and stops,
    /// leaving the rest on the ring for the next kick. EAGAIN (device busy, frame kept, or the
    /// kernel's batch limit reached) loses nothing.
    /// (xsk-rs's `TxQueue::wakeup` hides EBUSY, hence the system call here.)
    fn wake(&mut self) {
        use std::os::unix::io::AsRawFd;
        let fd = self.tx.fd().as_raw_fd();
        // Safety: a zero-length sendto on our own AF_XDP socket reads no buffer.
        let rc = unsafe {
            libc::sendto(
                fd,
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBUSY) {
            self.tx_drops += 1;
        }
    }
}

/// An integer socket option's value (getsockopt), `None` when the kernel refuses it.
fn sockopt_u32(fd: std::os::unix::io::RawFd, level: libc::c_int, opt: libc::c_int) -> Option<u32> {
    let mut v = 0u32;
    let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
    // Safety: `v`/`len` are valid for writes; getsockopt on a closed or foreign fd fails.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            opt,
            &mut v as *mut u32 as *mut libc::c_void,
            &mut len,
        )
    };
    (rc == 0).then_some(v)
}

/// An AF_XDP port: one socket per device queue, all on the worker's pool.
pub struct XdpPort {
    caps: Capabilities,
    pool: XdpPool,
    queues: Vec<XskQueue>,
    /// Descriptor buffer for the rx, tx and completion rings; always `RING` long, so that no
    /// burst pays for re-initialising it (a resize per burst was 48 KiB of writes).
    scratch: Vec<FrameDesc>,
    /// Descriptors on their way from the pool to a fill ring; empty between uses.
    fill: Vec<FrameDesc>,
    /// This port's entry in [`DEVICES`] (and its owner file's path).
    device: PathBuf,
    /// The attach mode of the program this port attached ([`XdpOptions::program`]), which the
    /// last close of the device detaches (libxdp detaches only its own).
    own_program: Option<(u32, u32)>,
}

/// Options for [`XdpPort::open`].
#[derive(Clone, Debug, Default)]
pub struct XdpOptions {
    pub mode: XdpMode,
    /// Replace any XDP program already attached, not only stale libxdp ones.
    pub force: bool,
    /// Only these device queues; all queues when `None`.
    pub queues: Option<Vec<u16>>,
    /// Attach this program instead of libxdp's (the kernel fast path, [`super::kfp`]).
    pub program: Option<XdpProgram>,
}

/// A loaded XDP program for [`XdpOptions::program`]: the port attaches it to its device when
/// it opens the device's first queue, enters each socket in the program's XSKMAP at its
/// queue's index (`xsk_socket__update_xskmap` does the same map update), and detaches it when
/// the last queue closes. The fds stay the caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpProgram {
    pub prog_fd: std::os::fd::RawFd,
    pub xskmap_fd: std::os::fd::RawFd,
}

fn unsupported(what: &str, e: impl std::fmt::Display) -> PortError {
    PortError::Unsupported {
        name: what.to_string(),
        what: e.to_string(),
    }
}

fn io_errno(e: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut cur = Some(e);
    while let Some(s) = cur {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        cur = s.source();
    }
    None
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// RLIMIT_MEMLOCK soft limit in bytes (`u64::MAX` for unlimited).
pub fn memlock_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // Safety: `r` is a valid rlimit to write into.
    unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) };
    r.rlim_cur
}

const OWNER_DIR: &str = "/run/quench";

/// The owner file of `ifname` in the calling thread's network namespace: it records which
/// process owns the AF_XDP program on the device, so a later start can tell a stale program
/// (owner dead) from a live one. The path is also the device's key in [`DEVICES`].
fn owner_path(ifname: &str) -> PathBuf {
    // Network namespaces share /run; the namespace inode keeps names apart. The thread's own
    // namespace: a process may open ports in several (crate::netns).
    let ns = std::fs::read_link("/proc/thread-self/ns/net")
        .map(|p| p.to_string_lossy().replace(['[', ']', ':'], ""))
        .unwrap_or_default();
    std::path::Path::new(OWNER_DIR).join(format!("xdp-{ns}-{ifname}.pid"))
}

fn owner_alive(ifname: &str) -> Option<u32> {
    let pid: i32 = std::fs::read_to_string(owner_path(ifname))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    // Safety: kill with signal 0 only checks that the process exists.
    let alive = pid > 0 && unsafe { libc::kill(pid, 0) } == 0 && pid != std::process::id() as i32;
    alive.then_some(pid as u32)
}

/// This process's open [`XdpPort`]s per device, keyed by [`owner_path`] (see the module docs,
/// "Program lifecycle"). Held while sockets are created or deleted.
static DEVICES: Mutex<BTreeMap<PathBuf, usize>> = Mutex::new(BTreeMap::new());

fn devices() -> MutexGuard<'static, BTreeMap<PathBuf, usize>> {
    // The table stays consistent if a holder panicked: counts change after the sockets do.
    DEVICES.lock().unwrap_or_else(|e| e.into_inner())
}

/// An XDP program attached to a device: id, name and mode flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachedProg {
    pub id: u32,
    pub name: String,
    pub mode: u32,
}

/// Programs attached to `ifindex` in native and generic mode.
pub fn attached_programs(ifindex: u32) -> Vec<AttachedProg> {
    let mut out = Vec::new();
    for mode in [
        XdpFlags::XDP_FLAGS_DRV_MODE.bits(),
        XdpFlags::XDP_FLAGS_SKB_MODE.bits(),
    ] {
        let mut id = 0u32;
        // Safety: `id` is a valid u32 to write into; ifindex is a plain integer.
        let rc = unsafe { libxdp_sys::bpf_xdp_query_id(ifindex as i32, mode as i32, &mut id) };
        if rc == 0 && id != 0 {
            out.push(AttachedProg {
                id,
                name: prog_name(id).unwrap_or_default(),
                mode,
            });
        }
    }
    out
}

fn prog_name(id: u32) -> Option<String> {
    // Safety: plain syscall wrapper; a negative return is an error.
    let fd = unsafe { libxdp_sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return None;
    }
    // Safety: bpf_prog_info is plain old data; zeroed is a valid value.
    let mut info: libxdp_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libxdp_sys::bpf_prog_info>() as u32;
    // Safety: `info` and `len` are valid for writes of `len` bytes; fd is ours and closed below.
    let rc = unsafe {
        let rc = libxdp_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len);
        libc::close(fd);
        rc
    };
    if rc != 0 {
        return None;
    }
    let bytes: Vec<u8> = info
        .name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Detaches whatever XDP program is attached to `ifindex` in `mode`.
pub fn detach_program(ifindex: u32, mode: u32) -> Result<(), std::io::Error> {
    // Safety: plain syscall wrapper; a null opts pointer is allowed.
    let rc = unsafe { libxdp_sys::bpf_xdp_detach(ifindex as i32, mode, std::ptr::null()) };
    if rc < 0 {
        Err(std::io::Error::from_raw_os_error(-rc))
    } else {
        Ok(())
    }
}

/// Attaches program `prog_fd` to `ifindex` in `mode` (only where none is attached).
fn attach_program(
    ifname: &str,
    ifindex: u32,
    prog_fd: std::os::fd::RawFd,
    mode: XdpFlags,
) -> Result<(), PortError> {
    let flags = mode.bits() | XdpFlags::XDP_FLAGS_UPDATE_IF_NOEXIST.bits();
    // Safety: plain syscall wrapper; a null opts pointer is allowed.
    let rc =
        unsafe { libxdp_sys::bpf_xdp_attach(ifindex as i32, prog_fd, flags, std::ptr::null()) };
    match -rc {
        0 => Ok(()),
        libc::EBUSY | libc::EEXIST => Err(PortError::XdpConflict {
            name: ifname.to_string(),
            prog_id: attached_programs(ifindex).first().map_or(0, |p| p.id),
        }),
        errno => Err(PortError::Io {
            name: ifname.to_string(),
            op: "attach the fast path's XDP program",
            source: std::io::Error::from_raw_os_error(errno),
        }),
    }
}

/// Program names libxdp loads for AF_XDP sockets, and quench's own ([`super::kfp`]).
fn is_afxdp_program(name: &str) -> bool {
    name.starts_with("xsk_def_prog")
        || name.starts_with("xdp_dispatcher")
        || name.starts_with(super::kfp::PROG_NAME)
}

/// Removes stale AF_XDP programs from `ifname`; errors on a live or foreign one unless `force`.
pub fn clear_stale(ifname: &str, ifindex: u32, force: bool) -> Result<(), PortError> {
    for p in attached_programs(ifindex) {
        let stale = is_afxdp_program(&p.name) && owner_alive(ifname).is_none();
        if !(stale || force) {
            return Err(PortError::XdpConflict {
                name: ifname.to_string(),
                prog_id: p.id,
            });
        }
        detach_program(ifindex, p.mode).map_err(|e| PortError::from_open(ifname, "detach", e))?;
    }
    Ok(())
}

impl XdpPort {
    /// Opens `ifname` on `pool` (see the module docs for modes and stale programs).
    pub fn open(pool: &XdpPool, ifname: &str, opts: &XdpOptions) -> Result<XdpPort, PortError> {
        let ifindex = if_index(ifname)?;
        // Safety: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(PortError::Permission {
                name: ifname.to_string(),
                // Safety: as above.
                uid: unsafe { libc::getuid() },
            });
        }
        let device = owner_path(ifname);
        let mut open = devices();
        let first = !open.contains_key(&device);
        if first {
            clear_stale(ifname, ifindex, opts.force)?;
        }
        let qids: Vec<u16> = match &opts.queues {
            Some(q) => q.clone(),
            None => (0..device_queues(ifname)).collect(),
        };
        let iface: Interface =
            CString::new(ifname)
                .map(Interface::new)
                .map_err(|_| PortError::NoSuchInterface {
                    name: ifname.to_string(),
                })?;
        let attempts: &[(XdpFlags, BindFlags, &str, bool)] = &[
            (
                XdpFlags::XDP_FLAGS_DRV_MODE,
                BindFlags::XDP_ZEROCOPY,
                "native/zero-copy",
                true,
            ),
            (
                XdpFlags::XDP_FLAGS_DRV_MODE,
                BindFlags::XDP_COPY,
                "native/copy",
                false,
            ),
            (
                XdpFlags::XDP_FLAGS_SKB_MODE,
                BindFlags::XDP_COPY,
                "generic/copy",
                false,
            ),
        ];
        let attempts: Vec<_> = attempts
            .iter()
            .filter(|(x, _, _, _)| match opts.mode {
                XdpMode::Auto => true,
                XdpMode::Native => x.contains(XdpFlags::XDP_FLAGS_DRV_MODE),
                XdpMode::Generic => x.contains(XdpFlags::XDP_FLAGS_SKB_MODE),
            })
            .collect();
        let mut last_err = None;
        for (xdp_flags, bind, _, _) in attempts {
            let attached = match opts.program.filter(|_| first) {
                Some(p) => match attach_program(ifname, ifindex, p.prog_fd, *xdp_flags) {
                    Ok(()) => Some((ifindex, xdp_flags.bits())),
                    Err(e) => {
                        last_err = Some(e);
                        continue;
                    }
                },
                None => None,
            };
            let opened = open_queues(pool, &iface, ifname, &qids, *xdp_flags, *bind, opts);
            if let (Err(_), Some((ix, mode))) = (&opened, attached) {
                let _ = detach_program(ix, mode);
            }
            match opened {
                Ok(queues) => {
                    // Ask the kernel what we got: a socket sharing a UMEM inherits its mode, and
                    // the attach mode is the program's, not the flag's.
                    let zc = queues
                        .first()
                        .is_some_and(|q| is_zero_copy(q.rx.fd().as_raw_fd()));
                    let native = attached_programs(ifindex)
                        .iter()
                        .any(|p| p.mode == XdpFlags::XDP_FLAGS_DRV_MODE.bits());
                    let mode = format!(
                        "{}/{}",
                        if native { "native" } else { "generic" },
                        if zc { "zero-copy" } else { "copy" }
                    );
                    if first {
                        let _ = std::fs::create_dir_all(OWNER_DIR);
                        let _ = std::fs::write(&device, std::process::id().to_string());
                    }
                    *open.entry(device.clone()).or_insert(0) += 1;
                    return Ok(XdpPort {
                        caps: Capabilities {
                            name: ifname.to_string(),
                            kind: PortKind::Xdp,
                            rx_queues: queues.len() as u16,
                            tx_queues: queues.len() as u16,
                            max_frame: pool.frame_cap(),
                            zero_copy: zc,
                            mode,
                            mac: device_mac(ifname),
                        },
                        pool: pool.clone(),
                        queues,
                        scratch: vec![FrameDesc::default(); RING as usize],
                        fill: Vec::with_capacity(RING as usize),
                        device,
                        own_program: attached,
                    });
                }
                // The MTU refusal says what to change; a later mode's error would hide it.
                Err(e) if !matches!(last_err, Some(PortError::XdpMtu { .. })) => last_err = Some(e),
                Err(_) => {}
            }
        }
        Err(last_err.unwrap_or(PortError::Unsupported {
            name: ifname.to_string(),
            what: "no AF_XDP mode to try".into(),
        }))
    }
}

impl Drop for XdpPort {
    fn drop(&mut self) {
        let mut open = devices();
        // Deleting the sockets removes them from the device's XSKMAP; the last one detaches the
        // program (libxdp's refcount), under the table's lock so no open runs meanwhile.
        self.queues.clear();
        let n = open.get_mut(&self.device).map(|n| {
            *n = n.saturating_sub(1);
            *n
        });
        if n == Some(0) {
            if let Some((ifindex, mode)) = self.own_program {
                let _ = detach_program(ifindex, mode);
            }
            open.remove(&self.device);
            let _ = std::fs::remove_file(&self.device);
        }
    }
}

/// Whether an AF_XDP socket runs in zero-copy mode (getsockopt XDP_OPTIONS).
fn is_zero_copy(fd: std::os::unix::io::RawFd) -> bool {
    sockopt_u32(fd, libc::SOL_XDP, libxdp_sys::XDP_OPTIONS as i32)
        .is_some_and(|o| o & libxdp_sys::XDP_OPTIONS_ZEROCOPY != 0)
}

fn open_queues(
    pool: &XdpPool,
    iface: &Interface,
    ifname: &str,
    qids: &[u16],
    xdp_flags: XdpFlags,
    bind: BindFlags,
    opts: &XdpOptions,
) -> Result<Vec<XskQueue>, PortError> {
    let xskmap = opts.program.map(|p| p.xskmap_fd);
    let ring = QueueSize::new(RING).map_err(|e| unsupported(ifname, e))?;
    let mut queues = Vec::new();
    let libxdp = match xskmap {
        Some(_) => LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD,
        None => LibxdpFlags::empty(),
    };
    for &q in qids {
        let config = SocketConfig::builder()
            .rx_queue_size(ring)
            .tx_queue_size(ring)
            .xdp_flags(xdp_flags)
            .bind_flags(bind | BindFlags::XDP_USE_NEED_WAKEUP)
            .libxdp_flags(libxdp)
            .build();
        // Safety: each (ifname, queue) pair is bound once per UMEM here, so the shared-UMEM
        // contract of `Socket::new` (INHIBIT_PROG_LOAD for re-binding a pair) does not apply.
        let r = unsafe { Socket::new(config, &pool.0.umem, iface, q as u32) };
        let (tx, rx, fqcq) = r.map_err(|e| classify_socket_error(ifname, &e))?;
        let (fq, cq) = fqcq.ok_or_else(|| unsupported(ifname, "queue already bound"))?;
        if let Some(map) = xskmap {
            let key = q as u32;
            let fd = rx.fd().as_raw_fd();
            // Safety: a 4-octet key and a 4-octet value (the socket's fd), the XSKMAP's sizes.
            let rc = unsafe {
                libxdp_sys::bpf_map_update_elem(
                    map,
                    &key as *const u32 as *const libc::c_void,
                    &fd as *const i32 as *const libc::c_void,
                    0,
                )
            };
            if rc < 0 {
                return Err(PortError::Io {
                    name: ifname.to_string(),
                    op: "enter the AF_XDP socket in the XSKMAP",
                    source: std::io::Error::from_raw_os_error(-rc),
                });
            }
        }
        let mut xq = XskQueue {
            tx,
            rx,
            fq,
            cq,
            in_flight: 0,
            tx_drops: 0,
        };
        refill(pool, &mut xq, &mut Vec::new());
        queues.push(xq);
    }
    Ok(queues)
}

fn classify_socket_error(ifname: &str, e: &xsk_rs::socket::SocketCreateError) -> PortError {
    let name = ifname.to_string();
    match io_errno(e) {
        Some(libc::ENODEV) | Some(libc::ENXIO) => PortError::NoSuchInterface { name },
        Some(libc::EPERM) | Some(libc::EACCES) => PortError::Permission {
            name,
            // Safety: getuid has no preconditions.
            uid: unsafe { libc::getuid() },
        },
        Some(libc::EBUSY) | Some(libc::EEXIST) => {
            let id = if_index(ifname)
                .map(attached_programs)
                .ok()
                .and_then(|p| p.first().map(|p| p.id))
                .unwrap_or(0);
            PortError::XdpConflict { name, prog_id: id }
        }
        Some(libc::ERANGE) => PortError::XdpMtu {
            mtu: super::device_mtu(&name).map_or_else(|| "unknown".into(), |m| m.to_string()),
            name,
        },
        Some(libc::ENOMEM) | Some(libc::ENOBUFS) => PortError::Memlock {
            name,
            needed: 0,
            limit: memlock_limit(),
        },
        _ => PortError::Io {
            name,
            op: "create AF_XDP socket",
            source: std::io::Error::other(error_chain(e)),
        },
    }
}

/// Tops up a queue's fill ring from the pool.
fn refill(pool: &XdpPool, q: &mut XskQueue, scratch: &mut Vec<FrameDesc>) {
    // Refill in batches: a ring-space check is a shared-memory read, a wakeup a syscall.
    let want = q.fq.nb_free(RING) as usize;
    if want < 32 {
        return;
    }
    scratch.clear();
    pool.take(want, scratch);
    if scratch.is_empty() {
        return;
    }
    // Safety: the descriptors come from this pool's free list, so they belong to the UMEM the
    // fill ring was created on and nothing else references them.
    let n = unsafe { q.fq.produce(scratch) };
    pool.put(&scratch[n..]);
    scratch.clear();
    if q.fq.needs_wakeup() {
        let fd = q.rx.fd_mut();
        let _ = q.fq.wakeup(fd, 0);
    }
}

impl Port for XdpPort {
    type Frame = XdpFrame;

    fn caps(&self) -> &Capabilities {
        &self.caps
    }

    fn rx_burst(
        &mut self,
        queue: u16,
        out: &mut Vec<XdpFrame>,
        max: usize,
    ) -> Result<usize, PortError> {
        let Some(q) = self.queues.get_mut(queue as usize) else {
            return Ok(0);
        };
        let max = max.min(self.scratch.len());
        // Safety: the rx ring was created on this pool's UMEM; the consumed descriptors are
        // ours until we return them.
        let n = unsafe { q.rx.consume(&mut self.scratch[..max]) };
        out.extend(self.scratch[..n].iter().map(|d| self.pool.frame(*d)));
        Ok(n)
    }

    fn tx_burst(&mut self, queue: u16, frames: &mut Vec<XdpFrame>) -> Result<usize, PortError> {
        let Some(q) = self.queues.get_mut(queue as usize) else {
            return Ok(0);
        };
        let room = q.tx.nb_free(frames.len() as u32) as usize;
        let n = room.min(frames.len());
        if n == 0 {
            if q.tx.needs_wakeup() {
                q.wake();
            }
            return Ok(0);
        }
        for (slot, f) in self.scratch[..n].iter_mut().zip(frames.drain(..n)) {
            *slot = f.into_desc();
        }
        // Safety: the descriptors belong to this UMEM (XdpFrame only comes from this pool
        // type, and all ports of a worker share one pool) and we checked the ring has room.
        let sent = unsafe { q.tx.produce(&self.scratch[..n]) };
        if sent < n {
            // Cannot happen after nb_free; return the frames to the pool rather than leak.
            self.pool.put(&self.scratch[sent..n]);
        }
        q.in_flight += sent as u32;
        if q.tx.needs_wakeup() {
            q.wake();
        }
        Ok(sent)
    }

    fn alloc(&mut self, len: usize) -> Option<XdpFrame> {
        if len > self.pool.frame_cap() {
            return None;
        }
        let desc = self.pool.0.free.borrow_mut().pop()?;
        let mut f = self.pool.frame(desc);
        f.set_len(len);
        Some(f)
    }

    fn wait_handle(&self, out: &mut Vec<std::os::fd::RawFd>) {
        // xsk_poll (net/xdp/xsk.c): readable while the rx ring holds a descriptor; the XDP
        // path's flush and the generic receive wake the socket's waiters (sk_data_ready) when
        // they fill it.
        out.extend(self.queues.iter().map(|q| q.rx.fd().as_raw_fd()));
    }

    fn stats(&mut self) -> PortStats {
        PortStats {
            // rx_dropped counts frames with no fill-ring buffer (rx_fill_ring_empty_descs
            // counts the same events again), rx_ring_full those the rx ring had no room for.
            rx_kernel_drops: self
                .queues
                .iter()
                .map(|q| {
                    q.rx.fd()
                        .xdp_statistics()
                        .ok()
                        .map(|s| s.rx_dropped() + s.rx_ring_full())
                })
                .sum(),
            tx_refusals: None,
            tx_kernel_drops: Some(self.queues.iter().map(|q| q.tx_drops).sum()),
            // Submitted to the tx ring and not yet back on the completion ring.
            tx_queued: Some(self.queues.iter().map(|q| q.in_flight as usize).sum()),
        }
    }

    fn poll(&mut self) -> Result<(), PortError> {
        for q in &mut self.queues {
            if q.in_flight > 0 {
                // Safety: completions return descriptors we produced on this UMEM.
                let n = unsafe { q.cq.consume(&mut self.scratch) };
                self.pool.put(&self.scratch[..n]);
                q.in_flight -= n as u32;
                if q.in_flight > 0 && q.tx.needs_wakeup() {
                    q.wake();
                }
            }
            refill(&self.pool, q, &mut self.fill);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk holds the headroom and a frame of the MTU with its Ethernet header and two
    /// tags: 2 KiB to MTU 1770, a page to 3818, and a clear error above.
    #[test]
    fn the_chunk_holds_the_mtus_frame() {
        assert_eq!(XdpPool::chunk_for_mtu(1500).unwrap(), 2048);
        assert_eq!(XdpPool::chunk_for_mtu(1770).unwrap(), 2048);
        assert_eq!(XdpPool::chunk_for_mtu(1771).unwrap(), 4096);
        assert_eq!(XdpPool::chunk_for_mtu(3502).unwrap(), 4096);
        assert_eq!(XdpPool::chunk_for_mtu(3818).unwrap(), 4096);
        let e = XdpPool::chunk_for_mtu(3819).unwrap_err().to_string();
        assert!(e.contains("MTU 3819") && e.contains("(MTU 3818)"), "{e}");
        assert!(XdpPool::chunk_for_mtu(9000).is_err());
    }
}
