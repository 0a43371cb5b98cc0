//! A port wrapper that writes every frame the wrapped port receives or transmits to a pcap
//! file (`--capture PORT=FILE`). With no file it is a pass-through costing one branch per burst.
//!
//! The file is classic pcap (magic a1b2c3d4, microsecond timestamps, LINKTYPE_ETHERNET),
//! readable by tcpdump and Wireshark. Timestamps are the wall clock at open plus the engine
//! clock's elapsed time, read once per burst.
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use units::Instant;

use super::heap::Carried;
use super::{Capabilities, Frame, Port, PortError};
use crate::time::Clock;

/// Classic pcap writer (pcap-savefile(5)).
pub struct PcapWriter {
    out: BufWriter<File>,
    wall_base_us: u64,
}

/// LINKTYPE_ETHERNET.
const LINKTYPE_ETHERNET: u32 = 1;
/// Octets recorded per frame (whole frames: larger than any frame a port carries).
const SNAPLEN: u32 = 65535;

impl PcapWriter {
    /// Creates `path` and writes the file header.
    pub fn create(path: &Path) -> std::io::Result<PcapWriter> {
        let mut out = BufWriter::new(File::create(path)?);
        out.write_all(&0xa1b2_c3d4u32.to_le_bytes())?;
        out.write_all(&2u16.to_le_bytes())?;
        out.write_all(&4u16.to_le_bytes())?;
        out.write_all(&0i32.to_le_bytes())?;
        out.write_all(&0u32.to_le_bytes())?;
        out.write_all(&SNAPLEN.to_le_bytes())?;
        out.write_all(&LINKTYPE_ETHERNET.to_le_bytes())?;
        #[allow(clippy::disallowed_methods)]
        // reason: pcap records need wall-clock time; read once at open
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        Ok(PcapWriter {
            out,
            wall_base_us: wall,
        })
    }

