//! quench's side of scripts/bench-dpdk.sh: forwards frames from net_null0 to net_null1 through
//! quench's DPDK port path with the per-frame work of a learning switch, and prints
//! `quench mpps=<Mpps>`. The peer is engine/benches/dpdk_fwd.c (the bare C loop), run by the
//! script in the same invocation.
//!
//! Per burst: one clock read; `rx_burst` into a `Vec<DpdkFrame>` (mbuf pointers, no copy).
//! Per frame: `wire::ethernet::walk` (EtherType, VLAN tags, CN-TAG, priority), source-MAC
//! learning and destination lookup in a forwarding table, `EgressQueue::enqueue` in the
//! frame's 802.1p class. Per output port: `dequeue` up to a burst, `tx_burst`.
//!
//! Usage: `cargo bench -p engine --features dpdk --bench dpdk_fwd -- SECONDS EAL-ARGS...`
//! (EAL args must create net_null0 and net_null1; `-l CPU` also pins this thread to CPU, as
//! rte_eal_init pins the C loop's main thread.)
use engine::port::dpdk::{DpdkConfig, DpdkFrame, DpdkPort};
use engine::port::{Frame, Port, BURST};
use engine::switch::queue::{Class, EgressQueue, Enqueued, QueueLimits};
use engine::time::Clock;
use engine::wire::ethernet::walk;
use units::Instant;

/// Destination and source MACs written into every mbuf of the receive pool: the destination is
/// a static forwarding-table entry on port 1, so every frame takes the known-unicast path.
const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x00];

/// A learning switch's forwarding table: open addressing over a power-of-two array, keyed by
/// MAC (as a u64), value = output port, with the time an entry was last refreshed for ageing.
struct Fdb {
    slots: Vec<Option<(u64, u16, Instant)>>,
    mask: usize,
}

impl Fdb {
    fn new(pow2: usize) -> Fdb {
        Fdb {
            slots: vec![None; pow2],
            mask: pow2 - 1,
        }
    }
    fn key(mac: &[u8]) -> u64 {
        let mut k = [0u8; 8];
        k[..6].copy_from_slice(&mac[..6]);
        u64::from_le_bytes(k)
    }
    fn slot(&self, key: u64) -> usize {
        // Fibonacci hashing: the golden-ratio multiplier spreads MACs that differ in one octet.
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & self.mask
    }
    fn learn(&mut self, mac: &[u8], port: u16, now: Instant) {
        let key = Fdb::key(mac);
        let mut i = self.slot(key);
        for _ in 0..8 {
            match &mut self.slots[i] {
                Some((k, p, t)) if *k == key => {
                    *p = port;
                    *t = now;
                    return;
                }
                s @ None => {
                    *s = Some((key, port, now));
                    return;
                }
                Some(_) => i = (i + 1) & self.mask,
            }
        }
    }
    fn lookup(&self, mac: &[u8]) -> Option<u16> {
        let key = Fdb::key(mac);
        let mut i = self.slot(key);
        for _ in 0..8 {
            match &self.slots[i] {
                Some((k, p, _)) if *k == key => return Some(*p),
                None => return None,
                Some(_) => i = (i + 1) & self.mask,
            }
        }
        None
    }
}

/// Writes a valid Ethernet header into every mbuf of `port`'s pool: net_null hands out pool
/// mbufs without writing them, and a zero EtherType would be a malformed (802.3 length) frame.
fn prime(port: &mut DpdkPort) {
    let mut all = Vec::new();
    while let Some(mut f) = port.alloc(64) {
        let d = f.data_mut();
        d[..6].copy_from_slice(&DST);
        d[6..12].copy_from_slice(&SRC);
        d[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        all.push(f);
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let (seconds, eal) = args
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("usage: dpdk_fwd SECONDS EAL-ARGS..."))?;
    let seconds: f64 = seconds.parse()?;
    let cfg = DpdkConfig {
        eal: eal.to_vec(),
        ..DpdkConfig::default()
    };
    let mut rx = DpdkPort::open("net_null0", &cfg)?;
    let tx = DpdkPort::open("net_null1", &cfg)?;
    if let Some(cpu) = eal
        .iter()
        .position(|a| a == "-l")
        .and_then(|i| eal.get(i + 1))
        .and_then(|c| c.parse::<usize>().ok())
    {
        // Safety: cpu_set_t is plain data; CPU_SET stays in bounds for cpu < CPU_SETSIZE
        // (checked by libc's macro), pid 0 is this thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
    prime(&mut rx);

    let clock = Clock::new();
    let mut fdb = Fdb::new(4096);
    fdb.learn(&DST, 1, clock.now());
    let mut egress: [EgressQueue<DpdkFrame>; 2] = [
        EgressQueue::new(QueueLimits::default()),
        EgressQueue::new(QueueLimits::default()),
    ];
    let mut ports = [rx, tx];
    let (mut inb, mut outb) = (Vec::with_capacity(BURST), Vec::with_capacity(BURST));
    let (mut sent, mut malformed, mut dropped) = (0u64, 0u64, 0u64);
    let start = clock.now();
    let stop = Instant::from_nanos(start.as_nanos() + (seconds * 1e9) as u64);
    let mut now = start;
    while now < stop {
        for _ in 0..1024 {
            now = clock.now();
            ports[0].rx_burst(0, &mut inb, BURST)?;
            for f in inb.drain(..) {
                let Ok(w) = walk(f.data()) else {
                    malformed += 1;
                    continue;
                };
                let d = f.data();
                fdb.learn(&d[6..12], 0, now);
                // Unknown destinations would be flooded; with two ports that is port 1.
                let out = fdb.lookup(&d[..6]).unwrap_or(1);
                if out == 0 {
                    continue; // back out of its ingress port: filtered
                }
                match egress[usize::from(out)].enqueue(now, Class::from_pcp(w.priority()), f) {
                    Enqueued::Queued => {}
                    Enqueued::TailDrop(_) | Enqueued::HookDrop(_) => dropped += 1,
                }
            }
            for (p, q) in ports.iter_mut().zip(egress.iter_mut()) {
                while outb.len() < BURST {
                    match q.dequeue(now) {
                        Some((_, f)) => outb.push(f),
                        None => break,
                    }
                }
                if !outb.is_empty() {
                    sent += p.tx_burst(0, &mut outb)? as u64;
                    dropped += outb.len() as u64;
                    outb.clear();
                }
            }
        }
    }
    let secs = now.saturating_since(start).as_secs_f64();
    println!(
        "quench frames={sent} seconds={secs:.3} mpps={:.2} malformed={malformed} dropped={dropped}",
        sent as f64 / secs / 1e6
    );
    Ok(())
}
