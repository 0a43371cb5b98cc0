//! N workers against one on the same input (in-memory ports, virtual time): every frame is
//! forwarded or counted exactly once, learning converges, and the congestion point's and
//! PFC's decisions are those of the one-worker switch.
//!
//! The switch has four ports; each port has one queue per worker (worker `w` holds queue `w`
//! of every port, as `quench switch` spreads a multi-queue port), and the input goes to a
//! queue by a hash of the flow, as RSS would, so a flow stays on one worker. Port 3 is the
//! bottleneck, with QCN and RED on priority 3, in one of two shapes ([`Bottleneck`]):
//! - paced at 40 Mbit/s: its egress is held by worker 0 alone (a pacer's rate is the port's),
//!   so frames for it from other workers cross. With PFC on, worker 0 holds every port's
//!   egress (PFC accounts a frame to its ingress port in whichever egress queue it waits);
//! - unpaced, paused by its downstream while the input arrives: its egress is on every worker,
//!   each with its own congestion point deciding on the port's depth summed over the workers
//!   (`switch::depth`); nothing crosses.
//!
//! The plain ports' egress is on every worker.
//!
//! The input is seeded and has one flow per tick (a burst of 1 to 8 frames, or a PFC
//! frame from port 3's peer): within a tick, frames then reach each egress queue in the same
//! order with one worker or N, which is what makes the decisions comparable frame for frame.
//! Per tick the workers are polled from the last to worker 0, so what crosses to worker 0 is
//! queued in the same tick, as with one worker.
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use units::{Duration, Ecn, Instant, Rate};

use super::forward::{links, OwnedPort, Worker};
use super::stats::{PortCounters, WorkerCounters};
use quench_node::switch::core::{CpCounters, CpProfiles, PfcCounters};
use quench_node::switch::depth::SharedDepth;
use quench_node::switch::fdb::{Fdb, Lookup, DEFAULT_CAPACITY};
use quench_node::switch::queue::QueueLimits;
use quench_node::switch::sampling::SharedSampling;
use quench_port::mem::{MemPeer, MemPort};
use quench_wire::pfc::{emit_frame, PfcRepr};
use quench_wire::MacAddr;

const PORTS: usize = 4;
const BOTTLENECK: usize = 3;
/// Stations: station `k` is behind port `k % PORTS`.
const STATIONS: usize = 8;

fn station(k: usize) -> MacAddr {
    MacAddr(2, 0, 0, 0, 0x50, k as u8)
}

/// Data frames: 1000 octets, or this many, small enough to cross between workers copied into
/// the ring slot (`Carried::Inline`; 1000-octet ones cross as themselves).
const SMALL: usize = 80;

/// An IPv4 frame (ECT(0)) of `len` octets from station `src` to `dst` at priority `pcp`;
/// `seq` in the test header and in the last payload octets, so each frame is unique.
fn frame(src: usize, dst: usize, pcp: u8, seq: u32, len: usize) -> Vec<u8> {
    let flow = (src * STATIONS + dst) as u32;
    let mut f = quench_wire::frame::test_frame_len(flow, u64::from(seq), 0, Ecn::Ect0, None, len);
    f[..6].copy_from_slice(&station(dst).octets());
    f[6..12].copy_from_slice(&station(src).octets());
    f[14] = pcp << 5;
    let n = f.len();
    f[n - 4..].copy_from_slice(&seq.to_be_bytes());
    f
}

/// Whether `f` is one of the data frames (VLAN-tagged IPv4), not a PFC frame or a CNM.
fn is_data(f: &[u8]) -> bool {
    f.get(16..18) == Some(&[0x08, 0x00][..])
}

/// Whether `f` is a MAC Control frame (PFC).
fn is_pfc(f: &[u8]) -> bool {
    f.get(12..14) == Some(&[0x88, 0x08][..])
}

fn pause(quanta: u16) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    let n = emit_frame(station(BOTTLENECK), &PfcRepr::pause(1 << 3, quanta), &mut b).unwrap();
    b.truncate(n);
    b
}

/// One tick's input: frames for port `port`, flow hash `hash` (which queue takes them).
struct Tick {
    port: usize,
    hash: usize,
    frames: Vec<Vec<u8>>,
}

