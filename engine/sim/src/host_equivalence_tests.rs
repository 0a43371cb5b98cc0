//! One scripted sequence through both drivers of the host core: the simulator's host node
//! (packets in virtual time) and `quench send`'s worker on an in-memory port with a virtual
//! clock (real frames: CNMs, CNPs and PAUSE frames built and parsed). Both must leave the same
//! reaction-point rates after each feedback and release their data frames at the same times.
//!
//! The script: one flow from host A to host B on 10 Gbit/s links, its frames 1048 octets on
//! the wire; feedback reaches A at odd instants (so no two events of either driver share one):
//! with QCN, CNMs with QntzFb from 1 to 63; with DCQCN, CNPs; and twice a PFC PAUSE of the
//! flow's priority, one that runs out and one that a resume lifts. The worker's loop plays the
//! simulated port: it polls the core when its port is idle, at the core's deadlines and after
//! each input, and a frame keeps the port busy for its serialisation time.
//!
//! The receive side: data frames of the flow reach host B, some CE-marked; with DCQCN, B's
//! notification point (the host core's in the simulator, `quench recv`'s worker on real frames)
//! answers with CNPs, which must leave at the same instants.
use super::*;
use crate::cc::CcKind;
use crate::packet::{Kind, Pkt};
use crate::tests::star;
use quench_node::flowgen::FlowStart;
use quench_port::mem::{MemPeer, MemPort};
use quench_port::{Frame as _, Port};
use quench_runtime::send::worker::{Addressing, SendWorker};
use quench_wire::ipv4::Ecn as WireEcn;
use quench_wire::pfc::{emit_frame, PfcRepr};
use quench_wire::MacAddr;

const FRAME: u32 = 1048;
const PRIO: u8 = 3;
const END_US: u64 = 3_000;
const SRC_MAC: MacAddr = MacAddr(2, 0, 0, 0, 1, 1);
const DST_MAC: MacAddr = MacAddr(2, 0, 0, 0, 9, 1);
const SRC_IP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 0, 0, 1);
const DST_IP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 0, 0, 100);

fn line() -> Rate {
    Rate::from_gbps(10)
}

fn ns(n: u64) -> Instant {
    Instant::from_nanos(n)
}

/// What reaches host A.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Input {
    /// QCN: a CNM with this QntzFb; DCQCN: a CNP (the value is ignored).
    Feedback(u8),
    /// A PFC frame for the flow's priority with these quanta (0: resume).
    Pause(u16),
}

/// The script: (time, input), in time order, at instants no frame boundary meets.
fn script() -> Vec<(Instant, Input)> {
    let mut s = Vec::new();
    for (k, fb) in [1u8, 20, 63, 40, 63, 5].into_iter().enumerate() {
        s.push((ns(100_003 + 211_111 * k as u64), Input::Feedback(fb)));
    }
    // 2000 quanta at 10 Gb/s: 102.4 us; the second pause is lifted after 31 us.
    s.push((ns(700_017), Input::Pause(2_000)));
    s.push((ns(1_500_029), Input::Pause(0xFFFF)));
    s.push((ns(1_531_041), Input::Pause(0)));
    s.push((ns(1_900_007), Input::Feedback(63)));
    s.sort_by_key(|&(t, _)| t);
    s
}

/// Arrivals at host B: (time, CE-marked), at instants apart from the script's.
fn arrivals() -> Vec<(Instant, bool)> {
    (0..60)
        .map(|k| (ns(250_013 + 9_137 * k), k % 3 != 0))
        .collect()
}

/// What each driver did: the rate after each feedback, when each data frame started, and when
/// each CNP left host B.
#[derive(Debug, Default, PartialEq, Eq)]
struct Trace {
    rates: Vec<(Instant, Rate)>,
    starts: Vec<Instant>,
    cnps: Vec<Instant>,
}

fn cc(kind: CcKind) -> CcSetup {
    let mut c = CcSetup::none();
    c.kind = kind;
    if kind == CcKind::Dcqcn {
        c.np = Some(np::NpParams::default().profile().unwrap());
    }
    c
}

