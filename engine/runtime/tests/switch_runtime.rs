//! The switch started as a library ([`Switch::start`]), without the `quench` binary: on two veth
//! pairs in a network namespace of the test's own, frames sent into one port come out of the
//! other, the handle's live counters and the control socket show them, and stop and join end
//! the switch with its final counters and its XDP programs detached. Needs root (namespaces,
//! veth pairs, AF_XDP); skipped with a printed reason otherwise.
use std::process::Command;
use std::time::Duration;

use quench_port::heap::HeapFrame;
use quench_port::netns::in_netns;
use quench_port::packet::PacketPort;
use quench_port::{Frame, Port};
use quench_runtime::switch::config::SwitchConfig;
use quench_runtime::switch::control;
use quench_runtime::switch::runtime::{Switch, SwitchOptions};
use quench_runtime::switch::stats::Snapshot;
use quench_wire::time::Clock;

/// The lock every root network test takes (engine/quench/tests/common): one at a time.
const LOCK_PATH: &str = "/tmp/quench-netns-tests.lock";

/// IEEE 802 local experimental EtherType: the test's frames, told apart from the kernel's.
const ETH_TEST: [u8; 2] = [0x88, 0xb5];

/// The namespace, removed (with its links and programs) on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().unwrap();
    assert!(st.success(), "ip {args:?}");
}

/// A namespace holding two veth pairs, `a0`-`a1` and `b0`-`b1`, all up: the switch's ports are
/// `a0` and `b0`, the test's hosts `a1` and `b1`.
fn testbed(name: &str) -> Netns {
    let _ = Command::new("ip").args(["netns", "del", name]).output();
    ip(&["netns", "add", name]);
    let ns = Netns(name.to_string());
    for x in ["a", "b"] {
        let (sw, host) = (format!("{x}0"), format!("{x}1"));
        ip(&[
            "-n", name, "link", "add", &sw, "type", "veth", "peer", "name", &host,
        ]);
        // GRO on the host end lets a veth take frames redirected to it by XDP.
        let _ = Command::new("ip")
            .args(["netns", "exec", name, "ethtool", "-K", &host, "gro", "on"])
            .output();
        for dev in [&sw, &host] {
            ip(&["-n", name, "link", "set", dev, "up"]);
        }
    }
    ns
}

fn frame(seq: u32) -> Vec<u8> {
    let mut f = vec![0x02, 0x71, 0x6e, 0x0b, 0, 1, 0x02, 0x71, 0x6e, 0x0a, 0, 1];
    f.extend_from_slice(&ETH_TEST);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(64, seq as u8);
    f
}

/// Polls `read` (every 10 ms, at most 5 s) until `done` holds; the last value read.
fn wait_for(read: impl Fn() -> Snapshot, done: impl Fn(&Snapshot) -> bool) -> Snapshot {
    let clock = Clock::monotonic();
    let t0 = clock.now();
    loop {
        let s = read();
        if done(&s) || clock.now() - t0 > units::Duration::from_secs(5) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_switch_started_as_a_library_forwards_reports_live_and_stops() {
    // Safety: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping a_switch_started_as_a_library: needs root (network namespaces, veth pairs, AF_XDP)");
        return;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("skipping a_switch_started_as_a_library: iproute2 (`ip`) not installed; run scripts/setup.sh");
        return;
    }
    let lock = std::fs::File::create(LOCK_PATH).unwrap();
    // Safety: flock on a file we own; the descriptor lives to the end of the test.
    unsafe { libc::flock(std::os::unix::io::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
    let name = format!("qlib{}", std::process::id());
    let ns = testbed(&name);
    let dir = std::env::temp_dir().join(format!("{name}-sw"));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ctl.sock");
    let text = "[[ports]]\nname = \"a\"\niface = \"a0\"\n[[ports]]\nname = \"b\"\niface = \"b0\"\n";
    let profile = SwitchConfig::parse(text, "lib.toml").unwrap();
    let options = SwitchOptions {
        control_socket: Some(sock.clone()),
        ..Default::default()
    };
    // Started from a thread inside the namespace: the switch's threads are created there and
    // stay there.
    let sw = in_netns(Some(&ns.0), || Switch::start(profile, options))
        .unwrap()
        .unwrap();
    assert_eq!(sw.ports().len(), 2);
    assert!(
        sw.notes().iter().any(|n| n.starts_with("port a (a0)")),
        "{:?}",
        sw.notes()
    );
    let frames: Vec<Vec<u8>> = (0..20).map(frame).collect();
    let sent = frames.clone();
    let got = in_netns(Some(&ns.0), move || {
        let mut rx = PacketPort::open("b1").unwrap();
        let mut tx = PacketPort::open("a1").unwrap();
        let mut burst: Vec<HeapFrame> = (sent.iter())
            .map(|f| HeapFrame::copy_of(f).unwrap())
            .collect();
        while !burst.is_empty() {
            tx.tx_burst(0, &mut burst).unwrap();
            tx.poll().unwrap();
        }
        let clock = Clock::monotonic();
        let (t0, mut got, mut buf) = (clock.now(), Vec::new(), Vec::new());
        while got.len() < sent.len() && clock.now() - t0 < units::Duration::from_secs(3) {
            rx.rx_burst(0, &mut buf, 64).unwrap();
            got.extend(
                (buf.drain(..).map(|f| f.data().to_vec())).filter(|f| f[12..14] == ETH_TEST),
            );
        }
        got
    })
    .unwrap();
    assert_eq!(
        got, frames,
        "b1 gets a1's frames (flooded: B is unknown), in order"
    );
    // Live: the handle's counters and the control socket's answer.
    let live = wait_for(|| sw.stats(), |s| s.ports[1].tx_pkts >= 20);
    assert!(live.ports[0].rx_pkts >= 20, "{live:?}");
    assert!(live.ports[0].flooded >= 20, "{live:?}");
    assert!(live.ports[1].tx_pkts >= 20, "{live:?}");
    assert!(live.fdb_entries >= 1, "A learned: {live:?}");
    let queried = control::query(&sock).unwrap();
    assert_eq!(queried.ports[0].info, live.ports[0].info);
    assert!(queried.ports[0].rx_pkts >= 20, "{queried:?}");
    assert!(!sw.is_stopped());
    sw.stop();
    let report = sw.join().unwrap();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert!(
        report.snapshot.ports[1].tx_pkts >= 20,
        "{:?}",
        report.snapshot
    );
    assert!(!sock.exists(), "control socket left behind");
    let links = Command::new("ip")
        .args(["-n", &ns.0, "link", "show"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&links.stdout);
    assert!(
        !text.contains("prog/xdp"),
        "XDP program left attached: {text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