/// The seeded input: first every station sends once (learning, flooding), then random flows,
/// a PFC frame from port 3's peer now and then.
fn input(seed: u64, ticks: usize) -> Vec<Tick> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut seq = 0u32;
    for s in 0..STATIONS {
        seq += 1;
        let d = (s + 1) % STATIONS;
        out.push(Tick {
            port: s % PORTS,
            hash: s,
            frames: vec![frame(s, d, 0, seq, 1000)],
        });
    }
    for _ in 0..ticks {
        let r = rng.next_u64();
        if r % 23 == 0 {
            let quanta = if r % 2 == 0 { 0 } else { 200 };
            out.push(Tick {
                port: BOTTLENECK,
                hash: (r >> 8) as usize,
                frames: vec![pause(quanta)],
            });
            continue;
        }
        let src = (r >> 8) as usize % STATIONS;
        let mut dst = (r >> 16) as usize % STATIONS;
        if dst % PORTS == src % PORTS {
            // Mostly towards the bottleneck; a few to a station behind the source's own port
            // (filtered).
            dst = if r % 5 == 0 { dst } else { BOTTLENECK };
        }
        let pcp = if r % 3 == 0 { 1 } else { 3 };
        let n = 1 + (r >> 24) as usize % 8;
        let frames = (0..n)
            .map(|j| {
                seq += 1;
                // One in four small: the bottleneck still overflows.
                let len = if (r >> (32 + 2 * j)) & 3 == 0 {
                    SMALL
                } else {
                    1000
                };
                frame(src, dst, pcp, seq, len)
            })
            .collect();
        out.push(Tick {
            port: src % PORTS,
            hash: src * 31 + dst * 7 + usize::from(pcp),
            frames,
        });
    }
    out
}

fn cp_profiles() -> CpProfiles {
    CpProfiles {
        prio_mask: 1 << 3,
        qcn: Some(
            cp::qcn::QcnCpProfile::new(&cp::qcn::QcnCpParams {
                queue_size_set_point: 10_000,
                min_sample_base: 15_000,
                ..Default::default()
            })
            .unwrap(),
        ),
        red: Some(
            cp::red::RedProfile::new(&cp::red::RedParams {
                kmax_bytes: 30_000,
                pmax: 0.4,
                ..Default::default()
            })
            .unwrap(),
        ),
        ..CpProfiles::none()
    }
}

fn pfc_profile() -> cp::pfc::PfcProfile {
    cp::pfc::PfcProfile::new(&cp::pfc::PfcParams {
        ports: PORTS as u16,
        lossless_priorities: vec![3],
        threshold: cp::pfc::ThresholdMode::Static,
        xoff_bytes: 20_000,
        xon_bytes: 10_000,
        headroom_bytes: 12_000,
        link_rate: Rate::from_gbps(1),
        ..Default::default()
    })
    .unwrap()
}

/// The congestion point of the shared-depth scenario: QCN on priority 3 and RED marking at
/// enqueue with Kmin = Kmax, so that a mark is a function of the depth alone (RED's coin is
/// drawn only between Kmin and Kmax): with per-worker generators the marks still compare
/// with the one-worker run frame for frame.
fn shared_cp_profiles() -> CpProfiles {
    CpProfiles {
        red: Some(
            cp::red::RedProfile::new(&cp::red::RedParams {
                kmin_bytes: 20_000,
                kmax_bytes: 20_000,
                mark_at: cp::red::MarkPoint::Enqueue,
                ..Default::default()
            })
            .unwrap(),
        ),
        ..cp_profiles()
    }
}

/// Port 3 of the test switch.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Bottleneck {
    /// Paced at 40 Mbit/s with QCN and RED: one worker (0) holds its egress, frames for it
    /// from the other workers cross; `pfc`: PFC on (every egress on worker 0).
    Paced { pfc: bool },
    /// Unpaced, QCN and RED ([`shared_cp_profiles`]), its egress on every worker with the
    /// depth shared (`switch::depth`), every data priority paused (by its downstream) until
    /// [`Switch::resume`]: its queues fill without draining, so each decision's depth is the
    /// sum of what was queued before it, whichever worker queued it.
    Shared,
}

