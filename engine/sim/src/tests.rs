//! End-to-end simulator tests without congestion control: timing, fairness, loss recovery,
//! link-rate changes and determinism.

use units::{Duration, Instant, Rate};

use super::cc::CcSetup;
use super::config::LinkChange;
use super::report::{self, Summary};
use super::{FlowSpec, RunConfig, Topology, World};

/// `n` hosts (0..n) on one switch (node n), all links `rate`, 1 us.
pub fn star(n: u32, rate: &str) -> Topology {
    let mut s = format!("{} 1 {}\n{}\n", n + 1, n, n);
    for h in 0..n {
        s += &format!("{h} {n} {rate} 1us 0\n");
    }
    Topology::parse(&s).unwrap()
}

pub fn flow(src: u32, dst: u32, bytes: u64, start_us: u64) -> FlowSpec {
    FlowSpec {
        src,
        dst,
        pg: 3,
        dport: 100,
        bytes,
        start: Instant::ZERO + Duration::from_micros(start_us),
    }
}

fn run(topo: &Topology, flows: &[FlowSpec], cfg: RunConfig) -> World {
    let mut w = World::new(topo, flows, CcSetup::none(), cfg).unwrap();
    w.run(&mut |_| {});
    w
}

#[test]
fn one_flow_completes_in_its_ideal_time_plus_the_ack() {
    let topo = star(2, "100Gbps");
    let w = run(&topo, &[flow(0, 1, 1_000_000, 0)], RunConfig::default());
    let f = &w.flows[0];
    assert!(f.done);
    let fct = (f.finish - f.spec.start).as_nanos();
    let ideal = f.ideal_fct.as_nanos();
    // ns-3's standalone FCT: 1000 packets of 1048 octets at 100 Gb/s = 83.84 us, plus twice the
    // 2 us one-way delay, plus one 1000-octet serialisation per hop (2 x 80 ns).
    assert_eq!(ideal, 83_840 + 4_000 + 160);
    // Serialisation times round up to the nanosecond per packet (<= 1 ns in 84).
    assert!(
        fct >= ideal && fct <= ideal + ideal / 200,
        "fct {fct} ideal {ideal}"
    );
}

#[test]
fn incast_shares_the_bottleneck_fairly() {
    let topo = star(3, "100Gbps");
    let flows = [flow(0, 2, 2_000_000, 0), flow(1, 2, 2_000_000, 0)];
    let w = run(&topo, &flows, RunConfig::default());
    let s = Summary::of(&w, "none");
    assert_eq!(s.totals.flows_done, 2);
    for f in &s.flows {
        let slow = f.slowdown.unwrap();
        assert!((1.95..2.05).contains(&slow), "slowdown {slow}");
    }
    assert!(s.jain.unwrap() > 0.999);
    // The bottleneck port (switch port towards host 2) queues about half the data.
    let bottleneck = s.ports.iter().find(|p| p.peer == 2).unwrap();
    assert!(bottleneck.queue_max_bytes > 1_900_000, "{bottleneck:?}");
    assert_eq!(s.totals.drops, 0);
}

#[test]
fn losses_are_recovered() {
    let mut topo = star(2, "10Gbps");
    topo.links[1].err = 0.01;
    let w = run(&topo, &[flow(0, 1, 500_000, 0)], RunConfig::default());
    let s = Summary::of(&w, "none");
    assert!(s.totals.drops > 0);
    assert!(s.flows[0].retransmits > 0);
    assert!(s.flows[0].done);
}

#[test]
fn tail_drop_queue_limit_and_go_back_n() {
    let topo = star(3, "10Gbps");
    let mut cfg = RunConfig::default();
    cfg.switch.queue_limit_bytes = Some(50_000);
    let flows = [flow(0, 2, 1_000_000, 0), flow(1, 2, 1_000_000, 0)];
    let w = run(&topo, &flows, cfg);
    let s = Summary::of(&w, "none");
    assert!(s.totals.drops > 0);
    assert_eq!(s.totals.flows_done, 2);
    assert!(s.ports.iter().all(|p| p.queue_max_bytes <= 50_000));
}

