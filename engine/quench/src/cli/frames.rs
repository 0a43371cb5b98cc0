//! `quench frames`: write one of each frame kind quench emits to a pcap file, or decode a pcap
//! or pcapng file one line per frame (Wireshark has no CNM dissector; this is how a user reads
//! CNMs). Classic pcap is read by [`quench_wire::pcap::PcapReader`]; pcapng (what dumpcap and
//! Wireshark write by default) by the `pcap-file` crate.
//!
//! `--out FILE` writes, in this order ([`sample_frames`]):
//! 1. a test data frame: VLAN (PCP 3, VID 10) + CN-TAG (RPID 7) / IPv4 / UDP 50101 / test header;
//! 2. the CNM a congestion point would send for it (QntzFb 42, QOffset -100, QDelta 25);
//! 3. PFC XOFF for priority 3 (0xFFFF quanta) and 4. PFC XON for priority 3;
//! 5. to 8. RoCEv2 RC SEND frames to QP 0x11 with ECN 00, 01, 10, 11;
//! 9. the CNP answering them, to the sender's QP 0x22 (DSCP 48, priority 6).

use std::fs;
use std::io::BufWriter;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use pnet_base::MacAddr;
use units::{FlowId, Instant, Rate};

use quench_wire::cnm::{self, CnmRepr};
use quench_wire::ethernet::{self, ethertype, L2Repr, VlanTci};
use quench_wire::frame::describe;
use quench_wire::frame::{
    cnm_l2, emit_cnm, emit_roce_frame, emit_test_frame, Ipv4UdpHeaders, RocePayload,
};
use quench_wire::ipv4::{self, Ecn};
use quench_wire::pcap::{PcapReader, PcapWriter, LINKTYPE_ETHERNET};
use quench_wire::pfc::{self, PfcRepr};
use quench_wire::roce::{self, BthRepr};
use quench_wire::testhdr::{self, TestHdrRepr};

/// Arguments of `quench frames`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write one frame of each kind quench emits to FILE (classic pcap, Ethernet).
    #[arg(long, value_name = "FILE", required_unless_present = "decode")]
    pub out: Option<PathBuf>,
    /// Print one line per frame of FILE (classic pcap or pcapng) with the fields quench cares
    /// about.
    #[arg(long, value_name = "FILE", conflicts_with = "out")]
    pub decode: Option<PathBuf>,
    /// Link rate used to show PFC pause quanta as time (e.g. 10gbit, 100gbit).
    #[arg(long, value_name = "RATE", default_value = "100gbit", value_parser = parse_rate,
          allow_hyphen_values = true)]
    pub link_rate: Rate,
}

fn parse_rate(s: &str) -> Result<Rate, String> {
    Rate::parse(s).map_err(|e| e.to_string())
}

/// Host A: sends data, receives CNMs and CNPs.
pub const MAC_A: MacAddr = MacAddr(0x02, 0x00, 0x00, 0x00, 0x00, 0x0A);
/// Host B: receives data.
pub const MAC_B: MacAddr = MacAddr(0x02, 0x00, 0x00, 0x00, 0x00, 0x0B);
/// The switch (congestion point, PFC sender).
pub const MAC_CP: MacAddr = MacAddr(0x02, 0x00, 0x00, 0x00, 0x00, 0xCC);
/// Host A's IPv4 address.
pub const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// Host B's IPv4 address.
pub const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Data priority and VLAN.
pub const DATA_TCI: VlanTci = VlanTci {
    pcp: 3,
    dei: false,
    vid: 10,
};
/// CN-TAG flow id of the data frame.
pub const RPID: u16 = 7;
/// QntzFb, QOffset and QDelta in the sample CNM.
pub const CNM_FIELDS: (u8, i16, i16) = (42, -100, 25);
/// Queue id in the sample CNM's CPID.
pub const CNM_QUEUE: u16 = 3;
/// Destination QP of the RoCEv2 data frames.
pub const DATA_QP: u32 = 0x11;
/// Destination QP of the CNP (the data sender's QP).
pub const CNP_QP: u32 = 0x22;
/// DSCP of the RoCEv2 data frames.
pub const ROCE_DSCP: u8 = 26;