/// A switch of `n` workers: the workers, the peers (`peers[port][worker]`), each worker's
/// counters per port.
struct Switch {
    workers: Vec<Worker<MemPort>>,
    peers: Vec<Vec<MemPeer>>,
    counters: Vec<Vec<Arc<PortCounters>>>,
    /// The bottleneck's port-wide QCN sampling (shared, more than one worker).
    sampling: Option<Arc<SharedSampling>>,
}

fn switch(n: usize, bottleneck: Bottleneck) -> Switch {
    let pfc = bottleneck == Bottleneck::Paced { pfc: true };
    let shared = bottleneck == Bottleneck::Shared;
    let depth = SharedDepth::new(n);
    // QCN's sampling port-wide (`switch::sampling`), as `quench switch` shares it: with the
    // one-worker congestion point's generator.
    let seed = || SeedableRng::seed_from_u64(7);
    let sampling = if shared && n > 1 {
        quench_node::switch::cp::CpHook::new(&shared_cp_profiles(), seed()).shared_sampling()
    } else {
        None
    };
    let rate = Rate::from_mbps(40);
    let mut links = links(n).into_iter();
    let owner = vec![0; PORTS];
    let mut peers: Vec<Vec<MemPeer>> = (0..PORTS).map(|_| Vec::new()).collect();
    let mut counters = Vec::new();
    let mut workers = Vec::new();
    for w in 0..n {
        let mut ports = Vec::new();
        let mut cs = Vec::new();
        for (p, peers_p) in peers.iter_mut().enumerate() {
            let (port, peer) = MemPort::with_peer(&format!("p{p}q{w}"));
            peers_p.push(peer);
            let c = Arc::new(PortCounters::default());
            cs.push(c.clone());
            let stateful = (p == BOTTLENECK && !shared) || pfc;
            // The bottleneck's data classes hold 64 frames: the lossy priority overflows.
            let limits = QueueLimits {
                data_bytes: if p == BOTTLENECK { 64_000 } else { 256 * 1024 },
                ..QueueLimits::default()
            };
            let paced = p == BOTTLENECK && !shared;
            let mut op = OwnedPort::new(port, vec![0], limits, paced.then_some(rate), c);
            op.egress = !stateful || w == 0;
            if p == BOTTLENECK {
                let prof = if shared {
                    shared_cp_profiles()
                } else {
                    cp_profiles()
                };
                let mut cp = quench_node::switch::cp::CpHook::new(&prof, seed());
                if let Some(s) = &sampling {
                    cp = cp.with_shared_sampling(s);
                }
                op.cp = Some(cp.for_worker(w));
                if shared {
                    op.depth = Some(depth.share(w));
                }
            }
            ports.push(Some(op));
        }
        let fdb = Fdb::new(Duration::from_secs(60), DEFAULT_CAPACITY);
        let fc = Arc::new(WorkerCounters::default());
        let mut wk = Worker::new(w, ports, owner.clone(), links.next().unwrap(), fdb, fc);
        if pfc {
            let rates = [
                Rate::from_gbps(1),
                Rate::from_gbps(1),
                Rate::from_gbps(1),
                rate,
            ];
            wk.set_pfc(pfc_profile(), &rates, &[]);
        }
        workers.push(wk);
        counters.push(cs);
    }
    Switch {
        workers,
        peers,
        counters,
        sampling,
    }
}

impl Switch {
    /// Every data priority of the bottleneck paused (`quanta` > 0; without PFC no pause runs
    /// out) or resumed (0) on every worker holding its egress, as a PFC frame received on it
    /// would.
    fn pause_bottleneck(&mut self, now: Instant, quanta: u16) {
        for w in &mut self.workers {
            if w.core.queue(BOTTLENECK).is_some() {
                for p in 0..units::PRIORITIES as u8 {
                    w.core.handle_pause(now, BOTTLENECK, p, quanta);
                }
            }
        }
    }
}

/// What a run produced: per port, the frames out (port 3's in order, the others sorted: they
/// leave on several queues), and the decisions and counts to compare.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    bottleneck_out: Vec<Vec<u8>>,
    other_out: Vec<Vec<Vec<u8>>>,
    /// Per port, the PFC frames out of it in the order they left (not sorted: with PFC one
    /// worker holds every egress, so the order is the decisions' order).
    pauses_out: Vec<Vec<Vec<u8>>>,
    cp: CpCounters,
    pfc: Vec<PfcCounters>,
    rx_pkts: Vec<u64>,
    rx_drops: Vec<u64>,
    queue_drops: u64,
    /// Frames still queued at the end.
    queued: u64,
    /// Per station, where the workers' tables put it (they all agree).
    learned: Vec<Lookup>,
}

