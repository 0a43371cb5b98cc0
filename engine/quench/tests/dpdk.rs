//! DPDK port tests (cargo feature `dpdk`): one test binary, because `rte_eal_init` runs once per
//! process. Every test initialises the EAL with the same [`eal`] arguments: no hugepages, no PCI,
//! virtual devices only.
//!
//! Run: `cargo test -p quench --features dpdk --test dpdk` (after scripts/setup-dpdk.sh).
use std::collections::HashSet;
use std::process::Command;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use quench_node::switch::queue::QueueLimits;
use quench_port::any::AnyPort;
use quench_port::dpdk::{self, DpdkConfig, DpdkError, DpdkPort};
use quench_port::heap::Carried;
use quench_port::{Frame, Port, PortKind, PortSpec};
use quench_runtime::switch::config::SwitchConfig;
use quench_runtime::switch::forward::{OwnedPort, Worker};
use quench_runtime::switch::stats::PortCounters;
use units::{Duration, Instant};

mod common;
use common::{lock, netns_or_skip, repo, Testbed};

/// One port per test so tests can run in parallel threads.
fn eal() -> Vec<String> {
    [
        "--no-huge",
        "-m",
        "256",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "-l",
        "0",
        "--log-level=lib.eal:error",
        "--vdev=net_null0",
        "--vdev=net_null1",
        "--vdev=net_null2",
        "--vdev=net_null3",
        "--vdev=net_null4",
        "--vdev=net_null5",
        "--vdev=net_null6",
        "--vdev=net_ring0",
        "--vdev=net_ring1",
    ]
    .map(String::from)
    .to_vec()
}

fn cfg() -> DpdkConfig {
    DpdkConfig {
        eal: eal(),
        mbufs: 4095,
        descriptors: 512,
        ..DpdkConfig::default()
    }
}

fn open(name: &str) -> DpdkPort {
    DpdkPort::open(name, &cfg()).unwrap_or_else(|e| panic!("open {name}: {e}"))
}

#[test]
fn null_port_receives_transmits_and_returns_every_mbuf() {
    let mut p = open("net_null0");
    assert_eq!(p.caps().kind, PortKind::Dpdk);
    assert!(p.caps().zero_copy);
    let before = p.pool_available();
    let mut frames = Vec::new();
    let n = p.rx_burst(0, &mut frames, 32).unwrap();
    assert_eq!(n, 32, "net_null always has a full burst");
    assert_eq!(frames.len(), 32);
    // net_null's frames are 64 octets (its default `size`).
    assert!(frames.iter().all(|f| f.len() == 64));
    assert_eq!(p.pool_available(), before - 32);
    // Without hugepages the pool packs mbufs across 4 KiB pages (quench_dpdk_pool_create): one
    // per page would put every mbuf at the same page offset, hence in one L1 cache set.
    let offsets: HashSet<usize> = frames.iter().map(|f| f.as_mbuf() as usize % 4096).collect();
    assert!(offsets.len() > 1, "{offsets:?}");
    // Half are transmitted (net_null frees them), half dropped by us: all go back to the pool.
    let mut tx: Vec<_> = frames.drain(..16).collect();
    assert_eq!(p.tx_burst(0, &mut tx).unwrap(), 16);
    assert!(tx.is_empty());
    drop(frames);
    assert_eq!(p.pool_available(), before);
    assert_eq!(p.frame_counts().rx_frames, 32);
    assert_eq!(p.frame_counts().tx_frames, 16);
    // The device's own drop count (imissed) is readable; net_null never misses a frame.
    assert_eq!(Port::stats(&mut p).rx_kernel_drops, Some(0));
}

