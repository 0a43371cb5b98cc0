//! The sender appliance's per-frame work on one core: classify + copy into a port frame (with
//! the CN-TAG the QCN appliance adds) + enqueue on the flow + release, with 1k, 100k and 1M
//! active flows (64-octet UDP frames, flows visited in a scattered order; each flow's frame is
//! due when it arrives, so it leaves in the same call, `InsideAction::Send`, or, with
//! `APPLIANCE_BENCH_RELEASE=poll`, `set_release_on_arrival(false)`, at the poll after the
//! burst). Frames come from a
//! recycled pool, as a port's UMEM or mbuf pool would give them: no allocation per frame.
//! `one/N` hands the frames over one at a time (`Appliance::on_inside`); `burst32/N` in
//! bursts of 32 as the driver receives them (`Appliance::on_inside_burst`, whose lookups
//! overlap); both report the time per frame. Prints the table memory per flow, the
//! process's RSS once the flows exist and how much of it is on transparent huge pages.
//!
//! With `APPLIANCE_BENCH_CLOCK=thread` both count the thread's CPU time instead of the time
//! that passed (`CLOCK_THREAD_CPUTIME_ID`): on a loaded machine the time the thread spent
//! descheduled is then left out (what other processes do to the caches is not).
//!
//!   cargo bench -p quench-runtime --bench appliance
use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use quench_node::host::rp::HostRp;
use quench_port::Frame;
use quench_runtime::appliance::table::{FlowTable, TableConfig};
use quench_runtime::appliance::{Appliance, InsideAction, Role};
use quench_wire::ethernet::{ethertype, L2Repr};
use quench_wire::frame::{emit_test_frame, Ipv4UdpHeaders};
use quench_wire::ipv4::Ecn;
use quench_wire::testhdr::TestHdrRepr;
use quench_wire::MacAddr;
use units::{FlowId, Instant, Rate};

/// Frames per burst (as the driver's receive burst).
const BURST: usize = 32;

/// A pooled frame buffer.
struct PoolFrame {
    buf: Box<[u8; 2048]>,
    len: usize,
}

impl Frame for PoolFrame {
    fn data(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
    fn set_len(&mut self, len: usize) -> usize {
        self.len = len.min(2048);
        self.len
    }
}

fn template() -> Vec<u8> {
    let h = Ipv4UdpHeaders {
        l2: L2Repr::new(
            MacAddr(2, 0, 0, 0, 0, 2),
            MacAddr(2, 0, 0, 0, 0, 1),
            ethertype::IPV4,
        ),
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
        dscp: 0,
        ecn: Ecn::NotEct,
        src_port: 0,
        dst_port: 0,
    };
    let mut buf = vec![0u8; 128];
    let n = emit_test_frame(
        &h,
        &TestHdrRepr::new(FlowId(1), 0, Instant::ZERO),
        64,
        &mut buf,
    )
    .expect("template");
    buf.truncate(n);
    buf
}

/// Writes flow `k`'s UDP ports (20 bits of flow number) into the frame.
fn set_flow(f: &mut [u8], k: u32) {
    f[34..36].copy_from_slice(&(k as u16).to_be_bytes());
    f[36..38].copy_from_slice(&(0x4000 | (k >> 16) as u16).to_be_bytes());
}

/// A frame the appliance released at once (its flow was idle and its pacer allowed it) goes
/// back to the pool, as the port would free it once sent; every frame is either that or queued.
fn sent(a: InsideAction<PoolFrame>, pool: &mut Vec<PoolFrame>) {
    match a {
        InsideAction::Send(f) => pool.push(f),
        InsideAction::Queued => {}
        InsideAction::Dropped => panic!("the bench's frames are never dropped"),
    }
}

fn rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1 << 20) as f64
}

