//! scripts/analysis/appliance-summary.py (the table and JSON line scripts/testbed/appliance.sh prints), fed the
//! files of two scripted runs: QCN meeting every target of issue 17 and DCQCN missing them. It
//! must read the testbed's MTU, take the queue's bound from each run's switch config (QCN
//! 2 x Qeq, DCQCN Kmax), split the switch's drops into queue drops, PFC headroom overruns and
//! the rest, count the PAUSE frames sent and honoured and the unicast frames flooded after the
//! first second, count the datagrams the receiver's kernel dropped (two /proc/net/snmp samples),
//! give the appliance's pacing over its unstalled windows (the reaction-point pairs only), and judge
//! each target.
use std::path::Path;
use std::process::Command;

mod common;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// One run's files: UDP goodput per host (Mb/s) at the receiver, the bottleneck's queue depth
/// (octets) in each sample while frames leave, drops (queue, receive, PFC headroom), the PAUSE
/// frames the switch sent (the appliance honoured half of them per pair), the unstalled pacing
/// windows' largest deviation, and the switch's congestion point.
struct Run<'a> {
    cc: &'a str,
    udp: [f64; 2],
    depths: &'a [u64],
    queue_drops: u64,
    rx_drops: u64,
    /// PFC: frames over an ingress port's headroom, PAUSE frames the switch sent.
    headroom_drops: u64,
    pauses: u64,
    /// Unicast frames the switch flooded, by the last sample (the first one is a second
    /// before the others and after the first frame).
    flooded: u64,
    max_dev: f64,
    congestion: &'a str,
}

fn run(dir: &Path, r: &Run) {
    let cc = r.cc;
    for (i, mbps) in r.udp.iter().enumerate() {
        write(
            dir,
            &format!("iperf-{cc}-udp-{i}.json"),
            &format!(
                r#"{{"end": {{"sum_received": {{"bits_per_second": {}}}, "sum": {{"bits_per_second": 8e8, "packets": 28000}}}}}}"#,
                mbps * 1e6
            ),
        );
        write(
            dir,
            &format!("iperf-{cc}-tcp-{i}.json"),
            r#"{"end": {"sum_received": {"bits_per_second": 4.5e8}}}"#,
        );
    }
    let mut q = String::new();
    for (k, d) in r.depths.iter().enumerate() {
        // The drops grow to their total by the last sample.
        let last = k + 1 == r.depths.len();
        q += &format!(
            r#"{{"uptime_ns": {}, "ports": [{{"name": "s0", "queue_drops": 0, "rx_drops": {}, "tx_drops": 0, "tx_pkts": 0, "queue_depth_bytes": 0, "pfc_headroom_drops": {}, "pfc_pauses_sent": {}, "flooded_unicast": {}}}, {{"name": "r0", "queue_drops": {}, "rx_drops": 0, "tx_drops": 0, "tx_pkts": {}, "queue_depth_bytes": {d}}}]}}"#,
            1_000_000_000 * (k + 1),
            if last { r.rx_drops } else { 0 },
            if last { r.headroom_drops } else { 0 },
            if last { r.pauses } else { 0 },
            if last { r.flooded } else { 0 },
            if last { r.queue_drops } else { 0 },
            1000 * (k + 1)
        );
        q += "\n";
    }
    write(dir, &format!("queue-{cc}.jsonl"), &q);
    // The receiver's UDP counters before and after: 5 datagrams more dropped for a full buffer.
    let h = "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors";
    write(
        dir,
        &format!("udp-{cc}.txt"),
        &format!("{h}\nUdp: 10 0 1 3 2 0\n{h}\nUdp: 900 0 6 3 7 0\n"),
    );
    let pacing = |dev: f64| {
        format!(
            r#""pacing": {{"windows": 150, "within_1pct": 0.9, "max_abs_dev": 0.05, "unstalled_windows": 100, "unstalled_within_1pct": {}, "unstalled_max_abs_dev": {dev}}}"#,
            if dev <= 0.01 { 1.0 } else { 0.5 }
        )
    };
    let pair = |role: &str, dev: f64| {
        format!(
            r#"{{"role": "{role}", "table": {{"queue_drops": 7}}, "counters": {{"cnms_accepted": 3, "cnps_accepted": 0, "unknown_flow": 0, "forged": {{"total": 0}}, "cnps_sent": 0, "pfc_rx": {}}}, "latency_us": {{"p50": 10.0, "p99": 90.0}}, {}}}"#,
            if role == "rp" { r.pauses / 2 } else { 0 },
            pacing(dev)
        )
    };
    // The NP pair paces nothing: its windows (none here, a large deviation if it had any) must
    // not count.
    write(
        dir,
        &format!("appliance-{cc}.log"),
        &format!(
            "quench appliance: a line of text\n{{\"appliance\": [{}, {}, {}]}}\n",
            pair("rp", r.max_dev),
            pair("rp", r.max_dev / 2.0),
            pair("np", 0.5)
        ),
    );
    write(
        dir,
        &format!("switch-{cc}.toml"),
        &format!(
            "[[ports]]\nname = \"r0\"\niface = \"x\"\n[[congestion]]\nport = \"r0\"\npriorities = [0]\n{}\n",
            r.congestion
        ),
    );
}

