//! Ports: where frames enter and leave quench; and the worker threads that poll them
//! ([`worker`]: pinning, idling, waiting) with the CPU cache hints they use ([`cache`]).
//!
//! Every kind of port (in-memory, AF_PACKET, AF_XDP, DPDK) implements one trait,
//! [`Port`], with burst receive and transmit and a declared set of [`Capabilities`]
//! (docs/style.md, "Ports", after smoltcp's `phy::Device`). Wrappers such as
//! [`capture::Capture`] take any port and are themselves ports.
//!
//! # Frame ownership
//! A frame is an owned handle, [`Port::Frame`], that implements [`Frame`]. Owning the handle is
//! owning the buffer: dropping it returns the buffer to the pool it came from (an AF_XDP UMEM
//! frame goes back on its worker's free list, a heap frame is freed). So "every frame is
//! forwarded or freed exactly once" is enforced by the type system: a frame is either moved into
//! a `tx_burst` or dropped.
//!
//! - Between ports of one kind, frames move without a copy: all AF_XDP ports of a worker share
//!   one UMEM, so a frame received on one is transmitted on another by passing its descriptor.
//! - Between kinds, a frame is copied exactly once, into a buffer of the destination kind
//!   ([`Port::import`]); the closed enum [`any::AnyPort`] does this dispatch with a `match`, never
//!   a `dyn` call per packet.
//! - A frame that must change core crosses on a lock-free ring as a [`heap::Carried`]
//!   ([`Frame::carry_into`] / [`Port::land`]): heap frames and DPDK mbufs move as they are;
//!   frames owned by a worker's pool (AF_XDP UMEM, `!Send`) are copied, a small one into the
//!   crossing itself ([`heap::Inline`]), and land in a buffer of the landing port's pool.
//!
//! # Call order
//! A worker calls, per iteration: `rx_burst` on its queues, then `tx_burst` with what it wants
//! sent, then `poll` (reclaims transmitted buffers, refills receive rings, kicks the kernel).
//! `tx_burst` takes frames from the front of the vector it is given and leaves those it could not
//! send (ring full) in place, in order: the caller keeps them for the next iteration or drops
//! them.
use quench_wire::MacAddr;
use std::fmt;
use std::mem::MaybeUninit;

pub mod any;
pub mod cache;
pub mod capture;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod heap;
pub mod kfp;
pub mod live;
pub mod mem;
pub mod netns;
pub mod packet;
pub mod probe;
pub mod worker;
pub mod xdp;

/// Largest frame any port here carries: a 1500-octet MTU Ethernet frame with two VLAN tags.
/// AF_XDP UMEM frames are 2048 octets (the kernel's minimum chunk size) minus headroom.
pub const MAX_FRAME: usize = 1522;

/// Burst size: frames moved per `rx_burst` / `tx_burst` call (DPDK l2fwd's MAX_PKT_BURST).
pub const BURST: usize = 32;

/// An owned frame buffer. Dropping it frees the buffer back to its pool.
pub trait Frame {
    /// The frame's octets, Ethernet header first, no FCS.
    fn data(&self) -> &[u8];
    /// Mutable view of the frame's octets (for rewriting headers, e.g. ECN marking).
    fn data_mut(&mut self) -> &mut [u8];
    /// Sets the frame length; `len` is clamped to the buffer's capacity, which is returned.
    fn set_len(&mut self, len: usize) -> usize;
    /// Length in octets.
    fn len(&self) -> usize {
        self.data().len()
    }
    /// True for a zero-length frame.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// When the kernel received the frame, for ports that ask it (AF_PACKET); `None` for the
    /// others, whose receive time is the poll loop's clock after the burst.
    fn rx_stamp(&self) -> Option<RxStamp> {
        None
    }
    /// This frame, ready to cross to another worker's core ([`Port::land`]s it): moved as it is
    /// when its buffer may be freed from any thread (a heap buffer, an mbuf), else copied to
    /// the heap (`None`: it could not be).
    fn into_carried(self) -> Option<heap::Carried>
    where
        Self: Sized,
    {
        heap::Carried::copy_of(self.data())
    }
    /// [`into_carried`](Self::into_carried), written into `dst` (a crossing's place in a ring
    /// slot) and returned from there; `None`, with `dst` not written, when it could not be.
    /// A frame that moves as itself writes its variant straight into `dst` (no whole
    /// [`heap::Carried`] built elsewhere and copied in).
    #[inline]
    fn carry_into(self, dst: &mut MaybeUninit<heap::Carried>) -> Option<&mut heap::Carried>
    where
        Self: Sized,
    {
        Some(dst.write(self.into_carried()?))
    }
    /// A frame that crossed, as a frame of this type when it is one (no copy); else handed
    /// back, for the landing port to [`import`](Port::import) ([`Port::land`]).
    fn from_carried(frame: heap::Carried) -> Result<Self, heap::Carried>
    where
        Self: Sized,
    {
        Err(frame)
    }
}

