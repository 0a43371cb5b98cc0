//! `quench frames --out` checked by independent decoders: tshark (with the project's 802.1Qau
//! dissector `tools/wireshark/quench.lua`) for field values and malformed frames, and scapy
//! (`scapy.contrib.roce`) for the RoCEv2 ICRCs.
//!
//! tshark and python3-scapy come from `scripts/setup.sh`; where they are missing the checks
//! that need them print why and are skipped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

const QUENCH: &str = env!("CARGO_BIN_EXE_quench");

/// The project's Lua dissector for CN-TAG and CNM.
fn dissector() -> PathBuf {
    common::repo().join("tools/wireshark/quench.lua")
}

fn have(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Writes the sample frames to a fresh file and returns its path.
fn write_pcap(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("quench-{name}-{}.pcap", std::process::id()));
    let out = Command::new(QUENCH)
        .args(["frames", "--out"])
        .arg(&path)
        .output()
        .expect("run quench frames --out");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

#[test]
fn decode_prints_one_line_per_frame() {
    let path = write_pcap("decode");
    let out = Command::new(QUENCH)
        .args(["frames", "--decode"])
        .arg(&path)
        .output()
        .expect("run quench frames --decode");
    let _ = std::fs::remove_file(&path);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 9, "{text}");
    assert!(!text.contains("error"), "{text}");
    assert!(lines[1].contains("cnm version=0 qntzfb=42 cpid=0x0200000000cc0003 qoffset=-100"));
}

#[test]
fn decode_reports_malformed_frames_without_panicking() {
    let path = write_pcap("malformed");
    let mut bytes = std::fs::read(&path).expect("read pcap");
    // Corrupt the last octet of the file: the CNP's ICRC.
    let last = bytes.len() - 1;
    bytes[last] ^= 0xFF;
    // And cut the file inside the final record's data by appending a partial record header.
    bytes.extend_from_slice(&[1, 2, 3]);
    std::fs::write(&path, &bytes).expect("write pcap");
    let out = Command::new(QUENCH)
        .args(["frames", "--decode"])
        .arg(&path)
        .output()
        .expect("run quench frames --decode");
    let _ = std::fs::remove_file(&path);
    // The frames before the cut are listed, the bad ICRC as a line of its own; the truncated
    // file is an error on standard error and a non-zero exit.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("record 10: pcap truncated"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 9, "{text}");
    assert!(lines[8].contains("error: RoCEv2 ICRC"), "{}", lines[8]);
    assert!(!text.contains("truncated"), "{text}");
}

const FIELDS: &[&str] = &[
    "frame.number",
    "_ws.malformed",
    "_ws.expert",
    "cntag.rpid",
    "cnm.version",
    "cnm.qntzfb",
    "cnm.cpid",
    "cnm.qoffset",
    "cnm.qdelta",
    "cnm.encap_prio",
    "cnm.encap_da",
    "cnm.encap_len",
    "cnm.cpid.mac",
    "cnm.cpid.queue",
    "cnm.encap_pcp",
    "cnm.reservedv",
    "macc.opcode",
    "macc.cbfc.enbv",
    "macc.cbfc.pause_time.c0",
    "macc.cbfc.pause_time.c3",
    "ip.dsfield.dscp",
    "ip.dsfield.ecn",
    "udp.dstport",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.p_key",
    "cnp.fecn",
    "cnp.becn",
    "cnp.destqp",
    "cnp.reserved",
    "qnch.version",
    "qnch.flow",
    "qnch.seq",
    "qnch.tx_ns",
];

