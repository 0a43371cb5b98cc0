//! scripts/analysis/latency-stages.py (bench-forward.sh --stages) splits each frame's latency into
//! stages from `perf script` text. Fed a scripted trace of 100 frames with known stage times and
//! one slow frame, it must find each stage's median, file the slow frame under the stage that
//! held it, name what ran on the forwarder's CPU meanwhile, and refuse a trace with no frame.
use std::io::Write;
use std::process::{Command, Stdio};

mod common;

/// One `perf script --ns -F comm,tid,cpu,time,event,trace` line at `ns` nanoseconds.
fn line(comm: &str, tid: u32, cpu: u32, ns: u64, ev: &str, rest: &str) -> String {
    format!(
        "{comm:>16} {tid:>6} [{cpu:03}] {}.{:09}: {ev}: {rest}\n",
        ns / 1_000_000_000,
        ns % 1_000_000_000
    )
}

fn run(forwarder: &str, trace: &str) -> (bool, String, String) {
    let mut child = Command::new("python3")
        .arg(common::repo().join("scripts/analysis/latency-stages.py"))
        .args(["--forwarder", forwarder, "--prefix", "qb"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(trace.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    common::outcome(out)
}

#[test]
fn stages_of_an_af_xdp_forwarder_and_the_frame_that_was_late() {
    let us = 1_000u64;
    let mut trace = String::new();
    // A sendto of another process before the first frame, never followed by one of ours.
    trace += &line(
        "ssh",
        7,
        1,
        500 * us,
        "syscalls:sys_enter_sendto",
        "fd: 0x3",
    );
    for k in 0..100u64 {
        let t = 1_000 * us + k * 100 * us;
        // Frame 50 waits 40 us on the forwarder's core while a kernel worker has it.
        let wait = if k == 50 { 40 * us } else { 3 * us };
        trace += &line(
            "quench",
            10,
            1,
            t,
            "syscalls:sys_enter_sendto",
            "fd: 0x5, len: 0",
        );
        trace += &line(
            "quench",
            10,
            1,
            t + 2 * us,
            "xdp:xdp_redirect",
            "prog_id=4 action=REDIRECT ifindex=5 to_ifindex=0 err=0 map_id=3 map_index=0",
        );
        // An ARP reply on the sink's veth: not a test frame (too short), left out.
        if k == 10 {
            trace += &line(
                "quench",
                10,
                1,
                t + 3 * us,
                "net:netif_rx",
                "dev=eth0 skbaddr=0x1 len=28",
            );
        }
        if k == 50 {
            let ev = "sched:sched_switch";
            let rest = "prev_comm=quench-w0 prev_pid=20 prev_prio=120 prev_state=R ==> next_comm=kworker/0:1 next_pid=30 next_prio=120";
            trace += &line("quench-w0", 20, 0, t + 5 * us, ev, rest);
        }
        let kick = t + 2 * us + wait;
        trace += &line(
            "quench-w0",
            20,
            0,
            kick,
            "syscalls:sys_enter_sendto",
            "fd: 0x9, len: 0",
        );
        trace += &line(
            "quench-w0",
            20,
            0,
            kick + 1_500,
            "net:netif_rx",
            "dev=eth0 skbaddr=0xffff8881 len=1486",
        );
    }
    let (ok, out, err) = run("quench", &trace);
    assert!(ok, "{out}{err}");
    let r: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(r["frames"], 100, "{out}");
    let st = &r["stages"];
    assert_eq!(st["send->in"]["p50_us"], 2.0, "{out}");
    assert_eq!(st["in->kick"]["p50_us"], 3.0, "{out}");
    assert_eq!(st["in->kick"]["max_us"], 40.0, "{out}");
    assert_eq!(st["kick->sink"]["p50_us"], 1.5, "{out}");
    assert_eq!(st["send->sink"]["p50_us"], 6.5, "{out}");
    // 99 frames of 6.5 us and one of 43.5: the p99 is 6.5 and the slow one is the tail.
    assert_eq!(r["tail"]["frames"], 1, "{out}");
    assert_eq!(r["tail"]["held_by"]["in->kick"], 1, "{out}");
    assert_eq!(r["tail"]["cpu_events"]["cpu0 run kworker/0:1"], 1, "{out}");
    assert_eq!(r["matching_slipped"], false, "{out}");
}

#[test]
fn an_extra_redirect_is_reported_as_a_slipped_matching() {
    let us = 1_000u64;
    let mut trace = String::new();
    for k in 0..20u64 {
        let t = 1_000 * us + k * 100 * us;
        trace += &line("quench", 10, 1, t, "syscalls:sys_enter_sendto", "fd: 0x5");
        let redirect = "prog_id=4 action=REDIRECT ifindex=5 to_ifindex=0 err=0";
        trace += &line("quench", 10, 1, t + 2 * us, "xdp:xdp_redirect", redirect);
        // Between frames 10 and 11, a frame that is not the test's goes into the AF_XDP
        // socket too: every later frame would be matched with its successor's sink event.
        if k == 10 {
            trace += &line("quench", 10, 1, t + 50 * us, "xdp:xdp_redirect", redirect);
        }
        let w = "quench-w0";
        trace += &line(w, 20, 0, t + 5 * us, "syscalls:sys_enter_sendto", "fd: 0x9");
        let sink = "dev=eth0 skbaddr=0x1 len=1486";
        trace += &line(w, 20, 0, t + 6 * us, "net:netif_rx", sink);
    }
    let (ok, out, err) = run("quench", &trace);
    assert!(ok, "{out}{err}");
    let r: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(r["matching_slipped"], true, "{out}");
}

#[test]
fn the_bridge_has_no_kick_and_an_empty_trace_is_an_error() {
    let us = 1_000u64;
    let mut trace = String::new();
    for k in 0..10u64 {
        let t = 1_000 * us + k * 100 * us;
        trace += &line(
            "quench",
            10,
            1,
            t,
            "syscalls:sys_enter_sendto",
            "fd: 0x5, len: 0",
        );
        let rx = "dev=qb-sw-s0 skbaddr=0x2 len=1486";
        trace += &line("quench", 10, 1, t + 4 * us, "net:netif_receive_skb", rx);
        let sink = "dev=eth0 skbaddr=0x2 len=1486";
        trace += &line("quench", 10, 1, t + 6 * us, "net:netif_rx", sink);
    }
    let (ok, out, err) = run("bridge", &trace);
    assert!(ok, "{out}{err}");
    let r: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(r["frames"], 10, "{out}");
    let st = r["stages"].as_object().unwrap();
    // (serde_json's map is sorted by key.)
    assert_eq!(
        st.keys().map(String::as_str).collect::<Vec<_>>(),
        ["in->sink", "send->in", "send->sink"],
        "{out}"
    );
    assert_eq!(st["in->sink"]["p50_us"], 2.0, "{out}");

    let (ok, out, err) = run("quench", "");
    assert!(!ok, "{out}");
    assert!(err.contains("no frames in the trace"), "{err}");
}