fn through_the_simulator(kind: CcKind, spacing: rp::Spacing) -> Trace {
    let topo = star(2, "10Gbps");
    let flows = vec![crate::tests::flow(0, 1, 1 << 40, 0)];
    let mut cfg = RunConfig::default();
    cfg.host.ack_every = 0;
    cfg.host.mtu = FRAME - cfg.host.header_bytes;
    cfg.host.spacing = spacing;
    let mut w = World::new(&topo, &flows, cc(kind), cfg).unwrap();
    let mut inputs = script().into_iter().peekable();
    let mut marked = arrivals().into_iter().peekable();
    let mut trace = Trace::default();
    // Hosts A and B have ports 0 and 1; the switch's ports towards them are 2 and 3 (star(2):
    // hosts first).
    let delay = Duration::from_micros(1);
    let ctrl = line().tx_time(u64::from(w.cfg.host.ctrl_bytes));
    loop {
        let next_event = w.events.next_deadline().unwrap_or(Instant::MAX);
        if let Some(&(at, ce)) = marked.peek().filter(|(at, _)| *at <= next_event) {
            marked.next();
            let pkt = Pkt {
                flow: 0,
                seq: 1 << 39,
                size: FRAME,
                kind: Kind::Data,
                prio: PRIO,
                ecn: if ce { Ecn::Ce } else { Ecn::Ect0 },
                in_port: 0,
                aux: 0,
                hop: 0,
            };
            w.now = at;
            w.arrive(1, pkt);
            continue;
        }
        if let Some(&(at, input)) = inputs.peek().filter(|(at, _)| *at <= next_event) {
            inputs.next();
            let pkt = match input {
                Input::Feedback(fb) => Pkt {
                    flow: 0,
                    seq: 0,
                    size: 64,
                    kind: if kind == CcKind::Qcn {
                        Kind::Cnm
                    } else {
                        Kind::Cnp
                    },
                    prio: PRIO,
                    ecn: Ecn::NotEct,
                    in_port: 0,
                    aux: if kind == CcKind::Qcn {
                        u16::from(fb)
                    } else {
                        0
                    },
                    hop: 0,
                },
                Input::Pause(q) => Pkt::pause(PRIO, q, 64),
            };
            w.now = at;
            w.arrive(0, pkt);
            if let Input::Feedback(_) = input {
                let f = &w.flows[0];
                trace.rates.push((at, w.hosts[0].core.rate(f.handle)));
            }
            continue;
        }
        let Some((t, ev)) = w.events.pop() else {
            break;
        };
        if t > ns(END_US * 1_000) {
            break;
        }
        if let Ev::Arrive { port, pkt: p } = ev {
            match (port, p.kind) {
                (2, Kind::Data) => {
                    trace
                        .starts
                        .push(t - delay - line().tx_time(u64::from(p.size)));
                }
                (3, Kind::Cnp) => {
                    // Recorded where it leaves B; it goes no further (A's feedback is the
                    // script's alone).
                    trace.cnps.push(t - delay - ctrl);
                    continue;
                }
                _ => {}
            }
        }
        w.now = t;
        w.handle(ev);
    }
    trace
}

fn feedback_frame(kind: CcKind, fb: u8, last_sent: &[u8]) -> Vec<u8> {
    if kind == CcKind::Qcn {
        // The CNM `quench switch` sends for the flow's latest frame.
        let src = quench_node::switch::core::CnmSource {
            cp_mac: MacAddr::new(2, 0, 0, 0, 0, 0xcc),
            priority: 6,
        };
        let fb = cp::qcn::QcnFeedback {
            qntz_fb: fb,
            qoffset: -10,
            qdelta: 4,
        };
        quench_node::switch::cp::cnm_frame(last_sent, &src, 0, &fb).unwrap()
    } else {
        let (l2, _) = quench_wire::ethernet::L2Repr::parse(last_sent).unwrap();
        let mut buf = [0u8; 256];
        let n = quench_wire::frame::emit_cnp_reply(
            &l2,
            SRC_IP,
            DST_IP,
            quench_wire::testhdr::UDP_PORT,
            DST_MAC,
            0,
            &mut buf,
        )
        .unwrap();
        buf[..n].to_vec()
    }
}

fn pause_frame(quanta: u16) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    let n = emit_frame(DST_MAC, &PfcRepr::pause(1 << PRIO, quanta), &mut b).unwrap();
    b.truncate(n);
    b
}

