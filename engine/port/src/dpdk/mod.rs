//! DPDK ports (cargo feature `dpdk`): poll-mode drivers behind the same [`Port`] trait as the
//! AF_XDP and AF_PACKET ports, over quench's own thin FFI layer ([`ffi`] + `shim.c`).
//!
//! # Invariants
//! - The EAL is initialised at most once per process ([`eal_init`]); every later call must ask
//!   for the same arguments, or gets [`DpdkError::EalMismatch`]. The EAL cannot be re-initialised
//!   after `rte_eal_cleanup`, so quench never calls it: the EAL lives as long as the process.
//! - Each DPDK port has one packet mempool, created on its first open and never freed. A
//!   [`DpdkFrame`] may therefore outlive the [`DpdkPort`] it came from: its buffer's pool is still
//!   there to take it back.
//! - A device queue is held by at most one [`DpdkPort`] at a time: a port opened whole holds
//!   them all, [`DpdkPort::open_queues`] holds the ones it names (one worker's share of a
//!   multi-queue port); asking for a queue already held is refused. The device is configured
//!   and started by the first handle and stopped when the last one is dropped.
//! - A [`DpdkFrame`] owns exactly one single-segment `rte_mbuf` and is `repr(transparent)` over
//!   the pointer, so `rx_burst` writes mbuf pointers straight into the caller's `Vec<DpdkFrame>`
//!   and `tx_burst` hands the vector's storage to the driver: no copy of frames, no temporary
//!   pointer array. Dropping a frame returns the mbuf to its pool (`rte_pktmbuf_free`).
//!   Multi-segment mbufs (a driver with scatter enabled) are dropped on receive and counted.
//!
//! # Threads
//! Ports and frames are `Send`-free by default (raw pointers); [`DpdkPort`] is `Send` so a worker
//! thread can own it. Threads that are not EAL lcores (quench's own workers) bypass the
//! mempool's per-lcore cache and use its multi-producer/multi-consumer ring, which is
//! thread-safe; each queue of a port must be polled by one thread at a time, which `&mut self`
//! and the per-queue holding above enforce. A worker thread may register itself as an lcore
//! ([`register_thread`]) to use the pools' per-lcore caches instead: two workers sharing one
//! pool's ring otherwise contend on its head and tail for every burst.
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int};
use std::ptr::NonNull;
use std::sync::{Mutex, OnceLock};

use serde::Deserialize;

use super::heap::Carried;
use super::{Capabilities, Frame, Port, PortError, PortKind, PortSpec, PortStats, MAX_FRAME};

pub mod ffi;

/// The `[dpdk]` table of a configuration file: EAL arguments and per-port resources.
///
/// ```toml
/// [dpdk]
/// eal = ["--no-huge", "-m", "256", "--no-pci", "--no-shconf", "--vdev=net_null0"]
/// ```
/// and ports named `dpdk:net_null0` in the port list.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DpdkConfig {
    /// Arguments to `rte_eal_init`, without the program name. Virtual devices come from
    /// `--vdev=...`; PMDs other than net_null, net_ring and net_af_packet (linked in) need
    /// `-d /usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0/librte_net_X.so`.
    pub eal: Vec<String>,
    /// Mbufs in each port's pool (DPDK recommends 2^k - 1).
    pub mbufs: u32,
    /// Per-lcore cache of each pool (EAL lcores only; 0 disables it).
    pub mbuf_cache: u32,
    /// Receive and transmit descriptors per queue (the driver may round it).
    pub descriptors: u16,
    /// Receive queues per port.
    pub rx_queues: u16,
    /// Transmit queues per port.
    pub tx_queues: u16,
}

/// Data room of each mbuf: DPDK's default (2048 octets of frame after 128 of headroom).
const DATA_ROOM: u16 = 2048 + 128;

impl Default for DpdkConfig {
    fn default() -> Self {
        DpdkConfig {
            eal: Vec::new(),
            mbufs: 8191,
            mbuf_cache: 256,
            descriptors: 1024,
            rx_queues: 1,
            tx_queues: 1,
        }
    }
}