#[test]
fn link_rate_change_slows_the_flow() {
    let topo = star(2, "10Gbps");
    let mut cfg = RunConfig::default();
    // From 100 us on, the switch's port towards host 1 runs at 1 Gb/s.
    cfg.link_changes.push(LinkChange {
        at: Instant::from_nanos(100_000),
        from: 2,
        to: 1,
        rate: Rate::from_gbps(1),
    });
    cfg.switch.queue_limit_bytes = Some(10_000_000);
    let w = run(&topo, &[flow(0, 1, 1_000_000, 0)], cfg);
    let f = &w.flows[0];
    let fct = (f.finish - f.spec.start).as_nanos();
    // ~125 KB in the first 100 us at 10 Gb/s, the other ~0.9 MB (with headers) at 1 Gb/s.
    assert!((7_000_000..8_000_000).contains(&fct), "fct {fct}");
}

#[test]
fn same_seed_same_bytes() {
    let mut topo = star(4, "25Gbps");
    topo.links[3].err = 0.001;
    let flows: Vec<FlowSpec> = (0..3).map(|i| flow(i, 3, 300_000, i as u64 * 3)).collect();
    let out = |seed: u64| {
        let cfg = RunConfig {
            seed,
            ..RunConfig::default()
        };
        let w = run(&topo, &flows, cfg);
        (
            report::fct_txt(&w),
            report::flows_csv(&w).unwrap(),
            report::queues_csv(&w).unwrap(),
            serde_json::to_string(&Summary::of(&w, "none")).unwrap(),
        )
    };
    let a = out(5);
    assert_eq!(a, out(5));
    assert_ne!(a, out(6), "the seed drives the link losses");
}

#[test]
fn unknown_hosts_and_self_flows_are_errors() {
    let topo = star(2, "10Gbps");
    let e = World::new(
        &topo,
        &[flow(0, 2, 1, 0)],
        CcSetup::none(),
        RunConfig::default(),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("not a host"), "{e}");
    let e = World::new(
        &topo,
        &[flow(1, 1, 1, 0)],
        CcSetup::none(),
        RunConfig::default(),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("same host"), "{e}");
}

#[test]
fn a_run_ends_with_its_last_flow_not_at_its_stop() {
    // One 1 KB flow under a 10 s stop: the run ends when the flow completes, and the time
    // series hold a few samples, not one per period for 10 s.
    let topo = star(2, "10Gbps");
    let cfg = RunConfig {
        stop: Some(Instant::ZERO + Duration::from_secs(10)),
        ..RunConfig::default()
    };
    let w = run(&topo, &[flow(0, 1, 1000, 0)], cfg);
    assert!(w.flows[0].done);
    assert_eq!(w.now(), w.flows[0].finish);
    assert!(
        w.now() < Instant::ZERO + Duration::from_millis(1),
        "{:?}",
        w.now()
    );
    let q = report::queues_csv(&w).unwrap();
    assert!(q.lines().count() < 10, "{q}");
    let s = Summary::of(&w, "none");
    assert_eq!(s.end_ns, w.flows[0].finish.as_nanos());
}

#[test]
fn a_pause_of_the_ack_priority_holds_a_hosts_acks() {
    // ns-3's ACK_HIGH_PRIO 0: the NIC's ACK queue waits while priority 3 is paused. Hosts 0
    // and 1 send to host 2 and are paused by PFC; host 3 sends short flows to host 0, whose
    // ACKs then wait for host 0's pauses to end, so those flows complete later.
    let topo = star(4, "40Gbps");
    let mut flows = vec![flow(0, 2, 10_000_000_000, 0), flow(1, 2, 10_000_000_000, 0)];
    flows.extend((0..20).map(|i| flow(3, 0, 20_000, 100 + 50 * i)));
    let run_with = |prio: Option<u8>| {
        let mut cfg = RunConfig {
            stop: Some(Instant::ZERO + Duration::from_millis(2)),
            ..RunConfig::default()
        };
        cfg.host.ack_pause_prio = prio;
        let sections: super::cc::CcSections = toml::from_str(
            "[pfc]\nthreshold = \"static\"\nxoff_bytes = 100000\nxon_bytes = 97000\n",
        )
        .unwrap();
        let cc = CcSetup::new(super::CcKind::None, &sections, "t").unwrap();
        let mut w = World::new(&topo, &flows, cc, cfg).unwrap();
        w.run(&mut |_| {});
        let s = Summary::of(&w, "none");
        assert!(s.totals.pauses > 0);
        let short: Vec<u64> = s.flows[2..].iter().map(|f| f.fct_ns.unwrap()).collect();
        short.iter().sum::<u64>()
    };
    let (free, held) = (run_with(None), run_with(Some(3)));
    assert!(held > free, "held {held} free {free}");
}

