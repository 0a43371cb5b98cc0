//! The frame-level half of `quench recv`: decodes each received frame, feeds test frames to the
//! [`Receiver`], tallies their ECN codepoints, writes the interval log, and acts as the DCQCN
//! notification point: a CE-marked frame asks for a CNP back to its sender.
//!
//! When to send a CNP is the np crate's decision ([`np::Np`]: one per flow per interval, or one
//! per marked frame); a TCD "undetermined encountered" frame is tallied but, as the np crate
//! reports it separately, sends nothing here (the RP's UE reaction is its own). A CNP goes to the data frame's source MAC and IPv4
//! address, with DSCP 48 and 802.1p priority 6 (protocols.md, NVIDIA defaults), DestQP = the
//! RoCEv2 frame's QP or, for quench test traffic over UDP, the flow id (quench's senders use the
//! flow id as their QP).
use hdrhistogram::Histogram;
use units::{Duration, Instant};

use super::{Accepted, Arrival, Receiver, RecvConfig};
use crate::report::{latency_histogram, IntervalLog, Summary, MAX_LATENCY_NS};
use crate::wire::frame::{decode, emit_cnp_reply, Body, IpBody, UdpBody};
use crate::wire::roce::MAX_QP;
use crate::wire::MacAddr;

pub use crate::wire::frame::CNP_PRIORITY;

/// Counters of frames that were not counted as test traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvCounters {
    /// Frames that failed to decode.
    pub malformed: u64,
    /// Decoded frames that are not quench test traffic (ARP, IPv6 ND, CNMs ...).
    pub other: u64,
    pub cnps_sent: u64,
    pub cnps_suppressed: u64,
}

/// One flow's closed interval on its way to the log: flow, start and duration (s), latency and
/// frame-length histograms.
/// A closed interval not yet in the log: one flow's latency and lengths, or (`flow` `None`) the
/// latency of every flow together.
struct Unlogged {
    flow: Option<u32>,
    start_s: f64,
    dur_s: f64,
    latency: Histogram<u64>,
    len: Option<Histogram<u64>>,
}

impl Unlogged {
    fn write(self, log: &mut IntervalLog) {
        // Into a Vec: cannot fail.
        let _ = match (self.flow, &self.len) {
            (Some(flow), Some(len)) => log.add(flow, self.start_s, self.dur_s, &self.latency, len),
            _ => log.add_all_flows(self.start_s, self.dur_s, &self.latency),
        };
    }
}

/// See the module docs. Call [`RecvWorker::on_frame`] per received frame with the receive time
/// in the senders' clock domain, [`RecvWorker::on_tick`] once per burst, [`RecvWorker::finish`]
/// at the end.
pub struct RecvWorker {
    rx: Receiver,
    all: Histogram<u64>,
    log: IntervalLog,
    /// Closed intervals not yet in the log, each flow's and then the all-flows one.
    /// Serialising one (two deflated histograms) takes ~0.2 ms; doing a whole interval's flows
    /// at once held the receive loop for 0.75 ms every interval with two flows, so one is
    /// written per tick instead.
    unlogged: std::collections::VecDeque<Unlogged>,
    interval: Duration,
    interval_start: Instant,
    start: Option<Instant>,
    last: Instant,
    ecn: [u64; 4],
    counters: RecvCounters,
    np: Option<np::Np>,
    mac: MacAddr,
}

impl RecvWorker {
    /// `mac` is this receiver's MAC (the CNP source); `np` the notification point (`None`: no
    /// CNPs); intervals of `interval` go to the log, whose times count from the first frame.
    pub fn new(
        cfg: RecvConfig,
        np: Option<np::NpProfile>,
        interval: Duration,
        mac: MacAddr,
    ) -> Self {
        RecvWorker {
            rx: Receiver::new(cfg),
            all: latency_histogram(),
            log: IntervalLog::new(0.0, "quench recv"),
            unlogged: std::collections::VecDeque::new(),
            interval,
            interval_start: Instant::ZERO,
            start: None,
            last: Instant::ZERO,
            ecn: [0; 4],
            counters: RecvCounters::default(),
            np: np.map(np::Np::new),
            mac,
        }
    }

    pub fn receiver(&self) -> &Receiver {
        &self.rx
    }

    pub fn counters(&self) -> RecvCounters {
        self.counters
    }

