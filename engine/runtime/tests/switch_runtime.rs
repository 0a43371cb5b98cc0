//! The switch started as a library ([`Switch::start`]), without the `quench` binary: on two veth
//! pairs in a network namespace of the test's own, frames sent into one port come out of the
//! other (by the kernel fast path, the default, or through the workers), the handle's live
//! counters and the control socket show how, and stop and join end the switch with its final
//! counters and its XDP programs detached. Needs root (namespaces, veth pairs, AF_XDP); skipped
//! with a printed reason otherwise.
mod common;

use std::process::Command;
use std::time::Duration;

use quench_port::heap::HeapFrame;
use quench_port::netns::in_netns;
use quench_port::packet::PacketPort;
use quench_port::{Frame, Port};
use quench_runtime::switch::config::SwitchConfig;
use quench_runtime::switch::control;
use quench_runtime::switch::runtime::{FastPathMode, Switch, SwitchHandle, SwitchOptions};
use quench_wire::time::Clock;

use common::wait_for;

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

const A: [u8; 6] = [0x02, 0x71, 0x6e, 0x0a, 0, 1];
const B: [u8; 6] = [0x02, 0x71, 0x6e, 0x0b, 0, 1];

fn frame(dst: [u8; 6], src: [u8; 6], seq: u32) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETH_TEST);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(64, seq as u8);
    f
}

/// Sends `frames` from host `from` (AF_PACKET) and returns the test frames host `to` got
/// meanwhile (until as many arrived, at most 3 s), in order.
fn exchange(ns: &str, from: &'static str, to: &'static str, frames: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    in_netns(Some(ns), move || {
        let mut rx = PacketPort::open(to).unwrap();
        let mut tx = PacketPort::open(from).unwrap();
        let mut burst: Vec<HeapFrame> = (frames.iter())
            .map(|f| HeapFrame::copy_of(f).unwrap())
            .collect();
        while !burst.is_empty() {
            tx.tx_burst(0, &mut burst).unwrap();
            tx.poll().unwrap();
        }
        let clock = Clock::monotonic();
        let (t0, mut got, mut buf) = (clock.now(), Vec::new(), Vec::new());
        while got.len() < frames.len() && clock.now() - t0 < units::Duration::from_secs(3) {
            rx.rx_burst(0, &mut buf, 64).unwrap();
            got.extend(
                (buf.drain(..).map(|f| f.data().to_vec())).filter(|f| f[12..14] == ETH_TEST),
            );
        }
        got
    })
    .unwrap()
}

/// Starts the switch on `a0` and `b0` in namespace `ns` with `options` (its control socket in
/// `dir`); started from a thread inside the namespace, so its threads are created there.
fn start(ns: &str, dir: &std::path::Path, options: SwitchOptions) -> SwitchHandle {
    let text = "[[ports]]\nname = \"a\"\niface = \"a0\"\n[[ports]]\nname = \"b\"\niface = \"b0\"\n";
    let profile = SwitchConfig::parse(text, "lib.toml").unwrap();
    let options = SwitchOptions {
        control_socket: Some(dir.join("ctl.sock")),
        ..options
    };
    in_netns(Some(ns), || Switch::start(profile, options))
        .unwrap()
        .unwrap()
}