impl DpdkConfig {
    /// Checks the parameters against each other; the error names the key.
    pub fn validate(&self) -> Result<(), DpdkError> {
        let bad = |key: &'static str, why: String| Err(DpdkError::Config { key, why });
        if self.rx_queues == 0 || self.tx_queues == 0 {
            return bad(
                "dpdk.rx_queues / dpdk.tx_queues",
                "must be at least 1".into(),
            );
        }
        if self.descriptors == 0 {
            return bad("dpdk.descriptors", "must be at least 1".into());
        }
        // Every receive descriptor holds an mbuf, and a burst in flight needs some more.
        let needed = u32::from(self.rx_queues) * u32::from(self.descriptors) + 2 * 1024;
        if self.mbufs < needed {
            return bad(
                "dpdk.mbufs",
                format!(
                    "{} is fewer than rx_queues x descriptors + 2048 = {needed}",
                    self.mbufs
                ),
            );
        }
        // rte_mempool_create: cache_size <= RTE_MEMPOOL_CACHE_MAX_SIZE and <= n / 1.5.
        if self.mbuf_cache > 512 || self.mbuf_cache as u64 * 3 > self.mbufs as u64 * 2 {
            return bad(
                "dpdk.mbuf_cache",
                format!("{} exceeds 512 or mbufs / 1.5", self.mbuf_cache),
            );
        }
        Ok(())
    }
}

/// Why the EAL or a DPDK port could not be brought up.
#[derive(Debug, thiserror::Error)]
pub enum DpdkError {
    #[error("{key}: {why}")]
    Config { key: &'static str, why: String },
    #[error("dpdk.eal: argument {0:?} contains a NUL octet")]
    EalArgument(String),
    #[error("rte_eal_init({args:?}) failed: {why} (see DPDK's EAL log above)")]
    EalInit { args: Vec<String>, why: String },
    #[error(
        "the DPDK EAL is already initialised with {have:?}; it runs once per process and cannot \
         take {want:?}"
    )]
    EalMismatch {
        have: Vec<String>,
        want: Vec<String>,
    },
    #[error(
        "no DPDK port named {0:?}: add `--vdev={0}` (or its PCI address) to the `eal` list of the \
         [dpdk] configuration"
    )]
    NoSuchPort(String),
    #[error("DPDK port {0:?} is already open in this process")]
    Busy(String),
    #[error("DPDK port {name:?}: {step} failed: {why}")]
    Setup {
        name: String,
        step: String,
        why: String,
    },
}

impl From<DpdkError> for PortError {
    fn from(e: DpdkError) -> PortError {
        let name = match &e {
            DpdkError::NoSuchPort(n) | DpdkError::Busy(n) => n.clone(),
            DpdkError::Setup { name, .. } => name.clone(),
            _ => "dpdk".to_string(),
        };
        PortError::Unsupported {
            name,
            what: e.to_string(),
        }
    }
}

/// DPDK's message for an errno value (positive or negative).
fn strerror(errnum: c_int) -> String {
    // Safety: rte_strerror accepts any value and returns a pointer to a NUL-terminated string
    // that stays valid at least until the next call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(ffi::rte_strerror(errnum.abs())) }
        .to_string_lossy()
        .into_owned()
}

/// The arguments the EAL was initialised with, or why that failed.
static EAL: OnceLock<Result<Vec<String>, String>> = OnceLock::new();

/// Initialises DPDK's EAL with `args` (without the program name), once per process.
///
/// Later calls return `Ok` when they ask for the same arguments, [`DpdkError::EalMismatch`]
/// otherwise, and repeat the first failure if there was one. The calling thread's CPU affinity
/// is restored afterwards: `rte_eal_init` pins it to the main lcore, and quench's workers choose
/// their own cores.
pub fn eal_init(args: &[String]) -> Result<(), DpdkError> {
    let mut first = false;
    let outcome = EAL.get_or_init(|| {
        first = true;
        init_once(args)
    });
    match outcome {
        Ok(have) if have == args => Ok(()),
        Ok(have) => Err(DpdkError::EalMismatch {
            have: have.clone(),
            want: args.to_vec(),
        }),
        Err(why) if first => Err(DpdkError::EalInit {
            args: args.to_vec(),
            why: why.clone(),
        }),
        Err(why) => Err(DpdkError::EalInit {
            args: args.to_vec(),
            why: format!("an earlier rte_eal_init failed: {why}"),
        }),
    }
}