    /// Counts one frame; returns a CNP to send back when the notification point wants one,
    /// written into `cnp_buf` (its length is returned).
    pub fn on_frame(&mut self, now: Instant, frame: &[u8], cnp_buf: &mut [u8]) -> Option<usize> {
        let Ok(d) = decode(frame) else {
            self.counters.malformed += 1;
            return None;
        };
        let Body::Ipv4 {
            ip,
            body: IpBody::Udp { udp, body },
        } = d.body
        else {
            self.counters.other += 1;
            return None;
        };
        let (hdr, qp) = match body {
            UdpBody::Test(h) => (h, h.flow.0 & MAX_QP),
            UdpBody::Roce { bth, test: Some(h) } => (h, bth.dest_qp),
            _ => {
                self.counters.other += 1;
                return None;
            }
        };
        if self.start.is_none() {
            self.start = Some(now);
            self.interval_start = now;
        }
        self.last = now;
        let acc = self.rx.on_arrival(
            now,
            Arrival {
                flow: hdr.flow,
                seq: hdr.seq,
                tx: hdr.tx,
                len: frame.len() as u32,
            },
        );
        if acc == Accepted::Overflow {
            return None;
        }
        if hdr.tx <= now {
            let ns = (now - hdr.tx).as_nanos().clamp(1, MAX_LATENCY_NS);
            let _ = self.all.record(ns);
        }
        self.ecn[usize::from(ip.ecn.bits())] += 1;
        let np = self.np.as_mut()?;
        match crate::host::rp::np_arrival(np, now, hdr.flow, ip.ecn) {
            np::Decision::SendCnp => {}
            np::Decision::CnpSuppressed | np::Decision::TableFull => {
                self.counters.cnps_suppressed += 1;
                return None;
            }
            _ => return None,
        }
        // The CNP goes back where the data came from.
        let n = emit_cnp_reply(&d.l2, ip.src, ip.dst, udp.dst_port, self.mac, qp, cnp_buf).ok()?;
        self.counters.cnps_sent += 1;
        Some(n)
    }

    /// Closes the interval when it has passed, and writes at most one flow's interval to the
    /// log.
    pub fn on_tick(&mut self, now: Instant) {
        let Some(start) = self.start else { return };
        if let Some(u) = self.unlogged.pop_front() {
            u.write(&mut self.log);
        }
        if now.saturating_since(self.interval_start) < self.interval {
            return;
        }
        let t0 = self.interval_start.saturating_since(start).as_secs_f64();
        let dur = now.saturating_since(self.interval_start).as_secs_f64();
        let unlogged = &mut self.unlogged;
        let mut all: Option<Histogram<u64>> = None;
        self.rx.take_interval(|flow, lat, len| {
            match &mut all {
                // Same bounds and precision: adding cannot fail.
                Some(a) => {
                    let _ = a.add(lat);
                }
                None => all = Some(lat.clone()),
            }
            unlogged.push_back(Unlogged {
                flow: Some(flow.0),
                start_s: t0,
                dur_s: dur,
                latency: lat.clone(),
                len: Some(len.clone()),
            });
        });
        if let Some(latency) = all {
            unlogged.push_back(Unlogged {
                flow: None,
                start_s: t0,
                dur_s: dur,
                latency,
                len: None,
            });
        }
        self.interval_start = now;
    }

    /// Closes the last interval and summarises the run.
    pub fn finish(mut self, now: Instant) -> (Summary, Histogram<u64>, IntervalLog) {
        if self.start.is_some() {
            let iv = self.interval;
            self.interval = Duration::ZERO;
            self.on_tick(now.max(self.last));
            self.interval = iv;
        }
        for u in std::mem::take(&mut self.unlogged) {
            u.write(&mut self.log);
        }
        let dur = match self.start {
            Some(s) => self.last.saturating_since(s).as_secs_f64(),
            None => 0.0,
        };
        let mut s = self.rx.summary(dur, &self.all);
        s.ecn = self.ecn;
        s.cnps_sent = self.counters.cnps_sent;
        s.other_frames = self.counters.other + self.counters.malformed;
        (s, self.all, self.log)
    }
}