#[test]
fn tshark_decodes_the_values_emitted() {
    if !have("tshark", "--version") {
        println!("SKIP tshark_decodes_the_values_emitted: tshark not installed (scripts/setup.sh)");
        return;
    }
    let path = write_pcap("tshark");
    let text = tshark_fields(&path);
    let _ = std::fs::remove_file(&path);
    let rows = rows(&text);
    assert_eq!(rows.len(), 9, "{text}");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["frame.number"], (i + 1).to_string());
        assert_eq!(r["_ws.malformed"], "", "frame {} malformed: {text}", i + 1);
        assert_eq!(
            r["_ws.expert"],
            "",
            "frame {} has expert info: {text}",
            i + 1
        );
    }
    let expect = |frame: usize, field: &str, want: &str| {
        assert_eq!(
            rows[frame - 1][field],
            want,
            "frame {frame} field {field}\n{text}"
        );
    };
    // 1: data frame with VLAN + CN-TAG, its UDP payload quench's test header.
    expect(1, "cntag.rpid", "0x0007");
    expect(1, "ip.dsfield.ecn", "2");
    expect(1, "udp.dstport", "50101");
    expect(1, "qnch.version", "1");
    expect(1, "qnch.flow", "7");
    expect(1, "qnch.seq", "0");
    expect(1, "qnch.tx_ns", "1000");
    // 2: CNM, read with tools/wireshark/quench.lua.
    expect(2, "cntag.rpid", "0x0007");
    expect(2, "cnm.version", "0");
    expect(2, "cnm.reservedv", "0x0000");
    expect(2, "cnm.cpid.mac", "02:00:00:00:00:cc");
    expect(2, "cnm.cpid.queue", "3");
    expect(2, "cnm.encap_pcp", "3");
    expect(2, "cnm.qntzfb", "42");
    expect(2, "cnm.cpid", "0200000000cc0003");
    expect(2, "cnm.qoffset", "-100");
    expect(2, "cnm.qdelta", "25");
    expect(2, "cnm.encap_prio", "0x6000");
    expect(2, "cnm.encap_da", "02:00:00:00:00:0b");
    expect(2, "cnm.encap_len", "64");
    // 3, 4: PFC XOFF then XON for priority 3.
    for (frame, time) in [(3, "65535"), (4, "0")] {
        expect(frame, "macc.opcode", "0x0101");
        expect(frame, "macc.cbfc.enbv", "0x0008");
        expect(frame, "macc.cbfc.pause_time.c3", time);
        expect(frame, "macc.cbfc.pause_time.c0", "0");
    }
    // 5-8: RoCEv2 data with ECN 00, 01, 10, 11, the test header in the SEND's payload; no
    // CNP tree on them.
    for (i, ecn) in ["0", "1", "2", "3"].iter().enumerate() {
        expect(5 + i, "ip.dsfield.ecn", ecn);
        expect(5 + i, "ip.dsfield.dscp", "26");
        expect(5 + i, "infiniband.bth.opcode", "4");
        expect(5 + i, "infiniband.bth.destqp", "0x000011");
        expect(5 + i, "qnch.flow", "7");
        expect(5 + i, "qnch.seq", &(i + 1).to_string());
        expect(5 + i, "cnp.becn", "");
    }
    // 9: CNP: Wireshark's BTH fields, and the CNP's own (BECN set, 16 reserved zero octets).
    expect(9, "infiniband.bth.opcode", "129");
    expect(9, "infiniband.bth.destqp", "0x000022");
    expect(9, "infiniband.bth.p_key", "65535");
    expect(9, "ip.dsfield.dscp", "48");
    expect(9, "cnp.fecn", "0");
    expect(9, "cnp.becn", "1");
    expect(9, "cnp.destqp", "0x000022");
    expect(9, "cnp.reserved", "00000000000000000000000000000000");
    expect(9, "qnch.flow", "");
}