fn init_once(args: &[String]) -> Result<Vec<String>, String> {
    let mut argv: Vec<*mut c_char> = Vec::with_capacity(args.len() + 2);
    for a in std::iter::once("quench").chain(args.iter().map(String::as_str)) {
        let c = CString::new(a).map_err(|_| DpdkError::EalArgument(a.to_string()).to_string())?;
        // The EAL may keep pointers into argv (device arguments), and it lives as long as the
        // process, so the strings are leaked on purpose (once per process).
        argv.push(c.into_raw());
    }
    argv.push(std::ptr::null_mut());
    let argv: &'static mut [*mut c_char] = Box::leak(argv.into_boxed_slice());
    let saved = affinity();
    // Safety: argv holds argc valid NUL-terminated strings followed by a NULL, leaked so they
    // outlive the EAL; rte_eal_init may permute the array, which nothing else reads. EAL
    // initialisation runs at most once per process (guarded by the OnceLock above).
    let rc = unsafe { ffi::rte_eal_init((argv.len() - 1) as c_int, argv.as_mut_ptr()) };
    if let Some(set) = saved {
        // Safety: `set` is a cpu_set_t filled by sched_getaffinity for this thread; pid 0 means
        // the calling thread.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    }
    if rc < 0 {
        // Safety: reads this thread's rte_errno, set by the failed rte_eal_init.
        let errno = unsafe { ffi::quench_dpdk_errno() };
        return Err(strerror(errno));
    }
    Ok(args.to_vec())
}

fn affinity() -> Option<libc::cpu_set_t> {
    // Safety: cpu_set_t is plain data for which all-zero is a valid (empty) set; pid 0 is the
    // calling thread and the size matches the buffer.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0)
            .then_some(set)
    }
}

/// Registers the calling thread as an EAL lcore (`rte_thread_register`), so that it allocates
/// and frees mbufs through the pools' per-lcore caches; quench's worker threads call it before
/// their first burst. Without it, every thread shares each pool's ring (correct, slower when
/// several workers use one pool).
pub fn register_thread() -> Result<(), DpdkError> {
    if !matches!(EAL.get(), Some(Ok(_))) {
        return Err(DpdkError::EalInit {
            args: Vec::new(),
            why: "registering a thread needs an initialised EAL".into(),
        });
    }
    // Safety: the EAL is initialised; the call only assigns this thread an lcore id.
    let rc = unsafe { ffi::rte_thread_register() };
    if rc != 0 {
        return Err(DpdkError::Setup {
            name: "lcore".into(),
            step: "rte_thread_register".into(),
            // Safety: reads this thread's rte_errno, set by the failed call.
            why: strerror(unsafe { ffi::quench_dpdk_errno() }),
        });
    }
    Ok(())
}

/// Hot-plugs a virtual device after EAL initialisation (`rte_dev_probe`), e.g.
/// `net_af_packet0,iface=veth0`. Drivers that open kernel objects (AF_PACKET sockets) do so in
/// the calling thread's network namespace.
pub fn probe_vdev(devargs: &str) -> Result<(), DpdkError> {
    let c = CString::new(devargs).map_err(|_| DpdkError::EalArgument(devargs.to_string()))?;
    if !matches!(EAL.get(), Some(Ok(_))) {
        return Err(DpdkError::EalInit {
            args: Vec::new(),
            why: format!("probing {devargs:?} needs an initialised EAL"),
        });
    }
    // Safety: the EAL is initialised and c is a valid NUL-terminated string (DPDK copies it).
    let rc = unsafe { ffi::rte_dev_probe(c.as_ptr()) };
    if rc != 0 {
        return Err(DpdkError::Setup {
            name: devargs.to_string(),
            step: "rte_dev_probe".into(),
            why: strerror(rc),
        });
    }
    Ok(())
}

