//! The receiver on one port as a poll-loop step: `quench recv` runs it alone, `quench send
//! --sink` in the sender's loop. Frame I/O and the periodic PFC PAUSE of `--pfc-pause`; the
//! measuring and the notification point are [`super::worker::RecvWorker`]'s, the printing the
//! command's.
use hdrhistogram::Histogram;
use units::Duration;

use crate::recv::worker::RecvWorker;
use crate::recv::RecvConfig;
use quench_node::host::announce::Announcer;
use quench_port::any::AnyFrame;
use quench_port::netns::NsPort;
use quench_port::{Port, BURST};
use quench_report::{IntervalLog, Summary};
use quench_wire::frame::announce_frame;
use quench_wire::time::shared_now;
use quench_wire::MacAddr;

/// `--interval`'s default, also `quench send --sink`'s interval.
pub const DEFAULT_INTERVAL_MS: u64 = 100;
/// `--max-flows`'s default, also `quench send --sink`'s.
pub const DEFAULT_MAX_FLOWS: usize = 4096;

/// `--pfc-pause PERIOD_US:PAUSE_US` -> (period, PAUSE frame).
fn pause_plan(
    spec: &str,
    src: MacAddr,
) -> anyhow::Result<(Duration, [u8; quench_wire::pfc::FRAME_LEN])> {
    let bad = || anyhow::anyhow!("--pfc-pause {spec:?}: expected PERIOD_US:PAUSE_US, e.g. 400:200");
    let (p, d) = spec.split_once(':').ok_or_else(bad)?;
    let period: u64 = p.trim().parse().map_err(|_| bad())?;
    let pause: u64 = d.trim().parse().map_err(|_| bad())?;
    if period == 0 || pause == 0 || pause >= period {
        anyhow::bail!("--pfc-pause {spec:?}: needs 0 < PAUSE_US < PERIOD_US");
    }
    let quanta = quench_wire::pfc::duration_to_quanta(
        Duration::from_micros(pause),
        units::Rate::from_gbps(1),
    );
    let mut frame = [0u8; quench_wire::pfc::FRAME_LEN];
    quench_wire::pfc::emit_frame(
        src,
        &quench_wire::pfc::PfcRepr::pause(1 << 3, quanta),
        &mut frame,
    )
    .map_err(|e| anyhow::anyhow!("--pfc-pause: {e}"))?;
    Ok((Duration::from_micros(period), frame))
}

/// The notification point `--preset NAME|FILE` configures (its `[np]` table), or the default
/// one.
pub fn np_profile(preset: Option<&str>) -> anyhow::Result<np::NpProfile> {
    use anyhow::Context as _;
    let p = match preset {
        Some(arg) => {
            let src = quench_config::bundled::open(arg, quench_config::bundled::Kind::Preset, None)
                .with_context(|| format!("--preset {arg}"))?;
            quench_config::bundled::table(&src, "np")?.unwrap_or_default()
        }
        None => np::NpParams::default(),
    };
    p.profile().map_err(|e| anyhow::anyhow!("[np] {e}"))
}

/// What configures a receiver beyond its port: `quench recv`'s options, or `quench send
/// --sink`'s defaults.
pub struct SinkOptions {
    /// `None`: send no CNPs.
    pub np: Option<np::NpProfile>,
    pub interval: Duration,
    pub max_flows: usize,
    pub pfc_pause: Option<String>,
    /// Send every test frame back to its sender (`--reflect`).
    pub reflect: bool,
    /// Acknowledge test frames every this many octets of a flow (`--ack-interval`).
    pub ack_interval: Option<u64>,
    /// This host's clock id ([`quench_wire::time::clock_id`]): one-way latency only for frames
    /// stamped on it.
    pub clock: u32,
}

impl SinkOptions {
    /// `quench recv`'s defaults, with notification point `np` (`None`: no CNPs).
    pub fn defaults(np: Option<np::NpProfile>) -> SinkOptions {
        SinkOptions {
            np,
            interval: Duration::from_millis(DEFAULT_INTERVAL_MS),
            max_flows: DEFAULT_MAX_FLOWS,
            pfc_pause: None,
            reflect: false,
            ack_interval: None,
            clock: quench_wire::time::clock_id(),
        }
    }
}

/// The receiver on one port, one [`Sink::step`] per poll-loop iteration: `quench recv` runs it
/// alone, `quench send --sink` in the sender's loop (one busy-polling process for a host that
/// both sends and receives, on a machine with fewer cores than hosts).
pub struct Sink {
    port: NsPort,
    w: RecvWorker,
    rx: Vec<AnyFrame>,
    tx: Vec<AnyFrame>,
    /// CNPs and reflected frames the port had no buffer or ring space for.
    tx_drops: u64,
    pauser: Option<(Duration, [u8; quench_wire::pfc::FRAME_LEN])>,
    next_pause: units::Instant,
    pauses_sent: u64,
    /// This port's MAC, announced to the bridges ([`Announcer`]): a receiver that sends nothing
    /// else (QCN's) would be forgotten, and every frame to it flooded to every host.
    announce: Option<[u8; quench_wire::ethernet::MIN_FRAME_LEN]>,
    announcer: Announcer,
    announce_drops: u64,
}

