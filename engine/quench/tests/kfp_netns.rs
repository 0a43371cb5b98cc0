//! The kernel fast path's program (`quench_port::kfp`) on a veth testbed, below the switch:
//! the verifier accepts it, a frame whose source and destination the table holds is redirected
//! in the kernel (counted by the program, never seen by the AF_XDP socket), any other frame
//! reaches the socket. Needs root; skipped with a printed reason otherwise.
use quench_node::switch::fdb::key;
use quench_port::kfp::{FastProgram, FastTable};
use quench_port::xdp::{XdpOptions, XdpPool, XdpPort, XdpProgram};
use quench_port::{if_index, Frame, Port};
use quench_wire::MacAddr;

mod common;
use common::{
    collect, in_ns, lock, netns_or_skip, send, xdp_progs, ScratchDir, Switch, Testbed, ETH_TEST,
};

const A: [u8; 6] = [0x02, 0x71, 0x6e, 0x0a, 0, 1];
const B: [u8; 6] = [0x02, 0x71, 0x6e, 0x0b, 0, 1];
const C: [u8; 6] = [0x02, 0x71, 0x6e, 0x0c, 0, 1];

fn frame(dst: [u8; 6], src: [u8; 6], seq: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETH_TEST);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(len, seq as u8);
    f
}

/// `f` with a VLAN tag (VID 10, priority `pcp`) after its addresses.
fn tag(mut f: Vec<u8>, pcp: u8) -> Vec<u8> {
    f.splice(12..12, [0x81, 0x00, pcp << 5, 0x0a]);
    f
}

fn mac(m: [u8; 6]) -> u64 {
    key(MacAddr(m[0], m[1], m[2], m[3], m[4], m[5]))
}

#[test]
fn known_pairs_are_redirected_in_the_kernel_and_counted_the_rest_reach_the_socket() {
    if !netns_or_skip("known_pairs_are_redirected_in_the_kernel") {
        return;
    }
    let _l = lock();
    let tb = Testbed::up(format!("q{}k", std::process::id() % 1000), 1, 1);
    let (s0, r0) = (tb.ns("sw-s0"), tb.ns("sw-r0"));
    let sw = tb.ns("sw");
    let r0_rx = collect(&tb.ns("r0"), 20, 1500);
    // The switch side, in its own thread inside the switch's namespace: ports 0 (s0), 1 (r0).
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
    let switch = std::thread::spawn(move || {
        in_ns(&sw, move || {
            let table = FastTable::new().unwrap();
            let progs: Vec<FastProgram> = (0..2)
                .map(|p| FastProgram::load(&table, p, 1).unwrap())
                .collect();
            let pool = XdpPool::new(4096).unwrap();
            let mut ports = Vec::new();
            for (i, dev) in [&s0, &r0].into_iter().enumerate() {
                table.set_device(i as u32, if_index(dev).unwrap()).unwrap();
                let (prog_fd, xskmap_fd) = progs[i].fds();
                let opts = XdpOptions {
                    queues: Some(vec![0]),
                    program: Some(XdpProgram { prog_fd, xskmap_fd }),
                    ..Default::default()
                };
                ports.push(XdpPort::open(&pool, dev, &opts).unwrap());
            }
            table.install(mac(A), 0).unwrap();
            table.install(mac(B), 1).unwrap();
            up_tx.send(()).unwrap();
            // Read the socket of s0 until told to stop: only frames the table does not cover.
            let mut seen = Vec::new();
            let mut buf = Vec::new();
            while go_rx.try_recv().is_err() {
                for p in ports.iter_mut() {
                    p.poll().unwrap();
                    p.rx_burst(0, &mut buf, 64).unwrap();
                    seen.extend(buf.drain(..).map(|f| f.data().to_vec()));
                }
            }
            let mut counts = vec![(0, 0); 2];
            progs[0].counts(&mut counts);
            let hit_a = table.take_hit(mac(A));
            let hit_again = table.take_hit(mac(A));
            let hit_b = table.take_hit(mac(B));
            (seen, counts, hit_a, hit_again, hit_b)
        })
    });
    up_rx.recv().unwrap();
    // 19 untagged frames and one with a VLAN tag take the fast path.
    let mut known: Vec<Vec<u8>> = (0..19)
        .map(|i| frame(B, A, i, 60 + 50 * i as usize))
        .collect();
    known.push(tag(frame(B, A, 19, 200), 3));
    // The core's: an unknown destination, an 802.3 length field, two VLAN tags.
    let mut length = frame(B, A, 100, 100);
    length[12..14].copy_from_slice(&[0x00, 0x40]);
    let core = vec![
        frame(C, A, 100, 100),
        length,
        tag(tag(frame(B, A, 101, 100), 2), 1),
    ];
    let mut all = known.clone();
    all.extend(core.iter().cloned());
    send(&tb.ns("s0"), all);
    let got = r0_rx.join().unwrap();
    go_tx.send(()).unwrap();
    let (seen, counts, hit_a, hit_again, hit_b) = switch.join().unwrap();
    assert_eq!(
        got, known,
        "r0 gets the known frames, byte for byte, in order"
    );
    let seen: Vec<_> = seen.into_iter().filter(|f| f[6..12] == A).collect();
    assert_eq!(seen, core, "what the socket gets: the core's frames only");
    let bytes: u64 = known.iter().map(|f| f.len() as u64).sum();
    assert_eq!(
        counts,
        vec![(0, 0), (20, bytes)],
        "counted under egress port 1"
    );
    assert_eq!(
        (hit_a, hit_again, hit_b),
        (Some(true), Some(false), Some(false))
    );
    assert_eq!(
        xdp_progs(&tb.ns("sw")),
        0,
        "XDP program left attached after the ports closed"
    );
}