/// A mempool pointer kept in the process-wide registry (pools are never freed).
struct Pool(NonNull<ffi::RteMempool>);
// Safety: a DPDK mempool is designed to be shared between threads (multi-producer,
// multi-consumer ring underneath); the registry only stores and hands out the pointer.
unsafe impl Send for Pool {}

struct Registry {
    pools: HashMap<u16, Pool>,
    /// Per started port: the device queues held by open handles.
    open: HashMap<u16, HashSet<u16>>,
}

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    static REG: OnceLock<Mutex<Registry>> = OnceLock::new();
    REG.get_or_init(|| {
        Mutex::new(Registry {
            pools: HashMap::new(),
            open: HashMap::new(),
        })
    })
    .lock()
    .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One frame in an `rte_mbuf`, owned: dropping it frees the mbuf back to its pool.
#[repr(transparent)]
pub struct DpdkFrame(NonNull<ffi::RteMbuf>);

// Safety: a frame owns its mbuf exclusively, and freeing an mbuf from any thread is sound: the
// pools are multi-producer / multi-consumer (quench_dpdk_pool_create passes no single-thread
// flags), and a thread that is not an EAL lcore bypasses the per-lcore caches. This is what
// lets a frame cross to another worker ([`Frame::into_carried`]) without a copy.
unsafe impl Send for DpdkFrame {}

impl DpdkFrame {
    fn field<T: Copy>(&self, offset: usize) -> T {
        // Safety: the frame owns a live rte_mbuf; `offset` is one of ffi's MBUF_* offsets,
        // checked against the C struct by shim.c's _Static_asserts, and T is that field's type.
        unsafe { self.0.as_ptr().cast::<u8>().add(offset).cast::<T>().read() }
    }
    fn set_field<T: Copy>(&mut self, offset: usize, v: T) {
        // Safety: as in `field`; the frame owns the mbuf exclusively, so nothing else writes it.
        unsafe {
            self.0
                .as_ptr()
                .cast::<u8>()
                .add(offset)
                .cast::<T>()
                .write(v)
        }
    }
    /// Octets the buffer can hold from the frame's start (`rte_pktmbuf_tailroom` + data_len).
    fn capacity(&self) -> usize {
        let buf_len: u16 = self.field(ffi::MBUF_BUF_LEN);
        let data_off: u16 = self.field(ffi::MBUF_DATA_OFF);
        usize::from(buf_len.saturating_sub(data_off))
    }
    fn start(&self) -> *mut u8 {
        let buf: *mut u8 = self.field(ffi::MBUF_BUF_ADDR);
        let data_off: u16 = self.field(ffi::MBUF_DATA_OFF);
        // Safety: rte_pktmbuf_mtod: data_off is within the buffer (DPDK keeps
        // data_off <= buf_len), so the result stays inside the mbuf's buffer.
        unsafe { buf.add(usize::from(data_off)) }
    }
    fn segments(&self) -> u16 {
        self.field(ffi::MBUF_NB_SEGS)
    }
    /// Starts loading the mbuf's two header cache lines (the fields the switch and the
    /// driver's free read: lengths, data offset, reference count; pool and next segment): a
    /// frame that crossed from another core has them in that core's cache, and a burst's
    /// loads overlap when issued ahead of the frames' use.
    pub fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let p = self.0.as_ptr().cast::<i8>();
            // Safety: a prefetch is a hint that never faults nor changes memory; both lines
            // belong to the live mbuf (struct rte_mbuf is two cache lines).
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(p);
                _mm_prefetch::<_MM_HINT_T0>(p.add(64));
            }
        }
    }
    /// The raw mbuf, still owned by the frame.
    pub fn as_mbuf(&self) -> *mut ffi::RteMbuf {
        self.0.as_ptr()
    }
}

