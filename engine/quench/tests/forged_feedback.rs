//! Forged feedback on real frames (issue 18, done-when): the closed loop of
//! scripts/testbed/closed-loop.sh (two senders, one `quench send` process, `quench switch` with a
//! 1 Gbit/s bottleneck), QCN and then DCQCN, while a third host namespace sends forged CNMs and
//! CNPs at 100,000 frames a second (`quench blast --from-pcap`): a CNM addressed to another station,
//! one for a frame with a foreign 5-tuple, a replay of a CNM for the flow's first frame, a CNP
//! from the third host, and two CNMs built from the flow's public fields (configs/send.toml's
//! addresses and ports): one whose copy is cut after the UDP header, and one whole copy with
//! the newest sequence number the third host could read of the flow's own frames, for each
//! sender's flow. The receiver announces its MAC, so the switch floods none of the flows'
//! frames to the third host after the first moments (asserted: at most [`SEEN_BY_FORGER`] of a
//! flow's frames flooded in a run), and that sequence number is outside the window by the
//! time the forger starts. Two baseline runs measure the run-to-run
//! spread; in them the third host sends the same frames at the same rate with EtherType 0x88B5
//! (local experimental) where the VLAN tag's TPID was, so they are no feedback but cost the
//! switch and the senders the same: on the 2-core testbed the CPU that 100,000 frames a second
//! take moves the flows' rates by more than the run-to-run spread, whatever the frames say.
//!
//! Asserts: every forged frame that reached a sender is counted under its reason and none is
//! acted on (each kind gets a sixth of what the forger sent, less what the testbed lost: the
//! replay and the live sequence number both outside the window, the cut copy `short_copy`);
//! the feedback from the switch (QCN) or the receiver (DCQCN) still acts; each flow's rate in
//! the forged run is within the baselines' spread. Needs root; skipped with a printed reason
//! otherwise; takes the netns tests' lock.
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

use quench_node::switch::core::CnmSource;
use quench_node::switch::cp::cnm_frame;
use quench_runtime::send::worker::udp_src_port;
use quench_wire::ethernet::{ethertype, walk, L2Repr, VlanTci};
use quench_wire::frame::{emit_cnp_reply, emit_test_frame, Ipv4UdpHeaders};
use quench_wire::ipv4::Ecn;
use quench_wire::pcap::PcapWriter;
use quench_wire::testhdr::{TestHdrRepr, UDP_PORT};
use quench_wire::MacAddr;
use serde_json::Value;
use units::{FlowId, Instant};

mod common;
use common::{lock, netns_or_skip, release_quench, repo};

/// Seconds each run's senders send; the forger starts [`FORGE_DELAY`] seconds in, when each
/// flow has sent far more than the 65,536 frames a CNM may answer, so the replayed CNM for its
/// first frame is stale.
const SECS: u64 = 8;
const FORGE_DELAY: u64 = 3;
/// The most frames of a flow the switch may flood (to the forger among others) in a run: the
/// ones it forwards before the receiver's first announcement. The forger's "live" sequence
/// number is the newest of them; the flow is more than 65,536 frames past it [`FORGE_DELAY`]
/// seconds in (at 1 Gbit/s shared by two flows, 3 s is about 125,000 frames of each).
const SEEN_BY_FORGER: u64 = 64;
/// Forged frames a second.
const FORGED_PPS: u64 = 100_000;

/// The testbed's sender `i` (scripts/testbed/testbed.sh, scripts/testbed/closed-loop.sh, configs/send.toml).
fn sender_mac(i: u8) -> MacAddr {
    MacAddr::new(0x02, 0x71, 0x6e, 0x01, 0x00, i)
}
fn sender_ip(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 71, 0, 1 + i)
}
fn flow_of(i: u8) -> FlowId {
    FlowId(1 + 100 * u32::from(i))
}
const RECEIVER_MAC: MacAddr = MacAddr(0x02, 0x71, 0x6e, 0x02, 0x00, 0x00);
const RECEIVER_IP: Ipv4Addr = Ipv4Addr::new(10, 71, 0, 101);
/// The forger: sender namespace 2 of the testbed.
const FORGER: u8 = 2;

