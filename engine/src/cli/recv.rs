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

use crate::port::{Port, BURST};
use crate::recv::worker::RecvWorker;
use crate::recv::RecvConfig;
use crate::report;
use crate::time::shared_now;
use crate::wire::MacAddr;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to receive on (the driver: `--driver`).
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
    #[arg(long, default_value_t = 100)]
    pub interval_ms: u64,
    /// TOML file whose `[np]` table configures the notification point (np::NpParams).
    #[arg(long)]
    pub np: Option<PathBuf>,
    /// Send no CNPs.
    #[arg(long)]
    pub no_cnp: bool,
    /// Flow-table size.
    #[arg(long, default_value_t = 4096)]
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

pub fn run(args: Args) -> anyhow::Result<()> {
    let np = if args.no_cnp {
        None
    } else {
        let p = match &args.np {
            Some(path) => super::preset_table(path, "np")?.unwrap_or_default(),
            None => np::NpParams::default(),
        };
        Some(p.profile().map_err(|e| anyhow::anyhow!("[np] {e}"))?)
    };
    let mut port = super::open_port(&args.iface, &args.port)?;
    let mac = port
        .caps()
        .mac
        .map(|m| MacAddr::new(m[0], m[1], m[2], m[3], m[4], m[5]))
        .unwrap_or_else(MacAddr::zero);
    let mut w = RecvWorker::new(
        RecvConfig {
            max_flows: args.max_flows,
        },
        np,
        Duration::from_millis(args.interval_ms.max(1)),
        mac,
    );
    let start = shared_now();
    let end = start + Duration::from_nanos((args.duration_s.max(0.0) * 1e9) as u64);
    let mut rx = Vec::with_capacity(BURST);
    let mut tx = Vec::with_capacity(BURST);
    let mut cnp = [0u8; 128];
    let mut tx_drops = 0u64;
    let mut idle = crate::worker::Idle::default();
    let pauser = args
        .pfc_pause
        .as_deref()
        .map(|spec| pause_plan(spec, mac))
        .transpose()?;
    let mut next_pause = start;
    let mut pauses_sent = 0u64;
    loop {
        port.rx_burst(0, &mut rx, BURST)?;
        idle.after(rx.len());
        // Read after the burst arrived: a frame is never stamped later than its receive time.
        let now = shared_now();
        if now >= end {
            break;
        }
        for f in rx.drain(..) {
            use crate::port::Frame as _;
            if let Some(n) = w.on_frame(now, f.data(), &mut cnp) {
                match port.import(&cnp[..n]) {
                    Some(c) => tx.push(c),
                    None => tx_drops += 1,
                }
            }
        }
        if !tx.is_empty() {
            port.tx_burst(0, &mut tx)?;
            // CNPs the ring could not take are dropped (freed): the next mark asks again.
            tx_drops += tx.len() as u64;
            tx.clear();
        }
        w.on_tick(now);
        if let Some((period, frame)) = &pauser {
            if now >= next_pause {
                next_pause = now + *period;
                if let Some(f) = port.import(frame) {
                    tx.push(f);
                    port.tx_burst(0, &mut tx)?;
                    pauses_sent += 1 - tx.len() as u64;
                    tx.clear();
                }
            }
        }
        port.poll()?;
    }
    let c = w.counters();
    let (summary, all, log) = w.finish(shared_now());
    print!("{}", summary.table());
    if tx_drops > 0 {
        println!("CNPs not sent (transmit ring full): {tx_drops}");
    }
    if pauses_sent > 0 {
        println!("PFC PAUSE frames sent (--pfc-pause): {pauses_sent}");
    }
    if c.cnps_suppressed > 0 {
        println!(
            "CNPs suppressed by the notification point's interval: {}",
            c.cnps_suppressed
        );
    }
    if let Some(dir) = &args.out {
        report::write_report_dir(dir, &summary, &all, &log)?;
        println!("report written to {}", dir.display());
    }
    println!("{}", serde_json::to_string(&summary)?);
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
