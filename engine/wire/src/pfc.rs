//! IEEE 802.1Qbb Priority-based Flow Control (PFC) PAUSE frames.
//!
//! protocols.md (V: tshark decodes it; Wireshark packet-macctrl.c): "DA 01-80-C2-00-00-01,
//! EtherType 0x8808, opcode 0x0101, class-enable vector (2 octets, bit n = priority n), 8 x 16-bit
//! pause times in quanta of 512 bit times, zero pad to 60 octets. Quanta 0 = resume (XON).
//! 0xFFFF = 3.355 ms at 10 Gb/s."
//!
//! pnet has the 802.3x PAUSE (`pnet_packet::flowcontrol`, one quanta) but not PFC, so the view is
//! our own `#[packet]`. This file covers the MAC Control PDU after EtherType 0x8808; the whole
//! frame (DA, SA, EtherType, pad) is built by [`emit_frame`].

use pnet_base::MacAddr;
use pnet_macros::packet;
use pnet_macros_support::types::u16be;
use units::{Duration, Rate, PRIORITIES};

use super::ethernet::{ethertype, EthernetRepr, HEADER_LEN as ETH_LEN, MIN_FRAME_LEN};
use super::{check_out, view, view_mut, EmitError, Truncated};

/// "DA 01-80-C2-00-00-01": the MAC Control multicast address.
pub const DA: MacAddr = MacAddr(0x01, 0x80, 0xC2, 0x00, 0x00, 0x01);
/// "opcode 0x0101": PFC.
pub const OPCODE_PFC: u16 = 0x0101;
/// 802.3 Annex 31B PAUSE opcode (one pause time for the whole link); not PFC.
pub const OPCODE_PAUSE: u16 = 0x0001;
/// MAC Control PDU octets PFC uses: opcode (2), class-enable vector (2), 8 pause times (16).
pub const LEN: usize = 20;
/// Frame length without FCS: "zero pad to 60 octets".
pub const FRAME_LEN: usize = MIN_FRAME_LEN;
/// "pause times in quanta of 512 bit times".
pub const QUANTUM_BITS: u64 = 512;
/// "Quanta 0 = resume (XON)". The longest pause is 0xFFFF quanta.
pub const XON: u16 = 0;
/// The longest pause a PFC frame can ask for.
pub const MAX_QUANTA: u16 = 0xFFFF;

/// View over the MAC Control PDU after EtherType 0x8808.
#[packet]
pub struct Pfc {
    pub opcode: u16be,
    pub class_enable: u16be,
    pub time0: u16be,
    pub time1: u16be,
    pub time2: u16be,
    pub time3: u16be,
    pub time4: u16be,
    pub time5: u16be,
    pub time6: u16be,
    pub time7: u16be,
    #[payload]
    pub pad: Vec<u8>,
}

/// Why a PFC PDU could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PfcError {
    /// Shorter than opcode + vector + 8 pause times.
    #[error(transparent)]
    Truncated(#[from] Truncated),
    /// A MAC Control opcode other than 0x0101 (e.g. 0x0001, 802.3x PAUSE).
    #[error("MAC Control opcode {0:#06x} is not PFC (0x0101)")]
    NotPfc(u16),
}

/// What a PFC frame says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PfcRepr {
    /// Class-enable vector: bit n set means `quanta[n]` applies to priority n. The reserved
    /// upper octet round-trips.
    pub class_enable: u16,
    /// Pause time per priority in quanta of 512 bit times; 0 = XON.
    pub quanta: [u16; PRIORITIES],
}

impl PfcRepr {
    /// XOFF for the priorities in `mask` (bit n = priority n) for `quanta` each.
    pub fn pause(mask: u8, quanta: u16) -> Self {
        let mut r = Self {
            class_enable: u16::from(mask),
            quanta: [0; PRIORITIES],
        };
        for (p, q) in r.quanta.iter_mut().enumerate() {
            if mask & (1 << p) != 0 {
                *q = quanta;
            }
        }
        r
    }

    /// XON (pause time 0) for the priorities in `mask`.
    pub fn resume(mask: u8) -> Self {
        Self::pause(mask, XON)
    }

    /// Is priority `p` enabled in the class-enable vector?
    pub fn enabled(&self, p: usize) -> bool {
        p < PRIORITIES && self.class_enable & (1 << p) != 0
    }

    /// Parses the MAC Control PDU (after EtherType 0x8808); padding is ignored.
    pub fn parse(buf: &[u8]) -> Result<Self, PfcError> {
        let p = view("PFC", buf, LEN, PfcPacket::new)?;
        let opcode = p.get_opcode();
        if opcode != OPCODE_PFC {
            return Err(PfcError::NotPfc(opcode));
        }
        Ok(Self {
            class_enable: p.get_class_enable(),
            quanta: [
                p.get_time0(),
                p.get_time1(),
                p.get_time2(),
                p.get_time3(),
                p.get_time4(),
                p.get_time5(),
                p.get_time6(),
                p.get_time7(),
            ],
        })
    }

    /// Octets `emit` writes (the PDU without padding).
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes opcode, vector and pause times into `buf[..20]`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        let mut p = view_mut("PFC", buf, LEN, MutablePfcPacket::new)?;
        p.set_opcode(OPCODE_PFC);
        p.set_class_enable(self.class_enable);
        let q = self.quanta;
        p.set_time0(q[0]);
        p.set_time1(q[1]);
        p.set_time2(q[2]);
        p.set_time3(q[3]);
        p.set_time4(q[4]);
        p.set_time5(q[5]);
        p.set_time6(q[6]);
        p.set_time7(q[7]);
        Ok(LEN)
    }
}