fn through_the_worker(kind: CcKind, spacing: rp::Spacing) -> Trace {
    let setup = cc(kind);
    let rp = super::cc::host_rp(&setup, line()).unwrap();
    let flows = vec![FlowStart {
        flow: FlowId(0),
        start: Duration::ZERO,
        destination: DST_MAC,
        priority: PRIO,
        max_rate: line(),
        bytes: None,
    }];
    let addr = Addressing {
        src_mac: SRC_MAC,
        src_ip: SRC_IP,
        dst_ip: DST_IP,
        vlan: 1,
        ecn: WireEcn::Ect0,
        cn_tag: kind == CcKind::Qcn,
    };
    let pacing = PacingConfig {
        spacing,
        ..SIM_PACING
    };
    let mut w = SendWorker::new(pacing, FRAME, flows, Instant::ZERO, rp, addr)
        .unwrap()
        .with_link_rate(line());
    let (mut port, peer): (MemPort, MemPeer) = MemPort::with_peer("a");
    let mut inputs = script().into_iter().peekable();
    let mut trace = Trace::default();
    let mut buf = vec![0u8; 2048];
    let mut last_sent = Vec::new();
    let mut rx = Vec::new();
    let mut busy_until = Instant::ZERO;
    let mut now = Instant::ZERO;
    let end = ns(END_US * 1_000);
    // Host B's receive side, as `quench recv` runs it.
    // (Latency is not measured here: a clock id no frame carries.)
    let mut receiver = quench_runtime::recv::worker::RecvWorker::new(
        quench_runtime::recv::RecvConfig::on_clock(0),
        setup.np,
        Duration::from_secs(1),
        DST_MAC,
    );
    for (k, (at, ce)) in arrivals().into_iter().enumerate() {
        let ecn = if ce { WireEcn::Ce } else { WireEcn::Ect0 };
        let frame = quench_wire::frame::test_frame(0, k as u64, at.as_nanos(), ecn, None);
        let mut cnp = false;
        receiver.on_frame(at, None, &frame, &mut |_| cnp = true);
        if cnp {
            trace.cnps.push(at);
        }
    }
    while now <= end {
        // Feedback arriving now, through the port.
        while let Some(&(at, input)) = inputs.peek().filter(|(at, _)| *at <= now) {
            inputs.next();
            let frame = match input {
                Input::Feedback(fb) => feedback_frame(kind, fb, &last_sent),
                Input::Pause(q) => pause_frame(q),
            };
            assert!(peer.send(&frame));
            port.rx_burst(0, &mut rx, 8).unwrap();
            for f in rx.drain(..) {
                w.on_rx(at, f.data());
            }
            if let Input::Feedback(_) = input {
                trace.rates.push((at, w.rate(FlowId(0))));
            }
        }
        w.on_timeout(now);
        if busy_until <= now {
            if let Some((_, n)) = w.next_frame(now, now, &mut buf) {
                let f = port.import(&buf[..n]).unwrap();
                port.tx_burst(0, &mut vec![f]).unwrap();
                last_sent = peer.recv().unwrap();
                assert_eq!(last_sent.len(), FRAME as usize);
                trace.starts.push(now);
                busy_until = now + line().tx_time(u64::from(FRAME));
            }
        }
        // The next instant anything happens: an input, the port falling idle, a deadline.
        let next = [
            inputs.peek().map(|&(at, _)| at),
            (busy_until > now).then_some(busy_until),
            w.core
                .next_deadline()
                .map(|d| d.max(now + Duration::from_nanos(1))),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) => now = t,
            None => break,
        }
    }
    trace
}

fn check(kind: CcKind, spacing: rp::Spacing) {
    // Frames that started in the last microseconds have not reached the simulator's switch.
    let cut = |mut t: Trace| {
        t.starts.retain(|&s| s < ns((END_US - 5) * 1_000));
        t
    };
    let sim = cut(through_the_simulator(kind, spacing));
    let wire = cut(through_the_worker(kind, spacing));
    // The script exercises what it compares: every feedback moved the rate, and frames left
    // throughout.
    assert_eq!(sim.rates.len(), 7, "{sim:?}");
    assert!(sim.rates.iter().any(|&(_, r)| r < line()), "{sim:?}");
    assert!(sim.starts.len() > 1_000, "{}", sim.starts.len());
    if kind == CcKind::Dcqcn {
        assert!(sim.cnps.len() >= 5, "{:?}", sim.cnps);
    }
    assert_eq!(sim.cnps, wire.cnps);
    assert_eq!(sim.rates, wire.rates);
    assert_eq!(sim.starts.len(), wire.starts.len());
    let first_difference = sim
        .starts
        .iter()
        .zip(&wire.starts)
        .position(|(a, b)| a != b);
    assert_eq!(
        first_difference,
        None,
        "first different release: {:?}",
        first_difference.map(|i| (sim.starts[i], wire.starts[i]))
    );
}

#[test]
fn qcn_the_simulator_and_the_sender_release_the_same_frames_at_the_same_rates() {
    check(CcKind::Qcn, rp::Spacing::Exact);
}

#[test]
fn dcqcn_the_simulator_and_the_sender_release_the_same_frames_at_the_same_rates() {
    check(CcKind::Dcqcn, rp::Spacing::Exact);
}

/// ns-3's NIC arithmetic (whole-nanosecond gaps, a new rate from the next frame on) is the
/// core's, so both drivers run it alike.
#[test]
fn dcqcn_with_ns3_spacing_the_simulator_and_the_sender_release_the_same_frames() {
    check(CcKind::Dcqcn, rp::Spacing::Ns3);
}