/// Runs `input` through `n` workers stepped one poll at a time in turn (the last first), then
/// lets the bottleneck drain.
///
/// Invariant this relies on for the shared bottleneck: a worker publishes its depths at the
/// end of its poll and reads the others' at the start (`Worker::poll`), so with polls taken in
/// turn every decision reads the port's exact depth (own + others', none of them stale).
fn run(n: usize, bottleneck: Bottleneck, input: &[Tick]) -> Outcome {
    let mut sw = switch(n, bottleneck);
    let shared = bottleneck == Bottleneck::Shared;
    let mut now = Instant::from_nanos(1_000_000);
    let tick = Duration::from_micros(100);
    let mut bottleneck_out = Vec::new();
    let mut other_out: Vec<Vec<Vec<u8>>> = vec![Vec::new(); PORTS];
    let mut pauses_out: Vec<Vec<Vec<u8>>> = vec![Vec::new(); PORTS];
    let mut collect = |sw: &Switch| {
        for (p, qs) in sw.peers.iter().enumerate() {
            for q in qs {
                let got = q.drain();
                pauses_out[p].extend(got.iter().filter(|f| is_pfc(f)).cloned());
                if p == BOTTLENECK {
                    bottleneck_out.extend(got);
                } else {
                    other_out[p].extend(got);
                }
            }
        }
    };
    // The input, then enough ticks to drain the bottleneck.
    for k in 0..input.len() + 4000 {
        if let Some(t) = input.get(k) {
            let q = t.hash % n;
            for f in &t.frames {
                assert!(sw.peers[t.port][q].send(f));
            }
        }
        if shared && k == 0 {
            sw.pause_bottleneck(now, 0xFFFF);
        }
        if shared && k == input.len() {
            sw.pause_bottleneck(now, 0);
        }
        for w in (0..n).rev() {
            sw.workers[w].poll(now);
        }
        collect(&sw);
        now += tick;
    }
    for w in &sw.workers {
        assert_eq!(w.cross_drops, 0);
    }
    for o in &mut other_out {
        o.sort();
    }
    let ld = |f: fn(&PortCounters) -> &std::sync::atomic::AtomicU64, p: usize| -> u64 {
        sw.counters
            .iter()
            .map(|cs| f(&cs[p]).load(Ordering::Relaxed))
            .sum()
    };
    let learned = (0..STATIONS)
        .map(|s| {
            let l = sw.workers[0].fdb.lookup(now, station(s));
            for w in &mut sw.workers {
                assert_eq!(
                    w.fdb.lookup(now, station(s)),
                    l,
                    "station {s}, worker {}",
                    w.id
                );
            }
            l
        })
        .collect();
    let core0 = &sw.workers[0].core;
    if shared {
        // Several queues: the order between them is the workers'.
        bottleneck_out.sort();
    }
    Outcome {
        bottleneck_out,
        other_out,
        pauses_out,
        cp: cp_counters(&sw),
        pfc: (0..PORTS).map(|p| core0.pfc_counters(p)).collect(),
        rx_pkts: (0..PORTS).map(|p| ld(|c| &c.rx_pkts, p)).collect(),
        rx_drops: (0..PORTS).map(|p| ld(|c| &c.rx_drops, p)).collect(),
        queue_drops: queues(&sw, |s| s.drop_pkts),
        queued: queues(&sw, |s| s.depth_pkts),
        learned,
    }
}

/// The bottleneck's congestion-point counters, summed over the workers holding its egress.
fn cp_counters(sw: &Switch) -> CpCounters {
    let mut sum = CpCounters::default();
    for q in sw.workers.iter().filter_map(|w| w.core.queue(BOTTLENECK)) {
        let c = q.hook().counters();
        sum.qcn_samples += c.qcn_samples;
        sum.cnms += c.cnms;
        sum.marks += c.marks;
        sum.ce_marks += c.ce_marks;
        sum.tcd_ue += c.tcd_ue;
        sum.tcd_ce += c.tcd_ce;
        sum.unparsed += c.unparsed;
        sum.cnm_errors += c.cnm_errors;
    }
    sum
}

