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
//!
//! A reflector (`quench recv --reflect`, [`RecvWorker::reflecting`]) also sends every UDP test
//! frame back to its sender ([`reflect_into`]). The sender measures the round trip with a worker
//! of its own that takes only the frames reflected to it ([`RecvWorker::round_trip`]).
use std::net::Ipv4Addr;

use hdrhistogram::Histogram;
use units::{Duration, Instant};

use super::{Accepted, Arrival, Receiver, RecvConfig};
use quench_port::{RxStamp, StampSource};
use quench_report::{latency_histogram, IntervalLog, LatencyKind, RxTimestamps, Summary};
use quench_wire::ack::{self, AckRepr};
use quench_wire::frame::{decode, emit_ack_reply, emit_cnp_reply, Body, IpBody, UdpBody};
use quench_wire::int::IntRepr;
use quench_wire::ipv4::Ecn;
use quench_wire::roce::MAX_QP;
use quench_wire::testhdr::UDP_PORT;
use quench_wire::MacAddr;

pub use quench_wire::frame::CNP_PRIORITY;

/// Counters of frames that were not counted as test traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvCounters {
    /// Frames that failed to decode.
    pub malformed: u64,
    /// Decoded frames that are not quench test traffic (ARP, IPv6 ND, CNMs ...).
    pub other: u64,
    pub cnps_sent: u64,
    pub cnps_suppressed: u64,
    /// Test frames sent back to their sender (`--reflect`).
    pub reflected: u64,
    /// ACKs sent (`--ack-interval`), and of them those echoing INT hops.
    pub acks_sent: u64,
    pub acks_with_int: u64,
}

/// The ACKs of the ACK-driven congestion controls (`quench recv --ack-interval`): per flow,
/// octets received against the next milestone, as ns-3's `RdmaHw::ReceiverCheckSeq` counts
/// them (`m_milestone_rx` starts at, and steps by, `L2_ACK_INTERVAL`).
struct Acker {
    interval: u64,
    /// Flow id -> (octets received, next milestone).
    flows: std::collections::HashMap<u32, (u64, u64)>,
    buf: Vec<u8>,
}

impl Acker {
    /// Counts a frame of `len` octets of `flow`: whether it is due an ACK.
    fn due(&mut self, flow: u32, len: u64) -> bool {
        let interval = self.interval;
        let (rx, milestone) = self.flows.entry(flow).or_insert((0, interval));
        *rx += len;
        if *rx >= *milestone {
            *milestone += interval;
            return true;
        }
        false
    }
}

/// Writes into `out` the IPv4/UDP test frame `frame` (its L2 header `l2_len` octets) sent back to
/// its sender: Ethernet addresses swapped (the new source is `mac` unless it is zero), IPv4
/// addresses and UDP ports swapped; tags, ECN and the test header with its transmit stamp and
/// clock id stay as they came. Both checksums stay valid: each is a ones' complement sum of
/// 16-bit words (RFC 1071), which a swap of words does not change. `None` when the frame is too
/// short for the headers it claims.
pub fn reflect_into(frame: &[u8], l2_len: usize, mac: MacAddr, out: &mut Vec<u8>) -> Option<()> {
    let ihl = usize::from(*frame.get(l2_len)? & 0x0f) * 4;
    let udp = l2_len + ihl;
    if ihl < 20 || frame.len() < udp + 8 {
        return None;
    }
    out.clear();
    out.extend_from_slice(frame);
    out[0..6].copy_from_slice(&frame[6..12]);
    if mac != MacAddr::zero() {
        out[6..12].copy_from_slice(&mac.octets());
    } else {
        out[6..12].copy_from_slice(&frame[0..6]);
    }
    let ip = l2_len;
    out[ip + 12..ip + 16].copy_from_slice(&frame[ip + 16..ip + 20]);
    out[ip + 16..ip + 20].copy_from_slice(&frame[ip + 12..ip + 16]);
    out[udp..udp + 2].copy_from_slice(&frame[udp + 2..udp + 4]);
    out[udp + 2..udp + 4].copy_from_slice(&frame[udp..udp + 2]);
    Some(())
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
    /// `Some(ip)`: a round-trip meter taking only test frames reflected to `ip`.
    reflected_to: Option<Ipv4Addr>,
    /// Send every UDP test frame back (`--reflect`).
    reflect: bool,
    reflect_buf: Vec<u8>,
    stamps: RxTimestamps,
    ack: Option<Acker>,
}

