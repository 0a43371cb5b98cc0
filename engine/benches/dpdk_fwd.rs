//! quench's side of scripts/bench-dpdk.sh: the switch's own worker loop
//! ([`engine::switch::forward::Worker`], what `quench switch` runs per core) over two net_null
//! DPDK ports, printing `quench mpps=<Mpps>`. The peer is engine/benches/dpdk_fwd.c (the bare C
//! loop: rx on one port, tx on the other, both directions), run by the script in the same
//! invocation with the same EAL arguments.
//!
//! Per `Worker::poll`: one clock read; per port, `rx_burst` into a `Vec<DpdkFrame>` (mbuf
//! pointers, no copy). Per burst, a first pass in frame order: a frame whose L2 headers equal the
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
//! Usage: `cargo bench -p engine --features dpdk --bench dpdk_fwd -- SECONDS EAL-ARGS...`
//! (EAL args must create net_null0 and net_null1; `-l CPU` also pins this thread to CPU, as
//! rte_eal_init pins the C loop's main thread.)
use std::sync::atomic::Ordering;
use std::sync::Arc;

use engine::port::dpdk::{DpdkConfig, DpdkPort};
use engine::port::{Frame, Port};
use engine::switch::fdb::DEFAULT_AGEING;
use engine::switch::forward::{OwnedPort, Worker};
use engine::switch::queue::QueueLimits;
use engine::switch::stats::PortCounters;
use engine::time::Clock;
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

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let (seconds, eal) = args
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("usage: dpdk_fwd SECONDS EAL-ARGS..."))?;
    let seconds: f64 = seconds.parse()?;
    let cfg = DpdkConfig {
        eal: eal.to_vec(),
        ..DpdkConfig::default()
    };
    let mut p0 = DpdkPort::open("net_null0", &cfg)?;
    let mut p1 = DpdkPort::open("net_null1", &cfg)?;
    if let Some(cpu) = eal
        .iter()
        .position(|a| a == "-l")
        .and_then(|i| eal.get(i + 1))
        .and_then(|c| c.parse::<usize>().ok())
    {
        // Safety: cpu_set_t is plain data; CPU_SET checks cpu against CPU_SETSIZE; pid 0 is
        // this thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
    prime(&mut p0, B, A);
    prime(&mut p1, A, B);

    let counters: Vec<Arc<PortCounters>> = (0..2).map(|_| Arc::default()).collect();
    let owned = [p0, p1]
        .into_iter()
        .zip(&counters)
        .map(|(p, c)| OwnedPort::new(p, vec![0], QueueLimits::default(), None, c.clone()))
        .collect();
    let mut worker = Worker::single(owned, DEFAULT_AGEING);
    let clock = Clock::new();
    let start = clock.now();
    let stop = Instant::from_nanos(start.as_nanos() + (seconds * 1e9) as u64);
    let mut now = start;
    while now < stop {
        for _ in 0..1024 {
            now = clock.now();
            worker.poll(now);
        }
    }
    worker.shutdown();
    let secs = now.saturating_since(start).as_secs_f64();
    let sum = |f: fn(&PortCounters) -> u64| counters.iter().map(|c| f(c)).sum::<u64>();
    let sent = sum(|c| c.tx_pkts.load(Ordering::Relaxed));
    let rx_drops = sum(|c| c.rx_drops.load(Ordering::Relaxed));
    let flooded = sum(|c| c.flooded.load(Ordering::Relaxed));
    println!(
        "quench frames={sent} seconds={secs:.3} mpps={:.2} rx_drops={rx_drops} flooded={flooded}",
        sent as f64 / secs / 1e6
    );
    Ok(())
}