/// Where a received frame's time came from, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StampSource {
    /// The NIC's clock (SO_TIMESTAMPING raw hardware stamp), taken as the frame arrived.
    Hardware,
    /// The kernel's software stamp, taken as the driver handed the frame to the stack.
    Software,
    /// The kernel's clock when it copied the frame into the AF_PACKET ring.
    Ring,
}

impl StampSource {
    pub fn name(self) -> &'static str {
        match self {
            StampSource::Hardware => "kernel hardware",
            StampSource::Software => "kernel software",
            StampSource::Ring => "kernel ring",
        }
    }
}

/// A frame's receive time from the kernel, in [`quench_wire::time::shared_now`]'s time base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxStamp {
    pub at: units::Instant,
    pub source: StampSource,
}

/// How a port moves frames, as declared by the port itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortKind {
    /// In-process queues (tests, the simulator's glue).
    Mem,
    /// AF_PACKET sockets with mmap'd TPACKET rings.
    Packet,
    /// AF_XDP sockets.
    Xdp,
    /// DPDK poll-mode drivers.
    Dpdk,
}

impl fmt::Display for PortKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PortKind::Mem => "mem",
            PortKind::Packet => "af_packet",
            PortKind::Xdp => "af_xdp",
            PortKind::Dpdk => "dpdk",
        })
    }
}

/// What a port declares about itself once it is open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Interface or port name, as the user wrote it in the configuration.
    pub name: String,
    pub kind: PortKind,
    /// Receive queues this handle polls (queue ids `0..rx_queues` in `rx_burst`).
    pub rx_queues: u16,
    /// Transmit queues this handle feeds.
    pub tx_queues: u16,
    /// Largest frame the port carries, octets without FCS.
    pub max_frame: usize,
    /// Frames are handed to the device without a copy by the kernel (AF_XDP zero-copy, DPDK).
    pub zero_copy: bool,
    /// Human-readable mode, e.g. `native/copy`, `generic/copy`, `tpacket_v2`.
    pub mode: String,
    /// The port's MAC address, when it has one.
    pub mac: Option<MacAddr>,
}

/// Why a port operation failed. Transient conditions (ring full, nothing received) are not
/// errors: they show as fewer frames moved.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error("interface {name:?} does not exist (check `ip link` in this network namespace)")]
    NoSuchInterface { name: String },
    #[error("opening {name:?} needs root or CAP_NET_RAW/CAP_NET_ADMIN (running as uid {uid})")]
    Permission { name: String, uid: u32 },
    #[error(
        "cannot lock {needed} bytes of memory for {name:?}: RLIMIT_MEMLOCK is {limit} bytes; \
         raise it (`ulimit -l unlimited`) or run as root with CAP_IPC_LOCK"
    )]
    Memlock {
        name: String,
        needed: u64,
        limit: u64,
    },
    #[error(
        "another XDP program is attached to {name:?} (prog id {prog_id}); detach it with \
         `ip link set dev {name} xdp off` or start quench with --force-xdp to replace it"
    )]
    XdpConflict { name: String, prog_id: u32 },
    /// veth_xdp_set (drivers/net/veth.c) answers ERANGE ("Peer MTU is too large to set XDP")
    /// when the peer's MTU exceeds what one page holds after XDP's headroom and the
    /// skb_shared_info: `SKB_WITH_OVERHEAD(PAGE_SIZE - 256) - 14`, 3506 with 4 KiB pages.
    #[error(
        "the kernel refuses XDP on {name:?} at its MTU ({mtu}) or its peer's (ERANGE): a veth \
         with an XDP program takes a peer MTU of at most 3506 with 4 KiB pages; lower it \
         (`ip link set dev PEER mtu 3506`)"
    )]
    XdpMtu { name: String, mtu: String },
    #[error("{op} on {name:?} failed: {source}")]
    Io {
        name: String,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{name:?}: {what}")]
    Unsupported { name: String, what: String },
}