impl RecvWorker {
    /// `mac` is this receiver's MAC (the CNP and reflection source); `np` the notification point
    /// (`None`: no CNPs); intervals of `interval` go to the log, whose times count from the
    /// first frame.
    pub fn new(
        cfg: RecvConfig,
        np: Option<np::NpProfile>,
        interval: Duration,
        mac: MacAddr,
    ) -> Self {
        RecvWorker {
            rx: Receiver::new(cfg),
            all: latency_histogram(),
            log: IntervalLog::new(
                0.0,
                match cfg.kind {
                    LatencyKind::OneWay => "quench recv",
                    LatencyKind::Rtt => "quench send: round trip of reflected frames",
                },
                cfg.kind,
            ),
            unlogged: std::collections::VecDeque::new(),
            interval,
            interval_start: Instant::ZERO,
            start: None,
            last: Instant::ZERO,
            ecn: [0; 4],
            counters: RecvCounters::default(),
            np: np.map(np::Np::new),
            mac,
            reflected_to: None,
            reflect: false,
            reflect_buf: Vec::new(),
            stamps: RxTimestamps::default(),
            ack: None,
        }
    }

    /// This receiver also acknowledges UDP test frames: one ACK ([`quench_wire::ack`]) each
    /// time a flow's octets received pass the next multiple of `interval` (L2_ACK_INTERVAL),
    /// echoing the frame's sequence number, transmit stamp, CE mark and INT header.
    pub fn acking(mut self, interval: u64) -> Self {
        self.ack = Some(Acker {
            interval: interval.max(1),
            flows: std::collections::HashMap::new(),
            buf: vec![0; 256],
        });
        self
    }

    /// This receiver also sends every UDP test frame back to its sender (see [`reflect_into`]).
    pub fn reflecting(mut self) -> Self {
        self.reflect = true;
        self
    }

    /// The sender's round-trip meter: takes only test frames reflected back to `src_ip` (UDP
    /// source port [`UDP_PORT`], a reflector's answer) and measures them against `clock`, the
    /// clock id the sender stamps; no notification point.
    pub fn round_trip(clock: u32, src_ip: Ipv4Addr, interval: Duration, mac: MacAddr) -> Self {
        let cfg = RecvConfig {
            kind: LatencyKind::Rtt,
            ..RecvConfig::on_clock(clock)
        };
        RecvWorker {
            reflected_to: Some(src_ip),
            ..RecvWorker::new(cfg, None, interval, mac)
        }
    }

    pub fn receiver(&self) -> &Receiver {
        &self.rx
    }

    pub fn counters(&self) -> RecvCounters {
        self.counters
    }

