//! The crossing ring alone ([`engine::switch::spsc`]): a producer thread pushes bursts of 32
//! items and a consumer thread, pinned to the other core, pops them, as two switch workers do
//! with the frames that change core. Per element size (8, 32 and 64 octets: a bare pointer, the
//! switch's [`Crossing`] and a cache line), the time per item moved from one core to the
//! other: the slots' cache lines and the index transfers, nothing of the frames themselves.
//! Prints `size_of::<Crossing>()` first.
//!
//!   cargo bench -p engine --bench spsc_ring
//!
//! On a loaded machine the two threads are not always both running; a consumer descheduled
//! while the producer runs makes it spin on a full ring, and the two-core figure then includes
//! that wait. `one_core` pushes and pops on one thread: the ring's own instructions per item.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use engine::switch::forward::{Crossing, CROSS_RING};
use engine::switch::spsc;
use engine::time::Clock;

const BURST: usize = 32;

/// Moves `items` items of `N` octets through a ring of the switch's size, producer on the
/// calling thread (core 0), consumer on core 1; returns the time until the consumer has them.
fn run<const N: usize>(items: u64) -> Duration {
    let (mut p, mut c) = spsc::ring::<[u8; N]>(CROSS_RING);
    let ready = Arc::new(AtomicBool::new(false));
    let r = ready.clone();
    let consumer = engine::worker::spawn_pinned(1, "consumer".into(), move || {
        r.store(true, Ordering::Release);
        let mut out = Vec::with_capacity(4 * BURST);
        let mut got = 0u64;
        let mut sum = 0u64;
        while got < items {
            out.clear();
            got += c.pop_burst(&mut out, 4 * BURST) as u64;
            // Read each item, as a worker reads the frame it lands.
            sum = out
                .iter()
                .fold(sum, |s, x| s.wrapping_add(u64::from(x[N - 1])));
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
    let mut burst: Vec<[u8; N]> = Vec::with_capacity(BURST);
    let mut sent = 0u64;
    while sent < items {
        while burst.len() < BURST {
            burst.push([sent as u8; N]);
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
        b.iter_custom(run::<8>)
    });
    g.bench_function(BenchmarkId::new("two_cores", 32), |b| {
        b.iter_custom(run::<32>)
    });
    g.bench_function(BenchmarkId::new("two_cores", 64), |b| {
        b.iter_custom(run::<64>)
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
