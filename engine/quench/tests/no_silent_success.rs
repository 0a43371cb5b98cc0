//! Inputs that used to run to exit status 0 while doing nothing, or something other than what
//! they said: each now fails with a message on standard error that names the problem.

use std::process::Output;

mod common;
use common::{incast_inputs, quench_in, ScratchDir, INCAST_ARGS};

/// The run failed, said nothing on standard output about it, and its standard error holds
/// every one of `want`.
fn fails_saying(out: &Output, want: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "exit 0; stderr: {err}");
    for w in want {
        assert!(err.contains(w), "`{w}` not in: {err}");
    }
}

/// A fresh directory with a 2:1 incast at 100 Gb/s in ns-3's formats and its config.txt.
fn inputs(name: &str) -> ScratchDir {
    let d = incast_inputs(
        &format!("quench-silent-{name}"),
        "100Gbps",
        [30_000, 30_000],
    );
    let config = "TOPOLOGY_FILE topo.txt\nFLOW_FILE flows.txt\nCC_MODE 1\nRP_TIMER 300\n\
                  RATE_AI 20Mb/s\nRATE_HAI 200Mb/s\nEWMA_GAIN 0.00390625\nL2_ACK_INTERVAL 1\n\
                  HAS_WIN 0\nENABLE_TRACE 0\nKMAX_MAP 1 100000000000 1600\n\
                  KMIN_MAP 1 100000000000 400\nPMAX_MAP 1 100000000000 0.2\n";
    std::fs::write(d.0.join("config.txt"), config).unwrap();
    d
}

#[test]
fn a_config_txt_without_flow_file_is_an_error() {
    let dir = inputs("noflow");
    let d = dir.0.as_path();
    let text = std::fs::read_to_string(d.join("config.txt")).unwrap();
    std::fs::write(
        d.join("config.txt"),
        text.replace("FLOW_FILE flows.txt\n", ""),
    )
    .unwrap();
    let out = quench_in(
        d,
        &["sim", "-q", "--ns3-config", "config.txt", "--out", "o"],
    );
    fails_saying(&out, &["config.txt: FLOW_FILE is missing"]);
    // The same file with it runs.
    std::fs::write(d.join("config.txt"), text).unwrap();
    let out = quench_in(
        d,
        &["sim", "-q", "--ns3-config", "config.txt", "--out", "o"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn ns3_config_with_options_it_would_override_is_an_error() {
    let dir = inputs("conflict");
    let d = dir.0.as_path();
    for (extra, want) in [
        (&["--preset", "nvidia"][..], "--ns3-config and --preset"),
        (
            &["--topology", "topo.txt"][..],
            "--ns3-config and --topology",
        ),
        (&["--flows", "flows.txt"][..], "--ns3-config and --flows"),
        (&["--bw", "100"][..], "--ns3-config and --bw"),
    ] {
        let mut args = vec!["sim", "-q", "--ns3-config", "config.txt", "--out", "o"];
        args.extend_from_slice(extra);
        fails_saying(&quench_in(d, &args), &[want]);
    }
    // An overrides file that names another topology, flows or preset.
    std::fs::write(d.join("over.toml"), "preset = \"nvidia\"\n").unwrap();
    let out = quench_in(
        d,
        &[
            "sim",
            "-q",
            "--ns3-config",
            "config.txt",
            "--overrides",
            "over.toml",
            "--out",
            "o",
        ],
    );
    fails_saying(&out, &["over.toml `preset`"]);
}

#[test]
fn a_preset_for_another_congestion_control_is_an_error() {
    let dir = inputs("preset");
    let d = dir.0.as_path();
    let run = |cc: &str, preset: &str| {
        quench_in(
            d,
            &[
                "sim",
                "-q",
                "--topology",
                "topo.txt",
                "--flows",
                "flows.txt",
                "--cc",
                cc,
                "--preset",
                preset,
                "--out",
                "o",
            ],
        )
    };
    fails_saying(
        &run("qcn", "hpcc-ns3"),
        &[
            "--preset hpcc-ns3 sets [dcqcn_rp], [np]",
            "--cc qcn reads only [qcn_rp]",
        ],
    );
    fails_saying(&run("none", "dcqcn-paper"), &["--cc none"]);
    // One that has the control's table runs (testbed-1g has both reaction points').
    assert!(run("qcn", "testbed-1g").status.success());
    assert!(run("dcqcn", "hpcc-ns3").status.success());
    // quench send checks the same before it opens a port.
    let out = quench_in(
        d,
        &[
            "send",
            "--iface",
            "quench-no-such-if",
            "--cc",
            "qcn",
            "--preset",
            "nvidia",
        ],
    );
    fails_saying(
        &out,
        &["--preset nvidia does not apply to cc qcn", "[qcn_rp]"],
    );
}

#[test]
fn a_sweep_checks_its_keys_before_any_run() {
    let dir = inputs("sweep");
    let d = dir.0.as_path();
    let sweep = |spec: &str| {
        let mut args = vec!["sim", "-q", "--sweep", spec, "--out", "grid"];
        args.extend_from_slice(&INCAST_ARGS);
        quench_in(d, &args)
    };
    fails_saying(
        &sweep("bogus=1,2"),
        &["no run started", "unknown field `bogus`"],
    );
    assert!(!d.join("grid/bogus=1").exists() && !d.join("grid/bogus=2").exists());
    // A value out of range in one point stops the others too.
    fails_saying(&sweep("host.mtu=1000,5"), &["no run started", "host.mtu"]);
    assert!(!d.join("grid/host.mtu=1000").exists());
}

#[test]
fn report_of_an_empty_or_foreign_log_is_an_error() {
    let dir = inputs("report");
    let d = dir.0.as_path();
    std::fs::write(d.join("empty.hlog"), "").unwrap();
    fails_saying(
        &quench_in(d, &["report", "empty.hlog"]),
        &["empty.hlog: empty file"],
    );
    // A standard HdrHistogram interval log whose tags are not quench's `lat.<flow>`.
    let mut text = Vec::new();
    let mut ser = hdrhistogram::serialization::V2DeflateSerializer::new();
    let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    h.record(1000).unwrap();
    {
        let mut w = hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder::new()
            .begin_log_with(&mut text, &mut ser)
            .unwrap();
        for tag in ["rtt", "service"] {
            w.write_histogram(
                &h,
                std::time::Duration::from_secs(1),
                std::time::Duration::from_secs(1),
                hdrhistogram::serialization::interval_log::Tag::new(tag),
            )
            .unwrap();
        }
    }
    std::fs::write(d.join("other.hlog"), &text).unwrap();
    let out = quench_in(d, &["report", "other.hlog"]);
    fails_saying(
        &out,
        &[
            "other.hlog: 2 histograms, none tagged `lat.<flow>`",
            "tags found: rtt, service",
        ],
    );
    assert!(out.stdout.is_empty());
}