impl PortError {
    /// Classifies an OS error from opening `name` into the specific causes users can act on.
    pub fn from_open(name: &str, op: &'static str, e: std::io::Error) -> PortError {
        match e.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) => PortError::NoSuchInterface {
                name: name.to_string(),
            },
            Some(libc::EPERM) | Some(libc::EACCES) => PortError::Permission {
                name: name.to_string(),
                // Safety: getuid has no preconditions and cannot fail.
                uid: unsafe { libc::getuid() },
            },
            _ => PortError::Io {
                name: name.to_string(),
                op,
                source: e,
            },
        }
    }
}

/// What a port counts of its own, since it was opened ([`Port::stats`]): loss and backpressure
/// no counter of the engine's can see. Each is `None` when the port cannot tell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames the kernel (or, for DPDK, the device: `imissed`) dropped on their way to the
    /// port's receive rings (ring full, no free buffer).
    pub rx_kernel_drops: Option<u64>,
    /// Times the device refused a frame the port handed it (AF_PACKET: an ENOBUFS from the
    /// ring's send, e.g. a veth whose peer is down or whose backlog is full). The kernel puts
    /// the frame back in the ring and the next poll sends it again: backpressure, not loss.
    pub tx_refusals: Option<u64>,
    /// Frames the kernel took from the port and then dropped without sending them (AF_XDP in
    /// copy mode: the device refused the frame, e.g. a veth whose far end is down; the kernel
    /// completes it as if sent): lost after the engine counted them as sent. AF_PACKET never
    /// loses a frame this way.
    pub tx_kernel_drops: Option<u64>,
    /// Frames accepted by `tx_burst` that have not left yet (AF_PACKET: tx ring slots still
    /// waiting for the kernel; AF_XDP: not yet back on the completion ring).
    pub tx_queued: Option<usize>,
}

/// A place frames enter and leave: receive ([`rx_burst`](Port::rx_burst)), transmit
/// ([`tx_burst`](Port::tx_burst)), buffers ([`alloc`](Port::alloc), [`import`](Port::import),
/// [`land`](Port::land)), housekeeping ([`poll`](Port::poll)), one wait handle and one stats
/// struct. See the module docs for ownership and call order.
pub trait Port {
    /// The owned frame handle this port produces and consumes without copying.
    type Frame: Frame;

    /// What the port declared when it was opened.
    fn caps(&self) -> &Capabilities;

    /// Receives up to `max` frames from receive queue `queue`, appending them to `out`.
    /// Returns how many were appended (0 when nothing is waiting).
    fn rx_burst(
        &mut self,
        queue: u16,
        out: &mut Vec<Self::Frame>,
        max: usize,
    ) -> Result<usize, PortError>;

    /// Transmits frames from the front of `frames` on transmit queue `queue`, removing those
    /// handed to the device; the rest stay in `frames`, in order. Returns how many were sent.
    fn tx_burst(&mut self, queue: u16, frames: &mut Vec<Self::Frame>) -> Result<usize, PortError>;

    /// A blank frame of `len` octets from this port's pool, or `None` when the pool is empty
    /// or `len` exceeds the capacity. Used for frames the engine originates (PFC pause, CNMs)
    /// and for copying in frames of another kind.
    fn alloc(&mut self, len: usize) -> Option<Self::Frame>;

    /// Housekeeping between bursts: reclaim transmitted buffers, refill receive rings, wake the
    /// kernel if it sleeps. Bounded work; never blocks. Apart from the bursts because a loop
    /// calls it whether or not it received or sent anything (a port only sent on still has
    /// completions to reclaim; one only received on, rings to refill; a sender's last frames
    /// still want their kick after its last burst).
    fn poll(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    /// The port's wait handle: appends the descriptors that poll(2) reports readable (POLLIN)
    /// while a frame waits on one of its receive queues, so a loop with nothing to do may wait
    /// in the kernel on them ([`crate::worker::RxWait`]). None (the default) when the port
    /// cannot be waited on (in memory, DPDK): such a loop sleeps or spins instead.
    fn wait_handle(&self, _out: &mut Vec<std::os::fd::RawFd>) {}

    /// What the port itself counts ([`PortStats`]), each `None` when the port cannot tell. May
    /// be system calls and a ring scan: ask now and then, not per burst.
    fn stats(&mut self) -> PortStats {
        PortStats::default()
    }

    /// Copies `bytes` into a fresh frame of this kind (the one copy between port kinds).
    fn import(&mut self, bytes: &[u8]) -> Option<Self::Frame> {
        let mut f = self.alloc(bytes.len())?;
        f.data_mut().copy_from_slice(bytes);
        Some(f)
    }

    /// A frame that crossed from another worker, as a frame of this port: without a copy when
    /// it is of this port's frame type ([`Frame::from_carried`]), else
    /// [`import`](Self::import)ed.
    fn land(&mut self, frame: heap::Carried) -> Option<Self::Frame> {
        match Self::Frame::from_carried(frame) {
            Ok(f) => Some(f),
            Err(other) => self.import(other.data()),
        }
    }
}

/// Opens every kind of port from a textual spec, for the CLI and configuration files:
/// `mem:NAME`, `af_packet:IFACE`, `af_xdp:IFACE` (all queues), `af_xdp:IFACE@Q` (one queue).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSpec {
    pub kind: PortKind,
    pub iface: String,
    /// Restrict to one device queue; `None` means every queue the device has.
    pub queue: Option<u16>,
}

