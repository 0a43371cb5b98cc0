//! quench's in-band network telemetry (INT) header: what HPCC's switches stamp on a data frame
//! on its way (ns-3 HPCC's `IntHeader`, `src/network/utils/int-header.{h,cc}`), carried in a
//! quench test frame's UDP payload right after the test header ([`crate::testhdr`]), where
//! ns-3 carries its `IntHeader` after the `SeqTsHeader`.
//!
//! Layout (network byte order):
//!
//! | octets | field | meaning |
//! |---|---|---|
//! | 0-3 | magic | 0x51494E54, ASCII "QINT": the sender reserved INT space in this frame |
//! | 4 | version | 1; a reader refuses other versions (typed error) |
//! | 5 | mode | 0: hops (HPCC, `CC_MODE 3`); 1: PINT (HPCC-PINT, `CC_MODE 10`) |
//! | 6-7 | nhop | hops pushed so far (`IntHeader::nhop`; past 5 the slots are reused) |
//! | 8-47 | hops (mode 0) | five 8-octet `IntHop` words, slot `nhop % 5` written next |
//! | 8-9 | power (mode 1) | PINT's utilisation code (`IntHeader::pint.power`) |
//!
//! A hop word is ns-3's `IntHop` bit field: from its least significant bit, line-rate code 3
//! bits, time 24 bits (ns), bytes 20 bits (units of 128 x INT_MULTI octets), queue length 17 bits
//! (units of 80 x INT_MULTI octets); on the wire as `IntHeader::Serialize` writes it, the low
//! 32 bits first, each half big-endian. `rp::int::IntHop` reads the word. The header has a
//! fixed length for its mode ([`HOPS_LEN`], [`PINT_LEN`]), written empty by the sender, so a
//! switch stamps it in place and no frame changes length on the way.

use super::{check_len, check_out, EmitError, Truncated};

/// "QINT" in ASCII.
pub const MAGIC: u32 = 0x5149_4E54;
/// The layout above.
pub const VERSION: u8 = 1;
/// `IntHeader::maxHop`.
pub const MAX_HOPS: usize = 5;
/// Octets before the mode's data.
const FIXED_LEN: usize = 8;
/// Header length in mode [`Mode::Hops`].
pub const HOPS_LEN: usize = FIXED_LEN + 8 * MAX_HOPS;
/// Header length in mode [`Mode::Pint`].
pub const PINT_LEN: usize = FIXED_LEN + 2;
/// Where the header starts in a test frame's UDP payload: right after the test header.
pub const OFFSET: usize = crate::testhdr::LEN;

/// What the header carries (`IntHeader::mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Up to five hop words (HPCC).
    Hops,
    /// One utilisation code, the largest on the path (HPCC-PINT).
    Pint,
}

impl Mode {
    const fn code(self) -> u8 {
        match self {
            Mode::Hops => 0,
            Mode::Pint => 1,
        }
    }

    /// Header length in this mode.
    pub const fn header_len(self) -> usize {
        match self {
            Mode::Hops => HOPS_LEN,
            Mode::Pint => PINT_LEN,
        }
    }
}

/// What an INT header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntData {
    /// The hop words, slot by slot (`IntHeader::hop`).
    Hops([u64; MAX_HOPS]),
    /// PINT's power code.
    Pint(u16),
}

/// An INT header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IntRepr {
    /// Hops pushed (`IntHeader::nhop`).
    pub nhop: u16,
    pub data: IntData,
}