#[test]
fn fct_csv_has_a_header_every_flow_and_the_fct_txt_values() {
    // Three flows, one of which cannot finish before the stop: an empty fct and slowdown.
    let topo = star(3, "10Gbps");
    let flows = [
        flow(0, 2, 100_000, 0),
        flow(1, 2, 50_000, 5),
        flow(0, 1, 100_000_000, 0),
    ];
    let cfg = RunConfig {
        stop: Some(Instant::ZERO + Duration::from_millis(1)),
        ..RunConfig::default()
    };
    let w = run(&topo, &flows, cfg);
    let s = Summary::of(&w, "none");
    let csv = report::fct_csv(&s);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "flow,src,dst,size,start_ns,fct_ns,ideal_ns,slowdown"
    );
    assert_eq!(lines.len(), 4);
    let row: Vec<&str> = lines[2].split(',').collect();
    assert_eq!(&row[..5], ["1", "1", "2", "50000", "5000"]);
    let fct: u64 = row[5].parse().unwrap();
    let ideal: u64 = row[6].parse().unwrap();
    let slow: f64 = row[7].parse().unwrap();
    assert!((slow - fct as f64 / ideal as f64).abs() < 1e-12);
    let unfinished: Vec<&str> = lines[3].split(',').collect();
    assert_eq!((unfinished[5], unfinished[7]), ("", ""), "{}", lines[3]);
    // fct.txt (ns-3's columns, for HPCC's analysis scripts) lists the finished flows with the
    // same FCTs.
    let txt = report::fct_txt(&w);
    assert_eq!(txt.lines().count(), 2);
    assert!(txt.lines().any(|l| l.split(' ').nth(6) == Some(row[5])));
}

#[test]
fn the_summary_table_shows_the_largest_queues_and_counts_the_rest() {
    // 20 hosts into host 20: the switch has 21 busy ports, the table shows 12.
    let topo = star(21, "10Gbps");
    let flows: Vec<FlowSpec> = (0..20).map(|i| flow(i, 20, 20_000, 0)).collect();
    let w = run(&topo, &flows, RunConfig::default());
    let s = Summary::of(&w, "none");
    assert_eq!(s.ports.len(), 21);
    let t = s.table();
    let port_lines = t
        .lines()
        .filter(|l| l.contains(":") && l.contains(">"))
        .count();
    assert_eq!(port_lines, 12, "{t}");
    assert!(
        t.contains("12 of 21 ports shown, those with the largest queues; 9 more in summary.json"),
        "{t}"
    );
    // The incast's bottleneck (towards host 20) is among them.
    assert!(t.contains(">20 "), "{t}");
}

