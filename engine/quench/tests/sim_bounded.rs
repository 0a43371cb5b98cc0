//! `quench sim` ends when its flows are done, whatever `--stop` says, and its memory is bounded by
//! what it records: one short flow under a `--stop` of 10 s peaks under 50 MB of resident memory (the
//! kernel's count for the child, from wait4), and queues.csv holds a few rows.

use std::process::Command;

/// Resident-set peak of a child process, in octets, with its exit status.
// The child is reaped by wait4 (which also returns its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_measured(cmd: &mut Command) -> (i32, u64) {
    let child = cmd.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // Safety: `usage` is a plain C struct the call fills; `pid` is our own unreaped child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    // Linux counts ru_maxrss in KiB.
    (libc::WEXITSTATUS(status), usage.ru_maxrss as u64 * 1024)
}

#[test]
fn one_short_flow_under_a_long_stop_ends_with_the_flow_in_bounded_memory() {
    let d = std::env::temp_dir().join(format!("quench-sim-bounded-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("topo.txt"),
        "3 1 2\n2\n0 2 100Gbps 0.001ms 0\n1 2 100Gbps 0.001ms 0\n",
    )
    .unwrap();
    std::fs::write(d.join("flows.txt"), "1\n0 1 3 100 1000 2\n").unwrap();
    let out = d.join("out");
    let (code, rss) = run_measured(
        Command::new(env!("CARGO_BIN_EXE_quench"))
            .args(["sim", "-q", "--cc", "none", "--stop", "10s"])
            .arg("--topology")
            .arg(d.join("topo.txt"))
            .arg("--flows")
            .arg(d.join("flows.txt"))
            .arg("--out")
            .arg(&out),
    );
    assert_eq!(code, 0);
    assert!(rss < 50 << 20, "peak RSS {} MB", rss >> 20);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    // The flow starts at 2 s and takes a few microseconds: the run ends there, not at 10 s.
    let end = summary["end_ns"].as_u64().unwrap();
    assert!((2_000_000_000..2_001_000_000).contains(&end), "end {end}");
    let queues = std::fs::read_to_string(out.join("queues.csv")).unwrap();
    assert!(queues.lines().count() < 10, "{queues}");
    std::fs::remove_dir_all(&d).unwrap();
}