    /// Counts one frame read in the burst of `now` (the loop's clock read after the burst), which
    /// the kernel stamped `stamp` when the port asks it for stamps; latency and goodput use the
    /// stamp when there is one. Hands `reply` each frame to send back (a CNP when the
    /// notification point wants one, the frame itself when reflecting). Returns whether the
    /// frame was a test frame this worker took (a round-trip meter takes only reflections to
    /// its sender and leaves the rest, uncounted, to the caller).
    pub fn on_frame(
        &mut self,
        now: Instant,
        stamp: Option<RxStamp>,
        frame: &[u8],
        reply: &mut impl FnMut(&[u8]),
    ) -> bool {
        let Ok(d) = decode(frame) else {
            if self.reflected_to.is_none() {
                self.counters.malformed += 1;
            }
            return false;
        };
        let Body::Ipv4 {
            ip,
            body: IpBody::Udp { udp, body },
        } = d.body
        else {
            if self.reflected_to.is_none() {
                self.counters.other += 1;
            }
            return false;
        };
        let (hdr, qp) = match body {
            UdpBody::Test(h) => (h, h.flow.0 & MAX_QP),
            UdpBody::Roce { bth, test: Some(h) } => (h, bth.dest_qp),
            _ => {
                if self.reflected_to.is_none() {
                    self.counters.other += 1;
                }
                return false;
            }
        };
        if let Some(me) = self.reflected_to {
            if ip.dst != me || udp.src_port != UDP_PORT {
                return false;
            }
        }
        if self.start.is_none() {
            self.start = Some(now);
            self.interval_start = now;
        }
        self.last = now;
        let at = match stamp {
            Some(s) => {
                match s.source {
                    StampSource::Hardware => self.stamps.hardware += 1,
                    StampSource::Software => self.stamps.software += 1,
                    StampSource::Ring => self.stamps.ring += 1,
                }
                s.at
            }
            None => {
                self.stamps.poll_loop += 1;
                now
            }
        };
        let (acc, latency) = self.rx.on_arrival(
            at,
            Arrival {
                flow: hdr.flow,
                seq: hdr.seq,
                tx: hdr.tx,
                clock: hdr.clock,
                len: frame.len() as u32,
            },
        );
        if acc == Accepted::Overflow {
            return true;
        }
        if let Some(ns) = latency {
            let _ = self.all.record(ns);
        }
        self.ecn[usize::from(ip.ecn.bits())] += 1;
        if self.reflect && matches!(body, UdpBody::Test(_)) {
            let l2_len = d.l2.buffer_len();
            if reflect_into(frame, l2_len, self.mac, &mut self.reflect_buf).is_some() {
                reply(&self.reflect_buf);
                self.counters.reflected += 1;
            }
        }
        if let (Some(a), UdpBody::Test(_)) = (self.ack.as_mut(), body) {
            if a.due(hdr.flow.0, frame.len() as u64) {
                let l2_len = d.l2.buffer_len();
                let int = quench_wire::frame::int_offset(frame, l2_len)
                    .and_then(|at| IntRepr::parse(&frame[at..]).ok());
                let ack = AckRepr {
                    flags: if ip.ecn == Ecn::Ce { ack::FLAG_ECE } else { 0 },
                    reserved: 0,
                    flow: hdr.flow,
                    seq: hdr.seq,
                    tx: hdr.tx,
                    int,
                };
                let sent = emit_ack_reply(
                    &d.l2,
                    ip.src,
                    ip.dst,
                    udp.src_port,
                    ip.dscp,
                    self.mac,
                    &ack,
                    &mut a.buf,
                );
                if let Ok(n) = sent {
                    self.counters.acks_sent += 1;
                    self.counters.acks_with_int += u64::from(int.is_some());
                    reply(&a.buf[..n]);
                }
            }
        }
        let Some(np) = self.np.as_mut() else {
            return true;
        };
        match quench_node::host::rp::np_arrival(np, now, hdr.flow, ip.ecn) {
            np::Decision::SendCnp => {}
            np::Decision::CnpSuppressed | np::Decision::TableFull => {
                self.counters.cnps_suppressed += 1;
                return true;
            }
            _ => return true,
        }
        // The CNP goes back where the data came from.
        let mut cnp = [0u8; 128];
        if let Ok(n) = emit_cnp_reply(&d.l2, ip.src, ip.dst, udp.dst_port, self.mac, qp, &mut cnp) {
            self.counters.cnps_sent += 1;
            reply(&cnp[..n]);
        }
        true
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
        s.rx_timestamps = self.stamps.clone();
        s.cnps_sent = self.counters.cnps_sent;
        s.other_frames = self.counters.other + self.counters.malformed;
        (s, self.all, self.log)
    }
}

#[cfg(test)]
use quench_wire::frame::{test_frame, TEST_CLOCK};