#[test]
fn slowdown_by_size_bins_as_hpccs_fct_analysis() {
    // 100 finished flows of 1000, 2000, ... octets; in bucket b (ranks 5b..5b+4) the slowdowns
    // are b+5, b+4, ..., b+1 by size, so sorted b+1..b+5: p50 is the one at index int(5 x 0.5)
    // = 2 (b+3), p95 and p99 at index 4 (b+5); the size is the bucket's largest. One flow is
    // unfinished (left out) and one faster than its standalone time (slowdown 1).
    let mut s = Summary::of(&run(&star(2, "10Gbps"), &[], RunConfig::default()), "none");
    let flow = |id: u32, size: u64, fct: Option<u64>, ideal: u64| report::FlowSummary {
        id,
        src: 0,
        dst: 1,
        sport: 10_000,
        dport: 100,
        pg: 3,
        size,
        start_ns: 0,
        done: fct.is_some(),
        fct_ns: fct,
        ideal_fct_ns: ideal,
        slowdown: fct.map(|f| f as f64 / ideal as f64),
        avg_rate_bps: None,
        window_rate_bps: 0.0,
        notifications_sent: 0,
        notifications_received: 0,
        ce_received: 0,
        ue_received: 0,
        retransmits: 0,
    };
    for k in 0..100u64 {
        let (b, j) = (k / 5, k % 5);
        s.flows.push(flow(
            k as u32,
            1000 * (k + 1),
            Some(1000 * (b + 5 - j)),
            1000,
        ));
    }
    s.flows.push(flow(100, 5, None, 1000));
    let buckets = report::slowdown_by_size(&s);
    assert_eq!(buckets.len(), 20);
    for (b, x) in buckets.iter().enumerate() {
        let b = b as f64;
        assert_eq!(x.upto_pct as usize, 5 * (b as usize + 1));
        assert_eq!(x.size_max, 5000 * (b as u64 + 1));
        assert_eq!(
            (x.flows, x.p50, x.p95, x.p99),
            (5, b + 3.0, b + 5.0, b + 5.0)
        );
    }
    // Faster than standalone counts as 1; with fewer than 20 flows empty buckets are skipped.
    s.flows = vec![flow(0, 10, Some(500), 1000), flow(1, 20, Some(3000), 1000)];
    let buckets = report::slowdown_by_size(&s);
    assert_eq!(buckets.len(), 2);
    assert_eq!((buckets[0].upto_pct, buckets[0].p99), (50, 1.0));
    assert_eq!(
        (buckets[1].upto_pct, buckets[1].size_max, buckets[1].p50),
        (100, 20, 3.0)
    );
}

#[test]
fn plots_start_at_the_first_flow_and_name_what_they_show() {
    // 20 flows from 2 s on (as HPCC's flow files start), to one host: rates.svg draws the 12
    // largest and says so; slowdown.svg and slowdown.csv hold the size buckets.
    let topo = star(21, "10Gbps");
    let flows: Vec<FlowSpec> = (0..20)
        .map(|i| flow(i, 20, 10_000 * (u64::from(i) + 1), 2_000_000 + u64::from(i)))
        .collect();
    let mut w = World::new(&topo, &flows, CcSetup::none(), RunConfig::default()).unwrap();
    w.run(&mut |_| {});
    let dir = std::env::temp_dir().join(format!("quench-sim-plots-{}", std::process::id()));
    report::write_all(&mut w, "none", &dir).unwrap();
    let rates = std::fs::read_to_string(dir.join("rates.svg")).unwrap();
    assert!(
        rates.contains("12 of 20 flows shown: the 12 with the most octets"),
        "{}",
        &rates[..400]
    );
    assert!(rates.contains("\nflow 8\n") && !rates.contains("\nflow 7\n"));
    // The time axis's labels (ms) are the run's, from 2000 on, not 0.
    let ticks: Vec<f64> = rates
        .split("text-anchor=\"middle\"")
        .skip(1)
        .filter_map(|t| t.split('>').nth(1)?.split('<').next()?.trim().parse().ok())
        .collect();
    assert!(
        !ticks.is_empty() && ticks.iter().all(|&t| t >= 2000.0),
        "{ticks:?}"
    );
    let csv = std::fs::read_to_string(dir.join("slowdown.csv")).unwrap();
    assert_eq!(csv.lines().count(), 21, "{csv}");
    let svg = std::fs::read_to_string(dir.join("slowdown.svg")).unwrap();
    assert!(svg.contains("FCT slowdown by flow size") && svg.contains("p99"));
    std::fs::remove_dir_all(&dir).unwrap();
}
