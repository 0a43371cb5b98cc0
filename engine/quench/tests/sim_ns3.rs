//! `quench sim --ns3-config`: an HPCC ns-3 config.txt as run.py writes it runs unchanged, its
//! outputs land where ns-3 puts them, and the `hpcc-dcqcn` preset at the same `--bw` is the
//! same run.

use std::path::{Path, PathBuf};
use std::process::Command;

fn quench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_quench"))
}

/// `quench sim -q ARGS` in directory `d`.
fn sim_in(d: &Path, args: &[&str]) -> std::process::Output {
    quench()
        .current_dir(d)
        .args(["sim", "-q"])
        .args(args)
        .output()
        .unwrap()
}

/// A fresh directory laid out as ns-3's `simulation/`: `mix/` with a 2:1 incast at 100 Gb/s.
fn ns3_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("quench-sim-ns3-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("mix")).unwrap();
    std::fs::write(
        d.join("mix/topo_incast.txt"),
        "4 1 3\n3\n0 3 100Gbps 0.001ms 0\n1 3 100Gbps 0.001ms 0\n2 3 100Gbps 0.001ms 0\n",
    )
    .unwrap();
    std::fs::write(
        d.join("mix/flow_incast.txt"),
        "2\n0 2 3 100 300000 2\n1 2 3 100 300000 2\n",
    )
    .unwrap();
    d
}

/// run.py's template for `--cc dcqcn --bw 100 --topo topo_incast --trace flow_incast`.
fn run_py_config(cc_mode: u32) -> String {
    format!(
        "ENABLE_QCN 1\nUSE_DYNAMIC_PFC_THRESHOLD 1\n\nPACKET_PAYLOAD_SIZE 1000\n\n\
         TOPOLOGY_FILE mix/topo_incast.txt\nFLOW_FILE mix/flow_incast.txt\nTRACE_FILE mix/trace.txt\n\
         TRACE_OUTPUT_FILE mix/mix_topo_incast_flow_incast_dcqcn.tr\n\
         FCT_OUTPUT_FILE mix/fct_topo_incast_flow_incast_dcqcn.txt\n\
         PFC_OUTPUT_FILE mix/pfc_topo_incast_flow_incast_dcqcn.txt\n\n\
         SIMULATOR_STOP_TIME 4.00\n\nCC_MODE {cc_mode}\nALPHA_RESUME_INTERVAL 1\n\
         RATE_DECREASE_INTERVAL 4\nCLAMP_TARGET_RATE 0\nRP_TIMER 300\nEWMA_GAIN 0.00390625\n\
         FAST_RECOVERY_TIMES 1\nRATE_AI 20Mb/s\nRATE_HAI 200Mb/s\nMIN_RATE 1000Mb/s\n\
         DCTCP_RATE_AI 1000Mb/s\n\nERROR_RATE_PER_LINK 0.0000\nL2_CHUNK_SIZE 4000\n\
         L2_ACK_INTERVAL 1\nL2_BACK_TO_ZERO 0\n\nHAS_WIN 0\nGLOBAL_T 1\nVAR_WIN 0\nFAST_REACT 0\n\
         U_TARGET 0.95\nMI_THRESH 0\nINT_MULTI 1\nMULTI_RATE 0\nSAMPLE_FEEDBACK 0\n\
         PINT_LOG_BASE 1.01\nPINT_PROB 1.0\n\nRATE_BOUND 1\n\nACK_HIGH_PRIO 1\n\n\
         LINK_DOWN 0 0 0\n\nENABLE_TRACE 0\n\n\
         KMAX_MAP 2 100000000000 1600 400000000000 6400\n\
         KMIN_MAP 2 100000000000 400 400000000000 1600\n\
         PMAX_MAP 2 100000000000 0.20 400000000000 0.20\nBUFFER_SIZE 32\n\
         QLEN_MON_FILE mix/qlen_topo_incast_flow_incast_dcqcn.txt\n\
         QLEN_MON_START 2000000000\nQLEN_MON_END 2000100000\n"
    )
}

/// `quench sim` in `d` on mix/'s incast with `--preset PRESET` and `EXTRA`, into `q/`.
fn sim_preset(d: &Path, preset: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "--topology",
        "mix/topo_incast.txt",
        "--flows",
        "mix/flow_incast.txt",
        "--preset",
        preset,
        "--out",
        "q",
    ];
    args.extend_from_slice(extra);
    sim_in(d, &args)
}

fn fcts(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(str::to_string).collect()
}