fn data_headers(ecn: Ecn, dst_port: u16) -> Ipv4UdpHeaders {
    Ipv4UdpHeaders {
        l2: L2Repr::new(MAC_B, MAC_A, ethertype::IPV4).with_vlan(DATA_TCI),
        src: IP_A,
        dst: IP_B,
        dscp: ROCE_DSCP,
        ecn,
        src_port: 49_152,
        dst_port,
    }
}

/// The frames `--out` writes, in order.
pub fn sample_frames() -> anyhow::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    let hdr = |seq| TestHdrRepr::new(FlowId(u32::from(RPID)), seq, Instant::from_nanos(1_000));

    // 1. Test data frame with VLAN + CN-TAG.
    let mut h = data_headers(Ecn::Ect0, testhdr::UDP_PORT);
    h.l2 = h.l2.with_cn_tag(RPID);
    let n = emit_test_frame(&h, &hdr(0), 128, &mut buf)?;
    let data = buf[..n].to_vec();
    out.push(data.clone());

    // 2. The CNM a CP sends for it.
    let walk = ethernet::walk(&data)?;
    let (sampled, _) = L2Repr::parse(&data)?;
    let (qntz_fb, q_offset, q_delta) = CNM_FIELDS;
    let c = CnmRepr {
        version: cnm::VERSION,
        reserved_v: 0,
        qntz_fb,
        cpid: cnm::cpid(MAC_CP, CNM_QUEUE),
        q_offset,
        q_delta,
        encap_priority: cnm::encap_priority(walk.priority()),
        encap_da: sampled.dst,
        encap_msdu: cnm::encap_msdu(&data, &walk),
    };
    let l2 = cnm_l2(&sampled, MAC_CP, cnm::DEFAULT_CNM_PRIORITY);
    let n = emit_cnm(&l2, &c, &mut buf)?;
    out.push(buf[..n].to_vec());

    // 3./4. PFC XOFF and XON for the data priority.
    for p in [
        PfcRepr::pause(1 << DATA_TCI.pcp, pfc::MAX_QUANTA),
        PfcRepr::resume(1 << DATA_TCI.pcp),
    ] {
        let n = pfc::emit_frame(MAC_CP, &p, &mut buf)?;
        out.push(buf[..n].to_vec());
    }

    // 5.-8. RoCEv2 data with each ECN codepoint.
    for (psn, ecn) in Ecn::ALL.into_iter().enumerate() {
        let bth = BthRepr {
            opcode: roce::opcode::RC_SEND_ONLY,
            pkey: roce::DEFAULT_PKEY,
            dest_qp: DATA_QP,
            psn: psn as u32,
            ..BthRepr::default()
        };
        let payload = RocePayload::Test {
            hdr: hdr(psn as u64 + 1),
            len: 64,
        };
        let n = emit_roce_frame(&data_headers(ecn, roce::UDP_PORT), &bth, &payload, &mut buf)?;
        out.push(buf[..n].to_vec());
    }

    // 9. CNP back to the sender: DSCP 48, priority 6 (NVIDIA cnp_dscp / cnp_802p_prio).
    let cnp = Ipv4UdpHeaders {
        l2: L2Repr::new(MAC_A, MAC_B, ethertype::IPV4).with_vlan(VlanTci {
            pcp: 6,
            dei: false,
            vid: DATA_TCI.vid,
        }),
        src: IP_B,
        dst: IP_A,
        dscp: ipv4::CNP_DSCP,
        ecn: Ecn::NotEct,
        src_port: 49_152,
        dst_port: roce::UDP_PORT,
    };
    let n = emit_roce_frame(&cnp, &BthRepr::cnp(CNP_QP), &RocePayload::Cnp, &mut buf)?;
    out.push(buf[..n].to_vec());
    Ok(out)
}

/// The first octets of a pcapng file: a Section Header Block's type, 0x0A0D0D0A.
const PCAPNG_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];

/// One line per frame of a classic pcap file.
fn decode_pcap(path: &std::path::Path, bytes: &[u8], rate: Rate) -> anyhow::Result<()> {
    let reader = PcapReader::new(bytes).with_context(|| format!("reading {}", path.display()))?;
    if reader.linktype() != LINKTYPE_ETHERNET {
        bail!(
            "{}: link type {} is not Ethernet (1)",
            path.display(),
            reader.linktype()
        );
    }
    for (i, rec) in reader.enumerate() {
        // A malformed frame is a line of the listing; a malformed file ends it, an error.
        match rec {
            Ok(r) => outln!("{} {}B {}", i + 1, r.data.len(), describe(r.data, rate))?,
            Err(e) => bail!("{}: record {}: {e}", path.display(), i + 1),
        }
    }
    Ok(())
}