/// A port spec that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("bad port {0:?}: expected af_xdp:IFACE[@QUEUE], af_packet:IFACE or mem:NAME")]
pub struct PortSpecError(pub String);

impl PortSpec {
    pub fn parse(s: &str) -> Result<PortSpec, PortSpecError> {
        let err = || PortSpecError(s.to_string());
        let (kind, rest) = s.split_once(':').ok_or_else(err)?;
        let kind = match kind {
            "af_xdp" | "xdp" => PortKind::Xdp,
            "af_packet" | "packet" => PortKind::Packet,
            "mem" => PortKind::Mem,
            "dpdk" => PortKind::Dpdk,
            _ => return Err(err()),
        };
        let (iface, queue) = match rest.split_once('@') {
            Some((i, q)) => (i, Some(q.parse().map_err(|_| err())?)),
            None => (rest, None),
        };
        if iface.is_empty() || iface.len() > 15 {
            return Err(err());
        }
        Ok(PortSpec {
            kind,
            iface: iface.to_string(),
            queue,
        })
    }
}

impl fmt::Display for PortSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.iface)?;
        if let Some(q) = self.queue {
            write!(f, "@{q}")?;
        }
        Ok(())
    }
}

/// Looks up an interface index; `NoSuchInterface` when there is none.
pub fn if_index(name: &str) -> Result<u32, PortError> {
    let c = std::ffi::CString::new(name).map_err(|_| PortError::NoSuchInterface {
        name: name.to_string(),
    })?;
    // Safety: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(PortError::NoSuchInterface {
            name: name.to_string(),
        })
    } else {
        Ok(idx)
    }
}

/// Number of rx queues of an interface (1 when unknown). Asked of the kernel with ethtool's
/// ETHTOOL_GCHANNELS on a socket of the calling thread's network namespace, not read from
/// sysfs: /sys shows the namespace that mounted it, which is not this thread's after a
/// [`netns::in_netns`].
pub fn device_queues(name: &str) -> u16 {
    #[repr(C)]
    #[derive(Default)]
    struct EthtoolChannels {
        cmd: u32,
        max_rx: u32,
        max_tx: u32,
        max_other: u32,
        max_combined: u32,
        rx_count: u32,
        tx_count: u32,
        other_count: u32,
        combined_count: u32,
    }
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    let ok = with_ifreq(name, |fd, ifr| {
        ifr.ifr_ifru.ifru_data = (&mut ch as *mut EthtoolChannels).cast();
        // SAFETY: SIOCETHTOOL with a valid ifreq whose data points at a live ethtool_channels.
        unsafe { libc::ioctl(fd, libc::SIOCETHTOOL, ifr as *mut libc::ifreq) == 0 }
    })
    .unwrap_or(false);
    let n = if ok {
        ch.rx_count.max(ch.combined_count)
    } else {
        1
    };
    n.clamp(1, u16::MAX as u32) as u16
}

/// The interface's MAC address, when it has one: SIOCGIFHWADDR on a socket of the calling
/// thread's network namespace (see [`device_queues`] for why not sysfs).
pub fn device_mac(name: &str) -> Option<MacAddr> {
    with_ifreq(name, |fd, ifr| {
        // SAFETY: SIOCGIFHWADDR fills ifr_hwaddr of a valid ifreq.
        if unsafe { libc::ioctl(fd, libc::SIOCGIFHWADDR, ifr as *mut libc::ifreq) } != 0 {
            return None;
        }
        // SAFETY: the kernel just wrote the hardware address member of the union.
        let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
        if sa.sa_family != libc::ARPHRD_ETHER {
            return None;
        }
        let mut mac = [0u8; 6];
        for (m, b) in mac.iter_mut().zip(sa.sa_data.iter()) {
            *m = *b as u8;
        }
        Some(MacAddr::from(mac))
    })
    .flatten()
}

