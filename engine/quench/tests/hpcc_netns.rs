//! HPCC on real frames, root only (skipped with the reason otherwise): two `quench send --cc
//! hpcc` senders at 1 Gb/s through `quench switch`, whose 50 Mb/s port to the receiver is the
//! bottleneck and stamps INT, to `quench recv --ack-interval 1`. The switch stamps hops, the
//! receiver echoes them in its ACKs, and ACKs cut the senders' HPCC rates. No timing is
//! asserted: only that each step happened and the rates moved.
use std::process::{Command, Stdio};

mod common;
use common::{lock, netns_or_skip, Switch, Testbed};

/// The last JSON line of `out` whose `type` is `kind`.
fn last_json(out: &str, kind: &str) -> serde_json::Value {
    out.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} line in {out}"))
}

#[test]
fn int_is_stamped_echoed_and_hpcc_cuts_the_senders() {
    if !netns_or_skip("int_is_stamped_echoed_and_hpcc_cuts_the_senders") {
        return;
    }
    let _l = lock();
    let quench = env!("CARGO_BIN_EXE_quench");
    let tb = Testbed::up(format!("q{}h", std::process::id() % 1000), 2, 1);
    let mut ports = String::new();
    for name in ["s0", "s1", "r0"] {
        ports += &format!(
            "[[ports]]\nname = \"{name}\"\niface = \"{}-sw-{name}\"\ndriver = \"af_packet\"\n",
            tb.prefix
        );
        if name == "r0" {
            // Slow enough that two debug-build senders on shared cores overfill it; a queue
            // short enough that a hop's queue length, in units of 80 octets x 500 (a 50 Mb/s
            // port stamps 25 Gb/s, octets scaled by 500), never wraps its 17 bits.
            ports += "rate = \"50mbit\"\nqueue_bytes = 16000\n";
        }
    }
    let body = format!("{ports}[[congestion]]\nport = \"r0\"\nint = true\n");
    let dir = common::ScratchDir::new("quench-hpcc-netns");
    std::fs::create_dir_all(&dir.0).unwrap();
    let pcap = dir.0.join("r0.pcap");
    let capture = format!("r0={}", pcap.display());
    let mut sw = Switch::start_with_args(&tb, &body, &["--capture", &capture]);
    let recv = Command::new("ip")
        .args(["netns", "exec", &tb.ns("r0")])
        .arg(quench)
        .args(["recv", "--iface", "eth0", "--no-cnp", "--ack-interval", "1"])
        .args(["--json", "--duration", "4s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let senders: Vec<_> = (0..2)
        .map(|i| {
            Command::new(quench)
                .args([
                    "send",
                    "--iface",
                    &format!("{}/eth0", tb.ns(&format!("s{i}"))),
                ])
                .args(["--src-ip", &format!("10.71.0.{}", 1 + i)])
                .args(["--flow-base", &(1 + 100 * i).to_string()])
                .args(["--cc", "hpcc", "--duration", "2s"])
                .arg("--json")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = senders
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let r = recv.wait_with_output().unwrap();
    sw.stop();
    let rout = String::from_utf8_lossy(&r.stdout).to_string();
    let rerr = String::from_utf8_lossy(&r.stderr).to_string();
    assert!(r.status.success(), "{rout}\n{rerr}");
    // The frames the bottleneck port sent carry one hop each.
    let bytes = std::fs::read(&pcap).unwrap();
    let mut hops = [0u64; 3];
    for rec in quench_wire::pcap::PcapReader::new(&bytes).unwrap() {
        let rec = rec.unwrap();
        let Ok((_, l3)) = quench_wire::ethernet::L2Repr::parse(rec.data) else {
            continue;
        };
        if let Some(at) = quench_wire::frame::int_offset(rec.data, l3) {
            let int = quench_wire::int::IntRepr::parse(&rec.data[at..]).unwrap();
            hops[usize::from(int.nhop.min(2))] += 1;
        }
    }
    assert!(hops[1] > 0 && hops[0] == 0 && hops[2] == 0, "{hops:?}");
    // --json: the human table on standard error, with the ACK counts.
    let echoed = rerr
        .lines()
        .find_map(|l| l.strip_prefix("ACKs echoing INT hops: "))
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert!(echoed.is_some_and(|n| n > 0), "{rerr}");
    for o in outs {
        let sout = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            o.status.success(),
            "{sout}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let s = last_json(&sout, "summary");
        assert_eq!(s["cc"], "hpcc", "{s}");
        assert!(s["acks_with_int"].as_u64().unwrap() > 0, "{s}");
        assert_eq!(s["forged_feedback"], 0, "{s}");
        // Two senders at their 1 Gb/s line rate into a 50 Mb/s port: ACKs cut HPCC's rate.
        assert!(s["acks_cutting"].as_u64().unwrap() > 0, "{s}");
    }
}