/// Sender `i`'s frame number `seq` of its flow, CN-TAG included (what a switch samples).
fn data_frame(i: u8, seq: u64) -> Vec<u8> {
    let flow = flow_of(i);
    let l2 = L2Repr::new(RECEIVER_MAC, sender_mac(i), ethertype::IPV4)
        .with_vlan(VlanTci {
            pcp: 3,
            dei: false,
            vid: 1,
        })
        .with_cn_tag(flow.0 as u16);
    let h = Ipv4UdpHeaders {
        l2,
        src: sender_ip(i),
        dst: RECEIVER_IP,
        dscp: 0,
        ecn: Ecn::NotEct,
        src_port: udp_src_port(flow),
        dst_port: UDP_PORT,
    };
    let mut buf = [0u8; 1600];
    let n = emit_test_frame(
        &h,
        &TestHdrRepr::new(flow, seq, Instant::ZERO),
        1500,
        &mut buf,
    )
    .unwrap();
    buf[..n].to_vec()
}

/// The CNM `quench switch` would send for `sampled` (QntzFb 63: the deepest cut).
fn cnm(sampled: &[u8]) -> Vec<u8> {
    let src = CnmSource {
        cp_mac: MacAddr::new(0x02, 0x71, 0x6e, 0x0c, 0x00, 0x00),
        priority: 6,
    };
    let fb = cp::qcn::QcnFeedback {
        qntz_fb: 63,
        qoffset: 100,
        qdelta: 10,
    };
    cnm_frame(sampled, &src, 0, &fb).unwrap()
}

/// The forged frames, six per sender, in the order the forger sends them round and round.
fn forged_frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..2 {
        // 1. Addressed to another station (the switch floods it: the other sender sees a CNM
        //    for a flow it does not hold).
        let mut other = cnm(&data_frame(i, 1));
        other[..6].copy_from_slice(&[0x02, 0x71, 0x6e, 0x01, 0x00, 0x99]);
        out.push(other);
        // 2. For a frame this sender never sent: another host's source address.
        let mut foreign = data_frame(i, 1);
        let ip_src = walk(&foreign).unwrap().payload_offset + 12;
        foreign[ip_src..ip_src + 4].copy_from_slice(&[10, 71, 0, 66]);
        out.push(cnm(&foreign));
        // 3. A replay of an old CNM: one recorded from an earlier run of the sender, whose flow
        //    had reached frame 10,000,000 (a run here sends under 700,000). The replay of a CNM
        //    from this run once the flow is 65,536 frames past it is send/worker.rs's unit test:
        //    how far a flow gets in a few seconds here depends on the machine's load.
        out.push(cnm(&data_frame(i, 10_000_000)));
        // 4. The flow's public fields, the copy cut after the UDP header (the test header starts
        //    50 octets into the frame): no sequence number to check.
        out.push(cnm(&data_frame(i, 1)[..50]));
        // 5. A whole copy with the newest sequence number the forger could read of the flow:
        //    one of the frames the switch flooded before it learned the receiver.
        out.push(cnm(&data_frame(i, SEEN_BY_FORGER)));
        // 6. A CNP for the flow's QP from the forger's address.
        let (l2, _) = L2Repr::parse(&data_frame(i, 1)).unwrap();
        let mut buf = [0u8; 256];
        let n = emit_cnp_reply(
            &l2,
            sender_ip(i),
            sender_ip(FORGER),
            UDP_PORT,
            sender_mac(FORGER),
            flow_of(i).0,
            &mut buf,
        )
        .unwrap();
        out.push(buf[..n].to_vec());
    }
    out
}

/// One closed-loop.sh run of QCN and DCQCN with the third host sending `forge`'s frames
/// (a pcap file, at a bit rate); the senders' per-port JSON lines, the forger's and the
/// switch's counters, by congestion control.
fn run(quench: &Path, out: &Path, prefix: &str, forge: (&Path, u64)) -> Vec<Run> {
    let mut cmd = Command::new(repo().join("scripts/testbed/closed-loop.sh"));
    cmd.env("QUENCH", quench)
        .args(["--prefix", prefix])
        .arg("--forge")
        .arg(forge.0)
        .args(["--forge-rate", &format!("{}bit", forge.1)])
        .args(["--forge-delay", &FORGE_DELAY.to_string()])
        .arg(SECS.to_string())
        .arg(out);
    let r = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    ["qcn", "dcqcn"]
        .iter()
        .map(|cc| {
            let log = std::fs::read_to_string(out.join(format!("send-{cc}-all.log"))).unwrap();
            let ports: Vec<Value> = log
                .lines()
                .filter(|l| l.starts_with('{'))
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .filter(|v| v.get("port").is_some())
                .collect();
            assert_eq!(ports.len(), 2, "{log}");
            let f = std::fs::read_to_string(out.join(format!("forge-{cc}.log"))).unwrap();
            let line = f.lines().rfind(|l| l.starts_with('{'));
            let forger =
                serde_json::from_str(line.unwrap_or_else(|| panic!("forger: {f}"))).unwrap();
            // The CPUs' backlog drops over the run (machine-wide: an upper bound).
            let softnet = |w: &str| -> Vec<u64> {
                std::fs::read_to_string(out.join(format!("softnet-{cc}.{w}")))
                    .unwrap()
                    .lines()
                    .map(|l| l.trim().parse().unwrap())
                    .collect()
            };
            let backlog = softnet("after")
                .iter()
                .zip(softnet("before"))
                .map(|(a, b)| a.saturating_sub(b))
                .sum();
            // The switch's counters at the end: the last `quench stats --json` the loop took.
            let stats = std::fs::read_to_string(out.join(format!("queue-{cc}.jsonl"))).unwrap();
            let switch = serde_json::from_str(stats.lines().last().unwrap()).unwrap();
            Run {
                cc: cc.to_string(),
                ports,
                forger,
                switch,
                backlog,
            }
        })
        .collect()
}