#[cfg(test)]
mod tests {
    use super::*;
    use quench_report::read_interval_log;
    use quench_wire::ipv4::CNP_DSCP;
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
            RecvConfig::on_clock(TEST_CLOCK),
            Some(np.profile().unwrap()),
            Duration::from_millis(1),
            MacAddr::new(2, 0, 0, 0, 9, 1),
        );
        let mut cnps = Vec::new();
        for i in 0..100u64 {
            let now = 1_000_000 + i * 10_000; // 10 us apart
            let ecn = if i % 2 == 0 { Ecn::Ce } else { Ecn::Ect0 };
            w.on_frame(
                Instant::from_nanos(now),
                None,
                &data(7, i, now - 3_000, ecn),
                &mut |f| cnps.push(f.to_vec()),
            );
            w.on_tick(Instant::from_nanos(now));
        }
        assert!(
            !w.on_frame(Instant::from_nanos(5), None, b"junk", &mut |_| panic!(
                "reply"
            ))
        );
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
        let ivs = read_interval_log(std::path::Path::new("t"), &log.bytes().unwrap()).unwrap();
        assert_eq!(ivs.iter().map(|i| i.len.len()).sum::<u64>(), 100);
        // The untagged all-flows histograms, merged, are the run's latency histogram.
        let mut merged = quench_report::latency_histogram();
        let mut untagged = 0;
        let mut de = hdrhistogram::serialization::Deserializer::new();
        for e in hdrhistogram::serialization::interval_log::IntervalLogIterator::new(
            &log.bytes().unwrap(),
        ) {
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
            RecvConfig::on_clock(TEST_CLOCK),
            Some(np.profile().unwrap()),
            Duration::from_millis(1),
            MacAddr::zero(),
        );
        let mut n = 0;
        for i in 0..10u64 {
            w.on_frame(
                Instant::from_nanos(1000 + i),
                None,
                &data(1, i, 0, Ecn::Ce),
                &mut |_| n += 1,
            );
        }
        assert_eq!(n, 10);
    }

    #[test]
    fn a_reflected_frame_goes_back_intact_and_the_sender_times_its_round_trip() {
        let me = MacAddr::new(2, 0, 0, 0, 9, 1);
        let mut reflector = RecvWorker::new(
            RecvConfig::on_clock(0x77),
            None,
            Duration::from_millis(1),
            me,
        )
        .reflecting();
        let sent = data(4, 0, 1_000, Ecn::Ect0);
        let mut back = Vec::new();
        let kernel = RxStamp {
            at: Instant::from_nanos(2_000),
            source: StampSource::Software,
        };
        assert!(
            reflector.on_frame(Instant::from_nanos(9_000), Some(kernel), &sent, &mut |f| {
                back.push(f.to_vec())
            })
        );
        assert_eq!(back.len(), 1);
        let b = decode(&back[0]).unwrap();
        let f = decode(&sent).unwrap();
        assert_eq!((b.l2.dst, b.l2.src), (f.l2.src, me));
        assert_eq!(b.l2.tags, f.l2.tags);
        let (
            Body::Ipv4 {
                ip: bip,
                body:
                    IpBody::Udp {
                        udp: budp,
                        body: UdpBody::Test(bh),
                    },
            },
            Body::Ipv4 {
                ip: fip,
                body:
                    IpBody::Udp {
                        udp: fudp,
                        body: UdpBody::Test(fh),
                    },
            },
        ) = (b.body, f.body)
        else {
            panic!("{:?}", b.body)
        };
        // decode checks both checksums: the swap kept them valid.
        assert_eq!((bip.src, bip.dst), (fip.dst, fip.src));
        assert_eq!(
            (budp.src_port, budp.dst_port),
            (fudp.dst_port, fudp.src_port)
        );
        assert_eq!(bh, fh, "test header (stamp and clock) untouched");
        // The reflector's clock is not the sender's: its one-way figure is refused.
        let (s, _, _) = reflector.finish(Instant::from_nanos(10_000));
        assert_eq!(s.flows[0].foreign_clock, 1);
        assert!(s.one_way_refused.is_some());
        assert_eq!(s.rx_timestamps.software, 1);
        // The sender (10.0.0.1) takes the reflection, not its own forward frame.
        let mut rtt = RecvWorker::round_trip(
            TEST_CLOCK,
            Ipv4Addr::new(10, 0, 0, 1),
            Duration::from_millis(1),
            MacAddr::new(2, 0, 0, 0, 1, 1),
        );
        assert!(!rtt.on_frame(Instant::from_nanos(50_000), None, &sent, &mut |_| panic!()));
        assert!(!rtt.on_frame(
            Instant::from_nanos(50_000),
            None,
            b"junk",
            &mut |_| panic!()
        ));
        assert!(rtt.on_frame(
            Instant::from_nanos(51_000),
            None,
            &back[0],
            &mut |_| panic!()
        ));
        let (s, all, log) = rtt.finish(Instant::from_nanos(60_000));
        assert_eq!(s.latency_kind, LatencyKind::Rtt);
        assert_eq!(s.one_way_refused, None);
        assert_eq!((s.flows[0].frames, s.other_frames), (1, 0));
        assert!(all.equivalent(all.value_at_quantile(0.5), 50_000));
        let text = String::from_utf8_lossy(&log.bytes().unwrap()).to_string();
        assert!(text.contains("lat.<flow> = rtt (ns)"), "{text}");
        // Too short for the headers it claims: nothing to send back.
        let mut out = Vec::new();
        assert!(reflect_into(&sent[..40], 18, me, &mut out).is_none());
    }
}