/// Why an INT header could not be read or stamped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IntError {
    /// Shorter than its mode's length.
    #[error(transparent)]
    Truncated(#[from] Truncated),
    /// No INT header here.
    #[error("INT header magic {0:#010x} is not {MAGIC:#010x} (\"QINT\")")]
    BadMagic(u32),
    /// A layout this build does not know.
    #[error("INT header version {0}, expected {VERSION}")]
    BadVersion(u8),
    /// A mode this build does not know.
    #[error("INT header mode {0}: 0 (hops) or 1 (PINT) expected")]
    BadMode(u8),
    /// A hop stamped on a PINT header, or a PINT code on a hops header.
    #[error("INT header in mode {0:?} cannot take this stamp")]
    WrongMode(Mode),
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Hop word `i` of a hops header whose length was checked.
fn word(b: &[u8], i: usize) -> u64 {
    let at = FIXED_LEN + 8 * i;
    u64::from(be32(b, at)) | u64::from(be32(b, at + 4)) << 32
}

fn put_word(b: &mut [u8], i: usize, w: u64) {
    let at = FIXED_LEN + 8 * i;
    b[at..at + 4].copy_from_slice(&(w as u32).to_be_bytes());
    b[at + 4..at + 8].copy_from_slice(&((w >> 32) as u32).to_be_bytes());
}

/// Checks magic, version and mode, and that `buf` holds the mode's length.
fn check(buf: &[u8]) -> Result<Mode, IntError> {
    check_len("INT header", buf, FIXED_LEN)?;
    let magic = be32(buf, 0);
    if magic != MAGIC {
        return Err(IntError::BadMagic(magic));
    }
    if buf[4] != VERSION {
        return Err(IntError::BadVersion(buf[4]));
    }
    let mode = match buf[5] {
        0 => Mode::Hops,
        1 => Mode::Pint,
        m => return Err(IntError::BadMode(m)),
    };
    check_len("INT header", buf, mode.header_len())?;
    Ok(mode)
}

impl IntRepr {
    /// An empty header of `mode`, as a sender writes it.
    pub const fn empty(mode: Mode) -> IntRepr {
        IntRepr {
            nhop: 0,
            data: match mode {
                Mode::Hops => IntData::Hops([0; MAX_HOPS]),
                Mode::Pint => IntData::Pint(0),
            },
        }
    }

    pub const fn mode(&self) -> Mode {
        match self.data {
            IntData::Hops(_) => Mode::Hops,
            IntData::Pint(_) => Mode::Pint,
        }
    }

    /// Parses the header at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<IntRepr, IntError> {
        let mode = check(buf)?;
        let data = match mode {
            Mode::Hops => IntData::Hops(std::array::from_fn(|i| word(buf, i))),
            Mode::Pint => IntData::Pint(be16(buf, FIXED_LEN)),
        };
        Ok(IntRepr {
            nhop: be16(buf, 6),
            data,
        })
    }

    /// The hop words a reaction point reads, oldest first: `None` in PINT mode or past
    /// [`MAX_HOPS`] hops (ns-3's `UpdateRateHp` ignores such a header).
    pub fn hops(&self) -> Option<&[u64]> {
        match &self.data {
            IntData::Hops(h) => h.get(..usize::from(self.nhop)),
            IntData::Pint(_) => None,
        }
    }

    /// Octets `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        self.mode().header_len()
    }

    /// Writes the header into `buf[..buffer_len()]`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        let len = self.buffer_len();
        check_out("INT header", buf, len)?;
        buf[..4].copy_from_slice(&MAGIC.to_be_bytes());
        buf[4] = VERSION;
        buf[5] = self.mode().code();
        buf[6..8].copy_from_slice(&self.nhop.to_be_bytes());
        match self.data {
            IntData::Hops(h) => {
                for (i, &w) in h.iter().enumerate() {
                    put_word(buf, i, w);
                }
            }
            IntData::Pint(p) => buf[FIXED_LEN..PINT_LEN].copy_from_slice(&p.to_be_bytes()),
        }
        Ok(len)
    }
}

/// Stamps one hop on the hops header at the start of `buf`, in place (`IntHeader::PushHop`):
/// the word goes to slot `nhop % 5` and `nhop` counts up (wrapping at 2^16). Returns the
/// header's length (the octets that may have changed).
pub fn push_hop(buf: &mut [u8], w: u64) -> Result<usize, IntError> {
    match check(buf)? {
        Mode::Hops => {
            let n = be16(buf, 6);
            put_word(buf, usize::from(n) % MAX_HOPS, w);
            buf[6..8].copy_from_slice(&n.wrapping_add(1).to_be_bytes());
            Ok(HOPS_LEN)
        }
        m => Err(IntError::WrongMode(m)),
    }
}

