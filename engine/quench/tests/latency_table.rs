//! scripts/analysis/latency-table.py (bench-forward.sh's latency tables) from cells written here: one
//! round gives the single-run table; several give each round's p99s and the medians over the
//! rounds of the p99s and of the per-round ratios (not the ratio of the medians); traced cells
//! add the kernel's first stage against the bridge's whole path. Bad arguments are refused.
use std::path::Path;
use std::process::Command;

mod common;

/// A cell's sink report with these p50 / p99 / p99.9 (us), and, if given, its traced twin's
/// stages report (the last line of latency-stages.py's output is its JSON).
fn cell(dir: &Path, name: &str, p: [f64; 3], stages: Option<[(&str, f64); 3]>) -> String {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    let ns = |us: f64| (us * 1e3) as u64;
    std::fs::write(
        d.join("summary.json"),
        format!(
            r#"{{"latency": {{"p50_ns": {}, "p99_ns": {}, "p999_ns": {}, "count": 4000}},
                "flows": [{{"lost": 0}}], "aggregate_bps": 1.0e8}}"#,
            ns(p[0]),
            ns(p[1]),
            ns(p[2])
        ),
    )
    .unwrap();
    if let Some(st) = stages {
        let body: Vec<String> = st
            .iter()
            .map(|(k, v)| format!(r#""{k}": {{"p50_us": 1.0, "p99_us": {v}}}"#))
            .collect();
        std::fs::write(
            dir.join(format!("{name}-stages.txt")),
            format!(
                "quench: 4000 frames matched\n{{\"stages\": {{{}}}}}\n",
                body.join(", ")
            ),
        )
        .unwrap();
    }
    d.to_string_lossy().into_owned()
}

fn table(args: &[String]) -> (bool, String, String) {
    let out = Command::new("python3")
        .arg(common::repo().join("scripts/analysis/latency-table.py"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Untraced cells at `load` with p50 `p[0]` and p99.9 `p[1]`, one round per entry of `rounds`
/// (each a forwarder's p99 per forwarder): the arguments of the first round alone, and of all.
fn rounds_of(
    dir: &Path,
    load: &str,
    p: [f64; 2],
    rounds: &[[(&str, f64); 3]],
) -> (Vec<String>, Vec<String>) {
    let (mut one, mut all) = (Vec::new(), Vec::new());
    for (r, fwds) in rounds.iter().enumerate() {
        for &(f, p99) in fwds {
            let c = cell(
                dir,
                &format!("r{}-{f}-{load}", r + 1),
                [p[0], p99, p[1]],
                None,
            );
            if r == 0 {
                one.extend(["1".into(), f.into(), load.into(), c.clone()]);
            }
            all.extend([(r + 1).to_string(), f.into(), load.into(), c]);
        }
    }
    (one, all)
}

fn json_line(out: &str) -> serde_json::Value {
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

#[test]
fn one_round_is_the_single_run_table() {
    let dir = common::ScratchDir::new("latency-table-one");
    let mut a = Vec::new();
    for (f, p99) in [("quench", 30.0), ("bridge", 20.0), ("af_xdp", 25.0)] {
        let c = cell(&dir.0, &format!("r1-{f}-10"), [5.0, p99, 90.0], None);
        a.extend(["1".into(), f.into(), "10".into(), c]);
    }
    let (ok, out, err) = table(&a);
    assert!(ok, "{err}");
    assert!(
        out.contains("| 10 % | 5.0 / 30.0 / 90.0 | 5.0 / 20.0 / 90.0 | 5.0 / 25.0 / 90.0 | 1.50 |"),
        "{out}"
    );
    assert!(!out.contains("Median"), "{out}");
    let j = json_line(&out);
    assert_eq!(j["latency"]["10"]["bridge"]["p99_us"], 20.0);
}

/// The userspace path's cells (`quench_userspace`: `--fast-path off`) get their own ratio to the
/// bridge, in one round and over rounds: 12/20, 18/20, 24/20 -> 0.60, 0.90, 1.20, median 0.90,
/// two of three rounds at or below the bridge.
#[test]
fn the_userspace_path_gets_its_own_ratio_to_the_bridge() {
    let dir = common::ScratchDir::new("latency-table-userspace");
    let rounds =
        [12.0, 18.0, 24.0].map(|k| [("quench", 30.0), ("quench_userspace", k), ("bridge", 20.0)]);
    let (one, three) = rounds_of(&dir.0, "50", [4.0, 50.0], &rounds);
    let (ok, out, err) = table(&one);
    assert!(ok, "{err}");
    assert!(
        out.contains(
            "| 50 % | 4.0 / 30.0 / 50.0 | 4.0 / 12.0 / 50.0 | 4.0 / 20.0 / 50.0 | 1.50 | 0.60 |"
        ),
        "{out}"
    );
    let (ok, out, err) = table(&three);
    assert!(ok, "{err}");
    assert!(out.contains("(q/b 1.50) (u/b 0.90)"), "{out}");
    assert!(
        out.contains("| 1.50 (1.50-1.50) | 3 of 3 |")
            || out.contains("| 0.90 (0.60-1.20) | 2 of 3 |"),
        "{out}"
    );
    let j = json_line(&out);
    assert_eq!(j["median"]["50"]["quench_userspace_over_bridge"], 0.9);
    assert_eq!(j["median"]["50"]["quench_over_bridge"], 1.5);
}

/// Open vSwitch's cells (`ovs`) get quench's ratio to them, in one round and over rounds:
/// quench 30 against OVS 60, 20, 40 -> 0.50, 1.50, 0.75, median 0.75, two of three rounds at or
/// below OVS.
#[test]
fn open_vswitch_gets_quenchs_ratio_to_it() {
    let dir = common::ScratchDir::new("latency-table-ovs");
    let rounds = [60.0, 20.0, 40.0].map(|o| [("quench", 30.0), ("bridge", 20.0), ("ovs", o)]);
    let (one, three) = rounds_of(&dir.0, "90", [4.0, 80.0], &rounds);
    let (ok, out, err) = table(&one);
    assert!(ok, "{err}");
    assert!(out.contains("| OVS afxdp p50 / p99 / p99.9 us |"), "{out}");
    assert!(
        out.contains(
            "| 90 % | 4.0 / 30.0 / 80.0 | 4.0 / 20.0 / 80.0 | 4.0 / 60.0 / 80.0 | 1.50 | 0.50 |"
        ),
        "{out}"
    );
    let (ok, out, err) = table(&three);
    assert!(ok, "{err}");
    assert!(
        out.contains("OVS afxdp 20.0 (q/b 1.50) (q/ovs 1.50)"),
        "{out}"
    );
    assert!(out.contains("| 0.75 (0.50-1.50) | 2 of 3 |"), "{out}");
    let j = json_line(&out);
    assert_eq!(j["median"]["90"]["quench_over_ovs"], 0.75);
    assert_eq!(j["median"]["90"]["quench_over_ovs_rounds"][1], 1.5);
}

#[test]
fn rounds_give_the_median_of_each_rounds_ratio() {
    let dir = common::ScratchDir::new("latency-table-rounds");
    // Three rounds at one load: quench / bridge p99 40/20, 10/20, 30/10 -> ratios 2.0, 0.5,
    // 3.0, median 2.0 (the ratio of the medians, 30/20 = 1.5, is not what the table gives);
    // testpmd 20, 20, 15 -> quench / testpmd 2.0, 0.5, 2.0, median 2.0. Only round 2 has quench
    // at or below the bridge. Every cell traced: the first stage's p99s give medians 12 / 14
    // against the bridge's whole 10.
    let q = [40.0, 10.0, 30.0];
    let b = [20.0, 20.0, 10.0];
    let x = [20.0, 20.0, 15.0];
    let mut a = Vec::new();
    for r in 0..3 {
        for (f, p99, st) in [
            (
                "quench",
                q[r],
                [
                    ("send->in", 12.0),
                    ("in->kick", 9.0 + r as f64),
                    ("kick->sink", 3.0),
                ],
            ),
            (
                "bridge",
                b[r],
                [("send->in", 5.0), ("in->sink", 3.0), ("send->sink", 10.0)],
            ),
            (
                "af_xdp",
                x[r],
                [("send->in", 14.0), ("in->kick", 3.0), ("kick->sink", 2.0)],
            ),
        ] {
            let c = cell(
                &dir.0,
                &format!("r{}-{f}-10", r + 1),
                [5.0, p99, 90.0],
                Some(st),
            );
            a.extend([(r + 1).to_string(), f.into(), "10".into(), c]);
        }
    }
    let (ok, out, err) = table(&a);
    assert!(ok, "{err}");
    assert!(
        out.contains(
            "round 2 p99 us: 10 %: quench 10.0, bridge 20.0, testpmd af_xdp 20.0 (q/b 0.50)"
        ),
        "{out}"
    );
    assert!(
        out.contains("| 10 % | 30.0 (10.0-40.0) | 20.0 (10.0-20.0) | 20.0 (15.0-20.0) | 2.00 (0.50-3.00) | 1 of 3 | 2.00 (0.50-2.00) |"),
        "{out}"
    );
    assert!(
        out.contains("| 10 % | 12.0 | 14.0 | 10.0 | 10.0 | 3.0 | 1.20, 1.40 |"),
        "{out}"
    );
    let j = json_line(&out);
    assert_eq!(j["rounds"], 3);
    assert_eq!(j["median"]["10"]["quench_over_bridge"], 2.0);
    assert_eq!(j["median"]["10"]["quench_over_af_xdp"], 2.0);
    assert_eq!(j["stages_p99_us"]["10"]["bridge_send_sink_p99_us"], 10.0);
}

#[test]
fn bad_arguments_are_refused_with_a_reason() {
    let (ok, _, err) = table(&["1".into(), "quench".into(), "10".into()]);
    assert!(!ok && err.contains("usage"), "{err}");
    let dir = common::ScratchDir::new("latency-table-bad");
    let c = cell(&dir.0, "c", [1.0, 2.0, 3.0], None);
    let (ok, _, err) = table(&["1".into(), "vpp".into(), "10".into(), c]);
    assert!(!ok && err.contains("unknown forwarder 'vpp'"), "{err}");
}

#[test]
fn a_traced_cell_whose_matching_slipped_is_named_and_left_out() {
    let dir = common::ScratchDir::new("latency-table-slipped");
    let mut a = Vec::new();
    for (f, st) in [
        (
            "quench",
            [("send->in", 12.0), ("in->kick", -30.0), ("kick->sink", 3.0)],
        ),
        (
            "af_xdp",
            [("send->in", 14.0), ("in->kick", 3.0), ("kick->sink", 2.0)],
        ),
    ] {
        let c = cell(&dir.0, &format!("r1-{f}-50"), [5.0, 20.0, 90.0], Some(st));
        a.extend(["1".into(), f.into(), "50".into(), c]);
    }
    // latency-stages.py's verdict on the quench cell: its FIFO matching slipped.
    let txt = dir.0.join("r1-quench-50-stages.txt");
    let rep = std::fs::read_to_string(&txt).unwrap();
    let rep = rep.replacen("{\"stages\"", "{\"matching_slipped\": true, \"stages\"", 1);
    std::fs::write(&txt, rep).unwrap();
    let (ok, out, err) = table(&a);
    assert!(ok, "{err}");
    assert!(
        out.contains("| 50 % | - | 14.0 | - | - | 3.0 | -, - |"),
        "{out}"
    );
    assert!(
        out.contains("matching slipped (negative stage times): round 1 quench 50 %"),
        "{out}"
    );
    let j = json_line(&out);
    assert_eq!(j["stages_slipped"][0], "round 1 quench 50 %");
}