/// A's frames to the unknown B are flooded to b1; once B has sent one, A's next frames to B
/// arrive in order, `fast` of them forwarded by the kernel fast path (the others through the
/// workers); the handle's live counters and the control socket say so; stop and join end it
/// with its final counters, the socket removed and no XDP program left.
fn forward_and_stop(ns: &str, dir: &std::path::Path, sw: SwitchHandle, fast: bool) {
    let flooded: Vec<Vec<u8>> = (0..20).map(|i| frame(B, A, i)).collect();
    let got = exchange(ns, "a1", "b1", flooded.clone());
    assert_eq!(
        got, flooded,
        "b1 gets a1's frames (flooded: B is unknown), in order"
    );
    assert_eq!(exchange(ns, "b1", "a1", vec![frame(A, B, 100)]).len(), 1);
    // B's learn reaches the table's worker (a notice with two workers) and the kernel table.
    std::thread::sleep(Duration::from_millis(100));
    let known: Vec<Vec<u8>> = (0..30).map(|i| frame(B, A, 200 + i)).collect();
    assert_eq!(
        exchange(ns, "a1", "b1", known.clone()),
        known,
        "b1: A's frames to B"
    );
    let live = wait_for(|| sw.stats(), |s| s.ports[1].tx_pkts >= 50);
    let (a, b) = (&live.ports[0], &live.ports[1]);
    assert!(
        a.rx_pkts >= 50 && a.flooded >= 20 && b.tx_pkts >= 50,
        "{live:?}"
    );
    let want = if fast { 30 } else { 0 };
    assert_eq!((a.fast_rx_pkts, b.fast_tx_pkts), (want, want), "{live:?}");
    let queried = control::query(&dir.join("ctl.sock")).unwrap();
    assert_eq!(queried.ports[0].info, a.info);
    assert!(queried.ports[0].rx_pkts >= 50, "{queried:?}");
    assert!(!sw.is_stopped());
    sw.stop();
    let report = sw.join().unwrap();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert!(
        report.snapshot.ports[1].tx_pkts >= 50,
        "{:?}",
        report.snapshot
    );
    assert!(!dir.join("ctl.sock").exists(), "control socket left behind");
    let links = Command::new("ip")
        .args(["-n", ns, "link", "show"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&links.stdout);
    assert!(
        !text.contains("prog/xdp"),
        "XDP program left attached: {text}"
    );
}

/// The lock every root network test takes, or why the test cannot run.
fn root_and_lock(test: &str) -> Option<std::fs::File> {
    // Safety: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping {test}: needs root (network namespaces, veth pairs, AF_XDP)");
        return None;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("skipping {test}: iproute2 (`ip`) not installed; run scripts/setup.sh");
        return None;
    }
    let lock = std::fs::File::create(LOCK_PATH).unwrap();
    // Safety: flock on a file we own; the descriptor lives as long as the returned file.
    unsafe { libc::flock(std::os::unix::io::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
    Some(lock)
}

/// The default (the kernel fast path on both plain ports) with two workers, one per port:
/// worker 1 learns B, worker 0 programs the table from the notice.
#[test]
fn a_library_switch_with_two_workers_forwards_known_pairs_in_the_kernel() {
    let Some(_lock) = root_and_lock("a_library_switch_with_two_workers") else {
        return;
    };
    let ns = testbed(&format!("qlib{}", std::process::id()));
    let dir = Scratch::new(&ns.0);
    let sw = start(
        &ns.0,
        &dir.0,
        SwitchOptions {
            workers: Some(2),
            ..Default::default()
        },
    );
    let notes = sw.notes().join("\n");
    assert!(
        notes.contains("kernel fast path: a plain, b plain"),
        "{notes}"
    );
    assert!(
        notes.contains("port b (b0) af_xdp") && notes.contains("on worker 1"),
        "{notes}"
    );
    forward_and_stop(&ns.0, &dir.0, sw, true);
}

/// `--fast-path off`: every frame through the worker.
#[test]
fn a_library_switch_without_the_fast_path_forwards_through_its_worker() {
    let Some(_lock) = root_and_lock("a_library_switch_without_the_fast_path") else {
        return;
    };
    let ns = testbed(&format!("qlio{}", std::process::id()));
    let dir = Scratch::new(&ns.0);
    let options = SwitchOptions {
        fast_path: FastPathMode::Off,
        ..Default::default()
    };
    let sw = start(&ns.0, &dir.0, options);
    assert!(
        !sw.notes().iter().any(|n| n.contains("fast path")),
        "{:?}",
        sw.notes()
    );
    forward_and_stop(&ns.0, &dir.0, sw, false);
}

/// A veth whose peer has GRO off drops frames redirected to it unsent: the start-up check
/// finds it, and its port stays off the fast path (its frames through the worker).
#[test]
fn a_port_whose_device_drops_redirected_frames_stays_off_the_fast_path() {
    let Some(_lock) = root_and_lock("a_port_whose_device_drops_redirected_frames") else {
        return;
    };
    let ns = testbed(&format!("qlig{}", std::process::id()));
    let off = Command::new("ip")
        .args(["netns", "exec", &ns.0, "ethtool", "-K", "b1", "gro", "off"])
        .output();
    if !off.is_ok_and(|o| o.status.success()) {
        eprintln!("skipping a_port_whose_device_drops_redirected_frames: ethtool cannot turn GRO off (scripts/setup.sh installs it)");
        return;
    }
    let dir = Scratch::new(&ns.0);
    let sw = start(&ns.0, &dir.0, SwitchOptions::default());
    let notes = sw.notes().join("\n");
    assert!(
        notes.contains("port b not (its device sent no frame redirected to it"),
        "{notes}"
    );
    forward_and_stop(&ns.0, &dir.0, sw, false);
}

/// A directory for the control socket, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("{name}-sw"));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
