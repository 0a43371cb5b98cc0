//! SIGINT and SIGTERM at any point of every long-running command on real ports (issue 18, item
//! 3): `quench send`, `quench recv`, `quench appliance` and `quench blast` (af_xdp, so an XDP
//! program is attached while they run), each started for a minute and signalled once its ports
//! are open, end with status 0, their report on stdout (or in their output directory) and no
//! XDP program left attached. (`quench switch` is switch_netns.rs's faults test, `quench stats
//! --watch` and `quench sim` are cli_pipe.rs's.) Needs root; skipped with a printed reason
//! otherwise; takes the netns tests' lock.
use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod common;
use common::{lock, netns_or_skip, repo, xdp_progs, Testbed};

/// Sends `sig` to `c` once `ready` holds (or after 5 s), waits at most 20 s for it to end, and
/// returns (status success, stdout, stderr).
fn signal(mut c: Child, sig: i32, ready: impl Fn() -> bool) -> (bool, String, String) {
    for _ in 0..50 {
        if ready() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Ports open, frames flowing: the command is in its loop.
    std::thread::sleep(Duration::from_millis(500));
    // Safety: signalling our own child by its pid.
    unsafe { libc::kill(c.id() as i32, sig) };
    for _ in 0..200 {
        if c.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if c.try_wait().unwrap().is_none() {
        let _ = c.kill();
        panic!("still running 20 s after signal {sig}");
    }
    let out = c.wait_with_output().unwrap();
    common::outcome(out)
}

fn piped(cmd: &mut Command) -> Child {
    cmd.current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn send_recv_appliance_and_blast_end_on_sigint_and_sigterm_with_their_reports() {
    if !netns_or_skip("send_recv_appliance_and_blast_end_on_sigint_and_sigterm") {
        return;
    }
    let _l = lock();
    let quench = env!("CARGO_BIN_EXE_quench");
    let tb = Testbed::up(format!("qg{}", std::process::id() % 10000), 2, 1);
    let (s0, s1, r0) = (tb.ns("s0"), tb.ns("s1"), tb.ns("r0"));
    let dir = std::env::temp_dir().join(format!("quench-sig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // quench recv (af_xdp) in r0, quench send (af_xdp) in s0 towards it, through nothing:
        // the receiver hears only what s0's veth peer passes on (none: no switch), which is
        // enough to be in the loop.
        let out = dir.join(format!("recv-{sig}"));
        let recv = piped(
            Command::new(quench)
                .args(["recv", "--driver", "af_xdp", "--iface"])
                .arg(format!("{r0}/eth0"))
                .args(["--duration", "60s", "--out"])
                .arg(&out),
        );
        let send = piped(
            Command::new(quench)
                .args(["send", "--driver", "af_xdp", "--iface"])
                .arg(format!("{s0}/eth0"))
                .args(["--config", "configs/send.toml", "--cc", "qcn"])
                .args(["--duration", "60s"]),
        );
        let blast = piped(
            Command::new("ip")
                .args(["netns", "exec", &s1, quench, "blast", "--iface", "eth0"])
                .args(["--engine", "af_xdp", "--dst", "02:71:6e:02:00:00"])
                .args(["--rate", "100mbit", "--duration", "60s", "--core", "0"]),
        );
        let (ok, stdout, stderr) = signal(send, sig, || xdp_progs(&s0) > 0);
        assert!(ok, "send, signal {sig}: {stderr}");
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with('{') && l.contains("\"frames\"")),
            "send, signal {sig}: no report: {stdout}"
        );
        let (ok, stdout, stderr) = signal(blast, sig, || xdp_progs(&s1) > 0);
        assert!(ok, "blast, signal {sig}: {stderr}");
        assert!(stdout.contains("\"sent\""), "blast, signal {sig}: {stdout}");
        let (ok, _, stderr) = signal(recv, sig, || xdp_progs(&r0) > 0);
        assert!(ok, "recv, signal {sig}: {stderr}");
        assert!(
            out.join("summary.json").exists(),
            "recv, signal {sig}: no summary.json in {}: {stderr}",
            out.display()
        );
        for ns in [&s0, &s1, &r0] {
            assert_eq!(
                xdp_progs(ns),
                0,
                "{ns}: XDP program left after signal {sig}"
            );
        }
    }
    drop(tb);

    // The appliance between s0 and the switch's side (testbed --appliance).
    let tb = Testbed::up_with(
        format!("qh{}", std::process::id() % 10000),
        1,
        1,
        &["--appliance"],
    );
    let ap = tb.ns("ap");
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let appliance = piped(
            Command::new(quench)
                .args(["appliance", "--driver", "af_xdp", "--cc", "qcn"])
                .args(["--inside", &format!("{ap}/{ap}-is0")])
                .args(["--outside", &format!("{ap}/{ap}-os0")]),
        );
        let (ok, stdout, stderr) = signal(appliance, sig, || xdp_progs(&ap) > 0);
        assert!(ok, "appliance, signal {sig}: {stderr}");
        assert!(
            stdout.lines().any(|l| l.starts_with('{')),
            "appliance, signal {sig}: no JSON report: {stdout}"
        );
        assert_eq!(
            xdp_progs(&ap),
            0,
            "appliance left an XDP program (signal {sig})"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