#[test]
fn ring_port_loops_frames_back_without_copying() {
    // A net_ring vdev created from the command line uses one ring per queue for both
    // directions: what queue 0 transmits, queue 0 receives.
    let mut p = open("net_ring0");
    let mut out = Vec::new();
    let mut sent_mbufs = HashSet::new();
    for i in 0..8u8 {
        let mut f = p.alloc(60 + usize::from(i)).expect("pool has mbufs");
        assert!(f.data().iter().all(|&b| b == 0), "alloc zeroes the frame");
        f.data_mut()[0] = i;
        f.data_mut()[59] = 0xa5;
        sent_mbufs.insert(f.as_mbuf() as usize);
        out.push(f);
    }
    assert_eq!(p.tx_burst(0, &mut out).unwrap(), 8);
    let mut back = Vec::new();
    assert_eq!(p.rx_burst(0, &mut back, 32).unwrap(), 8);
    for (i, f) in back.iter().enumerate() {
        assert_eq!(f.len(), 60 + i);
        assert_eq!(f.data()[0], i as u8);
        assert_eq!(f.data()[59], 0xa5);
        assert!(
            sent_mbufs.contains(&(f.as_mbuf() as usize)),
            "same mbuf, no copy"
        );
    }
    // set_len clamps to the buffer and zero-fills growth.
    let f = &mut back[0];
    assert_eq!(f.set_len(100), 100);
    assert!(f.data()[60..].iter().all(|&b| b == 0));
    assert_eq!(f.set_len(1 << 20), quench_port::MAX_FRAME);
    assert!(p.alloc(1 << 20).is_none());
}

#[test]
fn tx_keeps_what_the_ring_cannot_take_in_order() {
    // net_ring's rings hold `descriptors` frames; sending more leaves the rest in the vector.
    let c = DpdkConfig {
        descriptors: 512,
        ..cfg()
    };
    let mut p = DpdkPort::open("net_ring1", &c).unwrap();
    let mut out = Vec::new();
    for i in 0..1500u32 {
        let mut f = p.alloc(64).unwrap();
        f.data_mut()[..4].copy_from_slice(&i.to_be_bytes());
        out.push(f);
    }
    let sent = p.tx_burst(0, &mut out).unwrap();
    assert!(sent > 0 && sent < 1500, "sent {sent}");
    assert_eq!(out.len(), 1500 - sent);
    let first_left = u32::from_be_bytes(out[0].data()[..4].try_into().unwrap());
    assert_eq!(first_left as usize, sent, "unsent frames stay in order");
    let mut back = Vec::new();
    while p.rx_burst(0, &mut back, 32).unwrap() > 0 {}
    assert_eq!(back.len(), sent);
}

/// Two workers' handles on one port, a queue pair each: both receive and transmit on their own
/// queue, a queue already held or out of range is refused, and the device keeps running until
/// the last handle is gone.
#[test]
fn a_port_is_shared_one_queue_pair_per_handle() {
    let two = DpdkConfig {
        rx_queues: 2,
        tx_queues: 2,
        ..cfg()
    };
    let mut a = DpdkPort::open_queues("net_null5", &two, Some(&[0])).unwrap();
    let mut b = DpdkPort::open_queues("net_null5", &two, Some(&[1])).unwrap();
    assert_eq!((a.caps().rx_queues, b.caps().tx_queues), (1, 1));
    let e = DpdkPort::open_queues("net_null5", &two, Some(&[1])).unwrap_err();
    assert!(matches!(e, DpdkError::Busy(_)), "{e}");
    let e = DpdkPort::open("net_null5", &two).unwrap_err();
    assert!(matches!(e, DpdkError::Busy(_)), "{e}");
    let e = DpdkPort::open_queues("net_null5", &two, Some(&[2])).unwrap_err();
    assert!(e.to_string().contains("queue 2"), "{e}");
    let (mut va, mut vb) = (Vec::new(), Vec::new());
    assert_eq!(a.rx_burst(0, &mut va, 4).unwrap(), 4);
    assert_eq!(b.rx_burst(0, &mut vb, 4).unwrap(), 4);
    // Local queue 1 does not exist on a one-queue handle.
    assert_eq!(a.rx_burst(1, &mut va, 4).unwrap(), 0);
    assert_eq!(a.tx_burst(0, &mut va).unwrap(), 4);
    drop(a);
    // b's queue still runs after a is gone; the port stops with b.
    assert_eq!(b.rx_burst(0, &mut vb, 4).unwrap(), 4);
    assert_eq!(b.tx_burst(0, &mut vb).unwrap(), 8);
    drop(b);
    let mut whole = DpdkPort::open("net_null5", &two).unwrap();
    assert_eq!(whole.rx_burst(1, &mut va, 4).unwrap(), 4);
}

