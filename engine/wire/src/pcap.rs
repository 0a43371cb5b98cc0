//! Classic libpcap capture files (the format `tshark -r` and Wireshark open).
//!
//! File = global header (24 octets) then records (16-octet header + captured octets).
//! Global header: magic (4), version major 2 (2), minor 4 (2), thiszone (4), sigfigs (4),
//! snaplen (4), link type (4). Record header: seconds (4), sub-second (4, micro- or
//! nanoseconds by magic), captured length (4), original length (4). Fields are in the writer's
//! byte order, which the magic tells: 0xA1B2C3D4 (microseconds) or 0xA1B23C4D (nanoseconds),
//! read byte-swapped when written by a machine of the other endianness.
//!
//! [`PcapWriter`] writes nanosecond, Ethernet (link type 1) files in little-endian order.
//! [`PcapReader`] reads all four magic variants from a byte slice without allocating or
//! panicking: any malformed input ends the iteration with a typed [`PcapError`].

use std::io::{self, Write};

use units::Instant;

/// Magic of a microsecond-resolution file.
pub const MAGIC_MICROS: u32 = 0xA1B2_C3D4;
/// Magic of a nanosecond-resolution file.
pub const MAGIC_NANOS: u32 = 0xA1B2_3C4D;
/// Link type of Ethernet frames without FCS (tcpdump.org LINKTYPE_ETHERNET).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Global header length.
pub const GLOBAL_HEADER_LEN: usize = 24;
/// Record header length.
pub const RECORD_HEADER_LEN: usize = 16;
/// Snap length quench writes: the largest frame it captures.
pub const SNAPLEN: u32 = 65_535;
/// Longest record the reader accepts (libpcap's MAXIMUM_SNAPLEN); longer means corrupt.
pub const MAX_RECORD_LEN: u32 = 262_144;

/// Why a capture file could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PcapError {
    /// The file ends inside a header or record.
    #[error("pcap truncated at offset {offset}: need {need} more octets, have {have}")]
    Truncated {
        /// Offset of the header or record being read.
        offset: usize,
        /// Octets it needs.
        need: usize,
        /// Octets left.
        have: usize,
    },
    /// Not a classic pcap file (pcapng starts 0x0A0D0D0A).
    #[error("not a classic pcap file: magic {0:#010x}")]
    BadMagic(u32),
    /// A record longer than any real capture.
    #[error("pcap record at offset {offset} claims {len} octets (max {MAX_RECORD_LEN})")]
    RecordTooLong {
        /// Offset of the record header.
        offset: usize,
        /// Its captured length.
        len: u32,
    },
}

/// Writes a capture file.
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header (nanoseconds, Ethernet, snaplen 65535).
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = [0u8; GLOBAL_HEADER_LEN];
        h[0..4].copy_from_slice(&MAGIC_NANOS.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs stay 0.
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(Self { out })
    }

    /// Appends one frame captured at `ts` (nanoseconds since the epoch of the capture's
    /// clock). Frames longer than the snap length are cut to it, as a capture would.
    pub fn write(&mut self, ts: Instant, frame: &[u8]) -> io::Result<()> {
        let ns = ts.as_nanos();
        let secs = u32::try_from(ns / 1_000_000_000).unwrap_or(u32::MAX);
        let sub = (ns % 1_000_000_000) as u32;
        let orig = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let incl = orig.min(SNAPLEN);
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(&secs.to_le_bytes());
        h[4..8].copy_from_slice(&sub.to_le_bytes());
        h[8..12].copy_from_slice(&incl.to_le_bytes());
        h[12..16].copy_from_slice(&orig.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&frame[..incl as usize])
    }

    /// Flushes what was written so far.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// One captured frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Capture time in nanoseconds.
    pub ts: Instant,
    /// Length of the frame on the wire.
    pub orig_len: u32,
    /// The captured octets (`orig_len` or fewer).
    pub data: &'a [u8],
}

/// Reads a capture file held in memory; iterates over its records.
#[derive(Debug, Clone)]
pub struct PcapReader<'a> {
    buf: &'a [u8],
    at: usize,
    swapped: bool,
    nanos: bool,
    linktype: u32,
    snaplen: u32,
    failed: bool,
}

fn u32_at(buf: &[u8], at: usize, swapped: bool) -> Option<u32> {
    let b: [u8; 4] = buf.get(at..at + 4)?.try_into().ok()?;
    let v = u32::from_le_bytes(b);
    Some(if swapped { v.swap_bytes() } else { v })
}

impl<'a> PcapReader<'a> {
    /// Reads the global header.
    pub fn new(buf: &'a [u8]) -> Result<Self, PcapError> {
        if buf.len() < GLOBAL_HEADER_LEN {
            return Err(PcapError::Truncated {
                offset: 0,
                need: GLOBAL_HEADER_LEN,
                have: buf.len(),
            });
        }
        let magic = u32_at(buf, 0, false).unwrap_or_default();
        let (swapped, nanos) = match magic {
            MAGIC_MICROS => (false, false),
            MAGIC_NANOS => (false, true),
            m if m == MAGIC_MICROS.swap_bytes() => (true, false),
            m if m == MAGIC_NANOS.swap_bytes() => (true, true),
            m => return Err(PcapError::BadMagic(m)),
        };
        Ok(Self {
            buf,
            at: GLOBAL_HEADER_LEN,
            swapped,
            nanos,
            snaplen: u32_at(buf, 16, swapped).unwrap_or_default(),
            linktype: u32_at(buf, 20, swapped).unwrap_or_default(),
            failed: false,
        })
    }

