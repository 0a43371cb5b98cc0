//! What the root and network-namespace tests share: the root check, the lock that runs them one
//! at a time (two cores; scripts run by hand take the same lock with `flock`), the repository
//! path, this build's release binary, and a veth testbed (scripts/testbed/testbed.sh) in namespaces of
//! the test's own, torn down on drop.
//!
//! Each test binary includes this with `mod common;` and uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// XDP programs attached to the links of namespace `ns`.
pub fn xdp_progs(ns: &str) -> usize {
    let out = Command::new("ip")
        .args(["-n", ns, "link", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .matches("prog/xdp")
        .count()
}

/// A finished command's (success, stdout, stderr), the outputs as text.
pub fn outcome(out: std::process::Output) -> (bool, String, String) {
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The file every netns test, and every benchmark script run by hand, locks.
pub const LOCK_PATH: &str = "/tmp/quench-netns-tests.lock";

/// The repository's root (engine/..).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// True when running as root; otherwise prints why `test` is skipped (`needs`: what root is
/// for) and returns false.
pub fn root_or_skip(test: &str, needs: &str) -> bool {
    // Safety: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping {test}: needs root ({needs})");
        return false;
    }
    true
}

/// True when `test` can build a veth testbed: root, and iproute2 installed.
pub fn netns_or_skip(test: &str) -> bool {
    if !root_or_skip(test, "network namespaces, veth pairs") {
        return false;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("skipping {test}: iproute2 (`ip`) not installed; run scripts/setup.sh");
        return false;
    }
    true
}

/// Holds [`LOCK_PATH`] (flock, exclusive) until dropped.
pub struct Lock(#[allow(dead_code)] std::fs::File);

/// Waits for the netns tests' lock.
pub fn lock() -> Lock {
    let f = std::fs::File::create(LOCK_PATH).unwrap();
    // Safety: flock on a file we own; the descriptor lives as long as the Lock.
    unsafe { libc::flock(std::os::unix::io::AsRawFd::as_raw_fd(&f), libc::LOCK_EX) };
    Lock(f)
}

/// A directory under the system's temporary directory, named for the test and this process,
/// removed with what it holds when dropped: on success and when an assertion fails alike.
pub struct ScratchDir(pub PathBuf);

impl ScratchDir {
    pub fn new(name: &str) -> ScratchDir {
        ScratchDir(std::env::temp_dir().join(format!("{name}-{}", std::process::id())))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// This tree's release binary, built if needed. The netns scripts use it: a debug build's switch
/// and receiver fall behind even 10 k frames/s on two shared cores and lose frames in the kernel.
pub fn release_quench() -> PathBuf {
    let build = Command::new(env!("CARGO"))
        .args(["build", "--release", "-p", "quench", "--bin", "quench"])
        .current_dir(repo())
        .status()
        .unwrap();
    assert!(build.success());
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or(repo().join("target"), PathBuf::from);
    target.join("release/quench")
}

/// A veth testbed (scripts/testbed/testbed.sh) with its own namespace prefix; `down` on drop.
pub struct Testbed {
    pub prefix: String,
}

impl Testbed {
    /// `senders` sender and `receivers` receiver namespaces around a switch namespace, all named
    /// `<prefix>-...`.
    pub fn up(prefix: String, senders: u32, receivers: u32) -> Testbed {
        Testbed::up_with(prefix, senders, receivers, &[])
    }

    /// With `extra` arguments to `testbed.sh up` (e.g. `--appliance`).
    pub fn up_with(prefix: String, senders: u32, receivers: u32, extra: &[&str]) -> Testbed {
        let st = Command::new(repo().join("scripts/testbed/testbed.sh"))
            .args(["up", "--senders", &senders.to_string()])
            .args(["--receivers", &receivers.to_string(), "--prefix", &prefix])
            .args(extra)
            .output()
            .unwrap();
        // Built before the check, so that a half-built testbed is torn down too.
        let tb = Testbed { prefix };
        assert!(
            st.status.success(),
            "testbed.sh up failed: {}",
            String::from_utf8_lossy(&st.stderr)
        );
        tb
    }

    /// The namespace (or interface) `<prefix>-<n>`.
    pub fn ns(&self, n: &str) -> String {
        format!("{}-{n}", self.prefix)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("scripts/testbed/testbed.sh"))
            .args(["down", "--prefix", &self.prefix])
            .output();
    }
}

/// IEEE 802 local experimental EtherType: test frames are told apart from any other traffic.
pub const ETH_TEST: [u8; 2] = [0x88, 0xb5];

/// A test frame: its EtherType (after an optional VLAN tag) is [`ETH_TEST`].
pub fn is_test(f: &[u8]) -> bool {
    f.get(12..14) == Some(&ETH_TEST[..]) || f.get(16..18) == Some(&ETH_TEST[..])
}

/// Runs `f` on a thread inside network namespace `ns`.
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::spawn(move || quench_port::netns::in_netns(Some(&ns), f).unwrap())
        .join()
        .unwrap()
}

/// Sends `frames` from `eth0` of namespace `ns` (AF_PACKET), in order.
pub fn send(ns: &str, frames: Vec<Vec<u8>>) {
    use quench_port::{heap::HeapFrame, packet::PacketPort, Port};
    in_ns(ns, move || {
        let mut p = PacketPort::open("eth0").unwrap();
        let mut burst: Vec<HeapFrame> = frames
            .iter()
            .map(|f| HeapFrame::copy_of(f).unwrap())
            .collect();
        while !burst.is_empty() {
            p.tx_burst(0, &mut burst).unwrap();
            p.poll().unwrap();
        }
        for _ in 0..10 {
            p.poll().unwrap();
        }
    })
}

/// Starts collecting test frames ([`is_test`]) on `eth0` of namespace `ns` for `ms`
/// milliseconds (or until `want` arrived).
pub fn collect(ns: &str, want: usize, ms: u64) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
    use quench_port::{packet::PacketPort, Frame, Port};
    use quench_wire::time::Clock;
    use units::Duration;
    let ns = ns.to_string();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        in_ns(&ns, move || {
            let mut p = PacketPort::open("eth0").unwrap();
            ready_tx.send(()).unwrap();
            let clock = Clock::monotonic();
            let t0 = clock.now();
            let mut got = Vec::new();
            let mut buf = Vec::new();
            while got.len() < want && clock.now() - t0 < Duration::from_millis(ms) {
                p.rx_burst(0, &mut buf, 64).unwrap();
                got.extend(
                    buf.drain(..)
                        .map(|f| f.data().to_vec())
                        .filter(|f| is_test(f)),
                );
            }
            got
        })
    });
    ready_rx.recv().unwrap();
    h
}