impl Frame for DpdkFrame {
    fn data(&self) -> &[u8] {
        let len: u16 = self.field(ffi::MBUF_DATA_LEN);
        // Safety: a single-segment mbuf's data_len octets from mtod are initialised (written by
        // the driver on receive, zeroed by `alloc`) and lie inside the buffer the frame owns;
        // the borrow of self keeps the mbuf alive and unmodified.
        unsafe { std::slice::from_raw_parts(self.start(), usize::from(len)) }
    }
    fn data_mut(&mut self) -> &mut [u8] {
        let len: u16 = self.field(ffi::MBUF_DATA_LEN);
        // Safety: as in `data`, and the exclusive borrow of self makes the view unique.
        unsafe { std::slice::from_raw_parts_mut(self.start(), usize::from(len)) }
    }
    fn set_len(&mut self, len: usize) -> usize {
        let old = usize::from(self.field::<u16>(ffi::MBUF_DATA_LEN));
        let len = len.min(self.capacity()).min(MAX_FRAME.max(old));
        if len > old {
            // Safety: [old, len) lies inside the buffer (len <= capacity); zeroing it keeps
            // every octet `data` exposes initialised.
            unsafe { std::ptr::write_bytes(self.start().add(old), 0, len - old) };
        }
        self.set_field(ffi::MBUF_DATA_LEN, len as u16);
        self.set_field(ffi::MBUF_PKT_LEN, len as u32);
        len
    }
    #[inline]
    fn into_carried(self) -> Option<Carried> {
        Some(Carried::Dpdk(self))
    }
    #[inline]
    fn carry_into(self, dst: &mut std::mem::MaybeUninit<Carried>) -> Option<&mut Carried> {
        Some(dst.write(Carried::Dpdk(self)))
    }
    #[inline]
    fn from_carried(frame: Carried) -> Result<DpdkFrame, Carried> {
        match frame {
            Carried::Dpdk(f) => Ok(f),
            other => Err(other),
        }
    }
}

impl Drop for DpdkFrame {
    fn drop(&mut self) {
        // Safety: the frame owns the mbuf (it came from the driver or the pool and was not
        // handed to tx), so freeing it once here is the one release.
        unsafe { ffi::quench_dpdk_free(self.0.as_ptr()) }
    }
}

/// Counters a DPDK port keeps (read with [`DpdkPort::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DpdkStats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// Multi-segment mbufs dropped on receive (quench handles single-segment frames only).
    pub rx_multi_segment: u64,
    /// `alloc` found the pool empty.
    pub alloc_failed: u64,
}

/// A started DPDK ethdev port. Stopped (not closed: a vdev could not be found again) on drop.
pub struct DpdkPort {
    caps: Capabilities,
    port_id: u16,
    /// Device queue of each local queue index (receive and transmit alike; a transmit queue
    /// index past the device's count wraps onto its queues).
    queues: Vec<u16>,
    tx_queues: u16,
    pool: NonNull<ffi::RteMempool>,
    stats: DpdkStats,
}

impl std::fmt::Debug for DpdkPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpdkPort")
            .field("name", &self.caps.name)
            .field("port_id", &self.port_id)
            .field("stats", &self.stats)
            .finish()
    }
}

impl std::fmt::Debug for DpdkFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpdkFrame")
            .field("mbuf", &self.0)
            .field("len", &self.len())
            .finish()
    }
}

// Safety: the port id and pool pointer may be used from any thread (see the module docs,
// Threads); `&mut self` on every burst call keeps one thread per queue.
unsafe impl Send for DpdkPort {}

impl DpdkPort {
    /// An mbuf of the pool with room for `len` octets (at most [`MAX_FRAME`]) and no data yet,
    /// or `None` (the pool is empty: counted; `len` too large: the mbuf goes back).
    fn alloc_empty(&mut self, len: usize) -> Option<DpdkFrame> {
        // Safety: the pool is live for the process; a non-null result is an mbuf we now own,
        // reset by rte_pktmbuf_alloc (data_len 0, one segment, default headroom).
        let m = unsafe { ffi::quench_dpdk_alloc(self.pool.as_ptr()) };
        let Some(m) = NonNull::new(m) else {
            self.stats.alloc_failed += 1;
            return None;
        };
        let f = DpdkFrame(m);
        (len <= f.capacity() && len <= MAX_FRAME).then_some(f)
    }