/// Writes a whole PFC frame (DA 01-80-C2-00-00-01, SA `src`, 0x8808, PDU, zero pad to 60).
pub fn emit_frame(src: MacAddr, pfc: &PfcRepr, buf: &mut [u8]) -> Result<usize, EmitError> {
    check_out("PFC frame", buf, FRAME_LEN)?;
    let at = EthernetRepr {
        dst: DA,
        src,
        ethertype: ethertype::MAC_CONTROL,
    }
    .emit(buf)?;
    let at = at + pfc.emit(&mut buf[at..])?;
    buf[at..FRAME_LEN].fill(0);
    debug_assert_eq!(at, ETH_LEN + LEN);
    Ok(FRAME_LEN)
}

/// How long `quanta` pause quanta last at `link`: quanta x 512 bit times, rounded up to the
/// nanosecond. A zero rate never finishes (`Duration::MAX`).
pub fn quanta_to_duration(quanta: u16, link: Rate) -> Duration {
    // Rate::tx_time takes octets: 512 bits = 64 octets per quantum.
    link.tx_time(u64::from(quanta) * QUANTUM_BITS / 8)
}

/// The fewest quanta that cover `d` at `link`, saturating at [`MAX_QUANTA`].
pub fn duration_to_quanta(d: Duration, link: Rate) -> u16 {
    let bits = u128::from(link.as_bps()) * u128::from(d.as_nanos());
    let quanta = bits.div_ceil(u128::from(QUANTUM_BITS) * 1_000_000_000);
    u16::try_from(quanta).unwrap_or(MAX_QUANTA)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: MacAddr = MacAddr(0x02, 0, 0, 0, 0, 0x01);

    /// XOFF for priority 3 with 0xFFFF quanta.
    const PDU: [u8; 20] = [
        0x01, 0x01, // opcode
        0x00, 0x08, // class-enable vector: priority 3
        0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn parse_fixture() {
        let r = PfcRepr::parse(&PDU).unwrap();
        assert_eq!(r, PfcRepr::pause(1 << 3, 0xFFFF));
        assert!(r.enabled(3) && !r.enabled(2) && !r.enabled(8));
    }

    #[test]
    fn emit_fixture() {
        let mut out = [0xAAu8; 20];
        PfcRepr::pause(1 << 3, 0xFFFF).emit(&mut out).unwrap();
        assert_eq!(out, PDU);
    }

    #[test]
    fn frame_fixture() {
        let mut f = [0xAAu8; 64];
        assert_eq!(emit_frame(SRC, &PfcRepr::resume(0xFF), &mut f), Ok(60));
        assert_eq!(
            f[..14],
            [1, 0x80, 0xC2, 0, 0, 1, 2, 0, 0, 0, 0, 1, 0x88, 0x08]
        );
        assert_eq!(f[14..18], [0x01, 0x01, 0x00, 0xFF]);
        assert!(
            f[18..60].iter().all(|&b| b == 0),
            "XON times and pad are zero"
        );
        assert_eq!(f[60], 0xAA, "nothing written past 60 octets");
    }

    #[test]
    fn malformed() {
        for n in 0..20 {
            assert!(matches!(
                PfcRepr::parse(&PDU[..n]),
                Err(PfcError::Truncated(_))
            ));
        }
        let mut pause = PDU;
        pause[1] = 0x01;
        pause[0] = 0x00;
        assert_eq!(PfcRepr::parse(&pause), Err(PfcError::NotPfc(0x0001)));
        assert!(emit_frame(SRC, &PfcRepr::default(), &mut [0u8; 59]).is_err());
    }

    #[test]
    fn quanta_durations() {
        // protocols.md: "0xFFFF = 3.355 ms at 10 Gb/s".
        let d = quanta_to_duration(0xFFFF, Rate::from_gbps(10));
        assert_eq!(d.as_nanos(), 3_355_392);
        assert_eq!(quanta_to_duration(1, Rate::from_gbps(100)).as_nanos(), 6); // 5.12 ns up
        assert_eq!(quanta_to_duration(0, Rate::from_gbps(10)), Duration::ZERO);
        assert_eq!(duration_to_quanta(d, Rate::from_gbps(10)), 0xFFFF);
        assert_eq!(
            duration_to_quanta(Duration::from_secs(1), Rate::from_gbps(10)),
            MAX_QUANTA
        );
    }

    proptest! {
        #[test]
        fn round_trip(class_enable: u16, quanta: [u16; 8]) {
            let r = PfcRepr { class_enable, quanta };
            let mut out = [0u8; 20];
            r.emit(&mut out).unwrap();
            prop_assert_eq!(PfcRepr::parse(&out), Ok(r));
        }

        #[test]
        fn quanta_duration_cover(q: u16, ns in 0u64..10_000_000, gbps in 1u64..=400) {
            let link = Rate::from_gbps(gbps);
            // Rounding up to whole nanoseconds may add at most one quantum back.
            let back = duration_to_quanta(quanta_to_duration(q, link), link);
            prop_assert!(back == q || back == q.saturating_add(1), "{} -> {}", q, back);
            let d = Duration::from_nanos(ns);
            let q = duration_to_quanta(d, link);
            prop_assert!(q == MAX_QUANTA || quanta_to_duration(q, link).as_nanos() >= ns);
        }

        #[test]
        fn no_bytes_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = PfcRepr::parse(&bytes);
        }
    }
}
