//! The crossing ring alone ([`quench_runtime::switch::spsc`]): a producer thread pushes bursts of 32
//! items and a consumer thread, pinned to the other core, pops them, as two switch workers do
//! with the frames that change core. Per element size (8, 32 and 64 octets, unaligned: a bare
//! pointer, a small struct and a line's worth), the time per item moved from one core to the
//! other: the slots' cache lines and the index transfers, nothing of the frames themselves.
//! Prints `size_of::<Crossing>()` first (128: a small frame travels in the slot). `two_cores_lines` moves slots of 1, 2 and 3 whole cache
//! lines (line-aligned, as `Crossing` is), each read whole by the consumer as a frame copied
//! into the slot is: what one more line per slot costs (the choice of `INLINE_MAX`).
//!
//!   cargo bench -p quench-runtime --bench spsc_ring
//!
//! On a loaded machine the two threads are not always both running; a consumer descheduled
//! while the producer runs makes it spin on a full ring, and the two-core figure then includes
//! that wait. `one_core` pushes and pops on one thread: the ring's own instructions per item.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use quench_runtime::switch::forward::{Crossing, CROSS_RING};
use quench_runtime::switch::spsc;
use quench_wire::time::Clock;

const BURST: usize = 32;

/// An item of the ring: made from a counter, read whole.
trait Item: Copy + Send + 'static {
    fn make(x: u8) -> Self;
    fn read(&self) -> u64;
}

impl<const N: usize> Item for [u8; N] {
    fn make(x: u8) -> Self {
        [x; N]
    }
    fn read(&self) -> u64 {
        u64::from(self[N - 1])
    }
}

/// `N` octets in whole cache lines, line-aligned (a slot of `Crossing`'s kind).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Lines<const N: usize>([u8; N]);

impl<const N: usize> Item for Lines<N> {
    fn make(x: u8) -> Self {
        Lines([x; N])
    }
    /// Every line of it (a frame copied into the slot is copied out whole).
    fn read(&self) -> u64 {
        self.0.iter().step_by(64).map(|&b| u64::from(b)).sum()
    }
}

/// Moves `items` items of type `T` through a ring of the switch's size, producer on the
/// calling thread (core 0), consumer on core 1; returns the time until the consumer has them.
fn run<T: Item>(items: u64) -> Duration {
    let (mut p, mut c) = spsc::ring::<T>(CROSS_RING);
    let ready = Arc::new(AtomicBool::new(false));
    let r = ready.clone();
    let consumer = quench_port::worker::spawn_pinned(1, "consumer".into(), move || {
        r.store(true, Ordering::Release);
        let mut out = Vec::with_capacity(4 * BURST);
        let mut got = 0u64;
        let mut sum = 0u64;
        while got < items {
            out.clear();
            got += c.pop_burst(&mut out, 4 * BURST) as u64;
            // Read each item, as a worker reads the frame it lands.
            sum = out.iter().fold(sum, |s, x| s.wrapping_add(x.read()));
        }
        sum
    })
    .expect("spawn");
    let _ = core_affinity::set_for_current(core_affinity::CoreId { id: 0 });
    while !ready.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    let clock = Clock::monotonic();
    let t0 = clock.now();
    let mut burst: Vec<T> = Vec::with_capacity(BURST);
    let mut sent = 0u64;
    while sent < items {
        while burst.len() < BURST {
            burst.push(T::make(sent as u8));
        }
        let n = p.push_burst(&mut burst) as u64;
        sent += n;
        if n == 0 {
            std::hint::spin_loop();
        }
    }
    std::hint::black_box(consumer.join().expect("consumer"));
    Duration::from_nanos((clock.now() - t0).as_nanos())
}

/// The same on one thread: a burst pushed, then popped and read. What the ring's own
/// instructions cost per item, without cache lines changing core (and without the scheduler:
/// the figure that stays meaningful on a loaded machine).
fn one_core<const N: usize>(items: u64) -> Duration {
    let (mut p, mut c) = spsc::ring::<[u8; N]>(CROSS_RING);
    let mut burst: Vec<[u8; N]> = Vec::with_capacity(BURST);
    let mut out = Vec::with_capacity(BURST);
    let clock = Clock::monotonic();
    let t0 = clock.now();
    let mut sum = 0u64;
    let mut moved = 0u64;
    while moved < items {
        while burst.len() < BURST {
            burst.push([moved as u8; N]);
        }
        p.push_burst(&mut burst);
        out.clear();
        moved += c.pop_burst(&mut out, BURST) as u64;
        sum = out
            .iter()
            .fold(sum, |s, x| s.wrapping_add(u64::from(x[N - 1])));
    }
    std::hint::black_box(sum);
    Duration::from_nanos((clock.now() - t0).as_nanos())
}

fn ring(c: &mut Criterion) {
    println!(
        "size_of::<Crossing>() = {} octets",
        std::mem::size_of::<Crossing>()
    );
    let mut g = c.benchmark_group("spsc_ring");
    g.throughput(Throughput::Elements(1));
    g.sample_size(20);
    g.bench_function(BenchmarkId::new("two_cores", 8), |b| {
        b.iter_custom(run::<[u8; 8]>)
    });
    g.bench_function(BenchmarkId::new("two_cores", 32), |b| {
        b.iter_custom(run::<[u8; 32]>)
    });
    g.bench_function(BenchmarkId::new("two_cores", 64), |b| {
        b.iter_custom(run::<[u8; 64]>)
    });
    g.bench_function(BenchmarkId::new("two_cores_lines", 64), |b| {
        b.iter_custom(run::<Lines<64>>)
    });
    g.bench_function(BenchmarkId::new("two_cores_lines", 128), |b| {
        b.iter_custom(run::<Lines<128>>)
    });
    g.bench_function(BenchmarkId::new("two_cores_lines", 192), |b| {
        b.iter_custom(run::<Lines<192>>)
    });
    g.bench_function(BenchmarkId::new("one_core", 8), |b| {
        b.iter_custom(one_core::<8>)
    });
    g.bench_function(BenchmarkId::new("one_core", 64), |b| {
        b.iter_custom(one_core::<64>)
    });
    g.finish();
}

criterion_group!(benches, ring);
criterion_main!(benches);