    /// Appends one record at engine time `at`.
    pub fn write(&mut self, at: Instant, frame: &[u8]) -> std::io::Result<()> {
        let us = self.wall_base_us + at.as_nanos() / 1_000;
        let len = frame.len().min(SNAPLEN as usize) as u32;
        self.out
            .write_all(&((us / 1_000_000) as u32).to_le_bytes())?;
        self.out
            .write_all(&((us % 1_000_000) as u32).to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(&(frame.len() as u32).to_le_bytes())?;
        self.out.write_all(&frame[..len as usize])
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Wraps a port; records its rx and tx when a writer is set.
pub struct Capture<P> {
    inner: P,
    pcap: Option<PcapWriter>,
    clock: Clock,
    staged: Vec<u8>,
    staged_lens: Vec<usize>,
    /// Records lost to write errors (disk full...); capture never stops the datapath.
    pub write_errors: u64,
}

impl<P: Port> Capture<P> {
    /// A pass-through wrapper (no file).
    pub fn off(inner: P) -> Capture<P> {
        Capture {
            inner,
            pcap: None,
            clock: Clock::monotonic(),
            staged: Vec::new(),
            staged_lens: Vec::new(),
            write_errors: 0,
        }
    }

    /// Records to `path`.
    pub fn to_file(inner: P, path: &Path, clock: Clock) -> Result<Capture<P>, PortError> {
        let pcap = PcapWriter::create(path).map_err(|e| PortError::Io {
            name: path.display().to_string(),
            op: "create capture file",
            source: e,
        })?;
        Ok(Capture {
            pcap: Some(pcap),
            clock,
            ..Capture::off(inner)
        })
    }

    pub fn inner(&self) -> &P {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }

    pub fn is_capturing(&self) -> bool {
        self.pcap.is_some()
    }

    /// Flushes the file (at shutdown).
    pub fn flush(&mut self) {
        if let Some(p) = &mut self.pcap {
            if p.flush().is_err() {
                self.write_errors += 1;
            }
        }
    }

    /// Stages copies of `frames` before a transmit, so that the ones actually sent can be
    /// written afterwards (a sent frame is gone from the caller's vector).
    pub fn stage_tx(&mut self, frames: &[P::Frame]) {
        if self.pcap.is_none() {
            return;
        }
        self.staged.clear();
        self.staged_lens.clear();
        for f in frames {
            self.staged.extend_from_slice(f.data());
            self.staged_lens.push(f.len());
        }
    }

    /// Writes the first `sent` staged frames.
    pub fn commit_tx(&mut self, sent: usize) {
        let Some(pcap) = &mut self.pcap else { return };
        let now = self.clock.now();
        let mut at = 0;
        for &len in self.staged_lens.iter().take(sent) {
            if pcap.write(now, &self.staged[at..at + len]).is_err() {
                self.write_errors += 1;
            }
            at += len;
        }
    }

    /// Writes frames just received.
    pub fn record_rx(&mut self, frames: &[P::Frame]) {
        let Some(pcap) = &mut self.pcap else { return };
        let now = self.clock.now();
        for f in frames {
            if pcap.write(now, f.data()).is_err() {
                self.write_errors += 1;
            }
        }
    }
}

impl<P: Port> Port for Capture<P> {
    type Frame = P::Frame;

    fn caps(&self) -> &Capabilities {
        self.inner.caps()
    }

    fn rx_burst(
        &mut self,
        queue: u16,
        out: &mut Vec<P::Frame>,
        max: usize,
    ) -> Result<usize, PortError> {
        let start = out.len();
        let n = self.inner.rx_burst(queue, out, max)?;
        if self.pcap.is_some() {
            let frames = std::mem::take(out);
            self.record_rx(&frames[start..]);
            *out = frames;
        }
        Ok(n)
    }

    fn tx_burst(&mut self, queue: u16, frames: &mut Vec<P::Frame>) -> Result<usize, PortError> {
        self.stage_tx(frames);
        let n = self.inner.tx_burst(queue, frames)?;
        self.commit_tx(n);
        Ok(n)
    }

    fn alloc(&mut self, len: usize) -> Option<P::Frame> {
        self.inner.alloc(len)
    }

    fn carry(frame: P::Frame) -> Option<Carried> {
        P::carry(frame)
    }

    fn land(&mut self, frame: Carried) -> Option<P::Frame> {
        self.inner.land(frame)
    }

    fn poll(&mut self) -> Result<(), PortError> {
        self.inner.poll()
    }

    fn kernel_rx_drops(&mut self) -> Option<u64> {
        self.inner.kernel_rx_drops()
    }

    fn tx_refusals(&mut self) -> Option<u64> {
        self.inner.tx_refusals()
    }

    fn kernel_tx_drops(&mut self) -> Option<u64> {
        self.inner.kernel_tx_drops()
    }

    fn tx_queued(&mut self) -> Option<usize> {
        self.inner.tx_queued()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::mem::MemPort;

    #[test]
    fn capture_records_rx_and_sent_tx() {
        let dir = std::env::temp_dir().join(format!("qn-cap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.pcap");
        let (port, peer) = MemPort::with_peer("p");
        let mut cap = Capture::to_file(port, &path, Clock::monotonic()).unwrap();
        assert!(peer.send(&[1; 60]));
        let mut got = Vec::new();
        assert_eq!(cap.rx_burst(0, &mut got, 8).unwrap(), 1);
        assert_eq!(cap.tx_burst(0, &mut got).unwrap(), 1);
        drop(cap);
        let bytes = std::fs::read(&path).unwrap();
        // 24-octet header, then two records of 16 + 60 octets.
        assert_eq!(bytes.len(), 24 + 2 * (16 + 60));
        assert_eq!(&bytes[..4], &0xa1b2_c3d4u32.to_le_bytes());
        assert_eq!(&bytes[24 + 8..24 + 12], &60u32.to_le_bytes());
        assert_eq!(peer.recv().unwrap(), vec![1; 60]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A port that knows its kernel-side counts.
    struct Counting(MemPort);

    impl Port for Counting {
        type Frame = <MemPort as Port>::Frame;
        fn caps(&self) -> &Capabilities {
            self.0.caps()
        }
        fn rx_burst(
            &mut self,
            queue: u16,
            out: &mut Vec<Self::Frame>,
            max: usize,
        ) -> Result<usize, PortError> {
            self.0.rx_burst(queue, out, max)
        }
        fn tx_burst(
            &mut self,
            queue: u16,
            frames: &mut Vec<Self::Frame>,
        ) -> Result<usize, PortError> {
            self.0.tx_burst(queue, frames)
        }
        fn alloc(&mut self, len: usize) -> Option<Self::Frame> {
            self.0.alloc(len)
        }
        fn kernel_rx_drops(&mut self) -> Option<u64> {
            Some(1)
        }
        fn tx_refusals(&mut self) -> Option<u64> {
            Some(2)
        }
        fn kernel_tx_drops(&mut self) -> Option<u64> {
            Some(3)
        }
        fn tx_queued(&mut self) -> Option<usize> {
            Some(4)
        }
    }

    /// Every switch port is a Capture, on or off: the counts the switch publishes must be the
    /// port's own, not the trait's `None`.
    #[test]
    fn capture_passes_the_ports_kernel_counts_through() {
        let (port, _peer) = MemPort::with_peer("c");
        let mut cap = Capture::off(Counting(port));
        assert_eq!(cap.kernel_rx_drops(), Some(1));
        assert_eq!(cap.tx_refusals(), Some(2));
        assert_eq!(cap.kernel_tx_drops(), Some(3));
        assert_eq!(cap.tx_queued(), Some(4));
    }
}
