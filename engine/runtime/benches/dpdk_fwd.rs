//! quench's side of scripts/bench/bench-dpdk.sh: the switch's own worker loop
//! ([`quench_runtime::switch::forward::Worker`], what `quench switch` runs per core) over two net_null
//! DPDK ports, printing `quench mpps=<Mpps>`. The peer is engine/runtime/benches/dpdk_fwd.c (the bare C
//! loop: rx on one port, tx on the other, both directions), run by the script in the same
//! invocation with the same EAL arguments.
//!
//! Per `Worker::poll`: one clock read; per port, `rx_burst` into a `Vec<DpdkFrame>` (mbuf
//! pointers, no copy). Per burst, a first sweep in frame order: a frame whose L2 headers equal the
//! previous frame's (a masked compare of its first 16 or 32 octets) joins that frame's run; any
//! other is classified (`wire::ethernet::walk`: 802.1p class), its source learned and its
//! destination looked up in the MAC table (small memos first, then the hash), starting a new
//! run when the destination differs. Then per run for one egress queue, one cut-through check
//! (`EgressQueue::may_pass`) and one counter update, or `OwnedPort::enqueue` frame by frame when
//! the queue holds frames (and for flooded, filtered and PFC-accounted frames). Per port,
//! `dequeue` up to a burst and `tx_burst`; receive counters once per port per poll, queue
//! counters published every millisecond. The ports' mbuf pools are quench's own
//! (`quench_dpdk_pool_create`: packed across 4 KiB pages without hugepages).
//!
//! `--mix` measures a realistic mix instead of one repeated header (see [`mix`]): two ports made
//! with `rte_eth_from_rings` whose rings are crossed, holding frames between 1,024 stations on
//! each side, 64, 576 or 1500 octets long. The C loop builds the same ports and the same
//! frames with its own `--mix`.
//!
//! `--ports NAME0,NAME1` forwards between two ethdevs the EAL arguments create, their frames as
//! the driver gives them (nothing written into the pool): scripts/bench/bench-dpdk.sh gives two
//! net_pcap ports replaying the mix from the capture files `--write-mix DIR` writes
//! (DIR/mix0.pcap for port 0, DIR/mix1.pcap), the ports Open vSwitch forwards on as well.
//! Prints `quench_ports mpps=<Mpps>`.
//!
//! `--workers N` (net_null only) runs N workers, each on its own thread and core (`--cores
//! A,B,...`, default: the `-l` CPU and the ones after it), each holding one receive / transmit
//! queue pair of both ports (`DpdkPort::open_queues`: the ports get 2N queues, worker `w` takes
//! pair 2w + 1, see [`null_queue`]) and registered as
//! an EAL lcore (mbuf caches per worker). A receive callback writes each received frame's
//! Ethernet header ([`stamp_headers`]), as a NIC writes what it receives. Every worker holds
//! both ports' egress, so no frame changes core; with `--cross`, worker `w` holds only port
//! `w % 2`'s egress (as for a paced port), so the frames a worker receives for the other port,
//! half of them, cross to the worker holding it on the lock-free ring. `--cp` gives both ports
//! a congestion point (QCN with its MIB defaults on priority 0, the frames' priority: every
//! frame goes through the egress queue and the CP, no cut-through) as `quench switch` runs
//! one: every worker holds both ports' egress with its own congestion point on its own queue,
//! deciding on the port's depth summed over the workers (`switch::depth`); each port's
//! traffic comes from both workers and nothing crosses. `--cp-local` is the same without the
//! sum (each CP sees only its worker's queue: not a correct switch, the bound of `--cp`).
//! `--cp-cross` is the design before the sum: each port's egress on one worker and
//! (n - 1)/n of the frames crossing to it (as a paced port's still do), moved as mbufs.
//! `--one-thread` polls the N
//! workers in turn on one thread and core: the crossing's instructions without a line
//! changing core (and without a worker descheduled while another fills its ring). Prints
//! `quench_workers workers=N cross=0|1 cp=none|shared|local|cross one_thread=0|1
//! ... mpps=<Mpps>`.
//!
//! Usage: `cargo bench -p quench-runtime --features dpdk --bench dpdk_fwd -- SECONDS [--mix |
//! --ports NAME0,NAME1] [--workers N [--cross] [--cp | --cp-local | --cp-cross] [--one-thread]
//! [--cores LIST]] EAL-ARGS...` (EAL args must create net_null0
//! and net_null1, or the ports of --ports; `-l CPU` also pins this thread to CPU, as
//! rte_eal_init pins the C loop's main thread), or `... --bench dpdk_fwd -- --write-mix DIR`.
use std::sync::atomic::Ordering;
use std::sync::Arc;