    /// The link type (1 = Ethernet).
    pub fn linktype(&self) -> u32 {
        self.linktype
    }

    /// The snap length in the global header.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    fn next_record(&mut self) -> Result<Option<Record<'a>>, PcapError> {
        let offset = self.at;
        let left = self.buf.len() - offset;
        if left == 0 {
            return Ok(None);
        }
        let truncated = |need| PcapError::Truncated {
            offset,
            need,
            have: left,
        };
        let field = |i: usize| u32_at(self.buf, offset + 4 * i, self.swapped);
        let (Some(secs), Some(sub), Some(incl), Some(orig)) =
            (field(0), field(1), field(2), field(3))
        else {
            return Err(truncated(RECORD_HEADER_LEN));
        };
        if incl > MAX_RECORD_LEN {
            return Err(PcapError::RecordTooLong { offset, len: incl });
        }
        let start = offset + RECORD_HEADER_LEN;
        let end = start + incl as usize;
        let data = self
            .buf
            .get(start..end)
            .ok_or_else(|| truncated(RECORD_HEADER_LEN + incl as usize))?;
        self.at = end;
        let sub_ns = if self.nanos {
            u64::from(sub)
        } else {
            u64::from(sub).saturating_mul(1_000)
        };
        let ns = u64::from(secs)
            .saturating_mul(1_000_000_000)
            .saturating_add(sub_ns);
        Ok(Some(Record {
            ts: Instant::from_nanos(ns),
            orig_len: orig,
            data,
        }))
    }
}

impl<'a> Iterator for PcapReader<'a> {
    type Item = Result<Record<'a>, PcapError>;

    /// The next record; after an error, `None` (a corrupt length leaves no way to resync).
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let r = self.next_record();
        self.failed = r.is_err();
        r.transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn file(frames: &[&[u8]]) -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for (i, f) in frames.iter().enumerate() {
            w.write(Instant::from_nanos(1_500_000_000 + i as u64), f)
                .unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn writer_fixture() {
        let f = file(&[&[0xAB, 0xCD]]);
        assert_eq!(
            f,
            [
                0x4D, 0x3C, 0xB2, 0xA1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0, 1, 0,
                0, 0, // global header
                1, 0, 0, 0, 0x00, 0x65, 0xCD, 0x1D, 2, 0, 0, 0, 2, 0, 0, 0, // 1.5 s, 2 octets
                0xAB, 0xCD,
            ]
        );
    }

    #[test]
    fn reader_round_trip() {
        let f = file(&[&[1, 2, 3], &[], &[4; 100]]);
        let r = PcapReader::new(&f).unwrap();
        assert_eq!(r.linktype(), LINKTYPE_ETHERNET);
        assert_eq!(r.snaplen(), SNAPLEN);
        let recs: Vec<_> = r.map(Result::unwrap).collect();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].data, [1, 2, 3]);
        assert_eq!(recs[1].ts.as_nanos(), 1_500_000_001);
        assert_eq!(recs[2].data, [4; 100]);
        assert_eq!(recs[2].orig_len, 100);
    }

    #[test]
    fn reads_big_endian_microseconds() {
        let mut f = vec![0xA1, 0xB2, 0xC3, 0xD4, 0, 2, 0, 4];
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&[0, 0, 0xFF, 0xFF, 0, 0, 0, 1]);
        f.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 60, 0xEE]);
        let mut r = PcapReader::new(&f).unwrap();
        let rec = r.next().unwrap().unwrap();
        assert_eq!(rec.ts.as_nanos(), 2_000_007_000);
        assert_eq!((rec.data, rec.orig_len), (&[0xEE][..], 60));
        assert!(r.next().is_none());
    }

    #[test]
    fn malformed() {
        assert!(matches!(
            PcapReader::new(&[0; 10]),
            Err(PcapError::Truncated { .. })
        ));
        assert_eq!(
            PcapReader::new(&[
                0x0A, 0x0D, 0x0D, 0x0A, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
            ])
            .unwrap_err(),
            PcapError::BadMagic(0x0A0D_0D0A)
        );
        let mut f = file(&[&[1, 2, 3]]);
        f.pop();
        let mut r = PcapReader::new(&f).unwrap();
        assert!(matches!(r.next(), Some(Err(PcapError::Truncated { .. }))));
        assert!(r.next().is_none(), "stops after an error");
        let mut f = file(&[&[1]]);
        f[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            PcapReader::new(&f).unwrap().next(),
            Some(Err(PcapError::RecordTooLong { .. }))
        ));
    }

    proptest! {
        #[test]
        fn round_trip(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..8)) {
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            let f = file(&refs);
            let got: Vec<Vec<u8>> = PcapReader::new(&f).unwrap().map(|r| r.unwrap().data.to_vec()).collect();
            prop_assert_eq!(got, frames);
        }

        #[test]
        fn no_bytes_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120), magic in 0usize..4) {
            let mut bytes = bytes;
            let m = [MAGIC_MICROS, MAGIC_NANOS, MAGIC_MICROS.swap_bytes(), MAGIC_NANOS.swap_bytes()];
            if bytes.len() >= 4 {
                bytes[..4].copy_from_slice(&m[magic].to_le_bytes());
            }
            if let Ok(r) = PcapReader::new(&bytes) {
                for rec in r.flatten() {
                    prop_assert!(rec.data.len() <= bytes.len());
                }
            }
        }
    }
}
