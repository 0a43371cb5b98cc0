//! A port wrapper that writes every frame the wrapped port receives or transmits to a pcap
//! file (`--capture PORT=FILE`). With no file it is a pass-through costing one branch per burst.
//!
//! The file is classic pcap with nanosecond timestamps ([`quench_wire::pcap::PcapWriter`]: magic
//! a1b23c4d, LINKTYPE_ETHERNET), readable by tcpdump, tshark and Wireshark. Every frame has a
//! timestamp of its own: a received frame the kernel stamped (AF_PACKET) gets its kernel
//! receive time; every other frame the engine clock read as it is written (a TSC read, ~10 ns,
//! beside the copy of the frame into the file's buffer; capture is a diagnostic, off the
//! datapath's per-burst clock budget). Times are wall-clock: the wall clock at open plus the
//! time elapsed since on the engine's clock.
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use units::{Duration, Instant};

use super::heap::Carried;
use super::{Capabilities, Frame, Port, PortError, PortStats};
use quench_wire::pcap::PcapWriter;
use quench_wire::time::{shared_now, Clock};

/// The capture file and the clock readings that put its records on the wall clock.
struct CaptureFile {
    pcap: PcapWriter<BufWriter<File>>,
    /// Wall-clock nanoseconds at open.
    wall0: u64,
    /// The engine clock and [`shared_now`] at open.
    clock0: Instant,
    shared0: Instant,
}

impl CaptureFile {
    fn create(path: &Path, clock: &Clock) -> std::io::Result<CaptureFile> {
        let pcap = PcapWriter::new(BufWriter::new(File::create(path)?))?;
        #[allow(clippy::disallowed_methods)]
        // reason: pcap records need wall-clock time; read once at open
        let wall0 = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Ok(CaptureFile {
            pcap,
            wall0,
            clock0: clock.now(),
            shared0: shared_now(),
        })
    }

    /// Appends `frame`, seen `elapsed` after the open.
    fn write(&mut self, elapsed: Duration, frame: &[u8]) -> std::io::Result<()> {
        let ts = Instant::from_nanos(self.wall0.saturating_add(elapsed.as_nanos()));
        self.pcap.write(ts, frame)
    }

    /// Time since the open on the engine clock, read now.
    fn elapsed(&self, clock: &Clock) -> Duration {
        clock.now().saturating_since(self.clock0)
    }
}

/// Wraps a port; records its rx and tx when a writer is set.
pub struct Capture<P> {
    inner: P,
    pcap: Option<CaptureFile>,
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
        let pcap = CaptureFile::create(path, &clock).map_err(|e| PortError::Io {
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
            if p.pcap.flush().is_err() {
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
        let mut at = 0;
        for &len in self.staged_lens.iter().take(sent) {
            let t = pcap.elapsed(&self.clock);
            if pcap.write(t, &self.staged[at..at + len]).is_err() {
                self.write_errors += 1;
            }
            at += len;
        }
    }

    /// Writes frames just received, each at its kernel receive time when it has one.
    pub fn record_rx(&mut self, frames: &[P::Frame]) {
        let Some(pcap) = &mut self.pcap else { return };
        for f in frames {
            let t = match f.rx_stamp() {
                Some(s) => s.at.saturating_since(pcap.shared0),
                None => pcap.elapsed(&self.clock),
            };
            if pcap.write(t, f.data()).is_err() {
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

    fn wait_handle(&self, out: &mut Vec<std::os::fd::RawFd>) {
        self.inner.wait_handle(out)
    }

    fn import(&mut self, bytes: &[u8]) -> Option<P::Frame> {
        self.inner.import(bytes)
    }

    fn land(&mut self, frame: Carried) -> Option<P::Frame> {
        self.inner.land(frame)
    }

    fn poll(&mut self) -> Result<(), PortError> {
        self.inner.poll()
    }

    fn stats(&mut self) -> PortStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemPort;

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
        // Nanosecond pcap: the two records read back, each with its own time, in order.
        assert_eq!(&bytes[..4], &quench_wire::pcap::MAGIC_NANOS.to_le_bytes());
        let recs: Vec<_> = quench_wire::pcap::PcapReader::new(&bytes)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(recs.len(), 2);
        assert!(recs.iter().all(|r| r.data == [1; 60]));
        assert!(recs[0].ts <= recs[1].ts);
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
        fn stats(&mut self) -> PortStats {
            PortStats {
                rx_kernel_drops: Some(1),
                tx_refusals: Some(2),
                tx_kernel_drops: Some(3),
                tx_queued: Some(4),
            }
        }
    }

    /// Every switch port is a Capture, on or off: the counts the switch publishes must be the
    /// port's own, not the trait's `None`.
    #[test]
    fn capture_passes_the_ports_kernel_counts_through() {
        let (port, _peer) = MemPort::with_peer("c");
        let mut cap = Capture::off(Counting(port));
        let s = cap.stats();
        assert_eq!(s.rx_kernel_drops, Some(1));
        assert_eq!(s.tx_refusals, Some(2));
        assert_eq!(s.tx_kernel_drops, Some(3));
        assert_eq!(s.tx_queued, Some(4));
    }
}
