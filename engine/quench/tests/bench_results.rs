//! scripts/bench/bench-results.py (what scripts/bench/bench-all.sh writes docs/results.md with), fed
//! benchmark outputs written here: every key of a benchmark's JSON is a row or a column (a peer
//! the parser has never heard of included), a part parsed again replaces only its own tables,
//! the simulator's ns-3 tables stay when a run had no ns-3, and output it cannot read is an
//! error naming the part.
use std::path::Path;
use std::process::Command;

mod common;

fn results(args: &[&str]) -> (bool, String, String) {
    common::outcome(
        Command::new("python3")
            .arg(common::repo().join("scripts/bench/bench-results.py"))
            .args(args)
            .output()
            .unwrap(),
    )
}

/// Writes `stdout` to DIR/PART.out and parses it into DIR/figures.
fn parse(dir: &Path, part: &str, stdout: &str, command: &str) -> (bool, String, String) {
    let out = dir.join(format!("{part}.out"));
    std::fs::write(&out, stdout).unwrap();
    let figures = dir.join("figures");
    std::fs::create_dir_all(&figures).unwrap();
    results(&[
        "parse",
        part,
        out.to_str().unwrap(),
        "--dir",
        figures.to_str().unwrap(),
        "--command",
        command,
    ])
}

fn render(dir: &Path) -> String {
    let md = dir.join("results.md");
    let (ok, _, err) = results(&[
        "render",
        dir.join("figures").to_str().unwrap(),
        md.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    std::fs::read_to_string(md).unwrap()
}

/// bench-forward.sh's output: the latency part's JSON line, then the rates' (with `ovs`, a
/// forwarder this parser does not name anywhere).
fn forward_out(quench64: f64) -> String {
    format!(
        "| a table |\n{{\"latency\": {{}}}}\nshaping: ...\n\
         {{\"mpps\": {{\"64\": {{\"source\": 2.5, \"quench\": {quench64}, \"bridge\": 1.0, \
         \"ovs\": 0.5}}, \"1500\": {{\"source\": 2.4, \"quench\": 1.1, \"bridge\": 0.8, \
         \"ovs\": 0.4}}}}, \
         \"shaping_fraction\": {{\"1gbit\": 0.9904, \"100mbit\": 1.0014}}}}\n"
    )
}

fn dpdk_out(c: [f64; 3], q: [f64; 3]) -> String {
    let mut s = String::new();
    for r in 0..3 {
        s += &format!(
            "round {}: c_loop frames=1 seconds=3.0 mpps={:.2}\n\
             round {}: quench frames=1 seconds=3.0 mpps={:.2} rx_drops=0 flooded=0\n\
             round {}: c_loop frames=1 seconds=3.0 mpps=100.00 (packed pool)\n\
             round {}: ovs_dpdk frames=1 seconds=3.0 mpps=20.00\n",
            r + 1,
            c[r],
            r + 1,
            q[r],
            r + 1,
            r + 1
        );
    }
    s + "bench-dpdk: C loop 61.00 Mpps, quench 66.00 Mpps (medians), ratio quench/C = 1.08\n"
}

/// Whether `md` shows the ns-3 row of the first simulator run, once.
fn has_ns3_row(md: &str) -> bool {
    rows(
        md,
        "Simulator against ns-3",
        "| A: 2 x 20 MB incast | 5.00 |",
    ) == 1
}

/// How many lines of `md`'s section `title` start with `start`.
fn rows(md: &str, title: &str, start: &str) -> usize {
    section(md, title)
        .iter()
        .filter(|l| l.starts_with(start))
        .count()
}

/// The lines of `md` under the heading `## title`, up to the next heading.
fn section<'a>(md: &'a str, title: &str) -> Vec<&'a str> {
    md.lines()
        .skip_while(|l| *l != format!("## {title}"))
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .collect()
}

#[test]
fn every_key_is_a_row_or_a_column_and_a_rerun_replaces_only_its_tables() {
    let dir = common::ScratchDir::new("bench-results");
    let d = &dir.0;
    std::fs::create_dir_all(d).unwrap();
    let (ok, _, err) = parse(
        d,
        "forward",
        &forward_out(1.2),
        "scripts/bench/bench-forward.sh",
    );
    assert!(ok, "{err}");
    let (ok, _, err) = parse(
        d,
        "dpdk",
        &dpdk_out([60.0, 61.0, 62.0], [66.0, 70.0, 72.0]),
        "scripts/bench/bench-dpdk.sh",
    );
    assert!(ok, "{err}");
    let md = render(d);
    assert!(
        md.lines()
            .any(|l| l.starts_with("Machine: ") && l.contains("kernel")),
        "{md}"
    );

    let fwd = section(&md, "Forwarding rate");
    let header = fwd.iter().find(|l| l.starts_with("| frame")).unwrap();
    for col in [
        "source Mpps",
        "quench Mpps",
        "bridge Mpps",
        "ovs Mpps",
        "quench / bridge",
        "quench / ovs",
    ] {
        assert!(header.contains(col), "{col} missing: {header}");
    }
    assert!(
        fwd.contains(&"| 64 B | 2.500 | 1.200 | 1.000 | 0.500 | 1.20 | 2.40 |"),
        "{fwd:#?}"
    );
    assert!(
        fwd.iter()
            .any(|l| l.starts_with("`scripts/bench/bench-forward.sh` (")),
        "{fwd:#?}"
    );
    let shaping = section(&md, "Egress shaping");
    assert!(shaping.contains(&"| 1gbit | 99.04 |"), "{shaping:#?}");

    let dpdk = section(&md, "DPDK forwarding, one core");
    // Medians of the rounds; ratio quench / program; a peer in the same line format is a row.
    for row in [
        "| c_loop | 61.00 | 60.00-62.00 | 3 | 1.15 |",
        "| quench | 70.00 | 66.00-72.00 | 3 | - |",
        "| c_loop (packed pool) | 100.00 | 100.00-100.00 | 3 | 0.70 |",
        "| ovs_dpdk | 20.00 | 20.00-20.00 | 3 | 3.50 |",
    ] {
        assert!(dpdk.contains(&row), "{row} missing: {dpdk:#?}");
    }

    // Rerunning one part: its table changes, the other stays as it was.
    let (ok, _, err) = parse(
        d,
        "forward",
        &forward_out(2.0),
        "scripts/bench/bench-forward.sh",
    );
    assert!(ok, "{err}");
    let again = render(d);
    assert!(section(&again, "Forwarding rate")
        .contains(&"| 64 B | 2.500 | 2.000 | 1.000 | 0.500 | 2.00 | 4.00 |"));
    assert_eq!(section(&again, "DPDK forwarding, one core"), dpdk);
}

