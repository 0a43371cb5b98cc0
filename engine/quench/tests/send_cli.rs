//! `quench send`'s argument errors name the problem before any port is touched (no root needed).
use std::process::Command;

fn send(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_quench"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .arg("send")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn src_ip_count_must_match_the_ports() {
    let (ok, err) = send(&["--iface", "a0", "--iface", "a1", "--src-ip", "10.0.0.1"]);
    assert!(!ok);
    assert!(
        err.contains("--src-ip given 1 times for 2 --iface ports"),
        "{err}"
    );
}

#[test]
fn a_missing_namespace_is_named() {
    let (ok, err) = send(&["--iface", "quench-no-such-ns-4711/eth0", "--duration", "0s"]);
    assert!(!ok);
    assert!(err.contains("--iface quench-no-such-ns-4711/eth0"), "{err}");
    assert!(
        err.contains("no network namespace \"quench-no-such-ns-4711\""),
        "{err}"
    );
}

#[test]
fn overlapping_flow_ranges_are_refused() {
    let (ok, err) = send(&["--iface", "a0", "--iface", "a1", "--flow-stride", "0"]);
    assert!(!ok);
    assert!(err.contains("more than --flow-stride 0"), "{err}");
}

#[test]
fn per_port_options_are_given_once_or_once_per_port() {
    let (ok, err) = send(&[
        "--iface",
        "a0",
        "--iface",
        "a1",
        "--iface",
        "a2",
        "--config",
        "configs/send.toml",
        "--config",
        "configs/send.toml",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--config given 2 times for 3 --iface ports"),
        "{err}"
    );
    let (ok, err) = send(&[
        "--iface", "a0", "--iface", "a1", "--iface", "a2", "--rate", "1mbit", "--rate", "2mbit",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--rate given 2 times for 3 --iface ports"),
        "{err}"
    );
}

#[test]
fn a_pausing_sink_must_be_one_of_the_sinks() {
    let (ok, err) = send(&[
        "--iface",
        "a0",
        "--sink",
        "r0/eth0",
        "--sink-pfc-pause",
        "r1/eth0=400:200",
    ]);
    assert!(!ok);
    assert!(
        err.contains("\"r1/eth0\" is not one of the --sink ports"),
        "{err}"
    );
    let (ok, err) = send(&[
        "--iface",
        "a0",
        "--sink",
        "r0/eth0",
        "--sink-pfc-pause",
        "400:200",
    ]);
    assert!(!ok);
    assert!(err.contains("expected LABEL=PERIOD_US:PAUSE_US"), "{err}");
    let (ok, err) = send(&[
        "--iface",
        "a0",
        "--sink",
        "r0/eth0",
        "--sink",
        "r1/eth0",
        "--sink-out",
        "x",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--sink-out given 1 times for 2 --sink ports"),
        "{err}"
    );
}