/// tshark's `-T fields` output for [`FIELDS`] of every frame in `pcap`, decoded with the
/// project's dissector.
fn tshark_fields(pcap: &Path) -> String {
    let mut cmd = Command::new("tshark");
    cmd.arg("-X")
        .arg(format!("lua_script:{}", dissector().display()))
        .arg("-r")
        .arg(pcap)
        .args(["-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn rows(text: &str) -> Vec<HashMap<&str, &str>> {
    text.lines()
        .map(|l| FIELDS.iter().copied().zip(l.split('|')).collect())
        .collect()
}

#[test]
fn the_dissector_flags_a_malformed_cnm() {
    if !have("tshark", "--version") {
        println!(
            "SKIP the_dissector_flags_a_malformed_cnm: tshark not installed (scripts/setup.sh)"
        );
        return;
    }
    let path = write_pcap("tshark-bad");
    let mut bytes = std::fs::read(&path).expect("read pcap");
    // Frame 2 is the CNM: the PDU follows the first EtherType 0x22E7 after frame 1's record
    // (pcap header 24, record header 16, frame 1, record header 16).
    let frame1_len = u32::from_le_bytes(bytes[24 + 8..24 + 12].try_into().unwrap()) as usize;
    let start = 24 + 16 + frame1_len + 16;
    let pdu = start
        + bytes[start..]
            .windows(2)
            .position(|w| w == [0x22, 0xE7])
            .expect("a CNM EtherType in frame 2")
        + 2;
    // Encapsulated MSDU length 65: over the 64 octets a CNM carries.
    bytes[pdu + 22..pdu + 24].copy_from_slice(&65u16.to_be_bytes());
    std::fs::write(&path, &bytes).expect("write pcap");
    let text = tshark_fields(&path);
    let _ = std::fs::remove_file(&path);
    let rows = rows(&text);
    assert_eq!(rows[1]["_ws.malformed"], "_ws.malformed", "{text}");
    assert!(rows[1]["_ws.expert"].contains("MSDU length 65"), "{text}");
    // The header fields before the bad length still decode.
    assert_eq!(rows[1]["cnm.qntzfb"], "42", "{text}");
    assert_eq!(rows[0]["_ws.malformed"], "", "{text}");
}

#[test]
fn the_dissector_flags_a_cnp_without_becn_or_cut_short() {
    if !have("tshark", "--version") {
        println!("SKIP the_dissector_flags_a_cnp_without_becn_or_cut_short: tshark not installed");
        return;
    }
    // A CNP (the last frame: its 32 UDP payload octets end the file) without BECN, and one cut
    // short.
    let clean = write_pcap("tshark-cnp");
    let mut bytes = std::fs::read(&clean).expect("read pcap");
    let _ = std::fs::remove_file(&clean);
    let becn = bytes.len() - 32 + 4;
    bytes[becn] &= !0x40;
    let text = tshark_of(&bytes, "tshark-cnp");
    assert!(
        rows(&text)[8]["_ws.expert"].contains("CNP without BECN"),
        "{text}"
    );
    assert_eq!(rows(&text)[8]["cnp.becn"], "0", "{text}");
    // The last 8 octets cut off (the record's captured and original lengths with them).
    let mut cut = bytes.clone();
    cut.truncate(bytes.len() - 8);
    let last = last_record(&bytes);
    let n = u32::from_le_bytes(bytes[last + 8..last + 12].try_into().unwrap()) - 8;
    cut[last + 8..last + 12].copy_from_slice(&n.to_le_bytes());
    cut[last + 12..last + 16].copy_from_slice(&n.to_le_bytes());
    // IPv4 total length and UDP length 8 less too (Ethernet 14 + VLAN 4 before the IPv4
    // header), so only the CNP is short.
    let ip = last + 16 + 18;
    for at in [ip + 2, ip + 20 + 4] {
        let v = u16::from_be_bytes([cut[at], cut[at + 1]]) - 8;
        cut[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    let text = tshark_of(&cut, "tshark-cnp-cut");
    let row = &rows(&text)[8];
    assert_eq!(row["_ws.malformed"], "_ws.malformed", "{text}");
    assert!(
        row["_ws.expert"].contains("CNP of 24 octets, 32 expected"),
        "{text}"
    );
}

/// Offset of the last record header of a classic pcap.
fn last_record(pcap: &[u8]) -> usize {
    let mut at = 24;
    loop {
        let incl = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        if at + 16 + incl >= pcap.len() {
            return at;
        }
        at += 16 + incl;
    }
}

/// tshark's fields of the pcap `bytes` (written to a scratch file named for `name`).
fn tshark_of(bytes: &[u8], name: &str) -> String {
    let path = std::env::temp_dir().join(format!("quench-{name}-{}.pcap", std::process::id()));
    std::fs::write(&path, bytes).expect("write pcap");
    let text = tshark_fields(&path);
    let _ = std::fs::remove_file(&path);
    text
}

/// Recomputes every RoCEv2 frame's ICRC scapy's way and compares it with the one on the wire;
/// also checks that a corrupted frame fails, so the check can fail.
const SCAPY_CHECK: &str = r#"
import sys
from scapy.all import rdpcap, raw, Ether
from scapy.contrib.roce import BTH
frames = rdpcap(sys.argv[1])
checked = 0
for n, f in enumerate(frames, 1):
    p = Ether(raw(f))
    if BTH not in p:
        continue
    wire = p[BTH].icrc
    q = p.copy()
    q[BTH].icrc = None
    redone = Ether(raw(q))[BTH].icrc
    if wire != redone:
        print(f"frame {n}: ICRC {wire:#010x} on the wire, scapy computes {redone:#010x}")
        sys.exit(1)
    bad = bytearray(raw(f)); bad[-5] ^= 1
    b = Ether(bytes(bad)); c = b.copy(); c[BTH].icrc = None
    if Ether(raw(c))[BTH].icrc == b[BTH].icrc:
        print(f"frame {n}: corrupting the payload did not change the ICRC")
        sys.exit(1)
    print(f"frame {n}: opcode {p[BTH].opcode:#04x} ICRC {wire:#010x} verified by scapy")
    checked += 1
print(f"{checked} RoCEv2 ICRCs verified")
sys.exit(0 if checked == 5 else 2)
"#;

#[test]
fn scapy_verifies_the_icrcs() {
    let python = "/usr/bin/python3";
    let scapy_ok = Command::new(python)
        .args(["-c", "import scapy.contrib.roce"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !scapy_ok {
        println!(
            "SKIP scapy_verifies_the_icrcs: {python} with scapy not installed (scripts/setup.sh)"
        );
        return;
    }
    let path = write_pcap("scapy");
    let out = Command::new(python)
        .args(["-c", SCAPY_CHECK])
        .arg(&path)
        .output()
        .expect("run python3");
    let _ = std::fs::remove_file(&path);
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("opcode 0x81"), "the CNP was checked: {text}");
}

/// `frames --decode` reads the pcapng tshark writes (the default format of dumpcap and
/// Wireshark) as it reads the classic pcap, line for line; a cut pcapng lists what precedes the
/// cut and ends in an error on standard error with a non-zero exit, not a panic.
#[test]
fn decode_reads_pcapng_written_by_tshark() {
    if !have("tshark", "--version") {
        eprintln!("skipping decode_reads_pcapng_written_by_tshark: tshark not installed");
        return;
    }
    let pcap = write_pcap("ng");
    let ng = pcap.with_extension("pcapng");
    let conv = Command::new("tshark")
        .args(["-r"])
        .arg(&pcap)
        .args(["-F", "pcapng", "-w"])
        .arg(&ng)
        .output()
        .expect("run tshark");
    assert!(
        conv.status.success(),
        "{}",
        String::from_utf8_lossy(&conv.stderr)
    );
    let run = |p: &Path| {
        Command::new(QUENCH)
            .args(["frames", "--decode"])
            .arg(p)
            .output()
            .expect("run quench frames --decode")
    };
    let decode = |p: &Path| {
        let out = run(p);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let bytes = std::fs::read(&ng).unwrap();
    assert_eq!(
        &bytes[..4],
        &[0x0A, 0x0D, 0x0D, 0x0A],
        "tshark wrote pcapng"
    );
    let (classic, from_ng) = (decode(&pcap), decode(&ng));
    assert_eq!(from_ng.lines().count(), 9, "{from_ng}");
    assert_eq!(from_ng, classic);
    std::fs::write(&ng, &bytes[..bytes.len() - 30]).unwrap();
    let cut = run(&ng);
    assert!(!cut.status.success());
    let err = String::from_utf8_lossy(&cut.stderr);
    assert!(err.contains("block after packet 8"), "{err}");
    let listed = String::from_utf8_lossy(&cut.stdout);
    assert_eq!(listed.lines().count(), 8, "{listed}");
    let _ = std::fs::remove_file(&pcap);
    let _ = std::fs::remove_file(&ng);
}

/// A test frame whose INT header two switches stamped (hops: 100G, t 0x123456 ns, 5 x 128
/// octets sent, 3 x 80 queued; then 25G, t 7, 0, 0), one with PINT's code 627, and the ACK of
/// the first, echoing its hops and a CE mark: tshark with
/// the dissector reads every field as ns-3's `IntHop` packs it, and tshark finds the UDP
/// checksum the stamps updated good (`udp.checksum.status` 1).
#[test]
fn tshark_decodes_int_hops() {
    use quench_wire::ethernet::{ethertype, L2Repr};
    use quench_wire::frame::{emit_test_frame_int, stamp_int, Ipv4UdpHeaders};
    use quench_wire::int::{self, IntRepr, Mode};
    use quench_wire::ipv4::Ecn;
    use quench_wire::pcap::PcapWriter;
    use quench_wire::testhdr::{self, TestHdrRepr};
    use units::{FlowId, Instant};

    if !have("tshark", "--version") {
        println!("SKIP tshark_decodes_int_hops: tshark not installed (scripts/setup.sh)");
        return;
    }
    let mac = |b| quench_wire::MacAddr(2, 0, 0, 0, 0, b);
    let h = Ipv4UdpHeaders {
        l2: L2Repr::new(mac(2), mac(1), ethertype::IPV4),
        src: "10.0.0.1".parse().unwrap(),
        dst: "10.0.0.2".parse().unwrap(),
        dscp: 26,
        ecn: Ecn::Ect0,
        src_port: 40_000,
        dst_port: testhdr::UDP_PORT,
    };
    let l3 = h.l2.buffer_len();
    let hdr = TestHdrRepr::new(FlowId(3), 9, Instant::from_nanos(1000));
    let word = |rate: u64, t: u64, bytes: u64, q: u64| rate | t << 3 | bytes << 27 | q << 47;
    let mut frames = Vec::new();
    for mode in [Mode::Hops, Mode::Pint] {
        let mut buf = vec![0u8; 1500];
        let n = emit_test_frame_int(&h, &hdr, Some(&IntRepr::empty(mode)), 200, &mut buf).unwrap();
        buf.truncate(n);
        match mode {
            Mode::Hops => {
                for w in [word(2, 0x12_3456, 5, 3), word(0, 7, 0, 0)] {
                    assert_eq!(stamp_int(&mut buf, l3, |b| int::push_hop(b, w)), Ok(true));
                }
            }
            Mode::Pint => {
                assert_eq!(
                    stamp_int(&mut buf, l3, |b| int::fold_pint(b, 627)),
                    Ok(true)
                );
            }
        }
        frames.push(buf);
    }
    // The receiver's ACK of the first frame: CE echoed, the hops echoed.
    let at = quench_wire::frame::int_offset(&frames[0], l3).unwrap();
    let ack = quench_wire::ack::AckRepr {
        flags: quench_wire::ack::FLAG_ECE,
        reserved: 0,
        flow: FlowId(3),
        seq: 9,
        tx: Instant::from_nanos(1000),
        int: Some(IntRepr::parse(&frames[0][at..]).unwrap()),
    };
    let mut buf = vec![0u8; 256];
    let n = quench_wire::frame::emit_ack_reply(
        &h.l2,
        h.src,
        h.dst,
        h.src_port,
        26,
        mac(2),
        &ack,
        &mut buf,
    )
    .unwrap();
    buf.truncate(n);
    frames.push(buf);
    let path = std::env::temp_dir().join(format!("quench-int-{}.pcap", std::process::id()));
    let mut w = PcapWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    for f in &frames {
        w.write(Instant::ZERO, f).unwrap();
    }
    w.finish().unwrap();
    let fields = [
        "_ws.malformed",
        "_ws.expert",
        "udp.checksum.status",
        "qnch.flow",
        "qint.mode",
        "qint.nhop",
        "qint.hop.rate",
        "qint.hop.time",
        "qint.hop.bytes",
        "qint.hop.qlen",
        "qint.power",
        "qack.flow",
        "qack.seq",
        "qack.ece",
    ];
    let mut cmd = Command::new("tshark");
    cmd.arg("-X")
        .arg(format!("lua_script:{}", dissector().display()))
        .arg("-r")
        .arg(&path)
        .args(["-T", "fields", "-E", "separator=|", "-E", "occurrence=a"])
        .args(["-o", "udp.check_checksum:TRUE"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let _ = std::fs::remove_file(&path);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "||1|3|0|2|100G,25G|1193046,7|5,0|3,0||||",
            "||1|3|1|1|||||627|||",
            "||1||0|2|100G,25G|1193046,7|5,0|3,0||3|9|1",
        ],
        "{text}"
    );
}
