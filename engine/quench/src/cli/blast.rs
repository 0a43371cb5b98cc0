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
use units::{Duration, Instant, Rate};

use quench_node::switch::queue::Shaper;
use quench_port::live::LiveTx;
use quench_port::worker;
use quench_port::xdp::{XdpMode, XdpOptions, XdpPool, XdpPort};
use quench_port::{parse_mac, Frame, Port, BURST};
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

/// What a run sent, for the JSON line.
struct Sent {
    frames: u64,
    /// Octets per frame (the mean with `--from-pcap`).
    len: usize,
    dropped: u64,
    secs: f64,
    mode: String,
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

/// A device counter from sysfs (`tx_packets`, `tx_dropped`), 0 when unreadable.
fn tx_counter(iface: &str, name: &str) -> u64 {
    quench_port::device_attr(iface, &format!("statistics/{name}")).unwrap_or(0)
}

/// Frames in the first, short live test run, after which the device's counter must have moved.
const LIVE_PROBE: u32 = 65536;

fn blast_live(iface: &str, template: Vec<u8>, clock: &Clock, end: Instant) -> anyhow::Result<Sent> {
    let len = template.len();
    let mut tx = LiveTx::open(iface, template)?;
    let (p0, d0) = (
        tx_counter(iface, "tx_packets"),
        tx_counter(iface, "tx_dropped"),
    );
    let t0 = clock.now();
    tx.send(LIVE_PROBE)?;
    // A veth whose peer cannot take XDP frames drops every one without counting it: say so
    // rather than report a rate of nothing. (The pause lets a NIC with lazily updated counters
    // catch up.)
    std::thread::sleep(std::time::Duration::from_millis(50));
    if clock.now() < end && tx_counter(iface, "tx_packets") == p0 {
        anyhow::bail!(
            "{iface}: none of {LIVE_PROBE} redirected frames was transmitted; a veth's peer needs \
             an XDP program or GRO (`ethtool -K PEER gro on`), or use --engine af_xdp"
        );
    }
    while clock.now() < end {
        // One long run, ended by the signal the main thread sends at the end time.
        if !tx.send(1 << 30)? && clock.now() < end {
            break; // interrupted before the end: SIGINT or SIGTERM
        }
    }
    Ok(Sent {
        len,
        frames: tx_counter(iface, "tx_packets").saturating_sub(p0),
        dropped: tx_counter(iface, "tx_dropped").saturating_sub(d0),
        secs: (clock.now() - t0).as_secs_f64(),
        mode: "xdp-live".into(),
    })
}

/// What the af_xdp engine sends.
enum Frames {
    /// One frame, a sequence number written after its EtherType.
    Numbered(Vec<u8>),
    /// A pcap file's frames, unchanged, round and round.
    Recorded(Vec<Vec<u8>>),
}

/// The frames of a pcap file (Ethernet link type), each 14..=1514 octets.
fn read_frames(path: &std::path::Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let buf = std::fs::read(path).with_context(|| format!("--from-pcap {}", path.display()))?;
    let r = quench_wire::pcap::PcapReader::new(&buf)
        .map_err(|e| anyhow::anyhow!("--from-pcap {}: {e}", path.display()))?;
    if r.linktype() != quench_wire::pcap::LINKTYPE_ETHERNET {
        anyhow::bail!(
            "--from-pcap {}: link type {}, not Ethernet (1)",
            path.display(),
            r.linktype()
        );
    }
    let mut frames = Vec::new();
    for (i, rec) in r.enumerate() {
        let rec =
            rec.map_err(|e| anyhow::anyhow!("--from-pcap {}: record {}: {e}", path.display(), i + 1))?;
        if !(14..=1514).contains(&rec.data.len()) {
            anyhow::bail!(
                "--from-pcap {}: record {} has {} octets, not 14..=1514",
                path.display(),
                i + 1,
                rec.data.len()
            );
        }
        frames.push(rec.data.to_vec());
    }
    if frames.is_empty() {
        anyhow::bail!("--from-pcap {}: no frames", path.display());
    }
    Ok(frames)
}

/// A paced blast sleeps when its pacer holds the next frame by more than this, and keeps that
/// much credit so the frames due during a sleep leave in a burst.
const PACED_SLEEP: Duration = Duration::from_micros(200);
const PACED_CREDIT: Duration = Duration::from_micros(400);

fn blast_af_xdp(
    iface: &str,
    mode: XdpMode,
    frames: Frames,
    rate: Option<Rate>,
    clock: &Clock,
    end: Instant,
    stopped: impl Fn() -> bool,
) -> anyhow::Result<Sent> {
    let pool = XdpPool::new(8192)?;
    let opts = XdpOptions {
        mode,
        force: false,
        queues: Some(vec![0]),
        program: None,
    };
    let mut port = XdpPort::open(&pool, iface, &opts)?;
    let mut pacer = rate.map(|r| Shaper::new(r, Shaper::default_burst(r, 1514).max(PACED_CREDIT)));
    let t0 = clock.now();
    let (mut sent, mut octets, mut seq) = (0u64, 0u64, 0u32);
    let mut next = 0usize;
    let mut burst = Vec::with_capacity(BURST);
    let mut now = t0;
    while now < end && !stopped() {
        while burst.len() < BURST {
            let frame = match &frames {
                Frames::Numbered(t) => t,
                Frames::Recorded(v) => &v[next],
            };
            if let Some(p) = &mut pacer {
                if !p.ready(now) {
                    break;
                }
                p.on_send(now, frame.len() as u32);
            }
            let Some(mut f) = port.alloc(frame.len()) else {
                break;
            };
            let d = f.data_mut();
            d.copy_from_slice(frame);
            match &frames {
                Frames::Numbered(_) => {
                    d[14..18].copy_from_slice(&seq.to_be_bytes());
                    seq = seq.wrapping_add(1);
                }
                Frames::Recorded(v) => next = (next + 1) % v.len(),
            }
            octets += frame.len() as u64;
            burst.push(f);
        }
        let n = burst.len();
        sent += port.tx_burst(0, &mut burst)? as u64;
        port.poll()?;
        now = clock.now();
        if let Some(p) = &pacer {
            let wait = p.release_time().saturating_since(now);
            if n == 0 && wait > PACED_SLEEP {
                std::thread::sleep(std::time::Duration::from_nanos(PACED_SLEEP.as_nanos()));
                now = clock.now();
            }
        }
    }
    Ok(Sent {
        frames: sent,
        len: (octets / sent.max(1)) as usize,
        dropped: 0,
        secs: (now - t0).as_secs_f64(),
        mode: port.caps().mode.clone(),
    })
}