#[test]
fn errors_name_the_cause() {
    let e = DpdkPort::open("net_null9", &cfg()).unwrap_err();
    assert!(matches!(e, DpdkError::NoSuchPort(_)));
    assert!(e.to_string().contains("--vdev=net_null9"), "{e}");

    let p = open("net_null1");
    let e = DpdkPort::open("net_null1", &cfg()).unwrap_err();
    assert!(matches!(e, DpdkError::Busy(_)), "{e}");
    drop(p);
    // Reopening after the previous handle is gone works (the vdev is stopped, not closed).
    let mut p = open("net_null1");
    let mut v = Vec::new();
    assert_eq!(p.rx_burst(0, &mut v, 4).unwrap(), 4);

    let other = DpdkConfig {
        eal: vec!["--no-huge".into()],
        ..cfg()
    };
    let e = DpdkPort::open("net_null1", &other).unwrap_err();
    assert!(matches!(e, DpdkError::EalMismatch { .. }), "{e}");

    let spec = PortSpec::parse("dpdk:net_null2@1").unwrap();
    let e = DpdkPort::open_spec(&spec, &cfg()).unwrap_err();
    assert!(e.to_string().contains("dpdk.rx_queues"), "{e}");
    let spec = PortSpec::parse("dpdk:net_null2").unwrap();
    let p = DpdkPort::open_spec(&spec, &cfg()).unwrap();
    assert_eq!(p.caps().name, "net_null2");
}

#[test]
fn config_is_validated_and_parsed_from_toml() {
    let bad = DpdkConfig {
        mbufs: 100,
        ..DpdkConfig::default()
    };
    assert!(bad
        .validate()
        .unwrap_err()
        .to_string()
        .contains("dpdk.mbufs"));
    let c: DpdkConfig = toml::from_str("eal = [\"--no-pci\"]\ndescriptors = 256\n").unwrap();
    assert_eq!(c.eal, vec!["--no-pci".to_string()]);
    assert_eq!(c.descriptors, 256);
    assert!(toml::from_str::<DpdkConfig>("mbuf = 5\n").is_err());
}

