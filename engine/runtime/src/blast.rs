//! A fast traffic source for the forwarding benchmark (`quench blast`): one fixed frame, or a
//! pcap file's frames round and round, as fast as the device takes them or at a rate, for a
//! fixed time, then what was sent.
//!
//! Two engines: [`blast_live`] has the kernel replay the frame into the device with XDP live
//! frames ([`quench_port::live`]), no skb and no system call per frame; [`blast_af_xdp`] writes
//! each frame, with a sequence number after the EtherType, into an AF_XDP socket (copy mode on
//! a veth: an skb per frame, about half the rate on the 2-core testbed). With a rate the loop
//! sleeps while the pacer holds the next frame, so a paced blast costs little CPU beside what
//! it sends.
use anyhow::Context;
use units::{Duration, Instant, Rate};

use quench_node::switch::queue::Shaper;
use quench_port::live::LiveTx;
use quench_port::xdp::{XdpMode, XdpOptions, XdpPool, XdpPort};
use quench_port::{Frame, Port, BURST};
use quench_wire::time::Clock;

/// What a run sent.
pub struct Sent {
    pub frames: u64,
    /// Octets per frame (the mean with `--from-pcap`).
    pub len: usize,
    pub dropped: u64,
    pub secs: f64,
    pub mode: String,
}

/// A device counter from sysfs (`tx_packets`, `tx_dropped`), 0 when unreadable.
fn tx_counter(iface: &str, name: &str) -> u64 {
    quench_port::device_attr(iface, &format!("statistics/{name}")).unwrap_or(0)
}

/// Frames in the first, short live test run, after which the device's counter must have moved.
const LIVE_PROBE: u32 = 65536;

/// Sends `template` from `iface` with XDP live frames until `end` (or a signal to the thread:
/// the caller kicks it at the end time).
pub fn blast_live(
    iface: &str,
    template: Vec<u8>,
    clock: &Clock,
    end: Instant,
) -> anyhow::Result<Sent> {
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
pub enum Frames {
    /// One frame, a sequence number written after its EtherType.
    Numbered(Vec<u8>),
    /// A pcap file's frames, unchanged, round and round.
    Recorded(Vec<Vec<u8>>),
}

/// The frames of a pcap file (Ethernet link type), each 14..=1514 octets.
pub fn read_frames(path: &std::path::Path) -> anyhow::Result<Vec<Vec<u8>>> {
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
        let rec = rec.map_err(|e| {
            anyhow::anyhow!("--from-pcap {}: record {}: {e}", path.display(), i + 1)
        })?;
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

/// Sends `frames` from `iface` through an AF_XDP socket (at `rate` when given) until `end` or
/// `stopped`.
pub fn blast_af_xdp(
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