use cp::qcn::{QcnCpParams, QcnCpProfile};
use quench_node::switch::core::CpProfiles;
use quench_node::switch::cp::CpHook;
use quench_node::switch::depth::SharedDepth;
use quench_node::switch::fdb::DEFAULT_AGEING;
use quench_node::switch::fdb::{Fdb, DEFAULT_CAPACITY};
use quench_node::switch::queue::QueueLimits;
use quench_port::dpdk::{self, ffi, DpdkConfig, DpdkPort};
use quench_port::{Frame, Port};
use quench_runtime::switch::forward::{links, OwnedPort, Worker};
use quench_runtime::switch::stats::PortCounters;
use quench_wire::time::Clock;
use rand_xoshiro::rand_core::SeedableRng;
use units::Instant;

/// Station behind port 0 and station behind port 1.
const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

/// Writes an Ethernet header (`dst`, `src`, EtherType 0x88b5) into every mbuf of `port`'s pool:
/// net_null hands out pool mbufs without writing them, and a zero EtherType would be a
/// malformed (802.3 length) frame. After the first frames each way, both stations are learned
/// and every frame takes the known-unicast path.
fn prime(port: &mut DpdkPort, dst: [u8; 6], src: [u8; 6]) {
    let mut all = Vec::new();
    while let Some(mut f) = port.alloc(64) {
        let d = f.data_mut();
        d[..6].copy_from_slice(&dst);
        d[6..12].copy_from_slice(&src);
        d[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        all.push(f);
    }
}

/// The header [`stamp_headers`] writes into each frame received on net_null0 and net_null1.
static HEADERS: [[u8; 14]; 2] = [header(B, A), header(A, B)];

const fn header(dst: [u8; 6], src: [u8; 6]) -> [u8; 14] {
    let mut h = [0u8; 14];
    let mut k = 0;
    while k < 6 {
        h[k] = dst[k];
        h[6 + k] = src[k];
        k += 1;
    }
    h[12] = 0x88;
    h[13] = 0xb5;
    h
}

extern "C" {
    /// rte_ethdev.h (DPDK 22.11): runs `f` on every burst `rte_eth_rx_burst` returns from
    /// (`port`, `queue`).
    fn rte_eth_add_rx_callback(
        port: u16,
        queue: u16,
        f: extern "C" fn(u16, u16, *mut *mut ffi::RteMbuf, u16, u16, *mut std::ffi::c_void) -> u16,
        user: *mut std::ffi::c_void,
    ) -> *const std::ffi::c_void;
}

/// The receive callback of `--workers`: writes the port's frame header (`*user`, 14 octets)
/// into each received mbuf, as a NIC writes the frames it receives. net_null hands out pool
/// mbufs as they are; [`prime`]'s headers stay right only while an mbuf keeps to its port's
/// pool and its content.
extern "C" fn stamp_headers(
    _port: u16,
    _queue: u16,
    pkts: *mut *mut ffi::RteMbuf,
    n: u16,
    _max: u16,
    user: *mut std::ffi::c_void,
) -> u16 {
    for k in 0..usize::from(n) {
        // Safety: DPDK hands over the burst's `n` mbuf pointers, each a live single-segment mbuf
        // this receive call owns, with at least 14 octets of room from its data offset (64 on
        // net_null); `user` is one of the `HEADERS` (static, 14 octets); the offsets are ffi's,
        // checked against the C struct by shim.c.
        unsafe {
            let m = (*pkts.add(k)).cast::<u8>();
            let buf = m.add(ffi::MBUF_BUF_ADDR).cast::<*mut u8>().read();
            let off = m.add(ffi::MBUF_DATA_OFF).cast::<u16>().read();
            std::ptr::copy_nonoverlapping(
                user.cast::<u8>().cast_const(),
                buf.add(usize::from(off)),
                14,
            );
        }
    }
    n
}

/// The realistic mix: stations, frames per direction and their lengths. The C loop
/// (engine/runtime/benches/dpdk_fwd.c, `--mix`) uses the same constants and the same generator.
mod mix {
    use std::ffi::{c_char, c_int, c_uint, c_void, CString};

    use quench_port::dpdk::DpdkPort;
    use quench_port::{Frame, Port};

    /// Stations on each side: sources on one port are destinations on the other.
    pub const STATIONS: u32 = 1024;
    /// Frames circulating in each direction (each ring holds one direction's frames).
    pub const FRAMES: u32 = 2048;
    /// Frame lengths (octets in the mbuf), drawn uniformly.
    pub const LENS: [usize; 3] = [64, 576, 1500];
    const RING_SLOTS: c_uint = 4096;
    /// RING_F_SP_ENQ | RING_F_SC_DEQ (rte_ring_core.h): one thread enqueues and dequeues.
    const RING_FLAGS: c_uint = 0x0001 | 0x0002;
    const SOCKET_ID_ANY: c_int = -1;

    extern "C" {
        fn rte_ring_create(
            name: *const c_char,
            count: c_uint,
            socket_id: c_int,
            flags: c_uint,
        ) -> *mut c_void;
        fn rte_eth_from_rings(
            name: *const c_char,
            rx_queues: *const *mut c_void,
            nb_rx_queues: c_uint,
            tx_queues: *const *mut c_void,
            nb_tx_queues: c_uint,
            numa_node: c_uint,
        ) -> c_int;
    }

    /// xorshift32 (Marsaglia 2003), seeded 1: the frame sequence both loops build.
    pub fn next(x: &mut u32) -> u32 {
        *x ^= *x << 13;
        *x ^= *x >> 17;
        *x ^= *x << 5;
        *x
    }

    /// Station `k` on side `side` (0x0a: behind port 0, 0x0b: behind port 1).
    pub fn mac(side: u8, k: u32) -> [u8; 6] {
        [0x02, 0, 0, side, (k >> 8) as u8, k as u8]
    }

    /// Creates ethdevs `net_ring_mix0` and `net_ring_mix1` (rte_eth_from_rings prefixes the name
    /// with `net_ring_`) over two rings, crossed: mix0 receives from ring X and
    /// transmits into ring Y, mix1 receives from Y and transmits into X. A frame mix0 forwards
    /// to mix1 is therefore received on mix0 again with the same headers, so its source stays
    /// behind the same port and the forwarding table never sees a station move; the frames
    /// circulate with no allocation and no free, as they would between two NICs.
    pub fn create_ports() -> anyhow::Result<()> {
        let ring = |name: &str| {
            let n = CString::new(name).unwrap_or_default();
            // Safety: the EAL is initialised; the name is a NUL-terminated string.
            let r = unsafe { rte_ring_create(n.as_ptr(), RING_SLOTS, SOCKET_ID_ANY, RING_FLAGS) };
            if r.is_null() {
                anyhow::bail!("rte_ring_create({name}) failed");
            }
            Ok(r)
        };
        let (x, y) = (ring("mix_x")?, ring("mix_y")?);
        for (name, rx, tx) in [("mix0", x, y), ("mix1", y, x)] {
            let n = CString::new(name).unwrap_or_default();
            // Safety: the rings were created above and outlive the process's ports; the arrays
            // hold one ring each, as the counts say.
            let id = unsafe { rte_eth_from_rings(n.as_ptr(), &rx, 1, &tx, 1, 0) };
            if id < 0 {
                anyhow::bail!("rte_eth_from_rings({name}) failed");
            }
        }
        Ok(())
    }

    /// The frames of both directions: first those port 0 receives, `FRAMES` from side-0
    /// stations (each in turn) to random side-1 stations, then as many the other way, each of
    /// a random length from `LENS`: an Ethernet header (EtherType 0x88b5), zeros after it.
    pub fn frames() -> [Vec<Vec<u8>>; 2] {
        let mut x = 1u32;
        [(0x0a, 0x0b), (0x0b, 0x0a)].map(|(from, to)| {
            (0..FRAMES)
                .map(|i| {
                    // Every station sends (so every destination is learned after one round, as
                    // on a network where every host talks); destinations and lengths are random.
                    let src = mac(from, i % STATIONS);
                    let dst = mac(to, next(&mut x) % STATIONS);
                    let mut f = vec![0u8; LENS[(next(&mut x) % 3) as usize]];
                    f[..6].copy_from_slice(&dst);
                    f[6..12].copy_from_slice(&src);
                    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
                    f
                })
                .collect()
        })
    }

    /// Fills both rings with [`frames`]: port 0's into X (through mix1's transmit), port 1's
    /// into Y.
    pub fn seed(p0: &mut DpdkPort, p1: &mut DpdkPort) -> anyhow::Result<()> {
        let [to0, to1] = frames();
        for (data, via) in [(to0, &mut *p1), (to1, &mut *p0)] {
            let mut frames = Vec::new();
            for d in data {
                let mut f = via
                    .alloc(d.len())
                    .ok_or_else(|| anyhow::anyhow!("mbuf pool empty while seeding"))?;
                f.data_mut().copy_from_slice(&d);
                frames.push(f);
            }
            via.tx_burst(0, &mut frames)?;
            anyhow::ensure!(frames.is_empty(), "a ring refused seeded frames");
        }
        Ok(())
    }

    /// Writes [`frames`] as two capture files, DIR/mix0.pcap (port 0's) and DIR/mix1.pcap, for
    /// ports that replay a capture (net_pcap's `rx_pcap=...,infinite_rx=1`), so that a
    /// program which cannot share this process's rings (Open vSwitch) receives the same mix.
    pub fn write_pcaps(dir: &std::path::Path) -> anyhow::Result<()> {
        for (k, data) in frames().into_iter().enumerate() {
            let path = dir.join(format!("mix{k}.pcap"));
            let file = std::fs::File::create(&path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let mut w = quench_wire::pcap::PcapWriter::new(std::io::BufWriter::new(file))?;
            for d in &data {
                w.write(units::Instant::from_nanos(0), d)?;
            }
            w.finish()?;
        }
        Ok(())
    }
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    // Safety: cpu_set_t is plain data; CPU_SET checks cpu against CPU_SETSIZE; pid 0 is this
    // thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// CPU time the calling thread has had, in seconds (CLOCK_THREAD_CPUTIME_ID): on a loaded
/// machine a worker gets less than its wall-clock time, and frames per CPU-second still
/// compare.
fn thread_cpu_secs() -> f64 {
    // Safety: timespec is plain data and a valid out pointer for clock_gettime.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // Safety: as above; the clock id is a constant the kernel knows.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Polls `workers` in turn (the last first) for `seconds`; returns the seconds they ran.
fn run(workers: &mut [Worker<DpdkPort>], seconds: f64) -> f64 {
    let clock = Clock::new();
    let start = clock.now();
    let stop = Instant::from_nanos(start.as_nanos() + (seconds * 1e9) as u64);
    let mut now = start;
    while now < stop {
        for _ in 0..1024 {
            now = clock.now();
            for w in workers.iter_mut().rev() {
                w.poll(now);
            }
        }
    }
    for w in workers.iter_mut() {
        w.shutdown();
    }
    now.saturating_since(start).as_secs_f64()
}

/// The queue pair of worker `w` on a net_null port: 2w + 1. net_null keeps its queues in one
/// array of 40-octet structs that starts 16 octets into its port data, next to fields every
/// receive call reads (packet size, port id), and adds each burst to a counter in the queue's
/// struct with a locked add (drivers/net/null/rte_eth_null.c, DPDK 22.11): queues 0 and 1
/// write into the cache line all queues read, and queues 2k and 2k + 1 share lines. The
/// workers then contend for lines no real NIC's driver shares (their queue structs are
/// cache-line aligned): measured, the receive call's first load and its counter add took 2.3
/// ns per frame with two workers on queues 0 and 1, nothing on queues 1 and 3. Odd queues
/// two apart (56..96 and 136..176 octets in) touch no line the other writes.
fn null_queue(w: usize) -> u16 {
    (2 * w + 1) as u16
}

/// Where the congestion points of `--cp`, `--cp-local` and `--cp-cross` run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CpShape {
    /// Every worker its own egress queue and congestion point on both ports, deciding on the
    /// port's depth summed over the workers (`switch::depth`): what `quench switch` does.
    Shared,
    /// The same without the sum: each congestion point sees only its worker's queue.
    Local,
    /// Each port's egress on one worker (port p: worker p mod n); frames for it cross.
    Cross,
}

/// The congestion point of `--cp`: QCN with the MIB's defaults on priority 0.
fn cp_profiles() -> anyhow::Result<CpProfiles> {
    Ok(CpProfiles {
        prio_mask: 1,
        qcn: Some(QcnCpProfile::new(&QcnCpParams::default())?),
        ..CpProfiles::none()
    })
}

/// `--workers N`: N threads over queue pairs of net_null0 and net_null1 (see the module docs);
/// with `one_thread`, the N workers polled in turn on one thread (on the first core): what the
/// crossing's instructions cost, without a cache line changing core. Returns per thread the
/// seconds it ran, the CPU-seconds it had, and its workers' crossings dropped.
#[allow(clippy::too_many_arguments)]
fn run_workers(
    n: usize,
    cross: bool,
    cp: Option<(&CpProfiles, CpShape)>,
    one_thread: bool,
    cores: &[usize],
    seconds: f64,
    cfg: &DpdkConfig,
    counters: &[Vec<Arc<PortCounters>>],
) -> anyhow::Result<Vec<(f64, f64, u64)>> {
    let cfg = DpdkConfig {
        rx_queues: 2 * n as u16,
        tx_queues: 2 * n as u16,
        // rx_queues x descriptors + 2048, rounded up to 2^k - 1 (DpdkConfig::validate).
        mbufs: ((2 * n as u32 * 1024 + 4096).next_power_of_two() - 1).max(cfg.mbufs),
        ..cfg.clone()
    };
    let names = ["net_null0", "net_null1"];
    let mut handles = Vec::new();
    for w in 0..n {
        let mut ps = Vec::new();
        for name in names {
            ps.push(DpdkPort::open_queues(name, &cfg, Some(&[null_queue(w)]))?);
        }
        handles.push(ps);
    }
    for (w, ps) in handles.iter().enumerate() {
        for (p, port) in ps.iter().enumerate() {
            let user = HEADERS[p].as_ptr().cast_mut().cast();
            // Safety: the port is started and the queue set up; the callback and its
            // argument are static and live as long as the process.
            let cb = unsafe {
                rte_eth_add_rx_callback(port.port_id(), null_queue(w), stamp_headers, user)
            };
            anyhow::ensure!(!cb.is_null(), "rte_eth_add_rx_callback failed");
        }
    }
    let mut links = links(n).into_iter();
    // With crossing, port p's egress is worker (p % n)'s alone.
    let owner: Vec<usize> = (0..2).map(|p| if cross { p % n } else { 0 }).collect();
    // `CpShape::Shared`: each port's depth shared by the workers' congestion points.
    let depths: Vec<_> = (0..2).map(|_| SharedDepth::new(n)).collect();
    // ... and their QCN sampling, port-wide (`switch::sampling`), as `quench switch` does.
    let samplings: Vec<_> = (0..2u64)
        .map(|p| {
            cp.and_then(|(c, _)| CpHook::new(c, SeedableRng::seed_from_u64(p)).shared_sampling())
        })
        .collect();
    let mut parts = Vec::new();
    for (w, ps) in handles.into_iter().enumerate() {
        let owned = ps
            .into_iter()
            .zip(&counters[w])
            .enumerate()
            .map(|(p, (port, c))| {
                let mut op = OwnedPort::new(port, vec![0], QueueLimits::default(), None, c.clone());
                op.egress = !cross || owner[p] == w;
                if let Some((cp, shape)) = cp.filter(|_| op.egress) {
                    let mut hook = CpHook::new(cp, SeedableRng::seed_from_u64(p as u64));
                    if shape == CpShape::Shared && n > 1 {
                        op.depth = Some(depths[p].share(w));
                        if let Some(s) = &samplings[p] {
                            hook = hook.with_shared_sampling(s);
                        }
                    }
                    op.cp = Some(hook.for_worker(w));
                }
                Some(op)
            })
            .collect();
        let wl = links.next().ok_or_else(|| anyhow::anyhow!("links"))?;
        parts.push((w, owned, owner.clone(), wl));
    }
    // Per thread, the workers it runs (one each, or all on the first core).
    let groups: Vec<Vec<_>> = if one_thread {
        vec![parts]
    } else {
        parts.into_iter().map(|p| vec![p]).collect()
    };
    let mut threads = Vec::new();
    for group in groups {
        let cpu = cores[group[0].0 % cores.len()];
        threads.push(std::thread::spawn(
            move || -> anyhow::Result<(f64, f64, u64)> {
                dpdk::register_thread()?;
                pin(cpu);
                // Built on its own thread, as `quench switch` builds its workers: the worker's
                // heap (MAC table, bursts, staging) comes from this thread's allocator arena,
                // not interleaved with the other workers' in the main thread's.
                let mut workers: Vec<_> = group
                    .into_iter()
                    .map(|(w, owned, owner, wl)| {
                        let fdb = Fdb::new(DEFAULT_AGEING, DEFAULT_CAPACITY);
                        Worker::new(w, owned, owner, wl, fdb, Arc::default())
                    })
                    .collect();
                let cpu0 = thread_cpu_secs();
                let secs = run(&mut workers, seconds);
                let drops = workers.iter().map(|w| w.cross_drops).sum();
                anyhow::Ok((secs, thread_cpu_secs() - cpu0, drops))
            },
        ));
    }
    let mut out = Vec::new();
    for t in threads {
        out.push(
            t.join()
                .map_err(|_| anyhow::anyhow!("a worker panicked"))??,
        );
    }
    Ok(out)
}

/// The command line: how long, which forwarding set-up, and the EAL's arguments.
struct Opts {
    seconds: f64,
    eal: Vec<String>,
    with_mix: bool,
    ports: Option<[String; 2]>,
    workers: Option<usize>,
    cross: bool,
    cp: Option<(CpProfiles, CpShape)>,
    one_thread: bool,
    cores: Vec<usize>,
    /// The EAL's `-l` core: the single worker's.
    cpu: Option<usize>,
}

fn usage() -> anyhow::Error {
    anyhow::anyhow!(
        "usage: dpdk_fwd SECONDS [--mix | --ports NAME0,NAME1] [--workers N [--cross] [--cp | --cp-local | \
         --cp-cross] [--one-thread] [--cores LIST]] EAL-ARGS...\n       \
         dpdk_fwd --write-mix DIR"
    )
}

/// Reads `SECONDS [flags] EAL-ARGS...`: the flags up to the first it does not know.
fn parse(args: &[String]) -> anyhow::Result<Opts> {
    let seconds: f64 = args.first().ok_or_else(usage)?.parse()?;
    let mut o = Opts {
        seconds,
        eal: args[1..].to_vec(),
        with_mix: false,
        ports: None,
        workers: None,
        cross: false,
        cp: None,
        one_thread: false,
        cores: Vec::new(),
        cpu: None,
    };
    let eal = &mut o.eal;
    while let Some(a) = eal.first().cloned() {
        match a.as_str() {
            "--mix" => o.with_mix = true,
            "--cross" => o.cross = true,
            "--one-thread" => o.one_thread = true,
            "--cp" => o.cp = Some((cp_profiles()?, CpShape::Shared)),
            "--cp-local" => o.cp = Some((cp_profiles()?, CpShape::Local)),
            "--cp-cross" => {
                o.cross = true;
                o.cp = Some((cp_profiles()?, CpShape::Cross));
            }
            "--workers" | "--cores" | "--ports" => {
                let v = eal.get(1).ok_or_else(usage)?.clone();
                if a == "--workers" {
                    o.workers = Some(v.parse::<usize>().map_err(|_| usage())?);
                } else if a == "--ports" {
                    let (p0, p1) = v.split_once(',').ok_or_else(usage)?;
                    o.ports = Some([p0.to_string(), p1.to_string()]);
                } else {
                    o.cores = v
                        .split(',')
                        .map(|c| c.parse::<usize>().map_err(|_| usage()))
                        .collect::<Result<_, _>>()?;
                }
                eal.remove(0);
            }
            _ => break,
        }
        eal.remove(0);
    }
    o.cpu = (o.eal.iter())
        .position(|a| a == "-l")
        .and_then(|i| o.eal.get(i + 1))
        .and_then(|c| c.parse::<usize>().ok());
    Ok(o)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("--write-mix") {
        let dir = args.get(1).ok_or_else(usage)?;
        return mix::write_pcaps(std::path::Path::new(dir));
    }
    let mut o = parse(&args)?;
    let cfg = DpdkConfig {
        eal: o.eal.clone(),
        ..DpdkConfig::default()
    };
    match o.workers {
        Some(n) => bench_workers(&mut o, n, &cfg),
        None => bench_single(&o, &cfg),
    }
}

/// `--workers N`: N pinned workers on two ports, their counters summed.
fn bench_workers(o: &mut Opts, n: usize, cfg: &DpdkConfig) -> anyhow::Result<()> {
    anyhow::ensure!(
        n >= 1 && !o.with_mix && o.ports.is_none(),
        "--workers takes N >= 1, without --mix or --ports"
    );
    if o.cores.is_empty() {
        let first = o.cpu.unwrap_or(0);
        let ncpu = std::thread::available_parallelism().map_or(1, |c| c.get());
        o.cores = (0..n).map(|w| (first + w) % ncpu).collect();
    }
    let (cross, one_thread, cores) = (o.cross, o.one_thread, &o.cores);
    dpdk::eal_init(&o.eal)?;
    let counters: Vec<Vec<Arc<PortCounters>>> = (0..n)
        .map(|_| (0..2).map(|_| Arc::default()).collect())
        .collect();
    let runs = run_workers(
        n,
        cross,
        o.cp.as_ref().map(|(p, shape)| (p, *shape)),
        one_thread,
        cores,
        o.seconds,
        cfg,
        &counters,
    )?;
    let secs = runs.iter().map(|r| r.0).fold(0.0, f64::max);
    let cpu: f64 = runs.iter().map(|r| r.1).sum();
    let cross_drops: u64 = runs.iter().map(|r| r.2).sum();
    let sum =
        |f: fn(&PortCounters) -> u64| -> u64 { counters.iter().flatten().map(|c| f(c)).sum() };
    let sent = sum(|c| c.tx_pkts.load(Ordering::Relaxed));
    let rx_drops = sum(|c| c.rx_drops.load(Ordering::Relaxed));
    let queue_drops = sum(|c| {
        c.classes
            .iter()
            .map(|q| q.drop_pkts.load(Ordering::Relaxed))
            .sum()
    });
    let received = sum(|c| c.rx_pkts.load(Ordering::Relaxed));
    let per: Vec<String> = counters
        .iter()
        .map(|cs| {
            let n: u64 = cs.iter().map(|c| c.rx_pkts.load(Ordering::Relaxed)).sum();
            format!("{:.2}", n as f64 / secs / 1e6)
        })
        .collect();
    // Frames per CPU-second of all workers: what the workers would forward with a core
    // each to themselves (the figure a loaded machine still gives); and CPU time per frame
    // received, dropped ones included (with --cross, twice its excess over the run without
    // is what a crossing frame costs: half the frames cross).
    println!(
        "quench_workers workers={n} cross={} cp={} one_thread={} cores={cores:?} frames={sent} seconds={secs:.3} \
         cpu_seconds={cpu:.3} rx_mpps_per_worker={} cross_drops={cross_drops} \
         queue_drops={queue_drops} rx_drops={rx_drops} cpu_ns_per_rx_frame={:.2} mpps_per_cpu={:.2} mpps={:.2}",
        u8::from(cross),
        match o.cp.as_ref().map(|c| c.1) {
            None => "none",
            Some(CpShape::Shared) => "shared",
            Some(CpShape::Local) => "local",
            Some(CpShape::Cross) => "cross",
        },
        u8::from(one_thread),
        per.join(","),
        cpu * 1e9 / received as f64,
        sent as f64 / cpu / 1e6,
        sent as f64 / secs / 1e6
    );
    Ok(())
}

/// One worker on two ports: null devices primed with frames, `--mix`'s rings, or `--ports`.
fn bench_single(o: &Opts, cfg: &DpdkConfig) -> anyhow::Result<()> {
    let (with_mix, ports) = (o.with_mix, &o.ports);
    anyhow::ensure!(!(with_mix && ports.is_some()), "--mix or --ports, not both");
    let names = if let Some(p) = ports {
        [p[0].as_str(), p[1].as_str()]
    } else if with_mix {
        dpdk::eal_init(&o.eal)?;
        mix::create_ports()?;
        ["net_ring_mix0", "net_ring_mix1"]
    } else {
        ["net_null0", "net_null1"]
    };
    let mut p0 = DpdkPort::open(names[0], cfg)?;
    let mut p1 = DpdkPort::open(names[1], cfg)?;
    if let Some(cpu) = o.cpu {
        pin(cpu);
    }
    if with_mix {
        mix::seed(&mut p0, &mut p1)?;
    } else if ports.is_none() {
        prime(&mut p0, B, A);
        prime(&mut p1, A, B);
    }

    let counters: Vec<Arc<PortCounters>> = (0..2).map(|_| Arc::default()).collect();
    let owned = [p0, p1]
        .into_iter()
        .zip(&counters)
        .map(|(p, c)| OwnedPort::new(p, vec![0], QueueLimits::default(), None, c.clone()))
        .collect();
    let mut worker = [Worker::single(owned, DEFAULT_AGEING)];
    let secs = run(&mut worker, o.seconds);
    let sum = |f: fn(&PortCounters) -> u64| counters.iter().map(|c| f(c)).sum::<u64>();
    let sent = sum(|c| c.tx_pkts.load(Ordering::Relaxed));
    let rx_drops = sum(|c| c.rx_drops.load(Ordering::Relaxed));
    let flooded = sum(|c| c.flooded.load(Ordering::Relaxed));
    println!(
        "quench{} frames={sent} seconds={secs:.3} mpps={:.2} rx_drops={rx_drops} flooded={flooded}",
        if with_mix {
            "_mix"
        } else if ports.is_some() {
            "_ports"
        } else {
            ""
        },
        sent as f64 / secs / 1e6
    );
    Ok(())
}
