//! What scripts read: `fct.csv`, `quench report --csv` and `--json`, JSON lines that say their
//! `type`, sweeps with `--json`, and times in nanoseconds throughout.

use std::process::Output;

mod common;
use common::{incast_inputs, quench_in, INCAST_ARGS};

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Every line a JSON object with a `type`.
fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            assert!(v["type"].is_string(), "no type: {l}");
            v
        })
        .collect()
}

#[test]
fn sim_writes_fct_csv_and_json_lines_with_their_type() {
    let dir = incast_inputs("quench-machine-sim", "10Gbps", [30_000, 60_000]);
    let d = dir.0.as_path();
    let mut args = vec!["sim", "--out", "o"];
    args.extend_from_slice(&INCAST_ARGS);
    args.push("--json");
    let lines = json_lines(&ok(&quench_in(d, &args)));
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["totals"]["flows_done"], 2);
    assert!(lines
        .iter()
        .all(|l| l["type"] == "summary" || l["type"] == "progress"));
    let csv = std::fs::read_to_string(d.join("o/fct.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows[0],
        ["flow", "src", "dst", "size", "start_ns", "fct_ns", "ideal_ns", "slowdown"]
    );
    assert_eq!(rows.len(), 3);
    assert_eq!(&rows[2][..4], ["1", "1", "2", "60000"]);
    // The same FCT as fct.txt (ns-3's columns) and summary.json.
    let fct_ns = summary["flows"][1]["fct_ns"].as_u64().unwrap().to_string();
    assert_eq!(rows[2][5], fct_ns);
    let txt = std::fs::read_to_string(d.join("o/fct.txt")).unwrap();
    assert!(txt.lines().all(|l| l.split(' ').count() == 8), "{txt}");
    assert!(txt
        .lines()
        .any(|l| l.split(' ').nth(6) == Some(fct_ns.as_str())));

    // `quench report` of the summary: the flows as CSV (fct.csv's table), or one JSON line.
    let csv2 = ok(&quench_in(d, &["report", "o/summary.json", "--csv"]));
    assert_eq!(csv2, csv);
    let j = json_lines(&ok(&quench_in(d, &["report", "o", "--json"])));
    assert_eq!(j.len(), 1);
    assert_eq!(
        (&j[0]["type"], &j[0]["kind"]),
        (&"summary".into(), &"sim".into())
    );
    assert_eq!(
        j[0]["flows"][1]["fct_ns"].as_u64(),
        summary["flows"][1]["fct_ns"].as_u64()
    );
}

#[test]
fn a_sweep_with_json_prints_its_rows_and_its_table_in_nanoseconds() {
    let dir = incast_inputs("quench-machine-sweep", "10Gbps", [30_000, 60_000]);
    let d = dir.0.as_path();
    let mut args = vec![
        "sim",
        "--sweep",
        "host.mtu=1000,2000",
        "--jobs",
        "1",
        "--out",
        "g",
    ];
    args.extend_from_slice(&INCAST_ARGS);
    args.push("--json");
    let out = quench_in(d, &args);
    let rows = json_lines(&ok(&out));
    assert_eq!(rows.len(), 2, "{rows:?}");
    let mut runs: Vec<&str> = rows.iter().map(|r| r["run"].as_str().unwrap()).collect();
    runs.sort_unstable();
    assert_eq!(runs, ["host.mtu=1000", "host.mtu=2000"]);
    for r in &rows {
        assert_eq!(r["type"], "sweep_row");
        assert!(r["fct_p99_ns"].as_u64().unwrap() > 10_000, "{r}");
        assert!(r["wall_ns"].as_u64().is_some(), "{r}");
    }
    // The table: on standard error with --json, and in sweep.tsv, every time in ns.
    assert!(String::from_utf8_lossy(&out.stderr).contains("fct_p99_ns"));
    let tsv = std::fs::read_to_string(d.join("g/sweep.tsv")).unwrap();
    let head: Vec<&str> = tsv.lines().next().unwrap().split('\t').collect();
    for c in [
        "fct_mean_ns",
        "fct_p50_ns",
        "fct_p99_ns",
        "wall_ns",
        "events",
    ] {
        assert!(head.contains(&c), "{c}: {head:?}");
    }
    assert!(
        !head.iter().any(|c| c.ends_with("_us") || c.ends_with("_s")),
        "{head:?}"
    );
    let first: Vec<&str> = tsv.lines().nth(1).unwrap().split('\t').collect();
    let p99 = rows.iter().find(|r| r["run"] == first[0]).unwrap()["fct_p99_ns"].to_string();
    let i = head.iter().position(|c| *c == "fct_p99_ns").unwrap();
    assert_eq!(first[i], p99);
}

#[test]
fn report_of_an_interval_log_as_table_csv_and_json() {
    let dir = incast_inputs("quench-machine-log", "10Gbps", [30_000, 60_000]);
    let d = dir.0.as_path();
    let mut log = quench_report::IntervalLog::new(0.0, "test", quench_report::LatencyKind::OneWay);
    let hist = |v: u64, n: usize| {
        let mut h = quench_report::latency_histogram();
        for _ in 0..n {
            h.record(v).unwrap();
        }
        h
    };
    // Flow 3: 100 frames of 1500 octets in each 0.1 s (12 Mb/s), 50 us, then 70 us.
    log.add(3, 0.0, 0.1, &hist(50_000, 100), &hist(1500, 100))
        .unwrap();
    log.add(3, 0.1, 0.1, &hist(70_000, 100), &hist(1500, 100))
        .unwrap();
    std::fs::write(d.join("r.hlog"), log.bytes().unwrap()).unwrap();
    // The table: one token per header, as many as each row has.
    let table = ok(&quench_in(d, &["report", "r.hlog"]));
    let widths: Vec<usize> = table
        .lines()
        .map(|l| l.split_whitespace().count())
        .collect();
    assert_eq!(widths, [6, 6, 6], "{table}");
    assert!(table.starts_with("      t_s"), "{table}");
    let csv = ok(&quench_in(d, &["report", "r.hlog", "--csv"]));
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows[0],
        ["end_ns", "flow", "rate_bps", "frames", "p50_ns", "p99_ns", "p999_ns"]
    );
    assert_eq!(&rows[1][..4], ["100000000", "3", "12000000", "100"]);
    let p50: u64 = rows[2][4].parse().unwrap();
    assert!(p50.abs_diff(70_000) < 100, "{p50}");
    let j = json_lines(&ok(&quench_in(d, &["report", "r.hlog", "--json"])));
    assert_eq!(j.len(), 2);
    assert_eq!(j[1]["type"], "interval");
    assert_eq!(j[1]["end_ns"], 200_000_000);
    // A .hgrm: its percentiles.
    std::fs::write(d.join("l.hgrm"), quench_report::hgrm(&hist(50_000, 10))).unwrap();
    let j = json_lines(&ok(&quench_in(d, &["report", "l.hgrm", "--json"])));
    assert_eq!(j[0]["type"], "percentiles");
    assert_eq!(j[0]["count"], 10);
    assert!(
        j[0]["p99_ns"].as_u64().unwrap().abs_diff(50_000) < 100,
        "{}",
        j[0]
    );
}