/// `stat` summed over every class of every egress queue of every worker.
fn queues(sw: &Switch, stat: fn(&quench_node::switch::queue::ClassStats) -> u64) -> u64 {
    sw.workers
        .iter()
        .flat_map(|w| (0..PORTS).filter_map(|p| w.core.queue(p)))
        .flat_map(|q| q.stats().iter().map(stat).collect::<Vec<_>>())
        .sum()
}

/// The data frames of `input` (after the learning round) by their sequence number: source,
/// destination station.
fn data_frames(input: &[Tick]) -> BTreeMap<u32, (usize, usize)> {
    let mut m = BTreeMap::new();
    for t in &input[STATIONS..] {
        for f in &t.frames {
            if !is_data(f) {
                continue; // PFC
            }
            let n = f.len();
            let seq = u32::from_be_bytes(f[n - 4..].try_into().unwrap());
            let s = (0..STATIONS)
                .find(|&s| station(s).octets() == f[6..12])
                .unwrap();
            let d = (0..STATIONS)
                .find(|&s| station(s).octets() == f[..6])
                .unwrap();
            m.insert(seq, (s, d));
        }
    }
    m
}

fn check_exactly_once(input: &[Tick], o: &Outcome, pfc: bool) {
    let frames = data_frames(input);
    let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
    let outs = o
        .other_out
        .iter()
        .enumerate()
        .map(|(p, v)| (p, v.as_slice()));
    for (p, out) in outs.chain(std::iter::once((BOTTLENECK, o.bottleneck_out.as_slice()))) {
        for f in out.iter().filter(|f| is_data(f)) {
            let n = f.len();
            let seq = u32::from_be_bytes(f[n - 4..].try_into().unwrap());
            if let Some(&(_, d)) = frames.get(&seq) {
                assert_eq!(d % PORTS, p, "frame {seq} out of the wrong port");
                *seen.entry(seq).or_default() += 1;
            }
        }
    }
    assert!(seen.values().all(|&c| c == 1), "a frame forwarded twice");
    assert_eq!(o.queued, 0, "the bottleneck did not drain");
    let filtered = frames
        .values()
        .filter(|(s, d)| s % PORTS == d % PORTS)
        .count() as u64;
    let lost = (frames.len() - seen.len()) as u64;
    let headroom: u64 = o.pfc.iter().map(|c| c.headroom_drops).sum();
    // Every data frame left once, or was counted: filtered (a receive drop), or dropped at the
    // bottleneck's queue or for want of PFC headroom. rx_drops also counts the PFC frames.
    // Without PFC a PFC frame is dropped as it arrives (with PFC it is consumed, not dropped).
    let pauses = input.iter().filter(|t| !is_data(&t.frames[0])).count() as u64;
    let pauses = if pfc { 0 } else { pauses };
    assert_eq!(o.rx_drops.iter().sum::<u64>(), filtered + pauses);
    assert_eq!(lost, filtered + o.queue_drops + headroom, "pfc {pfc}");
    let sent: usize = input.iter().map(|t| t.frames.len()).sum();
    assert_eq!(o.rx_pkts.iter().sum::<u64>(), sent as u64);
}

