//! The `quench` binary run from `/`, as an installed one is: it finds its presets and default
//! configurations inside itself, never through the source tree it was built from. And one
//! grammar for every command: units on durations and rates, errors that name the flag that is
//! wrong, value enums, the top-level help and shell completions. No port is opened (no root).
//!
use std::path::PathBuf;
use std::process::Command;

struct Run {
    ok: bool,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn quench(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_quench"))
        .current_dir("/")
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    Run {
        ok: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("quench-installed-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn presets_lists_every_bundled_file_with_a_line() {
    let r = quench(&["presets"]);
    assert!(r.ok, "{}", r.stderr);
    for name in [
        "dcqcn-paper",
        "hpcc-ns3",
        "ieee-8021qau",
        "nvidia",
        "send",
        "switch-qcn",
        "switch-pfc",
        "incast",
        "websearch",
    ] {
        assert!(
            r.stdout
                .lines()
                .any(|l| l.split_whitespace().next() == Some(name) && l.len() > name.len() + 10),
            "{name} missing in:\n{}",
            r.stdout
        );
    }
}

#[test]
fn bundled_scenario_runs_from_the_root_directory() {
    let out = temp_dir("sim");
    let r = quench(&[
        "sim",
        "-q",
        "--scenario",
        "incast",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(r.ok, "{}", r.stderr);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let fcts = std::fs::read_to_string(out.join("fct.txt")).unwrap();
    assert_eq!(fcts.lines().count(), 3, "{fcts}");
    assert!(summary.is_object());
    // `quench report` reads the simulator's summary.json.
    let r = quench(&["report", out.join("summary.json").to_str().unwrap()]);
    assert!(r.ok, "{}", r.stderr);
    assert!(r.stdout.starts_with("3 of 3 flows done"), "{}", r.stdout);
    assert!(r.stdout.contains("FCT mean"), "{}", r.stdout);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn preset_by_name_and_by_path_give_the_same_replay() {
    let dir = temp_dir("replay");
    let events = dir.join("np.csv");
    std::fs::write(
        &events,
        "time_ns,event,value\n0,rx,3\n10000,rx,3\n60000,rx,3\n",
    )
    .unwrap();
    let by_name = quench(&[
        "replay",
        "--algo",
        "np",
        "--config",
        "nvidia",
        "--events",
        events.to_str().unwrap(),
    ]);
    assert!(by_name.ok, "{}", by_name.stderr);
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/nvidia.toml");
    let by_path = quench(&[
        "replay",
        "--algo",
        "np",
        "--config",
        file,
        "--events",
        events.to_str().unwrap(),
    ]);
    assert!(by_path.ok, "{}", by_path.stderr);
    assert_eq!(by_name.stdout, by_path.stdout);
    assert_eq!(by_name.stdout.lines().count(), 4, "{}", by_name.stdout);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn send_reads_its_default_config_from_the_binary() {
    // The bundled `send` configuration loads; the run then fails on the port, not on a file.
    let r = quench(&["send", "--iface", "quench-no-such-ns-4712/eth0"]);
    assert!(!r.ok);
    assert!(!r.stderr.contains("cannot read"), "{}", r.stderr);
    assert!(r.stderr.contains("quench-no-such-ns-4712"), "{}", r.stderr);
}

#[test]
fn an_unknown_preset_name_lists_the_bundled_ones() {
    let r = quench(&[
        "sim",
        "--scenario",
        "incast",
        "--preset",
        "nvidai",
        "--out",
        "/nonexistent",
    ]);
    assert!(!r.ok);
    assert!(
        r.stderr.contains("`nvidai` is not a bundled preset"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("dcqcn-paper, hpcc-ns3, ieee-8021qau, nvidia"),
        "{}",
        r.stderr
    );
}

#[test]
fn an_ambiguous_rate_is_refused_by_the_flag_with_both_readings() {
    let r = quench(&["send", "--iface", "x0", "--rate", "100mbps"]);
    assert!(!r.ok);
    assert!(r.stderr.contains("--rate"), "{}", r.stderr);
    assert!(
        r.stderr.contains("100mbit for bits or 100MBps for bytes"),
        "{}",
        r.stderr
    );
    // Not blamed on the configuration file.
    assert!(!r.stderr.contains("flows["), "{}", r.stderr);
}

#[test]
fn durations_need_a_unit() {
    let r = quench(&["sim", "--scenario", "incast", "--stop", "5", "--out", "/x"]);
    assert!(!r.ok);
    assert!(r.stderr.contains("--stop"), "{}", r.stderr);
    assert!(r.stderr.contains("`5` is not a duration"), "{}", r.stderr);
    let r = quench(&["recv", "--iface", "x0", "--interval", "100"]);
    assert!(!r.ok);
    assert!(r.stderr.contains("--interval"), "{}", r.stderr);
}

#[test]
fn a_bare_duration_still_works_with_a_hint_and_a_retired_flag_names_its_replacement() {
    // Fails later, on the namespace: the duration itself was accepted.
    let r = quench(&[
        "send",
        "--iface",
        "quench-no-such-ns-4713/eth0",
        "--duration",
        "1",
    ]);
    assert!(!r.ok);
    assert!(r.stderr.contains("deprecated: write 1s"), "{}", r.stderr);
    assert!(r.stderr.contains("quench-no-such-ns-4713"), "{}", r.stderr);
    let r = quench(&["send", "--iface", "eth0", "--duration-s", "1"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("error: --duration-s is gone: write --duration with its unit"),
        "{}",
        r.stderr
    );
}

/// One error prefix and two exit statuses: 2 for a wrong command line (clap's, and a retired
/// flag), 1 for a run that failed.
#[test]
fn errors_say_error_and_exit_2_for_usage_1_for_a_failed_run() {
    let usage = quench(&["sim", "--no-such-flag"]);
    assert_eq!(usage.code, Some(2), "{}", usage.stderr);
    assert!(usage.stderr.starts_with("error: "), "{}", usage.stderr);
    let failed = quench(&["sim", "--scenario", "no-such-scenario", "--out", "/x"]);
    assert_eq!(failed.code, Some(1), "{}", failed.stderr);
    assert!(failed.stderr.starts_with("error: "), "{}", failed.stderr);
}

#[test]
fn presets_prints_one_and_lists_the_run_py_ones() {
    let all = quench(&["presets"]);
    assert!(
        all.ok && all.stdout.contains("hpcc-dcqcn-paper"),
        "{}",
        all.stdout
    );
    let one = quench(&["presets", "nvidia"]);
    assert!(
        one.ok && one.stdout.contains("[dcqcn_rp]"),
        "{}",
        one.stdout
    );
    let at = quench(&["presets", "hpcc-dcqcn", "--bw", "25gbit"]);
    assert!(
        at.ok && at.stdout.contains("RATE_AI 5Mb/s"),
        "{}",
        at.stdout
    );
    let no_bw = quench(&["presets", "hpcc-dcqcn"]);
    assert!(
        !no_bw.ok && no_bw.stderr.contains("give --bw"),
        "{}",
        no_bw.stderr
    );
    let unknown = quench(&["presets", "nvidiaa"]);
    assert!(
        !unknown.ok && unknown.stderr.contains("`nvidiaa`"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn sim_bw_takes_units_and_stop_refuses_a_negative_duration() {
    let r = quench(&[
        "sim",
        "--scenario",
        "incast",
        "--stop",
        "-5ms",
        "--out",
        "/x",
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("`-5ms` is negative"), "{}", r.stderr);
    let r = quench(&[
        "sim",
        "--scenario",
        "incast",
        "--bw",
        "2.5gbit",
        "--out",
        "/x",
    ]);
    assert!(r.stderr.contains("whole number of Gb/s"), "{}", r.stderr);
}

#[test]
fn drivers_are_one_value_enum() {
    let r = quench(&["recv", "--iface", "x0", "--driver", "xdp"]);
    assert!(!r.ok);
    assert!(
        r.stderr.contains("possible values: af_packet, af_xdp"),
        "{}",
        r.stderr
    );
    let r = quench(&["recv", "--iface", "x0", "--driver", "dpdk"]);
    assert!(!r.ok);
    if cfg!(feature = "dpdk") {
        assert!(!r.stderr.contains("built without DPDK"), "{}", r.stderr);
    } else {
        assert!(
            r.stderr.contains("this quench was built without DPDK"),
            "{}",
            r.stderr
        );
        assert!(r.stderr.contains("--features dpdk"), "{}", r.stderr);
    }
}

#[test]
fn top_level_help_describes_the_product_with_examples() {
    let r = quench(&["--help"]);
    assert!(r.ok);
    let first = r.stdout.lines().next().unwrap_or("");
    assert!(
        first.starts_with("quench runs the IEEE 802.1Qau QCN"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("Examples:"), "{}", r.stdout);
    assert!(
        r.stdout.contains("quench sim --scenario incast"),
        "{}",
        r.stdout
    );
}

#[test]
fn completions_are_generated_for_each_shell() {
    for (shell, marker) in [
        ("bash", "_quench()"),
        ("zsh", "#compdef quench"),
        ("fish", "complete -c quench"),
    ] {
        let r = quench(&["completions", shell]);
        assert!(r.ok, "{shell}: {}", r.stderr);
        assert!(r.stdout.contains(marker), "{shell}");
        // The subcommands and the new spellings are offered.
        assert!(
            r.stdout.contains("presets") && r.stdout.contains("control-socket"),
            "{shell}"
        );
    }
    let r = quench(&["completions", "cmd"]);
    assert!(!r.ok);
    assert!(r.stderr.contains("possible values"), "{}", r.stderr);
}