const D: [u8; 6] = [0x02, 0x71, 0x6e, 0x0d, 0, 1];

/// An IPv4 frame, ECN ECT(0), `len` octets, from `src` to `dst`; its header checksum correct.
fn ect_frame(dst: [u8; 6], src: [u8; 6], seq: u16, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (len - 14) as u16;
    let mut ip = [
        0x45, 0x02, 0, 0, 0, 0, 0, 0, 64, 253, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[4..6].copy_from_slice(&seq.to_be_bytes());
    let sum: u32 = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    let csum = !(((folded & 0xffff) + (folded >> 16)) as u16);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.resize(len, seq as u8);
    f
}

/// The kernel fast path in `quench switch` (on by default; s0, s2, r0 plain; s1 with an egress
/// rate and RED/ECN, captured): learning, then frames between plain ports forwarded by the
/// program (counted as fast, byte for byte, in order); frames to s1 through the core, its marks
/// decoded by tshark from s1's capture; unknown destinations flooded; a move of a host between
/// plain ports followed; a killed switch's programs removed by the next start.
#[test]
fn the_switch_forwards_plain_pairs_in_the_kernel_and_the_rest_through_its_core() {
    if !netns_or_skip("the_switch_forwards_plain_pairs_in_the_kernel") {
        return;
    }
    let _l = lock();
    let tb = Testbed::up(format!("q{}f", std::process::id() % 1000), 3, 1);
    let dir = ScratchDir::new("kfp-switch");
    std::fs::create_dir_all(&dir.0).unwrap();
    let pcap = dir.0.join("s1.pcap");
    let mut body = String::from("ageing_secs = 30.0\n");
    for name in ["s0", "s1", "s2", "r0"] {
        body += &format!(
            "[[ports]]\nname = \"{name}\"\niface = \"{}-sw-{name}\"\n",
            tb.prefix
        );
        if name == "s1" {
            body += "rate = \"20mbit\"\nqueue_bytes = 200000\n";
        }
    }
    body += "[[congestion]]\nport = \"s1\"\n\
             red = { kmin_bytes = 2000, kmax_bytes = 6000, pmax = 1.0 }\n";
    let capture = format!("s1={}", pcap.display());
    let args = ["--capture", &capture];
    let mut sw = Switch::start_with_args(&tb, &body, &args);
    let settle = || std::thread::sleep(std::time::Duration::from_millis(200));
    // 1. Learning through the core: B on r0, A on s0, C on s1.
    send(&tb.ns("r0"), vec![frame(A, B, 0, 64)]);
    send(&tb.ns("s0"), vec![frame(B, A, 1, 64)]);
    send(&tb.ns("s1"), vec![frame(A, C, 2, 64)]);
    settle();
    let before = sw.stats();
    assert_eq!(before.ports[0].fast_rx_pkts, 0, "{before:?}");
    // 2. A -> B: both plain and learned, so the kernel forwards them, byte for byte, in order.
    let known: Vec<Vec<u8>> = (0..50)
        .map(|i| frame(B, A, 100 + i, 60 + 29 * i as usize))
        .collect();
    let r0 = collect(&tb.ns("r0"), known.len(), 3000);
    send(&tb.ns("s0"), known.clone());
    assert_eq!(r0.join().unwrap(), known, "r0: the fast path's frames");
    settle();
    let snap = sw.stats();
    let (s0, s1, r0) = (&snap.ports[0], &snap.ports[1], &snap.ports[3]);
    let bytes: u64 = known.iter().map(|f| f.len() as u64).sum();
    assert_eq!((s0.fast_rx_pkts, s0.fast_rx_bytes), (50, bytes), "{snap:?}");
    assert_eq!((r0.fast_tx_pkts, r0.fast_tx_bytes), (50, bytes), "{snap:?}");
    // The totals include them, and the worker saw none of them.
    assert_eq!(s0.rx_pkts, before.ports[0].rx_pkts + 50, "{snap:?}");
    assert_eq!(r0.tx_pkts, before.ports[3].tx_pkts + 50, "{snap:?}");
    // 3. A -> C: s1 is not plain (rate, RED, capture): through the core's shaped queue, where
    // RED marks them.
    let to_c: Vec<Vec<u8>> = (0..40).map(|i| ect_frame(C, A, i, 1000)).collect();
    send(&tb.ns("s0"), to_c);
    std::thread::sleep(std::time::Duration::from_millis(800));
    let snap = sw.stats();
    assert_eq!(snap.ports[1].fast_tx_pkts, 0, "{snap:?}");
    assert_eq!(snap.ports[0].fast_rx_pkts, 50, "{snap:?}");
    assert!(snap.ports[1].tx_pkts >= 40 + s1.tx_pkts, "{snap:?}");
    // 4. Unknown destination D from A: flooded by the core to s1, s2 and r0.
    let r0 = collect(&tb.ns("r0"), 1, 1500);
    let s2c = collect(&tb.ns("s2"), 1, 1500);
    send(&tb.ns("s0"), vec![frame(D, A, 500, 80)]);
    assert_eq!(
        r0.join().unwrap().len(),
        1,
        "unknown unicast not flooded to r0"
    );
    assert_eq!(
        s2c.join().unwrap().len(),
        1,
        "unknown unicast not flooded to s2"
    );
    // 5. B moves to s2 (a frame from it there): the core learns the move, and the kernel's
    // entry follows; A's frames to B now go to s2, still in the kernel, and none to r0.
    send(&tb.ns("s2"), vec![frame(A, B, 600, 64)]);
    settle();
    let r0 = collect(&tb.ns("r0"), 1, 1000);
    let s2c = collect(&tb.ns("s2"), 20, 2000);
    let moved: Vec<Vec<u8>> = (0..20).map(|i| frame(B, A, 700 + i, 90)).collect();
    send(&tb.ns("s0"), moved.clone());
    assert_eq!(s2c.join().unwrap(), moved, "s2 after the move");
    assert!(
        r0.join().unwrap().is_empty(),
        "r0 still gets B's frames after the move"
    );
    settle();
    let snap = sw.stats();
    assert_eq!(snap.ports[2].fast_tx_pkts, 20, "{snap:?}");
    // 6. s1's capture: tshark finds RED's CE marks on frames out of s1, and A's frames there.
    let st = sw.stop().unwrap();
    assert!(st.success(), "switch exit status {st:?}");
    assert_eq!(xdp_progs(&tb.ns("sw")), 0, "XDP program left attached");
    tshark_marks(&pcap);
    // 7. A killed switch leaves its programs attached; the next start removes them.
    let mut sw = Switch::start_with_args(&tb, &body, &[]);
    if let Some(c) = sw.child.as_mut() {
        // Safety: signalling our own child by its pid.
        unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
        c.wait().unwrap();
    }
    sw.child = None;
    assert_eq!(xdp_progs(&tb.ns("sw")), 4, "the killed switch's programs");
    let _ = std::fs::remove_file(&sw.sock);
    let mut again = Switch::start_with_args(&tb, &body, &["--fast-path", "kernel"]);
    let r0 = collect(&tb.ns("r0"), 1, 1500);
    send(&tb.ns("s0"), vec![frame(B, A, 900, 64)]);
    // B is still on s2 for nobody: a fresh table floods it to every other port.
    assert_eq!(r0.join().unwrap().len(), 1);
    assert!(again.stop().unwrap().success());
    assert_eq!(xdp_progs(&tb.ns("sw")), 0, "XDP program left attached");
}

/// Two workers, each polling two of the four ports (one queue each), share one kernel table,
/// which worker 0 programs from its MAC table and the other worker's learning notices: after
/// A (s0) and B (r0) are learned, on different workers, their frames both ways are forwarded in
/// the kernel, in order, and its counters say how many were; with `--fast-path off` the same
/// frames go through the workers (crossing from one to the other) and none is counted as fast.
#[test]
fn two_workers_share_one_kernel_table_and_off_keeps_every_frame_on_the_workers() {
    if !netns_or_skip("two_workers_share_one_kernel_table") {
        return;
    }
    let _l = lock();
    let tb = Testbed::up(format!("q{}w", std::process::id() % 1000), 3, 1);
    let mut body = String::from("workers = 2\n");
    for name in ["s0", "s1", "s2", "r0"] {
        body += &format!(
            "[[ports]]\nname = \"{name}\"\niface = \"{}-sw-{name}\"\n",
            tb.prefix
        );
    }
    for (args, fast) in [(&[][..], true), (&["--fast-path", "off"][..], false)] {
        let mut sw = Switch::start_with_args(&tb, &body, args);
        let settle = || std::thread::sleep(std::time::Duration::from_millis(200));
        send(&tb.ns("r0"), vec![frame(A, B, 0, 64)]);
        send(&tb.ns("s0"), vec![frame(B, A, 1, 64)]);
        settle();
        let before = sw.stats();
        let (w_s0, w_r0) = (before.ports[0].info.worker, before.ports[3].info.worker);
        assert_ne!(w_s0, w_r0, "s0 and r0 on one worker: {before:?}");
        let to_b: Vec<Vec<u8>> = (0..40)
            .map(|i| frame(B, A, 10 + i, 60 + 7 * i as usize))
            .collect();
        let to_a: Vec<Vec<u8>> = (0..40).map(|i| frame(A, B, 100 + i, 64)).collect();
        let r0 = collect(&tb.ns("r0"), to_b.len(), 3000);
        send(&tb.ns("s0"), to_b.clone());
        assert_eq!(
            r0.join().unwrap(),
            to_b,
            "r0: A's frames to B (fast path {fast})"
        );
        let s0 = collect(&tb.ns("s0"), to_a.len(), 3000);
        send(&tb.ns("r0"), to_a.clone());
        assert_eq!(
            s0.join().unwrap(),
            to_a,
            "s0: B's frames to A (fast path {fast})"
        );
        settle();
        let snap = sw.stats();
        let (s0, r0) = (&snap.ports[0], &snap.ports[3]);
        let n = if fast { 40 } else { 0 };
        assert_eq!((s0.fast_rx_pkts, r0.fast_tx_pkts), (n, n), "{snap:?}");
        assert_eq!((r0.fast_rx_pkts, s0.fast_tx_pkts), (n, n), "{snap:?}");
        assert!(r0.tx_pkts >= 40 && s0.tx_pkts >= 40, "{snap:?}");
        let st = sw.stop().unwrap();
        assert!(st.success(), "switch exit {st:?}");
        assert_eq!(xdp_progs(&tb.ns("sw")), 0, "XDP program left attached");
    }
}

/// tshark (scripts/setup.sh) reads `pcap` (s1's capture): the IPv4 frames out of s1 are A's
/// 40, and RED marked some of them CE (ECN 3).
fn tshark_marks(pcap: &std::path::Path) {
    if std::process::Command::new("tshark")
        .arg("-v")
        .output()
        .is_err()
    {
        eprintln!("skipping the tshark check: tshark not installed (scripts/setup.sh)");
        return;
    }
    let t = std::process::Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args([
            "-Y",
            "ip.proto == 253",
            "-T",
            "fields",
            "-e",
            "ip.id",
            "-e",
            "ip.dsfield.ecn",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&t.stdout).to_string();
    let rows: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(rows.len(), 40, "{text}");
    let ce = rows.iter().filter(|r| r.1 == "3").count();
    assert!(ce > 0, "no CE mark: {text}");
}