fn n_workers_equal_one(pfc: bool) {
    let input = input(if pfc { 11 } else { 5 }, 400);
    let one = run(1, Bottleneck::Paced { pfc }, &input);
    check_exactly_once(&input, &one, pfc);
    // The input congests the bottleneck: the decisions compared are not all zero.
    assert!(one.cp.cnms > 0 && one.cp.ce_marks > 0, "{:?}", one.cp);
    if pfc {
        assert!(one.pfc[0].xoff_sent + one.pfc[1].xoff_sent + one.pfc[2].xoff_sent > 0);
        let sent: u64 = one.pfc.iter().map(|c| c.sent).sum();
        let frames: usize = one.pauses_out.iter().map(Vec::len).sum();
        assert_eq!(frames as u64, sent, "every PFC frame sent is compared");
        assert!(one.pfc[BOTTLENECK].pauses_received > 0);
    } else {
        assert!(
            one.queue_drops > 0,
            "{} {}",
            one.bottleneck_out.len(),
            data_frames(&input).len()
        );
    }
    for n in [2, 3] {
        let many = run(n, Bottleneck::Paced { pfc }, &input);
        check_exactly_once(&input, &many, pfc);
        // Learning converged: every worker puts every station behind its port.
        for (s, l) in many.learned.iter().enumerate() {
            assert_eq!(*l, Lookup::Port((s % PORTS) as _), "station {s}");
        }
        assert_eq!(
            many.bottleneck_out.len(),
            one.bottleneck_out.len(),
            "{n} workers"
        );
        // Small and large frames crossed (with 3 workers, small ones both ways).
        let small = many.bottleneck_out.iter().filter(|f| f.len() == SMALL);
        assert!(small.count() > 0 && many.bottleneck_out.iter().any(|f| f.len() == 1000));
        assert!(
            many.bottleneck_out == one.bottleneck_out,
            "{n} workers: bottleneck differs"
        );
        assert_eq!(many.cp, one.cp, "{n} workers");
        assert_eq!(many.pfc, one.pfc, "{n} workers");
        // The PAUSE frames themselves, port by port in their order: the same priorities and
        // quanta, XOFF and XON, sent when one worker sent them (relative to each other).
        assert_eq!(
            many.pauses_out, one.pauses_out,
            "{n} workers: PAUSE frames differ"
        );
        assert_eq!(many, one, "{n} workers");
    }
}

#[test]
fn n_workers_forward_and_decide_as_one_with_a_congestion_point() {
    n_workers_equal_one(false);
}

#[test]
fn n_workers_forward_and_decide_as_one_with_pfc() {
    n_workers_equal_one(true);
}

/// The shared-depth design: the bottleneck's egress is on every worker, no frame crosses, and
/// the decisions are those of the one-worker switch frame for frame (the workers stepped in
/// turn: see [`run`]): the tail drops and RED's marks (functions of the port's depth), and
/// QCN's samples and CNMs, since the sampling state is the port's (`switch::sampling`: the
/// position, the next sample point, Qold and the one-worker generator).
#[test]
fn n_workers_share_a_congestion_points_depth_without_crossing() {
    let input = input(5, 400);
    let one = run(1, Bottleneck::Shared, &input);
    check_exactly_once(&input, &one, false);
    assert!(
        one.queue_drops > 0 && one.cp.ce_marks > 0 && one.cp.cnms > 0,
        "{:?}",
        one.cp
    );
    let data = |o: &Outcome| -> Vec<Vec<Vec<u8>>> {
        let only = |v: &Vec<Vec<u8>>| v.iter().filter(|f| is_data(f)).cloned().collect();
        o.other_out.iter().map(only).collect()
    };
    for n in [2, 3] {
        let many = run(n, Bottleneck::Shared, &input);
        check_exactly_once(&input, &many, false);
        for (s, l) in many.learned.iter().enumerate() {
            assert_eq!(*l, Lookup::Port((s % PORTS) as _), "station {s}");
        }
        // Every frame out of the bottleneck with the ECN field one worker gave it; the same
        // frames dropped at its queues (the limit is on the port's depth, summed).
        assert!(
            many.bottleneck_out == one.bottleneck_out,
            "{n} workers: bottleneck differs"
        );
        assert_eq!(many.queue_drops, one.queue_drops, "{n} workers");
        assert_eq!(many.cp.ce_marks, one.cp.ce_marks, "{n} workers");
        assert_eq!(many.cp.marks, one.cp.marks, "{n} workers");
        assert_eq!(data(&many), data(&one), "{n} workers");
        assert_eq!(
            (many.rx_pkts.clone(), many.rx_drops.clone()),
            (one.rx_pkts.clone(), one.rx_drops.clone())
        );
        // QCN sampled the one-worker switch's frames: the same samples, and the same CNMs
        // (QntzFb, QOffset, QDelta, CPID, the sampled frame's addresses, RPID and first
        // octets), out of the same ports (every frame the other ports sent, CNMs included).
        assert_eq!(many.cp, one.cp, "{n} workers");
        assert_eq!(many.other_out, one.other_out, "{n} workers: CNMs differ");
        assert_eq!(many, one, "{n} workers");
    }
}

