//! `quench blast`: a fast traffic source for the forwarding benchmark. Transmits one fixed
//! frame (Ethernet, local experimental EtherType 0x88B5, a sequence number) as fast as an
//! AF_XDP socket takes it (or at `--rate`), on one pinned core, for a fixed time, then prints
//! what it sent.
use anyhow::Context;
use units::{Duration, Rate};

use crate::port::xdp::{XdpMode, XdpOptions, XdpPool, XdpPort};
use crate::port::{parse_mac, Frame, Port, BURST};
use crate::switch::queue::Pacer;
use crate::time::Clock;
use crate::worker;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to send on.
    #[arg(long)]
    pub iface: String,
    /// Destination MAC.
    #[arg(long)]
    pub dst: String,
    /// Source MAC (default: the interface's).
    #[arg(long)]
    pub src: Option<String>,
    /// Frame length in octets without FCS (60..=1514; "64 B" on the wire is 60 here).
    #[arg(long, default_value_t = 60)]
    pub len: usize,
    /// Seconds to send.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Optional pacing rate, e.g. `1gbit`.
    #[arg(long)]
    pub rate: Option<String>,
    /// Core index to pin to (default: the last core).
    #[arg(long)]
    pub core: Option<usize>,
    /// AF_XDP mode: auto, native, generic.
    #[arg(long, default_value = "auto")]
    pub mode: String,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let dst = parse_mac(&args.dst).with_context(|| format!("--dst {:?}: not a MAC", args.dst))?;
    let src = match &args.src {
        Some(s) => parse_mac(s).with_context(|| format!("--src {s:?}: not a MAC"))?,
        None => crate::port::device_mac(&args.iface).unwrap_or([2, 0, 0, 0, 0, 1]),
    };
    if !(60..=1514).contains(&args.len) {
        anyhow::bail!("--len {} must be 60..=1514", args.len);
    }
    let rate = args
        .rate
        .as_deref()
        .map(Rate::parse)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--rate: {e}"))?;
    let mode = match args.mode.as_str() {
        "auto" => XdpMode::Auto,
        "native" => XdpMode::Native,
        "generic" => XdpMode::Generic,
        m => anyhow::bail!("--mode {m:?}: expected auto, native or generic"),
    };
    let mut template = Vec::with_capacity(args.len);
    template.extend_from_slice(&dst);
    template.extend_from_slice(&src);
    template.extend_from_slice(&[0x88, 0xb5]);
    template.resize(args.len, 0);
    let stop = worker::stop_on_signals()?;
    let core = args.core.unwrap_or(worker::cores().len().saturating_sub(1));
    let iface = args.iface.clone();
    let duration = args.duration;
    let h = worker::spawn_pinned(core, "quench-blast".into(), move || {
        let pool = XdpPool::new(8192)?;
        let opts = XdpOptions {
            mode,
            force: false,
            queues: Some(vec![0]),
        };
        let mut port = XdpPort::open(&pool, &iface, &opts)?;
        let clock = Clock::new();
        let mut pacer = rate.map(|r| Pacer::new(r, Pacer::default_burst(r, 1514)));
        let t0 = clock.now();
        let end = t0 + Duration::from_nanos((duration * 1e9) as u64);
        let (mut sent, mut seq) = (0u64, 0u32);
        let mut burst = Vec::with_capacity(BURST);
        let mut now = t0;
        while now < end && !stop.load(std::sync::atomic::Ordering::Relaxed) {
            while burst.len() < BURST {
                if let Some(p) = &mut pacer {
                    if !p.ready(now) {
                        break;
                    }
                    p.on_send(now, template.len() as u32);
                }
                let Some(mut f) = port.alloc(template.len()) else {
                    break;
                };
                let d = f.data_mut();
                d.copy_from_slice(&template);
                d[14..18].copy_from_slice(&seq.to_be_bytes());
                seq = seq.wrapping_add(1);
                burst.push(f);
            }
            sent += port.tx_burst(0, &mut burst)? as u64;
            port.poll()?;
            now = clock.now();
        }
        let secs = (now - t0).as_secs_f64();
        anyhow::Ok((sent, secs, port.caps().mode.clone()))
    })?;
    let (sent, secs, mode) = h
        .join()
        .map_err(|_| anyhow::anyhow!("blast thread panicked"))??;
    println!(
        "{{\"iface\":\"{}\",\"mode\":\"{mode}\",\"len\":{},\"sent\":{sent},\"secs\":{secs:.3},\"mpps\":{:.3}}}",
        args.iface,
        args.len,
        sent as f64 / secs / 1e6
    );
    Ok(())
}