/// A 1000-octet test frame from 02:..:01:01 / 10.0.0.1 to 02:..:09:01 / 10.0.0.9, VLAN 1
/// priority 3, for unit tests here and in the switch.
#[cfg(test)]
pub(crate) fn test_frame(flow: u32, seq: u64, tx: u64, ecn: Ecn, rpid: Option<u16>) -> Vec<u8> {
    use crate::wire::ethernet::{ethertype, L2Repr, VlanTci};
    use crate::wire::frame::{emit_test_frame, Ipv4UdpHeaders};
    use crate::wire::testhdr::{TestHdrRepr, UDP_PORT};
    use std::net::Ipv4Addr;
    let mut l2 = L2Repr::new(
        MacAddr::new(2, 0, 0, 0, 9, 1),
        MacAddr::new(2, 0, 0, 0, 1, 1),
        ethertype::IPV4,
    )
    .with_vlan(VlanTci {
        pcp: 3,
        dei: false,
        vid: 1,
    });
    if let Some(r) = rpid {
        l2 = l2.with_cn_tag(r);
    }
    let h = Ipv4UdpHeaders {
        l2,
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 9),
        dscp: 0,
        ecn,
        src_port: 40000,
        dst_port: UDP_PORT,
    };
    let mut buf = vec![0; 1600];
    let hdr = TestHdrRepr::new(units::FlowId(flow), seq, Instant::from_nanos(tx));
    let n = emit_test_frame(&h, &hdr, 1000, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[cfg(test)]
use crate::wire::ipv4::Ecn;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::read_interval_log;
    use crate::wire::ipv4::CNP_DSCP;
    use std::net::Ipv4Addr;

    fn data(flow: u32, seq: u64, tx: u64, ecn: Ecn) -> Vec<u8> {
        test_frame(flow, seq, tx, ecn, None)
    }

    #[test]
    fn counts_test_frames_and_answers_ce_with_rate_limited_cnps() {
        let np = np::NpParams {
            min_time_between_cnps: 50,
            ..np::NpParams::default()
        };
        let mut w = RecvWorker::new(
            RecvConfig::default(),
            Some(np.profile().unwrap()),
            Duration::from_millis(1),
            MacAddr::new(2, 0, 0, 0, 9, 1),
        );
        let mut cnp = [0u8; 128];
        let mut cnps = Vec::new();
        for i in 0..100u64 {
            let now = 1_000_000 + i * 10_000; // 10 us apart
            let ecn = if i % 2 == 0 { Ecn::Ce } else { Ecn::Ect0 };
            if let Some(n) = w.on_frame(
                Instant::from_nanos(now),
                &data(7, i, now - 3_000, ecn),
                &mut cnp,
            ) {
                cnps.push(cnp[..n].to_vec());
            }
            w.on_tick(Instant::from_nanos(now));
        }
        assert!(w
            .on_frame(Instant::from_nanos(5), b"junk", &mut cnp)
            .is_none());
        // 50 CE frames 20 us apart over 1 ms, at most one CNP per 50 us: 17 (t = 0, 60, 120...).
        assert_eq!(cnps.len(), 17);
        let d = decode(&cnps[0]).unwrap();
        assert_eq!(d.l2.dst, MacAddr::new(2, 0, 0, 0, 1, 1));
        assert_eq!(d.l2.tags[0].unwrap().tci.pcp, 6);
        let Body::Ipv4 {
            ip,
            body:
                IpBody::Udp {
                    body: UdpBody::Roce { bth, .. },
                    ..
                },
        } = d.body
        else {
            panic!("{:?}", d.body)
        };
        assert_eq!(ip.dst, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(ip.dscp, CNP_DSCP);
        assert_eq!(bth.opcode, 0x81);
        assert!(bth.becn);
        assert_eq!(bth.dest_qp, 7);
        let (s, all, log) = w.finish(Instant::from_nanos(2_000_000));
        assert_eq!(s.flows.len(), 1);
        assert_eq!(s.flows[0].frames, 100);
        assert_eq!(s.ecn, [0, 0, 50, 50]);
        assert_eq!(s.cnps_sent, 17);
        assert_eq!(s.other_frames, 1);
        assert!(all.equivalent(all.value_at_quantile(0.5), 3_000));
        let ivs = read_interval_log(std::path::Path::new("t"), log.as_bytes()).unwrap();
        assert_eq!(ivs.iter().map(|i| i.len.len()).sum::<u64>(), 100);
        // The untagged all-flows histograms, merged, are the run's latency histogram.
        let mut merged = crate::report::latency_histogram();
        let mut untagged = 0;
        let mut de = hdrhistogram::serialization::Deserializer::new();
        for e in hdrhistogram::serialization::interval_log::IntervalLogIterator::new(log.as_bytes())
        {
            let hdrhistogram::serialization::interval_log::LogEntry::Interval(iv) = e.unwrap()
            else {
                continue;
            };
            if iv.tag().is_some() {
                continue;
            }
            untagged += 1;
            use base64::Engine as _;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(iv.encoded_histogram())
                .unwrap();
            let h: Histogram<u64> = de.deserialize(&mut std::io::Cursor::new(raw)).unwrap();
            merged.add(&h).unwrap();
        }
        assert_eq!(
            untagged,
            ivs.len(),
            "one all-flows histogram per interval of one flow"
        );
        assert_eq!(merged, all);
    }

    #[test]
    fn per_frame_cnps_in_per_packet_mode() {
        let np = np::NpParams {
            cnp_mode: np::CnpMode::PerPacket,
            ..np::NpParams::default()
        };
        let mut w = RecvWorker::new(
            RecvConfig::default(),
            Some(np.profile().unwrap()),
            Duration::from_millis(1),
            MacAddr::zero(),
        );
        let mut cnp = [0u8; 128];
        let n = (0..10u64)
            .filter(|&i| {
                w.on_frame(
                    Instant::from_nanos(1000 + i),
                    &data(1, i, 0, Ecn::Ce),
                    &mut cnp,
                )
                .is_some()
            })
            .count();
        assert_eq!(n, 10);
    }
}