/// MiB of the process's anonymous memory on transparent huge pages.
fn huge_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    let kib: f64 = s
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// The bench's clock, nanoseconds: the thread's CPU time with `APPLIANCE_BENCH_CLOCK=thread`,
/// else CLOCK_MONOTONIC.
fn clock() -> impl Fn() -> u64 {
    let id = match std::env::var("APPLIANCE_BENCH_CLOCK").as_deref() {
        Ok("thread") => libc::CLOCK_THREAD_CPUTIME_ID,
        _ => libc::CLOCK_MONOTONIC,
    };
    move || {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // Safety: `t` is a valid timespec for clock_gettime to write.
        let r = unsafe { libc::clock_gettime(id, &mut t) };
        assert_eq!(r, 0, "clock_gettime");
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("appliance classify+enqueue+release");
    let clock = clock();
    g.throughput(Throughput::Elements(1));
    for flows in [1_000u32, 100_000, 1_000_000] {
        let line = Rate::from_gbps(100);
        let rp = HostRp::qcn(rp::QcnParams::default().profile(line).expect("profile"));
        let cfg = TableConfig {
            max_flows: 1 << 20,
            line_rate: line,
            ..TableConfig::default()
        };
        let mut app: Appliance<PoolFrame> =
            Appliance::new(Role::Rp, true, false, cfg, rp, None).expect("appliance");
        app.set_release_on_arrival(
            std::env::var("APPLIANCE_BENCH_RELEASE").as_deref() != Ok("poll"),
        );
        let mut pool: Vec<PoolFrame> = (0..128)
            .map(|_| PoolFrame {
                buf: Box::new([0; 2048]),
                len: 0,
            })
            .collect();
        let mut frame = template();
        let mut now = 1_000_000u64;
        let rss0 = rss_mib();
        // Create every flow once, then drain.
        for k in 0..flows {
            set_flow(&mut frame, k);
            let t = Instant::from_nanos(now);
            let a = app.on_inside(t, &frame, |n| {
                pool.pop().map(|mut f| {
                    f.set_len(n);
                    f
                })
            });
            sent(a, &mut pool);
            now += 1_000;
            while let Some(r) = app.poll_release(Instant::from_nanos(now)) {
                pool.push(r.frame);
            }
        }
        assert_eq!(app.table().flows(), flows as usize);
        eprintln!(
            "{flows} flows: {} octets of table per flow; RSS grew {:.1} MiB \
             ({:.0} octets per flow); {:.0} MiB on huge pages",
            FlowTable::<PoolFrame>::bytes_per_flow(),
            rss_mib() - rss0,
            (rss_mib() - rss0) * (1 << 20) as f64 / f64::from(flows),
            huge_mib()
        );
        // Visit the flows in a scattered order (a step coprime to the count).
        let step = 2_654_435_761u32 % flows;
        let mut k = 0u32;
        g.bench_with_input(BenchmarkId::new("one", flows), &flows, |b, &flows| {
            b.iter_custom(|iters| {
                let t0 = clock();
                for _ in 0..iters {
                    k = (k + step) % flows;
                    set_flow(&mut frame, k);
                    let t = Instant::from_nanos(now);
                    let a = app.on_inside(t, &frame, |n| {
                        pool.pop().map(|mut f| {
                            f.set_len(n);
                            f
                        })
                    });
                    sent(a, &mut pool);
                    now += 1_000;
                    while let Some(r) = app.poll_release(Instant::from_nanos(now)) {
                        pool.push(r.frame);
                    }
                }
                std::time::Duration::from_nanos(clock() - t0)
            })
        });
        let mut burst: Vec<Vec<u8>> = vec![frame.clone(); BURST];
        let mut back: Vec<PoolFrame> = Vec::with_capacity(BURST);
        g.bench_with_input(BenchmarkId::new("burst32", flows), &flows, |b, &flows| {
            // Criterion's iterations are frames: `iters` frames in bursts of 32.
            b.iter_custom(|iters| {
                let t0 = clock();
                let mut left = iters;
                while left > 0 {
                    let n = left.min(BURST as u64) as usize;
                    left -= n as u64;
                    for f in &mut burst[..n] {
                        k = (k + step) % flows;
                        set_flow(f, k);
                    }
                    let t = Instant::from_nanos(now);
                    app.on_inside_burst(
                        t,
                        &burst[..n],
                        |f| f.as_slice(),
                        |n| {
                            pool.pop().map(|mut f| {
                                f.set_len(n);
                                f
                            })
                        },
                        |a| sent(a, &mut back),
                    );
                    pool.append(&mut back);
                    // The same 1 us of time per frame as `one`.
                    now += 1_000 * n as u64;
                    while let Some(r) = app.poll_release(Instant::from_nanos(now)) {
                        pool.push(r.frame);
                    }
                }
                std::time::Duration::from_nanos(clock() - t0)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