/// One line per packet block of a pcapng file; packets of an interface whose link type is not
/// Ethernet get an error line. A malformed block ends the listing with an error (standard
/// error, non-zero exit).
fn decode_pcapng(path: &std::path::Path, bytes: &[u8], rate: Rate) -> anyhow::Result<()> {
    use pcap_file::pcapng::{Block, PcapNgReader};
    use pcap_file::DataLink;
    let mut reader = PcapNgReader::new(bytes)
        .map_err(|e| anyhow::anyhow!("{}: not a pcapng file: {e}", path.display()))?;
    let mut n = 0;
    while let Some(block) = reader.next_block() {
        let (iface, data) = match block {
            Ok(Block::EnhancedPacket(p)) => (Some(p.interface_id), p.data.into_owned()),
            Ok(Block::SimplePacket(p)) => (Some(0), p.data.into_owned()),
            Ok(Block::Packet(p)) => (Some(u32::from(p.interface_id)), p.data.into_owned()),
            Ok(_) => continue,
            Err(e) => bail!("{}: block after packet {n}: {e}", path.display()),
        };
        n += 1;
        let link = iface.and_then(|i| reader.interfaces().get(i as usize).map(|d| d.linktype));
        match link {
            Some(DataLink::ETHERNET) => outln!("{n} {}B {}", data.len(), describe(&data, rate))?,
            Some(other) => outln!("{n} error: link type {other:?} is not Ethernet")?,
            None => outln!("{n} error: packet of an interface the file never described")?,
        }
    }
    Ok(())
}

/// Runs `quench frames`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(path) = &args.out {
        let file =
            fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut w = PcapWriter::new(BufWriter::new(file))?;
        let frames = sample_frames()?;
        for (i, f) in frames.iter().enumerate() {
            // Timestamps 1 us apart so Wireshark lists them in order.
            w.write(Instant::from_nanos(1_000 * (i as u64 + 1)), f)?;
        }
        w.finish()?;
        outln!("wrote {} frames to {}", frames.len(), path.display())?;
    }
    if let Some(path) = &args.decode {
        let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        if bytes.starts_with(&PCAPNG_MAGIC) {
            decode_pcapng(path, &bytes, args.link_rate)?;
        } else {
            decode_pcap(path, &bytes, args.link_rate)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sample_frame_decodes() {
        let frames = sample_frames().unwrap();
        assert_eq!(frames.len(), 9);
        for (i, f) in frames.iter().enumerate() {
            let line = describe(f, Rate::from_gbps(10));
            assert!(!line.starts_with("error"), "frame {}: {line}", i + 1);
        }
        let lines: Vec<String> = frames
            .iter()
            .map(|f| describe(f, Rate::from_gbps(10)))
            .collect();
        assert!(lines[0].contains("cn-tag(rpid=7)") && lines[0].contains("test(flow=7 seq=0"));
        assert!(lines[1].contains("cnm version=0 qntzfb=42"), "{}", lines[1]);
        assert!(lines[1].contains("qoffset=-100 qdelta=25 encap_prio=3"));
        assert!(
            lines[2].contains("p3=XOFF(65535 quanta = 3355.392us at 10gbit)"),
            "{}",
            lines[2]
        );
        assert!(lines[3].contains("p3=XON(0 quanta"));
        for (i, bits) in ["00", "01", "10", "11"].iter().enumerate() {
            assert!(
                lines[4 + i].contains(&format!("ecn={bits}")),
                "{}",
                lines[4 + i]
            );
        }
        assert!(
            lines[8].contains("opcode=0x81 CNP becn=1 destqp=0x000022"),
            "{}",
            lines[8]
        );
    }

    #[test]
    fn malformed_frames_describe_as_errors() {
        let mut f = sample_frames().unwrap().remove(8);
        let last = f.len() - 1;
        f[last] ^= 0xFF;
        assert!(describe(&f, Rate::from_gbps(10)).starts_with("error: RoCEv2 ICRC"));
        assert!(describe(&[0u8; 5], Rate::from_gbps(10)).starts_with("error: Ethernet truncated"));
    }
}
