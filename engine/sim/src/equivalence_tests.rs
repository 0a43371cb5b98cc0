//! One scripted frame sequence through both drivers of the switch core: the simulator's
//! switch node (packets in virtual time) and `quench switch`'s worker on in-memory ports with a
//! virtual clock (real frames). Both must make the same marks, CNMs, PAUSE frames and drops.
//!
//! The script: host C pauses priority 3 of the switch's port towards it; hosts A and B each
//! send frames of priority 3 to C, interleaved, which pile up (QCN samples them and sends CNMs,
//! PFC pauses A and B past XOFF and drops what overflows the headroom); C resumes, the queue
//! drains at the link rate (RED marks at dequeue, PFC resumes A and B below XON). While the
//! queue fills nothing leaves it, and while it drains nothing arrives, so the decisions depend
//! on the order of events, not on when each driver's clock runs them.
use std::sync::Arc;

use super::*;
use crate::cc::PfcSetup;
use crate::packet::{Kind, Pkt};
use crate::tests::star;
use crate::traffic::FlowSpec;
use quench_port::mem::{MemPeer, MemPort};
use quench_runtime::switch::egress::OwnedPort;
use quench_runtime::switch::forward::Worker;
use quench_runtime::switch::stats::PortCounters;
use quench_wire::ethernet::ethertype;
use quench_wire::frame::{decode, Body};
use quench_wire::pfc::{emit_frame, PfcRepr};
use quench_wire::MacAddr;

const SEED: u64 = 7;
const FRAMES_EACH: u64 = 30;
/// Global id of the simulated switch's port towards host C (star(3): hosts 0..3 have ports
/// 0..3, the switch's ports are 3, 4, 5 in link order).
const SWITCH_TO_C: u32 = 5;
const MACS: [MacAddr; 3] = [
    MacAddr(2, 0, 0, 0, 1, 1),
    MacAddr(2, 0, 0, 0, 2, 1),
    MacAddr(2, 0, 0, 0, 9, 1),
];
const QUEUE_LIMIT: u64 = 1_000_000;

fn rate() -> Rate {
    Rate::from_gbps(1)
}

fn us(n: u64) -> Instant {
    Instant::ZERO + Duration::from_micros(n)
}

/// Arrival time of frame `k` (from A when `k` is even, else B), and the resume.
fn arrival(k: u64) -> Instant {
    us(10 + 2 * k)
}
const RESUME_US: u64 = 500;
const END_US: u64 = 3_000;

fn pfc_params() -> cp::pfc::PfcParams {
    cp::pfc::PfcParams {
        ports: 3,
        lossless_priorities: vec![3],
        threshold: cp::pfc::ThresholdMode::Static,
        xoff_bytes: 20_000,
        xon_bytes: 10_000,
        headroom_bytes: 8_000,
        link_rate: rate(),
        buffer_bytes: u64::MAX / 2,
        ..Default::default()
    }
}

fn cc() -> CcSetup {
    let mut c = CcSetup::none();
    c.qcn_cp = Some(
        cp::qcn::QcnCpProfile::new(&cp::qcn::QcnCpParams {
            queue_size_set_point: 10_000,
            min_sample_base: 15_000,
            ..Default::default()
        })
        .unwrap(),
    );
    c.red = Some(super::cc::RedByRate::single(
        cp::red::RedProfile::new(&cp::red::RedParams {
            kmin_bytes: 5_000,
            kmax_bytes: 40_000,
            pmax: 0.5,
            ..Default::default()
        })
        .unwrap(),
    ));
    c.pfc = Some(PfcSetup {
        params: pfc_params(),
        headroom_given: true,
    });
    c
}

/// A data frame from host `from` (0: A, 1: B) to C, ECT(0), priority 3.
fn data_frame(from: usize, seq: u64) -> Vec<u8> {
    let mut f = quench_wire::frame::test_frame(from as u32, seq, 0, Ecn::Ect0, None);
    f[6..12].copy_from_slice(&MACS[from].octets());
    f
}

fn pause_frame(quanta: u16) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    let n = emit_frame(MACS[2], &PfcRepr::pause(1 << 3, quanta), &mut b).unwrap();
    b.truncate(n);
    b
}

/// What a host saw come out of the switch, in order.
#[derive(Debug, Default, PartialEq, Eq)]
struct Seen {
    /// To C: (sender 0/1, ECN) of each data frame.
    data: Vec<(usize, Ecn)>,
    /// To A and B: (host, priority, quanta) of each PFC frame and (host, QntzFb) of each CNM.
    pfc: Vec<(usize, u8, u16)>,
    cnms: Vec<(usize, u8)>,
    /// Frames the switch lost, and ECN fields its congestion points changed.
    drops: u64,
    marks: u64,
}

