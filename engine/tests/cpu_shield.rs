//! scripts/cpu-shield.sh, which closed-loop.sh runs with SHIELD=1, changes other processes' CPU
//! affinity for the length of a run: it must move them off the sender's CPU, and `off` must
//! give every one of them its CPUs back. Needs root and two CPUs; skipped with a printed reason
//! otherwise; takes the netns tests' lock (a run must not be shielded twice at once).
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

mod common;

/// Every thread's `Cpus_allowed_list`, by thread id.
fn affinities() -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    for proc_dir in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(tasks) = std::fs::read_dir(proc_dir.path().join("task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(tid) = task.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
                continue;
            };
            if let Some(line) = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")) {
                out.insert(tid, line["Cpus_allowed_list:".len()..].trim().to_string());
            }
        }
    }
    out
}

fn shield(args: &[&str]) -> String {
    let script = common::repo().join("scripts/cpu-shield.sh");
    let run = Command::new(script).args(args).output().unwrap();
    assert!(
        run.status.success(),
        "cpu-shield.sh {args:?}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8_lossy(&run.stdout).into_owned()
}

#[test]
fn the_shield_moves_threads_off_the_senders_cpu_and_gives_them_back() {
    if !common::root_or_skip(
        "the_shield_moves_threads",
        "cpu-shield.sh changes other processes' affinity",
    ) {
        return;
    }
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    if online.trim() != "0-1" {
        eprintln!(
            "skipping: closed-loop.sh shields only on two CPUs (online: {})",
            online.trim()
        );
        return;
    }
    let _l = common::lock();

    let before = affinities();
    let state = format!("/tmp/quench-shield-test.{}", std::process::id());
    let said = shield(&["on", "1", &state]);
    assert!(said.contains("moved"), "{said}");
    let during = affinities();
    // pid 1 (init or the VM agent) and this test run on every CPU unless someone pinned them:
    // then they are moved.
    for tid in [1, std::process::id()] {
        if before.get(&tid).map(String::as_str) == Some("0-1") {
            assert_eq!(
                during.get(&tid).map(String::as_str),
                Some("1"),
                "{tid} not moved"
            );
        }
    }
    assert!(
        during.values().filter(|c| c.as_str() == "1").count()
            > before.values().filter(|c| c.as_str() == "1").count(),
        "nothing moved"
    );
    // Threads someone pinned stay where they were.
    for (tid, cpus) in &before {
        if cpus != "0-1" {
            if let Some(now) = during.get(tid) {
                assert_eq!(now, cpus, "pinned thread {tid} moved");
            }
        }
    }
    shield(&["off", &state]);
    assert!(!Path::new(&state).exists(), "state file left behind");
    let after = affinities();
    for (tid, cpus) in &before {
        if let Some(now) = after.get(tid) {
            assert_eq!(now, cpus, "thread {tid} not given its CPUs back");
        }
    }
}