/// A running `quench switch`, stopped with SIGTERM (by pid) on drop.
pub struct Switch {
    pub child: Option<std::process::Child>,
    pub sock: PathBuf,
    pub dir: PathBuf,
}

impl Switch {
    /// Starts with the three testbed ports on `driver` and `extra` top-level keys.
    pub fn start(tb: &Testbed, driver: &str, extra: &str) -> Switch {
        Switch::start_args(tb, driver, extra, &[])
    }

    /// [`Switch::start`] with `args` after `quench switch --config FILE`.
    pub fn start_args(tb: &Testbed, driver: &str, extra: &str, args: &[&str]) -> Switch {
        let mut ports = String::new();
        for name in ["s0", "s1", "r0"] {
            ports += &format!(
                "[[ports]]\nname = \"{name}\"\niface = \"{}-sw-{name}\"\ndriver = \"{driver}\"\n",
                tb.prefix
            );
        }
        Switch::start_with_args(tb, &format!("{extra}\n{ports}"), args)
    }

    /// Starts with `body` as the configuration (the control socket is added).
    pub fn start_with(tb: &Testbed, body: &str) -> Switch {
        Switch::start_with_args(tb, body, &[])
    }

    /// With `args` after `quench switch --config FILE`.
    pub fn start_with_args(tb: &Testbed, body: &str, args: &[&str]) -> Switch {
        let dir = std::env::temp_dir().join(format!("{}-sw", tb.prefix));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("ctl.sock");
        let cfg = format!("control_socket = {:?}\n{body}", sock.display().to_string());
        let cfg_path = dir.join("switch.toml");
        std::fs::write(&cfg_path, cfg).unwrap();
        let child = std::process::Command::new("ip")
            .args(["netns", "exec", &tb.ns("sw")])
            .arg(env!("CARGO_BIN_EXE_quench"))
            .args(["switch", "--config"])
            .arg(&cfg_path)
            .args(args)
            .spawn()
            .unwrap();
        let sw = Switch {
            child: Some(child),
            sock,
            dir,
        };
        let clock = quench_wire::time::Clock::monotonic();
        let t0 = clock.now();
        while quench_runtime::switch::control::query(&sw.sock).is_err() {
            assert!(
                clock.now() - t0 < units::Duration::from_secs(10),
                "switch did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        sw
    }
    pub fn stats(&self) -> quench_runtime::switch::stats::Snapshot {
        quench_runtime::switch::control::query(&self.sock).unwrap()
    }
    /// SIGTERM and wait; returns the exit status.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        // Safety: signalling our own child by its pid.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        c.wait().ok()
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `quench ARGS` (this build's binary) run in directory `d`.
pub fn quench_in(d: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_quench"))
        .current_dir(d)
        .args(args)
        .output()
        .unwrap()
}

/// `quench sim`'s arguments for the inputs of [`incast_inputs`], without congestion control.
pub const INCAST_ARGS: [&str; 6] = [
    "--topology",
    "topo.txt",
    "--flows",
    "flows.txt",
    "--cc",
    "none",
];

/// A fresh scratch directory holding a 2:1 incast in ns-3's formats: `topo.txt` (hosts 0, 1, 2
/// on switch 3, links of `rate`) and `flows.txt` (0 -> 2 and 1 -> 2, `bytes` each, at 0 s).
pub fn incast_inputs(name: &str, rate: &str, bytes: [u64; 2]) -> ScratchDir {
    let d = ScratchDir::new(name);
    let _ = std::fs::remove_dir_all(&d.0);
    std::fs::create_dir_all(&d.0).unwrap();
    let topo: String = (0..3).map(|h| format!("{h} 3 {rate} 1us 0\n")).collect();
    std::fs::write(d.0.join("topo.txt"), format!("4 1 3\n3\n{topo}")).unwrap();
    let [a, b] = bytes;
    std::fs::write(
        d.0.join("flows.txt"),
        format!("2\n0 2 3 100 {a} 0\n1 2 3 100 {b} 0\n"),
    )
    .unwrap();
    d
}