struct Run {
    cc: String,
    ports: Vec<Value>,
    forger: Value,
    switch: Value,
    /// Frames the CPUs' backlogs dropped during the run (/proc/net/softnet_stat).
    backlog: u64,
}

impl Run {
    fn switch_port(&self, name: &str) -> &Value {
        let ports = self.switch["ports"].as_array().unwrap();
        ports.iter().find(|p| p["name"] == name).unwrap()
    }
    fn sum(&self, f: impl Fn(&Value) -> u64) -> u64 {
        self.ports.iter().map(f).sum()
    }
    /// Each sender's flow rate over the run, Mb/s.
    fn rates(&self) -> Vec<f64> {
        self.ports
            .iter()
            .map(|p| p["flows"][0]["sent_bps"].as_f64().unwrap() / 1e6)
            .collect()
    }
    /// Feedback the senders acted on or refused as not theirs to use: all they received less
    /// what was counted unknown or forged.
    fn accepted(&self) -> u64 {
        self.sum(|p| {
            let n = |k: &str| p[k].as_u64().unwrap();
            (n("cnms") + n("cnps"))
                .saturating_sub(n("unknown_feedback") + p["forged"]["total"].as_u64().unwrap())
        })
    }
}

#[test]
fn forged_cnms_and_cnps_at_100k_per_second_are_counted_and_change_no_rate() {
    if !netns_or_skip("forged_cnms_and_cnps_at_100k_per_second") {
        return;
    }
    let _l = lock();
    let quench = release_quench();
    let dir = std::env::temp_dir().join(format!("quench-forged-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let frames = forged_frames();
    let pcap = dir.join("forged.pcap");
    let mut w = PcapWriter::new(std::fs::File::create(&pcap).unwrap()).unwrap();
    for f in &frames {
        w.write(Instant::ZERO, f).unwrap();
    }
    w.finish().unwrap();
    let decoy = dir.join("decoy.pcap");
    let mut w = PcapWriter::new(std::fs::File::create(&decoy).unwrap()).unwrap();
    for f in &frames {
        let mut d = f.clone();
        d[12..14].copy_from_slice(&[0x88, 0xb5]);
        w.write(Instant::ZERO, &d).unwrap();
    }
    w.finish().unwrap();
    let mean_len = frames.iter().map(Vec::len).sum::<usize>() as u64 / frames.len() as u64;
    let bps = FORGED_PPS * mean_len * 8;

    let prefix = format!("qf{}", std::process::id() % 10000);
    let base: Vec<Vec<Run>> = (0..2)
        .map(|k| {
            run(
                &quench,
                &dir.join(format!("base{k}")),
                &prefix,
                (&decoy, bps),
            )
        })
        .collect();
    let forged = run(&quench, &dir.join("forged"), &prefix, (&pcap, bps));

    for (c, f) in forged.iter().enumerate() {
        let cc = &f.cc;
        let b: Vec<&Run> = base.iter().map(|r| &r[c]).collect();
        let summary = format!(
            "{cc}: baselines {:?} Mb/s, forged run {:?} Mb/s; forger {}; senders {:?}",
            b.iter().map(|r| r.rates()).collect::<Vec<_>>(),
            f.rates(),
            f.forger,
            f.ports
                .iter()
                .map(|p| (&p["cnms"], &p["cnps"], &p["unknown_feedback"], &p["forged"]))
                .collect::<Vec<_>>(),
        );
        eprintln!("{summary}");
        let forger = &f.forger;
        let sent = forger["sent"].as_u64().unwrap();
        let secs = forger["secs"].as_f64().unwrap();
        assert!(
            // The forger shares the senders' CPU: on the loaded 2-core testbed it has reached
            // 81 % of its rate (101 % when the machine was less busy).
            sent as f64 / secs > 0.75 * FORGED_PPS as f64,
            "forger too slow: {summary}"
        );
        // The forger's frames enter the switch's port s2: taken, or dropped for want of room
        // in its receive ring (the switch's CPU is shared), every one counted there.
        let s2 = f.switch_port("s2");
        let taken = s2["rx_pkts"].as_u64().unwrap();
        let ring = s2["rx_kernel_drops"].as_u64().unwrap() + s2["rx_drops"].as_u64().unwrap();
        assert_eq!(
            taken + ring,
            sent,
            "forger's frames at the switch: {summary}"
        );
        // Every forged frame the switch passed on is counted by the sender under its reason, or
        // was dropped where a counter saw it (a switch queue toward a sender, a CPU's backlog
        // on the way, a sender's receive ring).
        let reason = |k: &str| f.sum(|p| p["forged"][k].as_u64().unwrap());
        let total = reason("total");
        let seen_lost = f.backlog
            + f.sum(|p| p["rx_kernel_drops"].as_u64().unwrap_or(0))
            + ["s0", "s1"]
                .iter()
                .map(|p| f.switch_port(p)["queue_drops"].as_u64().unwrap())
                .sum::<u64>();
        assert!(total <= taken, "{summary}");
        // A veth whose peer reads through NAPI (GRO on) drops what its ring cannot hold and
        // counts it in rx_dropped, with every frame no protocol takes (each CNM here): no
        // counter separates those. Seen: 1.3 % of what a sender's port was sent, at 620 Mb/s of
        // DCQCN data beside the forger; none at 150 Mb/s.
        let uncounted = (taken - total).saturating_sub(seen_lost);
        assert!(
            uncounted * 50 <= taken,
            "forged frames lost uncounted: {uncounted}: {summary}"
        );
        // The forger sends the six kinds in turn, so each reason holds a sixth, and
        // outside_window two (the replay and the sequence number read from a flooded frame).
        for (k, sixths) in [
            ("other_address", 1),
            ("foreign_frame", 1),
            ("outside_window", 2),
            ("short_copy", 1),
            ("cnp_source", 1),
        ] {
            let n = reason(k);
            assert!(
                n.abs_diff(total * sixths / 6) <= total / 100 + 8,
                "{k}: {n} of {total}: {summary}"
            );
        }
        // The switch flooded none of the flows' frames past the first few: the receiver
        // announced itself, so the forger saw no live sequence number.
        for r in b.iter().copied().chain([f]) {
            for p in ["s0", "s1"] {
                let flooded = r.switch_port(p)["flooded_unicast"].as_u64().unwrap();
                assert!(
                    flooded <= SEEN_BY_FORGER,
                    "{p}: {flooded} unicast frames flooded: {summary}"
                );
            }
        }
        // Valid feedback still acts: QCN's CNMs from the switch, DCQCN's CNPs from the
        // receiver, in the forged run as in the baselines.
        assert!(f.accepted() > 0, "no feedback accepted: {summary}");
        for r in &b {
            assert!(r.accepted() > 0, "baseline without feedback: {summary}");
            assert_eq!(r.sum(|p| p["forged"]["total"].as_u64().unwrap()), 0);
        }
        // Each flow's rate: within the baselines' range widened by their spread, and by at least
        // 30 % of their mean. The rates are CPU-bound on the shared 2-core testbed: a forged run
        // whose loop lost 1 s more to other processes than the baselines' ran 25 % slower
        // (DCQCN, 397 against 504-525 Mb/s), with the same number of genuine CNPs. Forged
        // feedback acted on at 100k/s would cut a flow to a few percent of its rate.
        for flow in 0..2 {
            let rates: Vec<f64> = b.iter().map(|r| r.rates()[flow]).collect();
            let (lo, hi) = rates
                .iter()
                .fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
            let spread = (hi - lo).max(0.3 * (lo + hi) / 2.0);
            let got = f.rates()[flow];
            assert!(
                got >= lo - spread && got <= hi + spread,
                "flow {flow}: {got:.1} Mb/s outside {lo:.1}..{hi:.1} +- {spread:.1}: {summary}"
            );
        }
    }
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&ns.stdout).contains(&prefix));
    let _ = std::fs::remove_dir_all(&dir);
}