/// The shared depth with the workers on threads of their own, polling concurrently: a
/// decision reads another worker's depth as that worker last published it (at the end of its
/// poll). So the decisions are within a bound of the one-worker switch's rather than equal:
/// with the bottleneck paused (nothing leaves), the port can admit past its limit, or leave
/// unmarked past RED's threshold, at most one poll's admissions per other worker (here a
/// burst: each worker polls one receive queue, of port 0, that carries the traffic; the
/// argument is in `switch::depth`). Every frame is still forwarded or counted exactly once.
#[test]
fn concurrent_workers_stay_within_a_burst_per_other_worker_of_one() {
    const LEN: u64 = 1000;
    const FRAMES: usize = 150;
    let limit = 64_000; // the bottleneck's data classes, as `switch` sets them
    let kmin = 20_000; // shared_cp_profiles
    for n in [1usize, 2, 3] {
        let mut sw = switch(n, Bottleneck::Shared);
        let now = Instant::from_nanos(1_000_000);
        sw.pause_bottleneck(now, 0xFFFF);
        for w in &mut sw.workers {
            w.fdb.add_static(station(BOTTLENECK), BOTTLENECK as _);
        }
        // Each worker's receive queue of port 0 holds FRAMES frames, from station 0 (behind
        // port 0) to station 3, at priority 3.
        let mut seq = 0;
        for q in &sw.peers[0] {
            for _ in 0..FRAMES {
                seq += 1;
                assert!(q.send(&frame(0, BOTTLENECK, 3, seq, LEN as usize)));
            }
        }
        let workers = std::mem::take(&mut sw.workers);
        // All start together, so that their polls overlap where the machine has the cores.
        let start = Arc::new(std::sync::Barrier::new(n));
        let threads: Vec<_> = workers
            .into_iter()
            .map(|mut w| {
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    for k in 0..2 * FRAMES as u64 {
                        w.poll(now + Duration::from_nanos(k));
                    }
                    w
                })
            })
            .collect();
        sw.workers = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let class3 = |f: fn(&quench_node::switch::queue::ClassStats) -> u64| -> u64 {
            sw.workers
                .iter()
                .filter_map(|w| w.core.queue(BOTTLENECK))
                .map(|q| f(&q.stats()[3]))
                .sum()
        };
        let (accepted, dropped) = (class3(|s| s.enq_pkts), class3(|s| s.drop_pkts));
        let marked = cp_counters(&sw).ce_marks;
        assert_eq!(accepted + dropped, (n * FRAMES) as u64, "{n} workers");
        // One worker: the limit admits 64 frames, the first 20 (20,000 octets with the frame
        // itself) unmarked.
        let (one_accepted, one_unmarked) = (limit / LEN, kmin / LEN);
        let slack = (n as u64 - 1) * quench_port::BURST as u64;
        assert!(
            (one_accepted..=one_accepted + slack).contains(&accepted),
            "{n} workers accepted {accepted}"
        );
        let unmarked = accepted - marked;
        assert!(
            (one_unmarked..=one_unmarked + slack).contains(&unmarked),
            "{n} workers left {unmarked} unmarked"
        );
        // QCN (MinSampleBase 15,000 octets, the first interval unjittered): every sample
        // number was taken by exactly one worker, and a position lags the port's by at most
        // the slack, so the first sample point is reached by the time 15,000 + slack octets
        // and a frame more were admitted.
        let samples = cp_counters(&sw).qcn_samples;
        if let Some(s) = &sw.sampling {
            assert_eq!(s.samples(3), samples, "{n} workers");
        }
        if accepted * LEN >= 15_000 + (slack + 1) * LEN {
            assert!(samples >= 1, "{n} workers: no sample in {accepted} frames");
        }
        // Resumed, every accepted frame leaves once, on the queue of the worker that took it.
        sw.pause_bottleneck(now, 0);
        for k in 0..100 {
            for w in &mut sw.workers {
                w.poll(now + Duration::from_micros(k));
            }
        }
        let out: Vec<Vec<u8>> = sw.peers[BOTTLENECK]
            .iter()
            .flat_map(|q| q.drain())
            .collect();
        let mut seqs: Vec<u32> = out
            .iter()
            .map(|f| u32::from_be_bytes(f[f.len() - 4..].try_into().unwrap()))
            .collect();
        seqs.sort_unstable();
        seqs.dedup();
        assert_eq!(
            (out.len(), seqs.len()),
            (accepted as usize, accepted as usize)
        );
        assert!(sw.workers.iter().all(|w| w.cross_drops == 0));
    }
}
