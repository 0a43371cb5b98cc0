//! `quench recv`: the receiver and DCQCN notification point on one interface.
//!
//! Busy-polls an AF_PACKET port for `--duration-s` seconds, counts quench test frames per flow
//! (goodput, loss, reordering, one-way latency against the senders' `CLOCK_MONOTONIC` stamps),
//! answers CE marks with RoCEv2 CNPs as the np crate decides (`--np FILE`, the `[np]` table of a
//! preset such as configs/nvidia.toml; `--no-cnp` to stay silent), and at the end prints the
//! summary table and one JSON line, and writes the report directory (`--out DIR`: summary.json,
//! latency.hgrm, intervals.hlog, rate.svg, latency.svg).
use std::path::PathBuf;

use units::Duration;

use crate::port::any::AnyFrame;
use crate::port::{Port, BURST};
use crate::recv::worker::RecvWorker;
use crate::recv::RecvConfig;
use crate::report;
use crate::time::shared_now;
use crate::wire::MacAddr;

/// `--interval-ms`'s default, also `quench send --sink`'s interval.
const DEFAULT_INTERVAL_MS: u64 = 100;
/// `--max-flows`'s default, also `quench send --sink`'s.
const DEFAULT_MAX_FLOWS: usize = 4096;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to receive on, `[NETNS/]IFACE` (the driver: `--driver`).
    #[arg(long)]
    pub iface: String,
    #[command(flatten)]
    pub port: super::PortArgs,
    /// How long to run, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration_s: f64,
    /// Report directory to write.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Interval of the interval log and the rate plot, milliseconds.
    #[arg(long, default_value_t = DEFAULT_INTERVAL_MS)]
    pub interval_ms: u64,
    /// TOML file whose `[np]` table configures the notification point (np::NpParams).
    #[arg(long)]
    pub np: Option<PathBuf>,
    /// Send no CNPs.
    #[arg(long)]
    pub no_cnp: bool,
    /// Flow-table size.
    #[arg(long, default_value_t = DEFAULT_MAX_FLOWS)]
    pub max_flows: usize,
    /// Act as a receiver whose link pauses: every PERIOD_US send a PFC PAUSE for priority 3
    /// lasting PAUSE_US (quanta at 1 Gbit/s, 512 ns each): `--pfc-pause 400:200`. The switch
    /// port toward this receiver then goes OFF and ON (TCD's victim scenario).
    #[arg(long, value_name = "PERIOD_US:PAUSE_US")]
    pub pfc_pause: Option<String>,
}

/// `--pfc-pause PERIOD_US:PAUSE_US` -> (period, PAUSE frame).
fn pause_plan(
    spec: &str,
    src: MacAddr,
) -> anyhow::Result<(Duration, [u8; crate::wire::pfc::FRAME_LEN])> {
    let bad = || anyhow::anyhow!("--pfc-pause {spec:?}: expected PERIOD_US:PAUSE_US, e.g. 400:200");
    let (p, d) = spec.split_once(':').ok_or_else(bad)?;
    let period: u64 = p.trim().parse().map_err(|_| bad())?;
    let pause: u64 = d.trim().parse().map_err(|_| bad())?;
    if period == 0 || pause == 0 || pause >= period {
        anyhow::bail!("--pfc-pause {spec:?}: needs 0 < PAUSE_US < PERIOD_US");
    }
    let quanta = crate::wire::pfc::duration_to_quanta(
        Duration::from_micros(pause),
        units::Rate::from_gbps(1),
    );
    let mut frame = [0u8; crate::wire::pfc::FRAME_LEN];
    crate::wire::pfc::emit_frame(
        src,
        &crate::wire::pfc::PfcRepr::pause(1 << 3, quanta),
        &mut frame,
    )
    .map_err(|e| anyhow::anyhow!("--pfc-pause: {e}"))?;
    Ok((Duration::from_micros(period), frame))
}

/// What configures a receiver beyond its port: `quench recv`'s options, or `quench send
/// --sink`'s defaults.
pub(crate) struct SinkOptions {
    /// `None`: send no CNPs.
    pub np: Option<np::NpProfile>,
    pub interval: Duration,
    pub max_flows: usize,
    pub pfc_pause: Option<String>,
}

impl SinkOptions {
    /// `quench recv`'s defaults, with notification point `np` (`None`: no CNPs).
    pub fn defaults(np: Option<np::NpProfile>) -> SinkOptions {
        SinkOptions {
            np,
            interval: Duration::from_millis(DEFAULT_INTERVAL_MS),
            max_flows: DEFAULT_MAX_FLOWS,
            pfc_pause: None,
        }
    }

    /// The notification point `--np FILE` configures (its `[np]` table), or the default one.
    pub fn np_profile(path: Option<&std::path::Path>) -> anyhow::Result<np::NpProfile> {
        let p = match path {
            Some(path) => super::preset_table(path, "np")?.unwrap_or_default(),
            None => np::NpParams::default(),
        };
        p.profile().map_err(|e| anyhow::anyhow!("[np] {e}"))
    }
}

