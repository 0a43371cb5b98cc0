//! The closed loop in virtual time, without privileges: two generator-mode senders with QCN or
//! DCQCN reaction points, one switch egress queue shaped to 1 Gb/s with the QCN or RED/ECN
//! congestion point, one receiver (the DCQCN notification point). Frames are real bytes (built,
//! queued, marked, decoded, answered); only the clock is virtual and the links are ideal
//! (feedback reaches its sender 10 us after it is made).
use std::net::Ipv4Addr;

use quench_node::flowgen::FlowStart;
use quench_node::host::core::PacingConfig;
use quench_node::host::rp::HostRp;
use quench_node::switch::core::{Event, SwitchCore};
use quench_node::switch::cp::{CongestionConfig, CpHook};
use quench_node::switch::queue::{Class, QueueLimits, Shaper};
use quench_port::heap::HeapFrame;
use quench_port::Frame;
use quench_runtime::recv::worker::RecvWorker;
use quench_runtime::recv::RecvConfig;
use quench_runtime::send::worker::{Addressing, SendWorker};
use quench_runtime::switch::egress::Classified;
use quench_wire::ipv4::Ecn;
use quench_wire::MacAddr;
use units::{Duration, FlowId, Instant, Rate};

#[derive(Clone, Copy, PartialEq)]
enum Cc {
    Qcn,
    Dcqcn,
}

fn sender(mac: u8, flows: &[u32], cc: Cc) -> SendWorker {
    let schedule = flows
        .iter()
        .map(|&f| FlowStart {
            flow: FlowId(f),
            start: Duration::ZERO,
            destination: quench_wire::MacAddr(2, 0, 0, 0, 9, 1),
            priority: 3,
            max_rate: Rate::from_gbps(1),
            bytes: None,
        })
        .collect();
    let control = match cc {
        // rpgByteReset and rpgTimeReset scaled from the MIB's 10 Gb/s values to 1 Gb/s.
        Cc::Qcn => {
            let p: rp::QcnParams =
                toml::from_str("rpg_byte_reset = 15000\nrpg_time_reset = 1500").unwrap();
            HostRp::qcn(p.profile(Rate::from_gbps(1)).unwrap())
        }
        Cc::Dcqcn => {
            let p = rp::DcqcnParams::default();
            HostRp::Dcqcn(p.profile(Rate::from_gbps(1)).unwrap())
        }
    };
    SendWorker::new(
        PacingConfig::default(),
        1500,
        schedule,
        Instant::ZERO,
        control,
        Addressing {
            src_mac: MacAddr::new(2, 0, 0, 0, 1, mac),
            src_ip: Ipv4Addr::new(10, 0, 0, mac),
            dst_ip: Ipv4Addr::new(10, 0, 0, 100),
            vlan: 1,
            ecn: if cc == Cc::Dcqcn {
                Ecn::Ect0
            } else {
                Ecn::NotEct
            },
            cn_tag: cc == Cc::Qcn,
        },
    )
    .unwrap()
}

struct Run {
    rates: Vec<f64>,
    jain: Option<f64>,
    utilisation: f64,
    mean_queue: f64,
    cnms: u64,
    drops: u64,
}