/// bench-dpdk.sh's JSON line: each program is compared with quench on the same ports (the key's
/// suffix), and the C loop's floors are labelled so, with no ratio on the mix (that loop never
/// reads a frame there).
#[test]
fn dpdk_programs_meet_quench_on_their_own_ports_and_floors_are_labelled() {
    let dir = common::ScratchDir::new("bench-results-floors");
    let d = &dir.0;
    std::fs::create_dir_all(d).unwrap();
    let out = "round 1: ...\n\
        {\"mpps\": {\"quench\": [30.0], \"quench_mix\": [12.0], \"quench_mix_pcap\": [6.0], \
        \"ovs_dpdk_mix_pcap\": [1.5]}, \"floor_mpps\": {\"c_loop\": [40.0], \
        \"c_loop_mix\": [400.0], \"c_loop_mix_pcap\": [8.0]}, \"quench_over_ovs_dpdk\": 4.0}\n";
    let (ok, _, err) = parse(d, "dpdk", out, "scripts/bench/bench-dpdk.sh");
    assert!(ok, "{err}");
    let md = render(d);
    let dpdk = section(&md, "DPDK forwarding, one core");
    for row in [
        "| quench_mix_pcap | 6.00 | 6.00-6.00 | 1 | - |",
        "| ovs_dpdk_mix_pcap | 1.50 | 1.50-1.50 | 1 | 4.00 |",
        "| c_loop (floor) | 40.00 | 40.00-40.00 | 1 | 0.75 |",
        "| c_loop_mix (floor) | 400.00 | 400.00-400.00 | 1 | - |",
        "| c_loop_mix_pcap (floor) | 8.00 | 8.00-8.00 | 1 | - |",
    ] {
        assert!(dpdk.contains(&row), "{row} missing: {dpdk:#?}");
    }
}

#[test]
fn the_ns3_tables_stay_when_a_run_had_no_ns3() {
    let dir = common::ScratchDir::new("bench-results-sim");
    let d = &dir.0;
    std::fs::create_dir_all(d).unwrap();
    let row = |qw: f64, nw: &str| {
        format!(
            "{{\"scenario\": \"A: 2 x 20 MB incast\", \"quench_wall_s\": {qw}, \
             \"quench_cpu_s\": 0.02, \"quench_mb\": 7.0, \"ns3_wall_s\": {nw}, \
             \"ns3_cpu_s\": {nw}, \"ns3_mb\": {nw}, \
             \"quench_fct_us\": [3772.1, 3996.2], \"ns3_fct_us\": null}}"
        )
    };
    let with = format!(
        "a table\n{{\"rows\": [{}], \
         \"buckets\": {{\"quench against ns-3\": {{\"p50\": 20, \"p99\": 18}}}}}}\n",
        row(0.1, "5.0")
    );
    let (ok, _, err) = parse(d, "sim", &with, "scripts/bench/bench-sim.sh --ns3-dir DIR");
    assert!(ok, "{err}");
    let md = render(d);
    assert!(has_ns3_row(&md), "{md}");
    assert!(
        section(&md, "Simulator against ns-3: fat-tree slowdown buckets")
            .contains(&"| quench against ns-3 | 20 of 20 | 18 of 20 |")
    );

    let without = format!("{{\"rows\": [{}]}}\n", row(0.2, "null"));
    let (ok, _, err) = parse(d, "sim", &without, "scripts/bench/bench-sim.sh");
    assert!(ok, "{err}");
    assert!(err.contains("previous ns-3 tables stay"), "{err}");
    let md = render(d);
    assert_eq!(
        rows(&md, "Simulator", "| A: 2 x 20 MB incast | 0.200 |"),
        1,
        "{md}"
    );
    assert!(has_ns3_row(&md), "{md}");
}

#[test]
fn output_without_figures_is_an_error_naming_the_part() {
    let dir = common::ScratchDir::new("bench-results-bad");
    let d = &dir.0;
    std::fs::create_dir_all(d).unwrap();
    let (ok, _, err) = parse(
        d,
        "forward",
        "no figures here\n",
        "scripts/bench/bench-forward.sh",
    );
    assert!(!ok);
    assert!(err.contains("forward") && err.contains("mpps"), "{err}");
    let (ok, _, err) = parse(d, "nonsense", "{}\n", "x");
    assert!(!ok);
    assert!(err.contains("unknown part"), "{err}");
    assert!(!d.join("figures/forward.json").exists());
    let (ok, _, err) = results(&[
        "render",
        d.join("figures").to_str().unwrap(),
        d.join("r.md").to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(err.contains("no figures"), "{err}");
}