/// The receiver on one port, one [`Sink::step`] per poll-loop iteration: `quench recv` runs it
/// alone, `quench send --sink` in the sender's loop (one busy-polling process for a host that
/// both sends and receives, on a machine with fewer cores than hosts).
pub(crate) struct Sink {
    port: super::NsPort,
    w: RecvWorker,
    rx: Vec<AnyFrame>,
    tx: Vec<AnyFrame>,
    cnp: [u8; 128],
    tx_drops: u64,
    pauser: Option<(Duration, [u8; crate::wire::pfc::FRAME_LEN])>,
    next_pause: units::Instant,
    pauses_sent: u64,
}

impl Sink {
    /// Opens `label` (`[NETNS/]IFACE`).
    pub fn open(label: &str, port: &super::PortArgs, opts: SinkOptions) -> anyhow::Result<Sink> {
        let port = super::NsPort::open(label, port)?;
        let mac = port.caps().mac.unwrap_or_else(MacAddr::zero);
        let w = RecvWorker::new(
            RecvConfig {
                max_flows: opts.max_flows,
            },
            opts.np,
            opts.interval,
            mac,
        );
        let pauser = opts
            .pfc_pause
            .as_deref()
            .map(|spec| pause_plan(spec, mac))
            .transpose()?;
        Ok(Sink {
            port,
            w,
            rx: Vec::with_capacity(BURST),
            tx: Vec::with_capacity(BURST),
            cnp: [0u8; 128],
            tx_drops: 0,
            pauser,
            next_pause: shared_now(),
            pauses_sent: 0,
        })
    }

    /// Reads one burst, answers it, runs the timers. Returns the frames read and the time they
    /// were stamped with (`CLOCK_MONOTONIC`, read after the burst arrived: a frame is never
    /// stamped later than its receive time).
    pub fn step(&mut self) -> anyhow::Result<(usize, units::Instant)> {
        let port = &mut *self.port;
        port.rx_burst(0, &mut self.rx, BURST)?;
        let n = self.rx.len();
        let now = shared_now();
        for f in self.rx.drain(..) {
            use crate::port::Frame as _;
            if let Some(len) = self.w.on_frame(now, f.data(), &mut self.cnp) {
                match port.import(&self.cnp[..len]) {
                    Some(c) => self.tx.push(c),
                    None => self.tx_drops += 1,
                }
            }
        }
        if !self.tx.is_empty() {
            port.tx_burst(0, &mut self.tx)?;
            // CNPs the ring could not take are dropped (freed): the next mark asks again.
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
        port.poll()?;
        Ok((n, now))
    }

    /// Prints the summary table, writes the report directory `out`, and returns the summary's
    /// JSON.
    pub fn finish(mut self, out: Option<&std::path::Path>) -> anyhow::Result<String> {
        use crate::port::Port as _;
        let c = self.w.counters();
        let drops = self.port.kernel_rx_drops();
        let (mut summary, all, log) = self.w.finish(shared_now());
        summary.rx_kernel_drops = drops;
        // The report first: a closed standard output (`| head`) must not lose it.
        if let Some(dir) = out {
            report::write_report_dir(dir, &summary, &all, &log)?;
        }
        out!("{}", summary.table())?;
        if self.tx_drops > 0 {
            outln!("CNPs not sent (transmit ring full): {}", self.tx_drops)?;
        }
        if self.pauses_sent > 0 {
            outln!("PFC PAUSE frames sent (--pfc-pause): {}", self.pauses_sent)?;
        }
        if c.cnps_suppressed > 0 {
            outln!(
                "CNPs suppressed by the notification point's interval: {}",
                c.cnps_suppressed
            )?;
        }
        if let Some(dir) = out {
            outln!("report written to {}", dir.display())?;
        }
        Ok(serde_json::to_string(&summary)?)
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let np = if args.no_cnp {
        None
    } else {
        Some(SinkOptions::np_profile(args.np.as_deref())?)
    };
    let mut sink = Sink::open(
        &args.iface,
        &args.port,
        SinkOptions {
            np,
            interval: Duration::from_millis(args.interval_ms.max(1)),
            max_flows: args.max_flows,
            pfc_pause: args.pfc_pause.clone(),
        },
    )?;
    let stop = crate::worker::stop_on_signals()?;
    let end = shared_now() + Duration::from_nanos((args.duration_s.max(0.0) * 1e9) as u64);
    let mut idle = crate::worker::Idle::default();
    loop {
        let (n, now) = sink.step()?;
        idle.after(n);
        if now >= end || stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
    }
    let json = sink.finish(args.out.as_deref())?;
    outln!("{json}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pfc_pause_spec_is_checked_and_becomes_a_pfc_frame() {
        let (period, f) = pause_plan("400:200", MacAddr::zero()).unwrap();
        assert_eq!(period, Duration::from_micros(400));
        let pdu = crate::wire::pfc::PfcRepr::parse(&f[14..]).unwrap();
        assert!(pdu.enabled(3));
        // 200 us at 1 Gbit/s = 200000 bit times / 512 = 390.6 -> 391 quanta.
        assert_eq!(pdu.quanta[3], 391);
        for bad in ["400", "a:b", "200:400", "0:0", "400:0"] {
            let e = pause_plan(bad, MacAddr::zero()).unwrap_err().to_string();
            assert!(e.contains("--pfc-pause"), "{bad}: {e}");
        }
    }
}