#[test]
fn targets_from_two_scripted_runs() {
    let dir = common::ScratchDir::new("appliance-summary");
    std::fs::create_dir_all(&dir.0).unwrap();
    write(
        &dir.0,
        "testbed.json",
        r#"{"mtu": 3502, "udp_len": 3474, "udp_rate": "800M"}"#,
    );
    run(
        &dir.0,
        &Run {
            cc: "qcn",
            udp: [470.0, 460.0],
            depths: &[60_000, 80_000, 100_000],
            queue_drops: 0,
            rx_drops: 0,
            headroom_drops: 0,
            pauses: 0,
            flooded: 0,
            max_dev: 0.008,
            congestion: "qcn = { queue_size_set_point = 50000 }",
        },
    );
    run(
        &dir.0,
        &Run {
            cc: "dcqcn",
            udp: [600.0, 200.0],
            depths: &[100_000, 160_000],
            queue_drops: 40,
            rx_drops: 2,
            headroom_drops: 3,
            pauses: 10,
            flooded: 7,
            max_dev: 0.02,
            congestion: "red = { kmin_bytes = 30000, kmax_bytes = 120000, pmax = 0.2 }",
        },
    );
    let out = Command::new("python3")
        .arg(common::repo().join("scripts/analysis/appliance-summary.py"))
        .arg(&dir.0)
        .args(["qcn", "dcqcn"])
        .output()
        .unwrap();
    let (ok, out, err) = common::outcome(out);
    assert!(ok, "{out}{err}");
    assert!(
        out.starts_with("MTU 3502, UDP datagrams of 3474 octets, each host offers 800M"),
        "{out}"
    );
    assert!(out.contains("\nqcn targets: jain>=0.95 yes, util>=0.90 yes, queue_mean<=bound yes, no_switch_drops yes, no_unicast_flood_after_1s yes, paced_within_1pct yes, tcp_completed yes\n"), "{out}");
    assert!(out.contains("\ndcqcn targets: jain>=0.95 NO, util>=0.90 NO, queue_mean<=bound NO, no_switch_drops NO, no_unicast_flood_after_1s NO, paced_within_1pct NO, tcp_completed yes\n"), "{out}");
    let json = out.lines().rfind(|l| l.starts_with('{')).unwrap();
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["testbed"]["mtu"], 3502);
    let (q, d) = (&v["runs"][0], &v["runs"][1]);
    assert_eq!(q["set_point"], "Qeq 50 KB");
    assert_eq!(q["queue_bound_kb"], 100.0);
    // The mean over the samples while frames left (the first sample has no predecessor).
    assert_eq!(q["queue_mean_kb"], 90.0);
    assert_eq!(q["utilisation"], 0.93);
    assert_eq!(q["pacing_unstalled_windows"], 200);
    assert_eq!(q["pacing_unstalled_max_dev"], 0.008);
    assert_eq!(d["set_point"], "RED 30-120 KB");
    assert_eq!(d["queue_bound_kb"], 120.0);
    assert_eq!(d["switch_drops"], 45);
    assert_eq!(
        (
            q["flooded_unicast_after_1s"].as_u64(),
            d["flooded_unicast_after_1s"].as_u64()
        ),
        (Some(0), Some(7))
    );
    assert_eq!(d["switch_queue_drops"], 40);
    assert_eq!(d["switch_headroom_drops"], 3);
    assert_eq!(d["pfc_pauses_sent"], 10);
    assert_eq!(d["appliance_pfc_rx"], 10);
    assert_eq!(q["switch_headroom_drops"], 0);
    assert_eq!(q["pfc_pauses_sent"], 0);
    assert_eq!(d["pacing_unstalled_max_dev"], 0.02);
    assert_eq!(d["appliance_queue_drops"], 14);
    assert_eq!(d["receiver_udp_drops"]["RcvbufErrors"], 5);
    assert_eq!(d["receiver_udp_drops"]["InErrors"], 5);
}