    /// Opens the port a `dpdk:NAME` spec names, initialising the EAL from `cfg` if needed.
    pub fn open_spec(spec: &PortSpec, cfg: &DpdkConfig) -> Result<DpdkPort, DpdkError> {
        if let Some(q) = spec.queue {
            return Err(DpdkError::Config {
                key: "port",
                why: format!(
                    "{spec}: a DPDK port polls all its queues (dpdk.rx_queues), not queue {q}"
                ),
            });
        }
        DpdkPort::open(&spec.iface, cfg)
    }

    /// Opens ethdev `name` (a vdev name such as `net_null0`, or a PCI address), initialising
    /// the EAL with `cfg.eal` on first use, and starts it with `cfg`'s queues and pool. The
    /// handle holds every queue.
    pub fn open(name: &str, cfg: &DpdkConfig) -> Result<DpdkPort, DpdkError> {
        DpdkPort::open_queues(name, cfg, None)
    }

    /// Like [`open`](Self::open), holding only the device queues `queues` (each a receive and
    /// a transmit queue: local index `i` in `rx_burst` / `tx_burst` is device queue
    /// `queues[i]`), so that several workers share a port, one queue pair each. The first
    /// handle of a port configures and starts the device with all of `cfg`'s queues.
    pub fn open_queues(
        name: &str,
        cfg: &DpdkConfig,
        queues: Option<&[u16]>,
    ) -> Result<DpdkPort, DpdkError> {
        cfg.validate()?;
        let queues: Vec<u16> = match queues {
            Some(q) => {
                if let Some(&bad) = q
                    .iter()
                    .find(|&&x| x >= cfg.rx_queues || x >= cfg.tx_queues)
                {
                    return Err(DpdkError::Config {
                        key: "dpdk.rx_queues / dpdk.tx_queues",
                        why: format!(
                            "{name}: queue {bad} asked for, the port has {} receive and {} \
                             transmit queues",
                            cfg.rx_queues, cfg.tx_queues
                        ),
                    });
                }
                q.to_vec()
            }
            None => (0..cfg.rx_queues).collect(),
        };
        eal_init(&cfg.eal)?;
        let cname = CString::new(name).map_err(|_| DpdkError::NoSuchPort(name.to_string()))?;
        let mut port_id = 0u16;
        // Safety: cname is a valid NUL-terminated string and port_id a valid out pointer; the
        // EAL is initialised.
        if unsafe { ffi::rte_eth_dev_get_port_by_name(cname.as_ptr(), &mut port_id) } != 0 {
            return Err(DpdkError::NoSuchPort(name.to_string()));
        }
        let mut reg = registry();
        if let Some(held) = reg.open.get_mut(&port_id) {
            // Started by an earlier handle: take the queues if they are free.
            if queues.iter().any(|q| held.contains(q)) {
                return Err(DpdkError::Busy(name.to_string()));
            }
            held.extend(queues.iter().copied());
            let pool = reg.pools.get(&port_id).map(|p| p.0);
            let pool = pool.ok_or_else(|| DpdkError::Busy(name.to_string()))?;
            let mut mac = [0u8; 6];
            // Safety: port_id names a started ethdev and mac has room for 6 octets.
            unsafe { ffi::rte_eth_macaddr_get(port_id, mac.as_mut_ptr()) };
            return Ok(DpdkPort::handle(name, port_id, pool, mac, queues, cfg));
        }
        reg.open
            .insert(port_id, queues.iter().copied().collect::<HashSet<u16>>());
        let mut setup = || -> Result<(NonNull<ffi::RteMempool>, [u8; 6]), DpdkError> {
            let pool = match reg.pools.get(&port_id) {
                Some(p) => p.0,
                None => {
                    let pool = create_pool(name, port_id, cfg)?;
                    reg.pools.insert(port_id, Pool(pool));
                    pool
                }
            };
            let mut mac = [0u8; 6];
            let mut step: *const c_char = std::ptr::null();
            // Safety: the EAL is up, port_id names an ethdev that no other DpdkPort holds,
            // pool is a live mempool, mac has room for 6 octets and step is a valid out pointer
            // that the shim sets to a static string.
            let rc = unsafe {
                ffi::quench_dpdk_port_setup(
                    port_id,
                    cfg.rx_queues,
                    cfg.tx_queues,
                    cfg.descriptors,
                    pool.as_ptr(),
                    mac.as_mut_ptr(),
                    &mut step,
                )
            };
            if rc != 0 {
                let step = if step.is_null() {
                    "port set-up".to_string()
                } else {
                    // Safety: the shim only stores pointers to static NUL-terminated strings.
                    unsafe { CStr::from_ptr(step) }
                        .to_string_lossy()
                        .into_owned()
                };
                return Err(DpdkError::Setup {
                    name: name.to_string(),
                    step,
                    why: strerror(rc),
                });
            }
            Ok((pool, mac))
        };
        let res = setup();
        if res.is_err() {
            reg.open.remove(&port_id);
        }
        let (pool, mac) = res?;
        Ok(DpdkPort::handle(name, port_id, pool, mac, queues, cfg))
    }