/// Runs `cmd` (a shell command); panics with its stderr when it fails.
fn sh(cmd: &str) {
    let out = Command::new("sh").args(["-c", cmd]).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Deletes the namespace (and with it the veth pair) when the test ends, even on panic.
struct Netns(String);
impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// End to end over the kernel: net_af_packet on both ends of a veth pair inside a network
/// namespace this test creates. Needs root (CI runs as root); skips with a reason otherwise.
#[test]
fn af_packet_over_veth_in_a_netns() {
    if !netns_or_skip("af_packet_over_veth_in_a_netns") {
        return;
    }
    let _l = lock();
    dpdk::eal_init(&eal()).unwrap();
    let pid = std::process::id();
    let ns = Netns(format!("qdpdk{pid}"));
    let (a, b) = (format!("qda{pid}"), format!("qdb{pid}"));
    sh(&format!("ip netns add {}", ns.0));
    let x = format!("ip -n {}", ns.0);
    sh(&format!("{x} link add {a} type veth peer name {b}"));
    sh(&format!("{x} link set {a} up && {x} link set {b} up"));

    // net_af_packet opens its sockets in the probing thread's namespace: probe from a thread
    // that entered it.
    let nsname = ns.0.clone();
    let (pa, pb) = std::thread::spawn(move || {
        quench_port::netns::in_netns(Some(&nsname), || {
            dpdk::probe_vdev(&format!("net_af_packet10,iface={a}")).unwrap();
            dpdk::probe_vdev(&format!("net_af_packet11,iface={b}")).unwrap();
            (open("net_af_packet10"), open("net_af_packet11"))
        })
        .unwrap()
    })
    .join()
    .unwrap();
    let (mut pa, mut pb) = (pa, pb);

    // Local-experimental EtherType 0x88b5, so kernel chatter (IPv6 RS, MLD) is told apart.
    let mut out = Vec::new();
    for i in 0..64u16 {
        let mut f = pa.alloc(64).unwrap();
        let d = f.data_mut();
        d[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xb]);
        d[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xa]);
        d[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        d[14..16].copy_from_slice(&i.to_be_bytes());
        out.push(f);
    }
    let mut sent = 0;
    for _ in 0..1000 {
        sent += pa.tx_burst(0, &mut out).unwrap();
        if out.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(sent, 64);
    let mut got = HashSet::new();
    let mut v = Vec::new();
    for _ in 0..2000 {
        pb.rx_burst(0, &mut v, 32).unwrap();
        for f in v.drain(..) {
            if f.data()[12..14] == 0x88b5u16.to_be_bytes() {
                got.insert(u16::from_be_bytes([f.data()[14], f.data()[15]]));
            }
        }
        if got.len() == 64 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(got.len(), 64, "frames received on the far end");
}

#[test]
fn switch_config_takes_dpdk_ports() {
    let text = r#"
[[ports]]
name = "a"
iface = "net_null3"
driver = "dpdk"
[dpdk]
eal = ["--no-huge", "--vdev=net_null3"]
descriptors = 256
"#;
    let prof = SwitchConfig::parse(text, "t.toml").unwrap();
    assert_eq!(prof.ports[0].kind, PortKind::Dpdk);
    assert_eq!(prof.dpdk.eal[1], "--vdev=net_null3");
    let bad = text.replace("descriptors = 256", "mbufs = 10");
    let e = SwitchConfig::parse(&bad, "t.toml").unwrap_err().to_string();
    assert!(e.contains("t.toml") && e.contains("dpdk.mbufs"), "{e}");
}

/// Writes `dst`, `src` and EtherType 0x88b5 into every free mbuf of the port's pool (net_null
/// receives pool mbufs without writing them).
/// What crosses between workers lands on a DPDK port (`Port::land`): a small frame, copied into
/// the crossing, in a fresh mbuf of the port's pool with the same octets; a large one as its own
/// mbuf, not copied. A copy too large for an mbuf is refused, and every mbuf goes back.
#[test]
fn a_small_crossing_lands_copied_and_a_large_one_as_its_mbuf() {
    let mut p = open("net_null6");
    let full = p.pool_available();
    let small: Vec<u8> = (0..64u8).collect();
    let inline = Carried::copy_of(&small).unwrap();
    assert!(matches!(inline, Carried::Inline(_)));
    let copied = p.land(inline).unwrap();
    assert_eq!(copied.data(), &small[..]);
    assert_eq!(p.pool_available(), full - 1);
    let mut big = p.alloc(1000).unwrap();
    big.data_mut()[999] = 7;
    let mbuf = big.as_mbuf();
    let carried = big.into_carried().unwrap();
    assert!(matches!(carried, Carried::Dpdk(_)));
    let landed = p.land(carried).unwrap();
    assert_eq!(landed.as_mbuf(), mbuf);
    assert_eq!((landed.len(), landed.data()[999]), (1000, 7));
    assert!(p.import(&[0u8; 3000]).is_none());
    drop((copied, landed));
    assert_eq!(p.pool_available(), full);
}

fn stamp_pool(p: &mut DpdkPort, dst: u8, src: u8) {
    let frames: Vec<_> = std::iter::from_fn(|| p.alloc(64)).collect();
    for mut f in frames {
        let d = f.data_mut();
        d[..12].copy_from_slice(&[2, 0, 0, 0, 0, dst, 2, 0, 0, 0, 0, src]);
        d[12..14].copy_from_slice(&[0x88, 0xb5]);
    }
}

/// The switch's worker loop (what `quench switch` runs per core) over two DPDK ports behind
/// `AnyPort`: frames are learned, forwarded both ways, and every mbuf is back in its pool after
/// shutdown.
#[test]
fn switch_worker_forwards_between_dpdk_ports() {
    let (mut a, mut b) = (open("net_null3"), open("net_null4"));
    stamp_pool(&mut a, 0xb, 0xa);
    stamp_pool(&mut b, 0xa, 0xb);
    let full = [a.pool_available(), b.pool_available()];
    let counters: Vec<Arc<PortCounters>> = (0..2).map(|_| Arc::default()).collect();
    let owned = [a, b]
        .into_iter()
        .zip(&counters)
        .map(|(p, c)| {
            OwnedPort::new(
                AnyPort::Dpdk(p),
                vec![0],
                QueueLimits::default(),
                None,
                c.clone(),
            )
        })
        .collect();
    let mut sw = Worker::single(owned, Duration::from_secs(10));
    for i in 0..200 {
        sw.poll(Instant::from_nanos(i * 1000));
    }
    let get = |i: usize, f: fn(&PortCounters) -> &std::sync::atomic::AtomicU64| {
        f(&counters[i]).load(Ordering::Relaxed)
    };
    for i in 0..2 {
        assert!(get(i, |c| &c.rx_pkts) >= 199 * 32, "port {i} received");
        assert!(get(i, |c| &c.tx_pkts) >= 198 * 32, "port {i} transmitted");
        assert_eq!(
            get(i, |c| &c.rx_drops),
            0,
            "no malformed or filtered frames"
        );
    }
    // Station 0x0a is behind port 0 and 0x0b behind port 1: only the very first frames flooded.
    assert!(get(0, |c| &c.flooded) + get(1, |c| &c.flooded) <= 64);
    sw.shutdown();
    for (i, op) in sw.ports.iter().enumerate() {
        let Some(op) = op else { unreachable!() };
        let AnyPort::Dpdk(p) = &op.port else {
            unreachable!()
        };
        assert_eq!(
            p.pool_available(),
            full[i],
            "every mbuf of port {i} is back"
        );
    }
}

/// `quench send` over a DPDK port (net_af_packet on a testbed veth) through `quench switch`
/// (AF_PACKET) to `quench recv`: every frame arrives, in order. The binaries run as processes
/// (each its own EAL). Needs root; skips with a reason otherwise.
#[test]
fn send_over_dpdk_through_the_switch_end_to_end() {
    if !netns_or_skip("send_over_dpdk_through_the_switch_end_to_end") {
        return;
    }
    let _l = lock();
    let tb = Testbed::up(format!("qe{}", std::process::id() % 10000), 1, 1);
    let prefix = tb.prefix.clone();
    let dir = std::env::temp_dir().join(format!("{prefix}-dpdk-e2e"));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("switch.toml");
    std::fs::write(
        &cfg,
        format!(
            "control_socket = {:?}\n[[ports]]\nname = \"s0\"\niface = \"{prefix}-sw-s0\"\n\
             driver = \"af_packet\"\n[[ports]]\nname = \"r0\"\niface = \"{prefix}-sw-r0\"\n\
             driver = \"af_packet\"\n",
            dir.join("ctl.sock").display().to_string()
        ),
    )
    .unwrap();
    let q = env!("CARGO_BIN_EXE_quench");
    let ns = |n: &str| format!("{prefix}-{n}");
    let mut sw = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns("sw"),
            q,
            "switch",
            "--duration",
            "8s",
            "--config",
        ])
        .arg(&cfg)
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let recv = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns("r0"),
            q,
            "recv",
            "--iface",
            "eth0",
            "--no-cnp",
        ])
        .args(["--duration", "4s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let send = Command::new("ip")
        .args(["netns", "exec", &ns("s0"), q, "send", "--driver", "dpdk"])
        .args(["--iface", "net_af_packet0", "--dpdk-eal"])
        .arg(format!(
            "--no-huge -m 256 --no-pci --no-shconf --no-telemetry --file-prefix={prefix} \
             --vdev=net_af_packet0,iface=eth0"
        ))
        .args([
            "--config",
            repo().join("configs/send.toml").to_str().unwrap(),
        ])
        .args(["--cc", "none", "--rate", "50mbit", "--duration", "2s"])
        .output()
        .unwrap();
    let send_out = String::from_utf8_lossy(&send.stdout).to_string();
    assert!(
        send.status.success(),
        "{send_out}\n{}",
        String::from_utf8_lossy(&send.stderr)
    );
    let recv = recv.wait_with_output().unwrap();
    let _ = sw.kill();
    let _ = sw.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let last_json = |s: &str| -> serde_json::Value {
        serde_json::from_str(s.lines().rfind(|l| l.starts_with('{')).unwrap()).unwrap()
    };
    let sent = last_json(&send_out)["frames"].as_u64().unwrap();
    let r = last_json(&String::from_utf8_lossy(&recv.stdout));
    let got: u64 = r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["frames"].as_u64().unwrap())
        .sum();
    // 50 Mb/s of 1500-octet frames for 2 s is about 8300 frames on an idle machine. This test
    // checks delivery (every frame sent arrives, in order); how close the sender keeps to its
    // rate is the pacing audit's business, and a loaded machine keeps a debug build's loop off
    // its CPU for much of the run. A thousand frames still make the path carry real traffic.
    assert!(sent > 1000, "sent {sent}: {send_out}");
    assert_eq!(got, sent, "received {got} of {sent}: {r}");
    assert_eq!(r["flows"][0]["lost"], 0);
    assert_eq!(r["flows"][0]["reordered"], 0);
}
