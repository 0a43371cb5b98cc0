//! scripts/testbed/cpu-shield.sh, which closed-loop.sh runs with --shield, changes other processes' CPU
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
    let script = common::repo().join("scripts/testbed/cpu-shield.sh");
    let run = Command::new(script).args(args).output().unwrap();
    assert!(
        run.status.success(),
        "cpu-shield.sh {args:?}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8_lossy(&run.stdout).into_owned()
}

/// The netns tests' lock when this machine can be shielded as the scripts do (root, two CPUs:
/// closed-loop.sh and bench-forward.sh shield only there); `None` with a printed reason.
fn shieldable(test: &str, needs: &str) -> Option<common::Lock> {
    if !common::root_or_skip(test, needs) {
        return None;
    }
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    if online.trim() != "0-1" {
        eprintln!(
            "skipping {test}: the scripts shield only on two CPUs (online: {})",
            online.trim()
        );
        return None;
    }
    Some(common::lock())
}

#[test]
fn the_shield_moves_threads_off_the_senders_cpu_and_gives_them_back() {
    let Some(_l) = shieldable(
        "the_shield_moves_threads",
        "cpu-shield.sh changes other processes' affinity",
    ) else {
        return;
    };

    let before = affinities();
    let state = format!("/tmp/quench-shield-test.{}", std::process::id());
    let said = shield(&["on", "1", &state]);
    assert!(said.contains("moved"), "{said}");
    let during = affinities();
    // pid 1 (init, or a VM's guest daemon) and this test run on every CPU unless someone pinned them:
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

/// Every interrupt's `smp_affinity_list`, by number.
fn irq_affinities() -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    for d in std::fs::read_dir("/proc/irq").unwrap().flatten() {
        let Ok(n) = d.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(s) = std::fs::read_to_string(d.path().join("smp_affinity_list")) {
            out.insert(n, s.trim().to_string());
        }
    }
    out
}

const WQ_MASK: &str = "/sys/devices/virtual/workqueue/cpumask";

/// The unbound workqueues' CPU mask, as a number.
fn wq_mask() -> Option<u64> {
    let s = std::fs::read_to_string(WQ_MASK).ok()?;
    u64::from_str_radix(&s.trim().replace(',', ""), 16).ok()
}

#[test]
fn with_irqs_the_shield_moves_interrupts_and_unbound_workers_and_gives_them_back() {
    let Some(_l) = shieldable(
        "the_shield_moves_interrupts",
        "cpu-shield.sh --irqs changes interrupt and workqueue affinity",
    ) else {
        return;
    };

    let bad = Command::new(common::repo().join("scripts/testbed/cpu-shield.sh"))
        .args(["on", "1", "/tmp/quench-shield-test-bad", "--irq"])
        .output()
        .unwrap();
    assert!(!bad.status.success(), "a misspelt flag was taken");
    assert!(!Path::new("/tmp/quench-shield-test-bad").exists());

    let (irqs_before, wq_before) = (irq_affinities(), wq_mask());
    let state = format!("/tmp/quench-shield-irq-test.{}", std::process::id());
    let said = shield(&["on", "1", &state, "--irqs"]);
    let (irqs_during, wq_during) = (irq_affinities(), wq_mask());
    shield(&["off", &state]);
    let (irqs_after, wq_after) = (irq_affinities(), wq_mask());

    // "moved N interrupts": exactly the N whose affinity changed, all of them now CPU 1.
    let n: usize = said
        .split("moved ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no interrupt count in {said:?}"));
    let changed: Vec<_> = irqs_before
        .iter()
        .filter(|(k, v)| irqs_during.get(k).is_some_and(|d| d != *v))
        .collect();
    assert_eq!(changed.len(), n, "{said}");
    for (k, _) in &changed {
        assert_eq!(irqs_during[k], "1", "irq {k}");
    }
    if wq_before.is_some() {
        assert_eq!(wq_during, Some(0b10), "the unbound workqueues' mask");
    }
    assert!(!Path::new(&state).exists(), "state file left behind");
    assert_eq!(wq_after, wq_before, "workqueue mask not given back");
    for (k, v) in &irqs_before {
        if let Some(now) = irqs_after.get(k) {
            assert_eq!(now, v, "irq {k} not given its CPUs back");
        }
    }
}