    fn handle(
        name: &str,
        port_id: u16,
        pool: NonNull<ffi::RteMempool>,
        mac: [u8; 6],
        queues: Vec<u16>,
        cfg: &DpdkConfig,
    ) -> DpdkPort {
        let n = queues.len() as u16;
        DpdkPort {
            caps: Capabilities {
                name: name.to_string(),
                kind: PortKind::Dpdk,
                rx_queues: n,
                tx_queues: n.min(cfg.tx_queues),
                max_frame: MAX_FRAME,
                zero_copy: true,
                mode: "pmd".to_string(),
                mac: Some(quench_wire::MacAddr::from(mac)),
            },
            port_id,
            queues,
            tx_queues: cfg.tx_queues,
            pool,
            stats: DpdkStats::default(),
        }
    }

    /// The ethdev port id.
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// Frames received and sent since the port was opened.
    pub fn frame_counts(&self) -> DpdkStats {
        self.stats
    }

    /// Mbufs currently free in this port's pool (for leak checks).
    pub fn pool_available(&self) -> u32 {
        // Safety: the pool is live for the process (never freed).
        unsafe { ffi::rte_mempool_avail_count(self.pool.as_ptr()) }
    }
}

fn create_pool(
    name: &str,
    port_id: u16,
    cfg: &DpdkConfig,
) -> Result<NonNull<ffi::RteMempool>, DpdkError> {
    let pname = CString::new(format!("quench_p{port_id}")).map_err(|_| DpdkError::Setup {
        name: name.to_string(),
        step: "pool name".into(),
        why: "NUL in name".into(),
    })?;
    // The shim packs mbufs across 4 KiB pages when that is safe (see quench_dpdk_pool_create).
    // Safety: the EAL is initialised; pname is a valid NUL-terminated string (DPDK copies it).
    let mp = unsafe {
        ffi::quench_dpdk_pool_create(
            pname.as_ptr(),
            cfg.mbufs,
            cfg.mbuf_cache,
            DATA_ROOM,
            ffi::SOCKET_ID_ANY,
        )
    };
    NonNull::new(mp).ok_or_else(|| DpdkError::Setup {
        name: name.to_string(),
        step: format!("rte_pktmbuf_pool_create({} mbufs)", cfg.mbufs),
        // Safety: reads this thread's rte_errno, set by the failed pool creation.
        why: strerror(unsafe { ffi::quench_dpdk_errno() }),
    })
}

impl Drop for DpdkPort {
    fn drop(&mut self) {
        let mut reg = registry();
        let last = match reg.open.get_mut(&self.port_id) {
            Some(held) => {
                for q in &self.queues {
                    held.remove(q);
                }
                held.is_empty()
            }
            None => true,
        };
        if last {
            // Safety: the port was started by the first handle and no other handle is left.
            // Stopping releases the mbufs the driver holds back to the pool, which outlives
            // the port.
            unsafe { ffi::rte_eth_dev_stop(self.port_id) };
            reg.open.remove(&self.port_id);
        }
    }
}

impl Port for DpdkPort {
    type Frame = DpdkFrame;

    fn caps(&self) -> &Capabilities {
        &self.caps
    }