/// An integer attribute of a network device from sysfs (`/sys/class/net/NAME/ATTR`, e.g.
/// `statistics/tx_packets` or `gro_flush_timeout`), `None` when it cannot be read or parsed.
pub fn device_attr(name: &str, attr: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/{attr}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The frames device `name` has sent (`tx_packets`), as this thread's network namespace sees
/// it: read from `/proc/thread-self/net/dev`, which follows the calling thread's namespace
/// (sysfs shows the namespace it was mounted in, so a thread that entered another with setns
/// reads the wrong device there, or none). `None` when it cannot be read.
pub fn device_tx_packets(name: &str) -> Option<u64> {
    tx_packets_in(
        &std::fs::read_to_string("/proc/thread-self/net/dev").ok()?,
        name,
    )
}

/// `tx_packets` of `name` in the text of /proc/net/dev: after `NAME:`, eight receive counters,
/// then transmit bytes and packets.
fn tx_packets_in(dev: &str, name: &str) -> Option<u64> {
    dev.lines().find_map(|l| {
        let (iface, counters) = l.split_once(':')?;
        (iface.trim() == name).then(|| counters.split_whitespace().nth(9)?.parse().ok())?
    })
}

/// The interface's MTU (SIOCGIFMTU on a socket of this thread's network namespace, as
/// [`device_queues`] asks), `None` when it cannot be had.
pub fn device_mtu(name: &str) -> Option<u32> {
    with_ifreq(name, |fd, ifr| {
        // SAFETY: SIOCGIFMTU fills ifr_mtu of a valid ifreq.
        if unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, ifr as *mut libc::ifreq) } != 0 {
            return None;
        }
        // SAFETY: the kernel just wrote the MTU member of the union.
        u32::try_from(unsafe { ifr.ifr_ifru.ifru_mtu }).ok()
    })
    .flatten()
}

/// Runs `f` with a datagram socket of this thread's network namespace and an `ifreq` naming
/// `name`; `None` when the name does not fit or no socket can be had.
fn with_ifreq<T>(name: &str, f: impl FnOnce(i32, &mut libc::ifreq) -> T) -> Option<T> {
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= ifr.ifr_name.len() || bytes.contains(&0) {
        return None;
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a descriptor just opened and owned by nothing else; closed when dropped.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    Some(f(std::os::fd::AsRawFd::as_raw_fd(&fd), &mut ifr))
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<MacAddr> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in mac.iter_mut() {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(MacAddr::from(mac))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A /proc/net/dev line's tenth counter is the transmitted frames; a name is matched whole.
    #[test]
    fn tx_packets_are_the_tenth_counter_of_the_device_line() {
        let dev = "Inter-|   Receive                            |  Transmit\n \
                   face |bytes packets errs drop fifo frame compressed multicast|bytes packets\n\
                   \x20   lo:  100  2  0 0 0 0 0 0  100  2 0 0 0 0 0 0\n\
                   \x20 qn-a0: 6400 100 0 0 0 0 0 0 12800 200 0 0 0 0 0 0\n";
        assert_eq!(tx_packets_in(dev, "qn-a0"), Some(200));
        assert_eq!(tx_packets_in(dev, "lo"), Some(2));
        assert_eq!(tx_packets_in(dev, "qn-a"), None);
    }

    #[test]
    fn port_specs_parse() {
        assert_eq!(
            PortSpec::parse("af_xdp:veth0@1"),
            Ok(PortSpec {
                kind: PortKind::Xdp,
                iface: "veth0".into(),
                queue: Some(1)
            })
        );
        assert_eq!(
            PortSpec::parse("af_packet:eth0").map(|p| p.to_string()),
            Ok("af_packet:eth0".to_string())
        );
        assert!(PortSpec::parse("eth0").is_err());
        assert!(PortSpec::parse("af_xdp:").is_err());
        assert!(PortSpec::parse("af_xdp:x@y").is_err());
        assert!(PortSpec::parse("af_xdp:averyveryverylongname").is_err());
    }

    #[test]
    fn macs_parse() {
        assert_eq!(
            parse_mac("02:00:00:00:00:0a"),
            Some(MacAddr(2, 0, 0, 0, 0, 0x0a))
        );
        assert_eq!(parse_mac("02:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:00:00:00:00:00"), None);
        assert_eq!(parse_mac("zz:00:00:00:00:00"), None);
    }

    #[test]
    fn missing_interface_is_named() {
        let e = if_index("qn-no-such-if").unwrap_err();
        assert!(e.to_string().contains("qn-no-such-if"), "{e}");
    }
}
