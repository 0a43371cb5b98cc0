//! scripts/analysis/cpu-budget.py (the CPU budget scripts/testbed/appliance.sh prints for each UDP phase), fed two
//! scripted samples of a 2-CPU machine over 2 s with known process and /proc/stat times: it must
//! give each role's share of a CPU, the microseconds per delivered frame, the machine's columns,
//! the CPU each role would need at the bottleneck's line rate, name a process that exited before
//! the last sample, and refuse a file with one sample or a malformed line, naming the problem.
use std::process::Command;

mod common;

/// A `/proc/PID/stat` line from field 3 (the state) on, with `ticks` split into utime and stime
/// (fields 14 and 15).
fn stat(ticks: u64) -> String {
    let mut f: Vec<String> = ["S", "1", "1", "1", "0", "-1", "4194560", "0", "0", "0", "0"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    f.push((ticks * 3 / 5).to_string());
    f.push((ticks - ticks * 3 / 5).to_string());
    f.extend(
        ["0", "0", "20", "0", "3", "0", "100"]
            .iter()
            .map(|s| s.to_string()),
    );
    f.join(" ")
}

fn switch(tx_pkts: u64, tx_bytes: u64, rx_pkts: u64) -> String {
    format!(
        r#"{{"ports":[{{"name":"s0","rx_pkts":{rx_pkts},"tx_pkts":5,"tx_bytes":500}},{{"name":"r0","rx_pkts":7,"tx_pkts":{tx_pkts},"tx_bytes":{tx_bytes}}}]}}"#
    )
}

/// Two samples 2 s apart on 2 CPUs at 100 ticks per second: 400 ticks, 0.5 % of a CPU each.
fn fixture() -> String {
    let mut s = String::new();
    s += "sample 1000.0 start\nhz 100\ncpu  1000 0 500 2000 0 0 100 0 0 0\n";
    for (role, pid, ticks) in [
        ("switch", 10, 800),
        ("appliance", 11, 100),
        ("client", 20, 50),
        ("client", 21, 50),
        ("client", 22, 70),
        ("server", 30, 5),
        ("stats", 40, 1),
        ("ksoftirqd", 14, 9),
    ] {
        s += &format!("proc {role} {pid} {}\n", stat(ticks));
    }
    s += &format!("switch {}\n", switch(1_000, 10_000, 3_000));
    // user +150, system +80, idle +120, iowait +10, softirq +40: 400 ticks.
    s += "sample 1002.0 end\nhz 100\ncpu  1150 0 580 2120 10 0 140 0 0 0\n";
    for (role, pid, ticks) in [
        ("switch", 10, 900),    // +100: 50 %
        ("appliance", 11, 160), // +60: 30 %
        ("client", 20, 90),     // +40
        ("client", 21, 80),     // +30
        ("server", 30, 15),     // +10: 5 %
        ("stats", 40, 1),       // +0
        ("ksoftirqd", 14, 13),  // +4: 2 %
    ] {
        s += &format!("proc {role} {pid} {}\n", stat(ticks));
    }
    // 100k frames of 1250 octets in 2 s: 500 Mb/s delivered, of 200k received.
    s += &format!(
        "switch {}\n",
        switch(101_000, 10_000 + 125_000_000, 203_000)
    );
    s
}

fn run(text: &str, name: &str) -> (bool, String, String) {
    let dir = common::ScratchDir::new(name);
    std::fs::create_dir_all(&dir.0).unwrap();
    let f = dir.0.join("cpu-qcn.txt");
    std::fs::write(&f, text).unwrap();
    let out = Command::new("python3")
        .arg(common::repo().join("scripts/analysis/cpu-budget.py"))
        .arg(&f)
        .output()
        .unwrap();
    common::outcome(out)
}

#[test]
fn the_budget_of_two_samples() {
    let (ok, out, err) = run(&fixture(), "cpu-budget-ok");
    assert!(ok, "{out}{err}");
    let json = out.lines().rfind(|l| l.starts_with('{')).unwrap();
    let b: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(b["ncpu"], 2);
    assert_eq!(b["capacity_pct"], 200);
    assert_eq!(b["frames_delivered"], 100_000);
    assert_eq!(b["delivered_mbps"], 500.0);
    let role = |r: &str| {
        b["roles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["role"] == r)
            .unwrap_or_else(|| panic!("no role {r} in {b}"))
            .clone()
    };
    // 100 ticks = 1 s of CPU over 2 s; 1 s / 100k frames = 10 us.
    assert_eq!(role("switch")["cpu_pct"], 50.0);
    assert_eq!(role("switch")["us_per_frame"], 10.0);
    assert_eq!(b["switch_frames_received"], 200_000);
    assert_eq!(b["switch_us_per_frame_received"], 5.0);
    assert_eq!(role("appliance")["cpu_pct"], 30.0);
    // The two clients present in both samples; the third exited and is named, not counted.
    assert_eq!(role("client")["cpu_pct"], 35.0);
    assert_eq!(role("server")["cpu_pct"], 5.0);
    assert_eq!(role("ksoftirqd")["cpu_pct"], 2.0);
    assert_eq!(b["missing"][0]["pid"], 22);
    assert!(out.contains("left out: client (pid 22)"), "{out}");
    // At 1 Gb/s (twice what was delivered) the switch and the servers double; the rest stays.
    assert_eq!(role("switch")["at_line_rate_pct"], 100.0);
    assert_eq!(role("server")["at_line_rate_pct"], 10.0);
    assert_eq!(role("client")["at_line_rate_pct"], 35.0);
    assert_eq!(b["at_line_rate_pct"], 177.0);
    // 244 ticks listed: 122 % of a CPU, 24.4 us per frame.
    assert_eq!(b["testbed_pct"], 122.0);
    assert_eq!(b["testbed_us_per_frame"], 24.4);
    let m = &b["machine"];
    assert_eq!(m["busy_pct"], 135.0);
    assert_eq!(m["softirq_pct"], 20.0);
    assert_eq!(m["idle_pct"], 65.0);
    assert_eq!(m["rest_pct"], 13.0);
    // The table: the roles, heaviest first, and the sum.
    let switch_row = out
        .lines()
        .position(|l| l.trim_start().starts_with("switch"));
    let client_row = out
        .lines()
        .position(|l| l.trim_start().starts_with("client"));
    assert!(switch_row < client_row, "{out}");
    assert!(out.contains("testbed (sum)"), "{out}");
}

#[test]
fn one_sample_or_a_bad_line_is_refused_by_name() {
    let text = fixture();
    let first = &text[..text.find("sample 1002").unwrap()];
    let (ok, _, err) = run(first, "cpu-budget-one");
    assert!(!ok);
    assert!(err.contains("1 sample(s): a window needs two"), "{err}");

    let bad = text.replacen("proc appliance 11 S", "proc appliance eleven S", 1);
    let (ok, _, err) = run(&bad, "cpu-budget-bad");
    assert!(!ok);
    assert!(
        err.contains("line 5: cannot read 'proc appliance eleven"),
        "{err}"
    );

    let (ok, _, err) = run(
        &text.replacen("hz 100\n", "hz 100\nload 4\n", 1),
        "cpu-budget-word",
    );
    assert!(!ok);
    assert!(err.contains("line 3: unknown line 'load'"), "{err}");
}