fn through_the_simulator() -> Seen {
    let topo = star(3, "1Gbps");
    // Flows give the packets their sender (CNMs go back to a flow's source); they never start.
    let never = Instant::ZERO + Duration::from_secs(10);
    let flows: Vec<FlowSpec> = (0..2)
        .map(|src| FlowSpec {
            src,
            dst: 2,
            pg: 3,
            dport: 100,
            bytes: 1 << 40,
            start: never,
        })
        .collect();
    let mut cfg = RunConfig {
        seed: SEED,
        ..Default::default()
    };
    cfg.host.ack_every = 0;
    cfg.switch.buffer_bytes = u64::MAX / 2;
    cfg.switch.queue_limit_bytes = Some(QUEUE_LIMIT);
    let mut w = World::new(&topo, &flows, cc(), cfg).unwrap();
    let len = data_frame(0, 0).len() as u32;
    let inject = |w: &mut World, at: Instant, port: u32, pkt: Pkt| {
        w.events.push(at, Ev::Arrive { port, pkt });
    };
    let pause = |quanta| Pkt::pause(3, quanta, 64);
    inject(&mut w, us(1), SWITCH_TO_C, pause(0xFFFF));
    for k in 0..2 * FRAMES_EACH {
        let from = (k % 2) as u32;
        let pkt = Pkt {
            flow: from,
            seq: k / 2,
            size: len,
            kind: Kind::Data,
            prio: 3,
            ecn: Ecn::Ect0,
            in_port: 0,
            aux: 0,
            hop: 0,
        };
        // The switch's ports towards A and B are 3 and 4.
        inject(&mut w, arrival(k), 3 + from, pkt);
    }
    inject(&mut w, us(RESUME_US), SWITCH_TO_C, pause(0));
    let mut seen = Seen::default();
    while w.events.next_deadline().is_some_and(|t| t <= us(END_US)) {
        let (t, ev) = w.events.pop().unwrap();
        if let Ev::Arrive { port, pkt: p } = ev {
            match (port, p.kind) {
                (2, Kind::Data) => seen.data.push((p.flow as usize, p.ecn)),
                (0 | 1, Kind::Pause) => seen.pfc.push((port as usize, p.prio, p.aux)),
                (0 | 1, Kind::Cnm) => seen.cnms.push((port as usize, p.aux as u8)),
                _ => {}
            }
        }
        w.now = t;
        w.handle(ev);
    }
    let s = w.port_stats(SWITCH_TO_C);
    seen.drops = s.drops;
    seen.marks = s.marks;
    seen
}

fn through_the_worker() -> Seen {
    let mut ports = Vec::new();
    let mut peers: Vec<MemPeer> = Vec::new();
    for i in 0..3 {
        let (p, peer) = MemPort::with_peer(&format!("p{i}"));
        let mut op = OwnedPort::new(
            p,
            vec![0],
            quench_node::switch::queue::QueueLimits {
                data_bytes: QUEUE_LIMIT,
                control_bytes: 1 << 20,
            },
            (i == 2).then(rate),
            Arc::new(PortCounters::default()),
        );
        if i == 2 {
            // The simulator's congestion point of that port, with its random stream.
            let mut prof = cc().cp_profiles(rate()).unwrap();
            prof.cnm.cp_mac = MacAddr(2, 0, 0, 0, 0, 0xcc);
            let rng = super::rng::stream(SEED, super::rng::Stream::Port, SWITCH_TO_C as u64);
            op.cp = Some(quench_node::switch::core::PortCp::new(&prof, rng));
        }
        ports.push(op);
        peers.push(peer);
    }
    let mut sw = Worker::single(ports, Duration::from_secs(10));
    for (i, m) in MACS.iter().enumerate() {
        sw.fdb.add_static(*m, i as u16);
    }
    let profile = cp::pfc::PfcProfile::new(&pfc_params()).unwrap();
    sw.set_pfc(profile, &[rate(); 3], &[]);
    let mut seen = Seen::default();
    let collect = |peers: &[MemPeer], seen: &mut Seen| {
        for (h, peer) in peers.iter().enumerate() {
            for f in peer.drain() {
                let d = decode(&f).unwrap();
                match (h, d.l2.ethertype, d.body) {
                    (2, _, Body::Ipv4 { ip, .. }) => {
                        let from = MACS.iter().position(|m| *m == d.l2.src).unwrap();
                        seen.data.push((from, ip.ecn));
                    }
                    (0 | 1, ethertype::MAC_CONTROL, Body::Pfc(p)) => {
                        for prio in (0..8u8).filter(|&q| p.enabled(usize::from(q))) {
                            seen.pfc.push((h, prio, p.quanta[usize::from(prio)]));
                        }
                    }
                    (0 | 1, _, Body::Cnm(c)) => seen.cnms.push((h, c.qntz_fb)),
                    other => panic!("host {h} got {other:?}"),
                }
            }
        }
    };
    let mut k = 0;
    let mut paused = false;
    let mut resumed = false;
    for t in 0..=END_US {
        let now = us(t);
        if !paused && now >= us(1) {
            peers[2].send(&pause_frame(0xFFFF));
            paused = true;
        }
        while k < 2 * FRAMES_EACH && arrival(k) <= now {
            let from = (k % 2) as usize;
            peers[from].send(&data_frame(from, k / 2));
            // One frame per poll, as the simulator takes them one arrival at a time.
            sw.poll(now);
            k += 1;
        }
        if !resumed && now >= us(RESUME_US) {
            peers[2].send(&pause_frame(0));
            resumed = true;
        }
        sw.poll(now);
        collect(&peers, &mut seen);
    }
    let q = sw.core.queue(2).unwrap();
    seen.drops = (0..3)
        .map(|p| sw.core.pfc_counters(p).headroom_drops)
        .sum::<u64>()
        + q.stats()[3].drop_pkts;
    seen.marks = q.hook().counters().marks;
    seen
}

#[test]
fn the_simulator_and_the_worker_make_the_same_decisions() {
    let sim = through_the_simulator();
    let wire = through_the_worker();
    // The script exercises everything it compares.
    assert!(sim.cnms.len() >= 2, "{sim:?}");
    assert!(sim.drops > 0, "{sim:?}");
    assert!(sim.marks > 0, "{sim:?}");
    assert!(
        sim.pfc.contains(&(0, 3, 0xFFFF)) && sim.pfc.contains(&(1, 3, 0)),
        "{sim:?}"
    );
    assert_eq!(
        sim.data.len() as u64 + sim.drops,
        2 * FRAMES_EACH,
        "{sim:?}"
    );

    assert_eq!(sim, wire);
}