fn run(flows_a: &[u32], flows_b: &[u32], ms: u64, cc: Cc) -> Run {
    let mut senders = [sender(1, flows_a, cc), sender(2, flows_b, cc)];
    let cfg: CongestionConfig = toml::from_str(match cc {
        // MinSampleBase scaled from the MIB's 150000 (for 10 Gb/s) to the 1 Gb/s bottleneck.
        Cc::Qcn => "port = \"r\"\npriorities = [3]\nqcn = { min_sample_base = 15000 }",
        // HPCC run.py: Kmin = 100 KB x bw/25G, Kmax = 400 KB x bw/25G, Pmax 0.2.
        Cc::Dcqcn => {
            "port = \"r\"\npriorities = [3]\nred = { kmin_bytes = 4000, kmax_bytes = 16000, pmax = 0.2 }"
        }
    })
    .unwrap();
    let hook = CpHook::from_config(0, &cfg, MacAddr::new(2, 0, 0, 0, 0, 0xcc)).unwrap();
    // The switch core with the bottleneck port (0); frames arrive on port 1.
    let mut q = SwitchCore::new(2);
    q.attach(0, QueueLimits::default(), hook, Rate::from_gbps(1));
    let mut pacer = Shaper::new(Rate::from_gbps(1), Duration::from_micros(12));
    // Latency is not measured here: a clock id no frame carries.
    let mut rx = RecvWorker::new(
        RecvConfig::on_clock(0),
        (cc == Cc::Dcqcn).then(|| np::NpParams::default().profile().unwrap()),
        Duration::from_millis(10),
        MacAddr::new(2, 0, 0, 0, 9, 1),
    );
    let mut in_flight: Vec<(Instant, usize, Vec<u8>)> = Vec::new();
    let mut buf = vec![0u8; 2048];
    let (mut q_sum, mut q_n) = (0f64, 0u64);
    let mut cnps = 0u64;
    let end = ms * 1_000_000;
    let mut t = 0;
    while t < end {
        let now = Instant::from_nanos(t);
        for (i, s) in senders.iter_mut().enumerate() {
            in_flight.retain(|(at, to, f)| {
                if *to == i && *at <= now {
                    s.on_rx(now, f);
                    false
                } else {
                    true
                }
            });
            s.on_timeout(now);
            while let Some((_, n)) = s.next_frame(now, now, &mut buf) {
                let f = Classified::classify(HeapFrame::copy_of(&buf[..n]).unwrap());
                let _ = q.handle_frame(now, 1, 0, Class::Data(3), f);
            }
        }
        while pacer.ready(now) {
            let Some((_, f)) = q.poll_transmit(now, 0) else {
                break;
            };
            pacer.on_send(now, f.frame.len() as u32);
            rx.on_frame(now, None, f.frame.data(), &mut |cnp| {
                let to = usize::from(cnp[5] == 2);
                in_flight.push((now + Duration::from_micros(10), to, cnp.to_vec()));
                cnps += 1;
            });
        }
        while let Some(Event::Cnm { cnm, .. }) = q.poll_event() {
            let to = usize::from(cnm[5] == 2);
            in_flight.push((now + Duration::from_micros(10), to, cnm));
        }
        rx.on_tick(now);
        if t > end / 2 {
            q_sum += q.queue(0).unwrap().stats()[3].depth_bytes as f64;
            q_n += 1;
        }
        t += 1_000;
    }
    let drops = q.queue(0).unwrap().stats()[3].drop_pkts;
    let cnms = q.queue(0).unwrap().hook().counters().cnms + cnps;
    let (_, _, log) = rx.finish(Instant::from_nanos(end));
    // Rates over the second half of the run, from the interval log.
    let ivs =
        quench_report::read_interval_log(std::path::Path::new("-"), &log.bytes().unwrap()).unwrap();
    let half = ms as f64 / 2e3;
    let mut bytes = std::collections::BTreeMap::<u32, f64>::new();
    let mut span = (f64::INFINITY, 0f64);
    for iv in ivs.iter().filter(|iv| iv.start_s >= half) {
        *bytes.entry(iv.flow).or_default() += iv.bytes();
        span = (span.0.min(iv.start_s), span.1.max(iv.start_s + iv.dur_s));
    }
    let rates: Vec<f64> = bytes
        .values()
        .map(|b| b * 8.0 / (span.1 - span.0))
        .collect();
    Run {
        jain: quench_report::jain_index(&rates),
        utilisation: rates.iter().sum::<f64>() / 1e9,
        rates,
        mean_queue: q_sum / q_n as f64,
        cnms,
        drops,
    }
}

fn check(r: Run, max_mean_queue: f64) {
    eprintln!(
        "rates {:?} Mb/s, Jain {:?}, utilisation {:.3}, mean queue {:.0} B, CNMs+CNPs {}, drops {}",
        r.rates
            .iter()
            .map(|x| (x / 1e6).round())
            .collect::<Vec<_>>(),
        r.jain,
        r.utilisation,
        r.mean_queue,
        r.cnms,
        r.drops
    );
    assert!(r.cnms > 0);
    assert!(r.jain.is_some_and(|j| j >= 0.95), "Jain {:?}", r.jain);
    assert!(r.utilisation >= 0.9, "utilisation {}", r.utilisation);
    assert!(
        r.mean_queue <= max_mean_queue,
        "mean queue {}",
        r.mean_queue
    );
    assert_eq!(r.drops, 0);
}

#[test]
fn qcn_two_flows_share_a_1g_bottleneck() {
    // Mean queue within 2 x Qeq (26000 octets).
    check(run(&[1], &[2], 200, Cc::Qcn), 52_000.0);
}

#[test]
fn dcqcn_two_flows_share_a_1g_bottleneck() {
    // Queue around the RED band (Kmax 16000 octets).
    check(run(&[1], &[2], 200, Cc::Dcqcn), 32_000.0);
}
