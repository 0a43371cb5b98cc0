//! The 2-bit ECN field of IP (RFC 3168), which TCD reuses for its ternary code points.

/// The 2-bit ECN field. One type for the wire formats, the algorithms and the simulator; both
/// vocabularies name the same four codepoints:
///
/// | bits | RFC 3168 | TCD (tcd.md, Table 1) |
/// |---|---|---|
/// | 00 | Not-ECT | not TCD-capable |
/// | 01 | ECT(1) | TCD-capable |
/// | 10 | ECT(0) | undetermined encountered (UE) |
/// | 11 | CE | congestion encountered (CE) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum Ecn {
    /// 00: Not ECN-Capable Transport: never marked.
    #[default]
    NotEct = 0b00,
    /// 01: ECN-Capable Transport (1).
    Ect1 = 0b01,
    /// 10: ECN-Capable Transport (0).
    Ect0 = 0b10,
    /// 11: Congestion Experienced.
    Ce = 0b11,
}

impl Ecn {
    /// All four codepoints in bit order.
    pub const ALL: [Ecn; 4] = [Ecn::NotEct, Ecn::Ect1, Ecn::Ect0, Ecn::Ce];
    /// TCD "00 not TCD-capable".
    pub const TCD_NOT_CAPABLE: Ecn = Ecn::NotEct;
    /// TCD "01 TCD-capable".
    pub const TCD_CAPABLE: Ecn = Ecn::Ect1;
    /// TCD "10 undetermined encountered (UE)".
    pub const TCD_UNDETERMINED: Ecn = Ecn::Ect0;
    /// TCD "11 congestion encountered (CE)".
    pub const TCD_CONGESTED: Ecn = Ecn::Ce;

    /// The codepoint of the low two bits of `bits`.
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two bits.
    pub const fn bits(self) -> u8 {
        self as u8
    }

    /// ECN-capable (ECT(0), ECT(1) or already CE).
    pub const fn is_capable(self) -> bool {
        !matches!(self, Ecn::NotEct)
    }

    /// RFC 3168 name.
    pub const fn rfc3168_name(self) -> &'static str {
        match self {
            Ecn::NotEct => "Not-ECT",
            Ecn::Ect1 => "ECT(1)",
            Ecn::Ect0 => "ECT(0)",
            Ecn::Ce => "CE",
        }
    }

    /// TCD name (tcd.md, Table 1).
    pub const fn tcd_name(self) -> &'static str {
        match self {
            Ecn::NotEct => "not-TCD-capable",
            Ecn::Ect1 => "TCD-capable",
            Ecn::Ect0 => "UE",
            Ecn::Ce => "CE",
        }
    }
}

impl From<u8> for Ecn {
    /// The low two bits.
    fn from(bits: u8) -> Ecn {
        Ecn::from_bits(bits)
    }
}

impl From<Ecn> for u8 {
    fn from(e: Ecn) -> u8 {
        e.bits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip() {
        for (b, e) in Ecn::ALL.iter().enumerate() {
            assert_eq!(Ecn::from(b as u8), *e);
            assert_eq!(u8::from(*e), b as u8);
            assert_eq!(Ecn::from(b as u8 | 0xfc), *e);
        }
    }
}
