//! The testbed of the runtimes' root tests: a network namespace of the test's own holding veth
//! pairs, removed (with its links and programs) on drop; the lock every root network test takes
//! (engine/quench/tests/common), so that they run one at a time.
#![allow(dead_code)]
use std::process::Command;
use std::time::Duration;

use quench_port::heap::HeapFrame;
use quench_port::netns::in_netns;
use quench_port::packet::PacketPort;
use quench_port::{Frame, Port};
use quench_wire::time::Clock;

const LOCK_PATH: &str = "/tmp/quench-netns-tests.lock";

/// Why the test cannot run here (not root, no `ip`), printed by the caller, or `None`.
pub fn cannot_run() -> Option<&'static str> {
    // Safety: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network namespaces, veth pairs)");
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("iproute2 (`ip`) not installed; run scripts/setup.sh");
    }
    None
}

/// The namespace; its links go with it.
pub struct Netns {
    pub name: String,
    _lock: std::fs::File,
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().unwrap();
    assert!(st.success(), "ip {args:?}");
}

impl Netns {
    /// A namespace named after `tag` and this process, holding the veth pairs `pairs` (both
    /// ends up), once the root tests' lock is taken.
    pub fn with_veths(tag: &str, pairs: &[(&str, &str)]) -> Netns {
        let lock = std::fs::File::create(LOCK_PATH).unwrap();
        // Safety: flock on a file we own; the descriptor lives as long as the namespace.
        unsafe { libc::flock(std::os::unix::io::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
        let name = format!("q{tag}{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        // No IPv6 on the namespace's links: a link coming up sends MLD reports and router
        // solicitations, frames the test did not send that a runtime would count (the appliance
        // makes each one a flow).
        let st = Command::new("ip")
            .args(["netns", "exec", &name, "sysctl", "-qw"])
            .args([
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])
            .status()
            .unwrap();
        assert!(st.success(), "sysctl disable_ipv6 in {name}");
        let ns = Netns { name, _lock: lock };
        for (a, b) in pairs {
            ip(&[
                "-n", &ns.name, "link", "add", a, "type", "veth", "peer", "name", b,
            ]);
            for dev in [a, b] {
                ip(&["-n", &ns.name, "link", "set", dev, "up"]);
            }
        }
        ns
    }

    /// `IFACE` as the runtimes name it: `NETNS/IFACE`.
    pub fn port(&self, iface: &str) -> String {
        format!("{}/{iface}", self.name)
    }

    /// Sends `frames` out of `iface` in the namespace.
    pub fn send(&self, iface: &str, frames: &[Vec<u8>]) {
        let frames = frames.to_vec();
        let iface = iface.to_string();
        in_netns(Some(&self.name), move || {
            let mut tx = PacketPort::open(&iface).unwrap();
            let mut burst: Vec<HeapFrame> = (frames.iter())
                .map(|f| HeapFrame::copy_of(f).unwrap())
                .collect();
            while !burst.is_empty() {
                tx.tx_burst(0, &mut burst).unwrap();
                tx.poll().unwrap();
            }
        })
        .unwrap();
    }

    /// Opens `iface` in the namespace for [`receive`].
    pub fn open(&self, iface: &str) -> PacketPort {
        in_netns(Some(&self.name), || PacketPort::open(iface).unwrap()).unwrap()
    }
}

/// The frames `rx` receives that `keep` holds, until `n` of them or 3 s.
pub fn receive(rx: &mut PacketPort, n: usize, keep: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
    let clock = Clock::monotonic();
    let (t0, mut got, mut buf) = (clock.now(), Vec::new(), Vec::new());
    while got.len() < n && clock.now() - t0 < units::Duration::from_secs(3) {
        rx.rx_burst(0, &mut buf, 64).unwrap();
        got.extend((buf.drain(..).map(|f| f.data().to_vec())).filter(|f| keep(f)));
        std::thread::sleep(Duration::from_micros(200));
    }
    got
}

/// Reads `read` every 10 ms, at most 5 s, until `done` holds; the last value read.
pub fn wait_for<T>(read: impl Fn() -> T, done: impl Fn(&T) -> bool) -> T {
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