impl Sink {
    /// The receiver on `port`, opened by the caller.
    pub fn new(port: NsPort, opts: SinkOptions) -> anyhow::Result<Sink> {
        let mac_known = port.caps().mac.is_some();
        let mac = port.caps().mac.unwrap_or_else(MacAddr::zero);
        let mut w = RecvWorker::new(
            RecvConfig {
                max_flows: opts.max_flows,
                ..RecvConfig::on_clock(opts.clock)
            },
            opts.np,
            opts.interval,
            mac,
        );
        if opts.reflect {
            w = w.reflecting();
        }
        if let Some(i) = opts.ack_interval {
            w = w.acking(i);
        }
        let pauser = opts
            .pfc_pause
            .as_deref()
            .map(|spec| pause_plan(spec, mac))
            .transpose()?;
        Ok(Sink {
            w,
            rx: Vec::with_capacity(BURST),
            tx: Vec::with_capacity(2 * BURST),
            tx_drops: 0,
            pauser,
            port,
            next_pause: shared_now(),
            pauses_sent: 0,
            announce: mac_known.then(|| announce_frame(mac)),
            announcer: Announcer::default(),
            announce_drops: 0,
        })
    }

    /// Reads one burst, answers it, runs the timers. Returns the frames read and the time the
    /// burst was read (`CLOCK_MONOTONIC`, after the burst arrived); a frame's receive time is its
    /// kernel stamp when the port has one, else this.
    pub fn step(&mut self) -> anyhow::Result<(usize, units::Instant)> {
        let port = &mut *self.port;
        port.rx_burst(0, &mut self.rx, BURST)?;
        let n = self.rx.len();
        let now = shared_now();
        let (tx, tx_drops) = (&mut self.tx, &mut self.tx_drops);
        for f in self.rx.drain(..) {
            use quench_port::Frame as _;
            self.w.on_frame(
                now,
                f.rx_stamp(),
                f.data(),
                &mut |reply| match port.import(reply) {
                    Some(c) => tx.push(c),
                    None => *tx_drops += 1,
                },
            );
        }
        if !self.tx.is_empty() {
            port.tx_burst(0, &mut self.tx)?;
            // Replies the ring could not take are dropped (freed): the next mark asks again,
            // a reflected frame counts as lost on the way back.
            self.tx_drops += self.tx.len() as u64;
            self.tx.clear();
        }
        self.w.on_tick(now);
        if let Some((period, frame)) = &self.pauser {
            if now >= self.next_pause {
                self.next_pause = now + *period;
                if let Some(f) = port.import(frame) {
                    self.tx.push(f);
                    port.tx_burst(0, &mut self.tx)?;
                    self.pauses_sent += 1 - self.tx.len() as u64;
                    self.tx.clear();
                }
            }
        }
        if let Some(frame) = &self.announce {
            if self.announcer.due(now) {
                match port.import(frame) {
                    Some(f) => {
                        self.tx.push(f);
                        port.tx_burst(0, &mut self.tx)?;
                        self.announce_drops += self.tx.len() as u64;
                        self.tx.clear();
                    }
                    None => self.announce_drops += 1,
                }
            }
        }
        port.poll()?;
        Ok((n, now))
    }

    /// When the sink next has work that no received frame announces (`--pfc-pause`'s next
    /// PAUSE, the next announcement of its address), on the shared clock ([`shared_now`]).
    pub fn next_deadline(&self) -> Option<units::Instant> {
        let pause = self.pauser.as_ref().map(|_| self.next_pause);
        let announce = self.announce.and(self.announcer.next_deadline());
        match (pause, announce) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The port's wait handle ([`Port::wait_handle`]), for a loop that waits on it.
    pub fn wait_handle(&self, out: &mut Vec<std::os::fd::RawFd>) {
        self.port.wait_handle(out)
    }

    /// The receiver, for progress.
    pub fn worker(&self) -> &RecvWorker {
        &self.w
    }

    /// Closes the last interval and summarises the run.
    pub fn finish(mut self) -> SinkEnd {
        use quench_port::Port as _;
        let c = self.w.counters();
        let drops = self.port.stats().rx_kernel_drops;
        let (mut summary, all, log) = self.w.finish(shared_now());
        summary.rx_kernel_drops = drops;
        SinkEnd {
            summary,
            latency: all,
            log,
            reply_tx_drops: self.tx_drops,
            reflected: c.reflected,
            acks_sent: c.acks_sent,
            acks_with_int: c.acks_with_int,
            pauses_sent: self.pauses_sent,
            cnps_suppressed: c.cnps_suppressed,
            announced: self.announcer.sent() - self.announce_drops,
        }
    }
}

/// What a [`Sink`] measured, for the report.
pub struct SinkEnd {
    pub summary: Summary,
    /// Every flow's latency, merged.
    pub latency: Histogram<u64>,
    pub log: IntervalLog,
    /// CNPs and reflected frames not sent (no buffer, transmit ring full).
    pub reply_tx_drops: u64,
    /// Test frames sent back to their sender (`--reflect`).
    pub reflected: u64,
    /// ACKs sent (`--ack-interval`), and of them those echoing an INT header.
    pub acks_sent: u64,
    pub acks_with_int: u64,
    /// PFC PAUSE frames sent (`--pfc-pause`).
    pub pauses_sent: u64,
    /// CNPs the notification point's interval suppressed.
    pub cnps_suppressed: u64,
    /// Announcements of the port's address sent ([`Announcer`]).
    pub announced: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pfc_pause_spec_is_checked_and_becomes_a_pfc_frame() {
        let (period, f) = pause_plan("400:200", MacAddr::zero()).unwrap();
        assert_eq!(period, Duration::from_micros(400));
        let pdu = quench_wire::pfc::PfcRepr::parse(&f[14..]).unwrap();
        assert!(pdu.enabled(3));
        // 200 us at 1 Gbit/s = 200000 bit times / 512 = 390.6 -> 391 quanta.
        assert_eq!(pdu.quanta[3], 391);
        for bad in ["400", "a:b", "200:400", "0:0", "400:0"] {
            let e = pause_plan(bad, MacAddr::zero()).unwrap_err().to_string();
            assert!(e.contains("--pfc-pause"), "{bad}: {e}");
        }
    }
}