#[test]
fn run_py_config_runs_unchanged_and_matches_the_preset() {
    let d = ns3_dir("ok");
    std::fs::write(
        d.join("mix/config_topo_incast_flow_incast_dcqcn.txt"),
        run_py_config(1),
    )
    .unwrap();
    // From ns-3's working directory, as `waf --run 'scratch/third mix/config...'`.
    assert!(sim_in(
        &d,
        &[
            "--ns3-config",
            "mix/config_topo_incast_flow_incast_dcqcn.txt",
            "--out",
            "q",
        ]
    )
    .status
    .success());
    let ns3 = fcts(&d.join("mix/fct_topo_incast_flow_incast_dcqcn.txt"));
    assert_eq!(ns3.len(), 2, "{ns3:?}");
    // ns-3 columns: sip dip sport dport size start_ns fct_ns standalone_fct_ns.
    let cols: Vec<&str> = ns3[0].split(' ').collect();
    assert_eq!(cols.len(), 8);
    assert_eq!(
        &cols[1..6],
        ["0b000201", "10000", "100", "300000", "2000000000"]
    );
    // The PFC log exists (empty or not); the queue monitor dumped at 2.0 s, the start.
    assert!(d.join("mix/pfc_topo_incast_flow_incast_dcqcn.txt").exists());
    let qlen =
        std::fs::read_to_string(d.join("mix/qlen_topo_incast_flow_incast_dcqcn.txt")).unwrap();
    assert!(qlen.starts_with("time: 2000000000\n3 1 "), "{qlen}");
    assert_eq!(qlen.lines().count(), 4, "{qlen}");

    // The same run from elsewhere: the paths resolve from the directory above mix/.
    let st = quench()
        .args(["sim", "-q", "--ns3-config"])
        .arg(d.join("mix/config_topo_incast_flow_incast_dcqcn.txt"))
        .arg("--out")
        .arg(d.join("q2"))
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(
        fcts(&d.join("mix/fct_topo_incast_flow_incast_dcqcn.txt")),
        ns3
    );

    // `--preset hpcc-dcqcn --bw 100` with only the topology and flows: the same FCTs.
    assert!(sim_in(
        &d,
        &[
            "--topology",
            "mix/topo_incast.txt",
            "--flows",
            "mix/flow_incast.txt",
            "--preset",
            "hpcc-dcqcn",
            "--bw",
            "100",
            "--out",
            "p",
        ]
    )
    .status
    .success());
    assert_eq!(fcts(&d.join("p/fct.txt")), ns3);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn unsupported_cc_mode_and_unknown_keys_fail_naming_them() {
    let d = ns3_dir("bad");
    for (text, want) in [
        (run_py_config(4), "CC_MODE 4: quench models"),
        (run_py_config(3), "CC_MODE 3 with HAS_WIN 0"),
        (run_py_config(1) + "MY_KNOB 7\n", "MY_KNOB"),
    ] {
        std::fs::write(d.join("mix/config.txt"), text).unwrap();
        let out = sim_in(&d, &["--ns3-config", "mix/config.txt", "--out", "q"]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
    }
    let out = sim_preset(&d, "hpcc-dcqcn", &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bw"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn sweep_runs_a_grid_with_one_directory_each_and_one_table() {
    let d = ns3_dir("sweep");
    std::fs::write(d.join("mix/config.txt"), run_py_config(1)).unwrap();
    assert!(sim_in(
        &d,
        &[
            "--ns3-config",
            "mix/config.txt",
            "--sweep",
            "host.mtu=1000,2000",
            "--seeds",
            "2",
            "--jobs",
            "2",
            "--out",
            "grid",
        ]
    )
    .status
    .success());
    let table = std::fs::read_to_string(d.join("grid/sweep.tsv")).unwrap();
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect())
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(
        names,
        [
            "host.mtu=1000,seed=1",
            "host.mtu=1000,seed=2",
            "host.mtu=2000,seed=1",
            "host.mtu=2000,seed=2"
        ]
    );
    for r in &rows {
        assert_eq!((r[1], r[2]), ("2", "2"), "{r:?}");
        // Each run has its own outputs, config.txt's files included.
        let dir = d.join("grid").join(r[0]);
        assert!(dir.join("summary.json").exists() && dir.join("fct.txt").exists());
        assert!(dir.join("fct_topo_incast_flow_incast_dcqcn.txt").exists());
    }
    // Twice the payload per packet: about half the events.
    let events = |i: usize| rows[i][11].parse::<f64>().unwrap();
    assert!(events(2) < 0.7 * events(0), "{table}");
    // A point of the grid is the plain run with the same values.
    assert!(sim_in(
        &d,
        &[
            "--ns3-config",
            "mix/config.txt",
            "--seed",
            "1",
            "--out",
            "plain",
        ]
    )
    .status
    .success());
    assert_eq!(
        std::fs::read_to_string(d.join("plain/fct.txt")).unwrap(),
        std::fs::read_to_string(d.join("grid/host.mtu=1000,seed=1/fct.txt")).unwrap()
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn hpccs_mix_files_read_as_ns3_reads_them() {
    // The shapes of HPCC's own mix/ files: a topology whose header counts fewer links than
    // follow and a note on the format after them, a flow file whose count line says 2 of its
    // flows, and config.txt's ACK_HIGH_PRIO 0 and ENABLE_TRACE 1; then its CC_MODE 3 (HPCC)
    // with its window and the rest of its own values.
    let d = ns3_dir("mix");
    std::fs::write(
        d.join("mix/topology.txt"),
        "4 1 3\n3\n0 3 100Gbps 0.001ms 0\n1 3 100Gbps 0.001ms 0\n2 3 100Gbps 0.001ms 0\n\
         0 9 25Gbps 0.001ms 0\n\nsrc0 dst0 rate delay error_rate\n...\n",
    )
    .unwrap();
    std::fs::write(
        d.join("mix/flow.txt"),
        "2\n0 2 3 100 300000 2\n1 2 3 100 300000 2\n0 1 3 100 5000 2\n\n\
         First line: # of flows\nsrc0 dst0 3 dst_port0 size0 start_time0\n",
    )
    .unwrap();
    let config = run_py_config(1)
        .replace("topo_incast.txt", "topology.txt")
        .replace("flow_incast.txt", "flow.txt")
        .replace("ACK_HIGH_PRIO 1", "ACK_HIGH_PRIO 0")
        .replace("ENABLE_TRACE 0", "ENABLE_TRACE 1");
    std::fs::write(d.join("mix/config.txt"), &config).unwrap();
    let out = sim_in(&d, &["--ns3-config", "mix/config.txt", "--out", "q"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for want in [
        "mix/topology.txt: 3 lines from line 6 on ignored",
        "mix/flow.txt: 3 lines from line 4 on ignored",
        "warning: mix/config.txt: ENABLE_TRACE 1",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    assert_eq!(
        fcts(&d.join("mix/fct_topo_incast_flow_incast_dcqcn.txt")).len(),
        2
    );
    // HPCC's own values (its mix/config.txt): HPCC with INT, a window scaled by the rate.
    let hpcc = config
        .replace("CC_MODE 1", "CC_MODE 3")
        .replace("RP_TIMER 300", "RP_TIMER 900")
        .replace("RATE_AI 20Mb/s", "RATE_AI 50Mb/s")
        .replace("RATE_HAI 200Mb/s", "RATE_HAI 100Mb/s")
        .replace("MIN_RATE 1000Mb/s", "MIN_RATE 100Mb/s")
        .replace("HAS_WIN 0", "HAS_WIN 1")
        .replace("VAR_WIN 0", "VAR_WIN 1")
        .replace("FAST_REACT 0", "FAST_REACT 1")
        .replace("PINT_LOG_BASE 1.01", "PINT_LOG_BASE 1.05");
    std::fs::write(d.join("mix/config.txt"), &hpcc).unwrap();
    let out = sim_in(&d, &["--ns3-config", "mix/config.txt", "--out", "q"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let fct = fcts(&d.join("mix/fct_topo_incast_flow_incast_dcqcn.txt"));
    assert_eq!(fct.len(), 2);
    // A config key quench does not model, a mode it does not, a bad rate: every problem in
    // one run.
    let bad = hpcc
        .replace("CC_MODE 3", "CC_MODE 6")
        .replace("GLOBAL_T 1", "GLOBAL_T 0")
        .replace("RATE_HAI 100Mb/s", "RATE_HAI 200");
    std::fs::write(d.join("mix/config.txt"), bad).unwrap();
    let out = sim_in(&d, &["--ns3-config", "mix/config.txt", "--out", "q"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "3 problems:",
        "CC_MODE 6: quench models",
        "GLOBAL_T 0",
        "RATE_HAI `200`",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn hpcc_incast_finishes_when_ns3_finishes_it() {
    // run.py's `--cc hp --bw 100` on two 20 MB flows into one 100G host. ns-3 (HPCC's
    // simulator, unmodified) finishes them at 3,227,732 and 3,677,547 ns: the first flow keeps
    // the larger share it took in the first microseconds, because HPCC's multiplicative steps
    // keep the ratio of the two rates and only RATE_AI (40 Mb/s per RTT) evens it out. That
    // share is set by which host's frame reaches the switch first when both send in the same
    // nanosecond: the host whose NIC scheduled its send first (`QbbNetDevice`'s `m_nextSend`,
    // set when its link goes idle, not by an ACK during a transmission).
    let d = ns3_dir("hp");
    std::fs::write(
        d.join("mix/flow_incast.txt"),
        "2\n0 2 3 100 20000000 2\n1 2 3 100 20000000 2\n",
    )
    .unwrap();
    let out = sim_preset(&d, "hpcc-hp", &["--bw", "100"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut fct: Vec<f64> = fcts(&d.join("q/fct.txt"))
        .iter()
        .map(|l| l.split(' ').nth(6).unwrap().parse().unwrap())
        .collect();
    fct.sort_by(f64::total_cmp);
    for (q, ns3) in fct.iter().zip([3_227_732.0, 3_677_547.0]) {
        assert!((q - ns3).abs() / ns3 < 0.01, "quench {fct:?}, ns-3 {ns3}");
    }
    let _ = std::fs::remove_dir_all(&d);
}