    fn stats(&mut self) -> PortStats {
        // Safety: port_id names the ethdev this port holds; the call only reads its counters.
        let n = unsafe { ffi::quench_dpdk_imissed(self.port_id) };
        PortStats {
            rx_kernel_drops: u64::try_from(n).ok(),
            ..PortStats::default()
        }
    }

    fn rx_burst(
        &mut self,
        queue: u16,
        out: &mut Vec<DpdkFrame>,
        max: usize,
    ) -> Result<usize, PortError> {
        let Some(&queue) = self.queues.get(usize::from(queue)) else {
            return Ok(0);
        };
        let max = max.min(usize::from(u16::MAX));
        out.reserve(max);
        let old = out.len();
        // Safety: `out` has room for `max` more elements after `old`; DpdkFrame is
        // repr(transparent) over a non-null `*mut rte_mbuf`, so the driver can write mbuf
        // pointers straight into the spare capacity. rte_eth_rx_burst writes exactly `n`
        // non-null pointers, each an mbuf now owned by us, and set_len exposes just those.
        let n = unsafe {
            let slots = out.as_mut_ptr().add(old).cast::<*mut ffi::RteMbuf>();
            let n = ffi::quench_dpdk_rx_burst(self.port_id, queue, slots, max as u16);
            out.set_len(old + usize::from(n));
            usize::from(n)
        };
        let mut kept = n;
        // One OR over the burst rather than `any`: no early-exit branch per frame.
        if out[old..].iter().fold(0, |acc, f| acc | (f.segments() ^ 1)) != 0 {
            let tail = out.split_off(old);
            for f in tail {
                if f.segments() == 1 {
                    out.push(f);
                } else {
                    kept -= 1;
                    self.stats.rx_multi_segment += 1;
                }
            }
        }
        self.stats.rx_frames += kept as u64;
        Ok(kept)
    }

    fn tx_burst(&mut self, queue: u16, frames: &mut Vec<DpdkFrame>) -> Result<usize, PortError> {
        let Some(&queue) = self.queues.get(usize::from(queue)) else {
            return Ok(0);
        };
        let queue = queue % self.tx_queues;
        let len = frames.len();
        let mut sent = 0usize;
        while sent < len {
            let want = (len - sent).min(usize::from(u16::MAX)) as u16;
            // Safety: frames[sent..] are owned mbufs laid out as `*mut rte_mbuf` (DpdkFrame is
            // repr(transparent)); the driver takes ownership of the first `n` it reports.
            let n = unsafe {
                let slots = frames.as_mut_ptr().add(sent).cast::<*mut ffi::RteMbuf>();
                ffi::quench_dpdk_tx_burst(self.port_id, queue, slots, want)
            };
            sent += usize::from(n);
            if n < want {
                break;
            }
        }
        if sent > 0 {
            // Safety: the first `sent` elements now belong to the driver and must not be
            // dropped: the unsent tail is moved to the front (ranges may overlap, hence copy)
            // and the length shrunk, which forgets the sent ones without running Drop.
            unsafe {
                let p = frames.as_mut_ptr();
                std::ptr::copy(p.add(sent), p, len - sent);
                frames.set_len(len - sent);
            }
        }
        self.stats.tx_frames += sent as u64;
        Ok(sent)
    }

    fn alloc(&mut self, len: usize) -> Option<DpdkFrame> {
        let mut f = self.alloc_empty(len)?;
        f.set_len(len);
        Some(f)
    }

    /// Copies `bytes` into an mbuf of this port's pool (from this thread's lcore cache when it
    /// is an EAL lcore): written once, not zeroed first as [`alloc`](Port::alloc) does.
    fn import(&mut self, bytes: &[u8]) -> Option<DpdkFrame> {
        let mut f = self.alloc_empty(bytes.len())?;
        // Safety: `alloc_empty` checked bytes.len() against the buffer's room from the frame's
        // start, which the frame owns exclusively; source and destination do not overlap (the
        // mbuf was in the pool, `bytes` is borrowed from elsewhere).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), f.start(), bytes.len()) };
        f.set_field(ffi::MBUF_DATA_LEN, bytes.len() as u16);
        f.set_field(ffi::MBUF_PKT_LEN, bytes.len() as u32);
        Some(f)
    }
}
