//! `quench blast`: a fast traffic source for the forwarding benchmark. Transmits one fixed
//! frame (Ethernet, local experimental EtherType 0x88B5) as fast as the device takes it (or at
//! `--rate`), on one pinned core, for a fixed time, then prints what it sent.
//!
//! Two engines: `live` (default) has the kernel replay the frame into the device with XDP live
//! frames ([`quench_port::live`]), no skb and no system call per frame; `af_xdp` writes each
//! frame, with a sequence number after the EtherType, into an AF_XDP socket (copy mode on a
//! veth: an skb per frame, about half the rate on the 2-core testbed).
//!
//! `--from-pcap FILE` (af_xdp only) sends the file's frames instead, unchanged and in order,
//! round and round: how the forged-feedback test (`scripts/testbed/closed-loop.sh --forge FILE`)
//! puts forged CNMs and CNPs on the wire. With `--rate` the loop sleeps while the pacer holds the
//! next frame, so a paced blast costs little CPU beside what it sends.
use anyhow::Context;
use units::{Duration, Rate};

use quench_port::parse_mac;
use quench_port::worker;
use quench_port::xdp::XdpMode;
use quench_runtime::blast::{blast_af_xdp, blast_live, read_frames, Frames};
use quench_wire::time::Clock;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to send on.
    #[arg(long, value_name = "IFACE")]
    pub iface: String,
    /// Destination MAC.
    #[arg(long, value_name = "MAC", required_unless_present = "from_pcap")]
    pub dst: Option<String>,
    /// Source MAC (default: the interface's).
    #[arg(long, value_name = "MAC")]
    pub src: Option<String>,
    /// Frame length in octets without FCS (60..=1514; "64 B" on the wire is 60 here).
    #[arg(long, value_name = "OCTETS", default_value_t = 60)]
    pub len: usize,
    /// How long to send, e.g. `5s`.
    #[arg(long, value_name = "DURATION", default_value = "5s",
          value_parser = super::duration_or_secs_arg, allow_hyphen_values = true)]
    pub duration: Duration,
    /// Optional pacing rate, e.g. `1gbit`.
    #[arg(long, value_name = "RATE", value_parser = super::rate_arg, allow_hyphen_values = true)]
    pub rate: Option<Rate>,
    /// Core index to pin to (default: the last core).
    #[arg(long, value_name = "N")]
    pub core: Option<usize>,
    /// AF_XDP mode for `--engine af_xdp`.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = Mode::Auto)]
    pub mode: Mode,
    /// How frames are made.
    #[arg(long, value_enum, value_name = "ENGINE", default_value_t = Engine::Live)]
    pub engine: Engine,
    /// Send the frames of this pcap file (Ethernet), in order and round again, unchanged
    /// (`--engine af_xdp`; `--dst`, `--src` and `--len` then do not apply).
    #[arg(long, value_name = "FILE")]
    pub from_pcap: Option<std::path::PathBuf>,
}

/// `--mode`: the AF_XDP attach mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Native with zero-copy, else native copy, else generic.
    Auto,
    /// Native (driver) mode only.
    Native,
    /// Generic (SKB) mode only.
    Generic,
}

/// `--engine`: how blast makes its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// XDP live frames, the fast one; needs an XDP program or GRO on a veth's peer.
    Live,
    /// An AF_XDP socket; frames carry a sequence number.
    #[value(name = "af_xdp", alias = "af-xdp")]
    AfXdp,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let dst = match &args.dst {
        Some(d) => parse_mac(d).with_context(|| format!("--dst {d:?}: not a MAC"))?,
        None => quench_wire::MacAddr::broadcast(),
    };
    let src = match &args.src {
        Some(s) => parse_mac(s).with_context(|| format!("--src {s:?}: not a MAC"))?,
        None => {
            quench_port::device_mac(&args.iface).unwrap_or(quench_wire::MacAddr(2, 0, 0, 0, 0, 1))
        }
    };
    if !(60..=1514).contains(&args.len) {
        anyhow::bail!("--len {} must be 60..=1514", args.len);
    }
    let rate = args.rate;
    let live = args.engine == Engine::Live;
    if live && args.from_pcap.is_some() {
        anyhow::bail!("--from-pcap sends several frames, which the live engine cannot (it repeats one): use --engine af_xdp with --from-pcap");
    }
    if live && rate.is_some() {
        anyhow::bail!(
            "--rate paces frame by frame, which the live engine cannot (a kernel test run sends \
             a whole batch): use --engine af_xdp with --rate"
        );
    }
    let mode = match args.mode {
        Mode::Auto => XdpMode::Auto,
        Mode::Native => XdpMode::Native,
        Mode::Generic => XdpMode::Generic,
    };
    let mut template = Vec::with_capacity(args.len);
    template.extend_from_slice(&dst.octets());
    template.extend_from_slice(&src.octets());
    template.extend_from_slice(&[0x88, 0xb5]);
    template.resize(args.len, 0);
    let frames = match &args.from_pcap {
        Some(p) => Frames::Recorded(read_frames(p)?),
        None => Frames::Numbered(template),
    };
    let stop = worker::stop_on_signals()?;
    let core = args.core.unwrap_or(worker::cores().len().saturating_sub(1));
    let iface = args.iface.clone();
    let duration = args.duration;
    let stop_thread = stop.clone();
    let h = worker::spawn_pinned(core, "quench-blast".into(), move || {
        let stop = stop_thread;
        let clock = Clock::new();
        let end = clock.now() + duration;
        match frames {
            Frames::Numbered(template) if live => blast_live(&iface, template, &clock, end),
            frames => {
                let stopped = || stop.load(std::sync::atomic::Ordering::Relaxed);
                blast_af_xdp(&iface, mode, frames, rate, &clock, end, stopped)
            }
        }
    })?;
    if live {
        // The live engine sits in one long kernel test run; a signal to its thread ends the
        // run. Kick it at the end of the duration or on SIGINT/SIGTERM (which the kernel may
        // deliver to this thread instead).
        let kick = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGUSR1, kick)?;
        let clock = Clock::monotonic();
        let end = clock.now() + duration;
        let tid = std::os::unix::thread::JoinHandleExt::as_pthread_t(&h);
        while !h.is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(5));
            if clock.now() >= end || stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Safety: `tid` names a thread that has not been joined (we hold its handle),
                // and SIGUSR1 has a handler, so the signal only interrupts its system call.
                unsafe { libc::pthread_kill(tid, libc::SIGUSR1) };
            }
        }
    }
    let sent = h
        .join()
        .map_err(|_| anyhow::anyhow!("blast thread panicked"))??;
    outln!(
        "{{\"iface\":\"{}\",\"engine\":\"{}\",\"mode\":\"{}\",\"len\":{},\"sent\":{},\"dropped\":{},\"secs\":{:.3},\"mpps\":{:.3}}}",
        args.iface,
        clap::ValueEnum::to_possible_value(&args.engine)
            .map(|v| v.get_name().to_string())
            .unwrap_or_default(),
        sent.mode,
        sent.len,
        sent.frames,
        sent.dropped,
        sent.secs,
        sent.frames as f64 / sent.secs / 1e6
    )?;
    Ok(())
}