/// Folds a switch's PINT code into the PINT header at the start of `buf`, in place: the
/// larger of the two stays (ns-3's `SwitchNotifyDequeue`, `CC_MODE 10`: `if (power >
/// ih->GetPower()) ih->SetPower(power)`); `nhop` counts the hops. Returns the header's length.
pub fn fold_pint(buf: &mut [u8], power: u16) -> Result<usize, IntError> {
    match check(buf)? {
        Mode::Pint => {
            if power > be16(buf, FIXED_LEN) {
                buf[FIXED_LEN..PINT_LEN].copy_from_slice(&power.to_be_bytes());
            }
            let n = be16(buf, 6).wrapping_add(1);
            buf[6..8].copy_from_slice(&n.to_be_bytes());
            Ok(PINT_LEN)
        }
        m => Err(IntError::WrongMode(m)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Two hops stamped: words 0x0000_0001_0000_0002 and 0x1122_3344_5566_7788.
    const BYTES: [u8; HOPS_LEN] = [
        b'Q', b'I', b'N', b'T', 1, 0, 0, 2, // magic, version, mode hops, nhop 2
        0, 0, 0, 2, 0, 0, 0, 1, // hop 0: low half 2, high half 1
        0x55, 0x66, 0x77, 0x88, 0x11, 0x22, 0x33, 0x44, // hop 1
        0, 0, 0, 0, 0, 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 0, 0, //
    ];

    fn repr() -> IntRepr {
        IntRepr {
            nhop: 2,
            data: IntData::Hops([0x1_0000_0002, 0x1122_3344_5566_7788, 0, 0, 0]),
        }
    }

    #[test]
    fn fixture_both_ways() {
        assert_eq!(IntRepr::parse(&BYTES), Ok(repr()));
        let mut out = [0u8; HOPS_LEN];
        assert_eq!(repr().emit(&mut out), Ok(HOPS_LEN));
        assert_eq!(out, BYTES);
        assert_eq!(
            repr().hops(),
            Some(&[0x1_0000_0002, 0x1122_3344_5566_7788][..])
        );
    }

    #[test]
    fn push_fills_slots_in_order_and_reuses_them_past_five() {
        let mut b = [0u8; HOPS_LEN];
        IntRepr::empty(Mode::Hops).emit(&mut b).unwrap();
        for w in 1..=6u64 {
            assert_eq!(push_hop(&mut b, w), Ok(HOPS_LEN));
        }
        let r = IntRepr::parse(&b).unwrap();
        assert_eq!(r.nhop, 6);
        assert_eq!(r.data, IntData::Hops([6, 2, 3, 4, 5]));
        assert_eq!(r.hops(), None, "past five hops a reader ignores the header");
        assert_eq!(fold_pint(&mut b, 1), Err(IntError::WrongMode(Mode::Hops)));
    }

    #[test]
    fn pint_keeps_the_largest_code() {
        let mut b = [0u8; PINT_LEN];
        IntRepr::empty(Mode::Pint).emit(&mut b).unwrap();
        for p in [300, 627, 5] {
            fold_pint(&mut b, p).unwrap();
        }
        assert_eq!(
            IntRepr::parse(&b),
            Ok(IntRepr {
                nhop: 3,
                data: IntData::Pint(627)
            })
        );
        assert_eq!(push_hop(&mut b, 1), Err(IntError::WrongMode(Mode::Pint)));
    }

    #[test]
    fn malformed() {
        for n in 0..HOPS_LEN {
            assert!(matches!(
                IntRepr::parse(&BYTES[..n]),
                Err(IntError::Truncated(_))
            ));
        }
        let mut b = BYTES;
        b[0] = b'X';
        assert_eq!(IntRepr::parse(&b), Err(IntError::BadMagic(0x5849_4E54)));
        let mut b = BYTES;
        b[4] = 2;
        assert_eq!(IntRepr::parse(&b), Err(IntError::BadVersion(2)));
        let mut b = BYTES;
        b[5] = 9;
        assert_eq!(IntRepr::parse(&b), Err(IntError::BadMode(9)));
        assert!(push_hop(&mut b, 1).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(nhop: u16, words: [u64; MAX_HOPS], power: u16, pint: bool) {
            let data = if pint { IntData::Pint(power) } else { IntData::Hops(words) };
            let r = IntRepr { nhop, data };
            let mut out = [0u8; HOPS_LEN];
            let n = r.emit(&mut out).unwrap();
            prop_assert_eq!(IntRepr::parse(&out[..n]), Ok(r));
        }

        #[test]
        fn no_bytes_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..60), magic: bool,
                          w: u64, p: u16) {
            if magic && bytes.len() >= 5 {
                bytes[..4].copy_from_slice(&MAGIC.to_be_bytes());
                bytes[4] = VERSION;
            }
            let _ = IntRepr::parse(&bytes);
            let _ = push_hop(&mut bytes.clone(), w);
            let _ = fold_pint(&mut bytes, p);
        }
    }
}
