//! The HPCC ns-3 simulator's `config.txt` (alibaba-edu/High-Precision-Congestion-Control,
//! `simulation/mix/config_doc.txt`, written by `simulation/run.py`, read by `scratch/third.cc`),
//! and the run.py settings as presets (`hpcc-dcqcn`, `hpcc-dcqcn-paper` at a NIC speed).
//!
//! The file is whitespace-separated `KEY value...` pairs. ns-3 skips a key it does not know and
//! runs on; here every key is either applied, or known to have no effect in the modelled setting
//! (DCQCN, `CC_MODE 1`, no window), or an error that names it, so a config never runs with a
//! setting quietly dropped.
//!
//! | keys | here |
//! |---|---|
//! | `CC_MODE` | 1 (DCQCN) only; 3 HPCC, 7 TIMELY, 8 DCTCP, 10 HPCC-PINT are errors |
//! | `ALPHA_RESUME_INTERVAL`, `RATE_DECREASE_INTERVAL`, `CLAMP_TARGET_RATE`, `RP_TIMER`, `EWMA_GAIN`, `FAST_RECOVERY_TIMES`, `RATE_AI`, `RATE_HAI`, `MIN_RATE` | `[dcqcn_rp]` over configs/hpcc-ns3.toml (ns-3's "mlx" event flow) |
//! | `KMAX_MAP`, `KMIN_MAP`, `PMAX_MAP` | `[[red.by_rate]]` (K in KB of 1000 octets, as ns-3's `ConfigEcn`) |
//! | `ENABLE_QCN` | 0: switches never mark |
//! | `BUFFER_SIZE` | switch buffer, MB of 2^20 octets; PFC on, dynamic threshold |
//! | `PACKET_PAYLOAD_SIZE`, `L2_ACK_INTERVAL` | payload octets; ACK every packet (an interval up to one payload) |
//! | `ERROR_RATE_PER_LINK` | loss on links whose topology line gives 0 |
//! | `SIMULATOR_STOP_TIME` | upper bound of the run (it ends when the last flow completes) |
//! | `TOPOLOGY_FILE`, `FLOW_FILE` | inputs (relative to ns-3's working directory) |
//! | `FCT_OUTPUT_FILE`, `PFC_OUTPUT_FILE`, `QLEN_MON_FILE`, `QLEN_MON_START`, `QLEN_MON_END` | outputs in ns-3's formats |
//! | `ACK_HIGH_PRIO` 1, `RATE_BOUND` 1, `HAS_WIN` 0, `L2_BACK_TO_ZERO` 0, `LINK_DOWN 0 0 0`, `ENABLE_TRACE` 0 | the modelled behaviour; other values are errors |
//! | `L2_CHUNK_SIZE` | no effect with an ACK per packet and go-back-N |
//! | `USE_DYNAMIC_PFC_THRESHOLD` | no effect in ns-3 either: its `SwitchMmu` always uses the dynamic threshold |
//! | `TRACE_FILE`, `TRACE_OUTPUT_FILE` | the binary packet trace is not written (only wanted with `ENABLE_TRACE` 1) |
//! | `DCTCP_RATE_AI`, `GLOBAL_T`, `VAR_WIN`, `FAST_REACT`, `U_TARGET`, `MI_THRESH`, `INT_MULTI`, `MULTI_RATE`, `SAMPLE_FEEDBACK`, `PINT_LOG_BASE`, `PINT_PROB`, `DATA_RATE`, `LINK_DELAY` | never read by ns-3 under `CC_MODE 1` without a window |
//!
//! Anything else (`PAUSE_TIME` included) is an error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use units::{Instant, Rate};

use super::cc::{CcKind, CcSections};
use super::config::{RunConfig, TxTime};
use super::monitor::QlenWindow;
use super::topology::Topology;

// The frames ns-3 puts on its links, in octets (`Packet::GetSize()`, what `QbbNetDevice`
// serialises, its queues count and its switch MMU accounts), with INT off (CC_MODE 1). HPCC's
// `PppHeader::GetStaticSize` returns 14 (an Ethernet header's size), not PPP's 2.
/// Data: payload + `SeqTsHeader` 6 ("6 + IntHeader::GetStaticSize()") + UDP 8 + IPv4 20 + PPP
/// 14 (rdma-hw.cc `GetNxtPacket`), the 48 its standalone FCT counts too.
pub const NS3_DATA_HEADER_BYTES: u32 = 48;
/// ACK / NACK: "Create<Packet>(std::max(60-14-20-(int)seqh.GetSerializedSize(), 0))" (14) +
/// `qbbHeader` 12 + IPv4 20 + PPP 14 (rdma-hw.cc `ReceiveUdp`).
pub const NS3_ACK_BYTES: u32 = 60;
/// PFC: `PauseHeader` 9 + IPv4 20 + PPP 14 (qbb-net-device.cc `SendPfc`).
pub const NS3_PFC_BYTES: u32 = 43;

/// ns-3's RDMA defaults that config.txt tunes: configs/hpcc-ns3.toml (the "mlx" event flow,
/// per-packet CNP flags). Built in, so the preset works wherever the binary runs.
const MLX_BASE: &str = include_str!("../../../configs/hpcc-ns3.toml");

/// Keys that take no effect under `CC_MODE 1` without a window (see the module table).
const NO_EFFECT: &[&str] = &[
    "DCTCP_RATE_AI",
    "GLOBAL_T",
    "VAR_WIN",
    "FAST_REACT",
    "U_TARGET",
    "MI_THRESH",
    "INT_MULTI",
    "MULTI_RATE",
    "SAMPLE_FEEDBACK",
    "PINT_LOG_BASE",
    "PINT_PROB",
    "DATA_RATE",
    "LINK_DELAY",
    "L2_CHUNK_SIZE",
    "USE_DYNAMIC_PFC_THRESHOLD",
    "TRACE_FILE",
    "TRACE_OUTPUT_FILE",
];

/// Keys this reader applies.
const APPLIED: &[&str] = &[
    "CC_MODE",
    "ALPHA_RESUME_INTERVAL",
    "RATE_DECREASE_INTERVAL",
    "CLAMP_TARGET_RATE",
    "RP_TIMER",
    "EWMA_GAIN",
    "FAST_RECOVERY_TIMES",
    "RATE_AI",
    "RATE_HAI",
    "MIN_RATE",
    "KMAX_MAP",
    "KMIN_MAP",
    "PMAX_MAP",
    "ENABLE_QCN",
    "BUFFER_SIZE",
    "PACKET_PAYLOAD_SIZE",
    "L2_ACK_INTERVAL",
    "ERROR_RATE_PER_LINK",
    "SIMULATOR_STOP_TIME",
    "TOPOLOGY_FILE",
    "FLOW_FILE",
    "FCT_OUTPUT_FILE",
    "PFC_OUTPUT_FILE",
    "QLEN_MON_FILE",
    "QLEN_MON_START",
    "QLEN_MON_END",
    "ACK_HIGH_PRIO",
    "RATE_BOUND",
    "HAS_WIN",
    "L2_BACK_TO_ZERO",
    "LINK_DOWN",
    "ENABLE_TRACE",
];

/// A config.txt as read: everything a run needs besides the topology and flows themselves.
#[derive(Clone, Debug)]
pub struct Ns3Config {
    /// Names the file in errors.
    pub origin: String,
    pub sections: CcSections,
    pub payload: u32,
    pub buffer_bytes: u64,
    pub stop: Instant,
    /// `ERROR_RATE_PER_LINK`: loss on links whose own error rate is 0.
    pub error_rate: f64,
    pub topology_file: Option<String>,
    pub flow_file: Option<String>,
    pub fct_file: Option<String>,
    pub pfc_file: Option<String>,
    pub qlen: Option<(String, QlenWindow)>,
}

fn parse_num<T: std::str::FromStr>(origin: &str, key: &str, v: &str) -> anyhow::Result<T> {
    v.parse()
        .map_err(|_| anyhow::anyhow!("{origin}: {key} `{v}` is not a valid number"))
}

/// An ns-3 `DataRate` string (`20Mb/s`, `100Gbps`) in whole Mb/s.
fn mbps(origin: &str, key: &str, v: &str) -> anyhow::Result<u64> {
    let r = Rate::parse(v)
        .map_err(|_| anyhow::anyhow!("{origin}: {key} `{v}` is not a rate such as 20Mb/s"))?;
    if r.as_bps() % 1_000_000 != 0 {
        bail!("{origin}: {key} `{v}`: quench's DCQCN takes whole Mb/s");
    }
    Ok(r.as_bps() / 1_000_000)
}

/// A time in microseconds as ns-3 reads it (a double), to quench's whole microseconds.
fn micros(origin: &str, key: &str, v: &str) -> anyhow::Result<u64> {
    let x: f64 = parse_num(origin, key, v)?;
    if !(x >= 0.0 && x.fract() == 0.0 && x < 1e12) {
        bail!("{origin}: {key} `{v}`: quench's DCQCN timers take whole microseconds");
    }
    Ok(x as u64)
}

fn flag(origin: &str, key: &str, v: &str) -> anyhow::Result<bool> {
    match v {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => bail!("{origin}: {key} `{v}`: expected 0 or 1"),
    }
}

impl Ns3Config {
    /// Reads config.txt text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> anyhow::Result<Ns3Config> {
        let mut toks = text.split_whitespace();
        let mut kv: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        while let Some(key) = toks.next() {
            let arity = match key {
                "KMAX_MAP" | "KMIN_MAP" | "PMAX_MAP" => {
                    let n = toks
                        .next()
                        .with_context(|| format!("{origin}: {key} without its entry count"))?;
                    let n: usize = parse_num(origin, key, n)?;
                    if n > 1024 {
                        bail!("{origin}: {key} {n}: too many entries");
                    }
                    let v: Vec<&str> = toks.by_ref().take(2 * n).collect();
                    if v.len() != 2 * n {
                        bail!("{origin}: {key} promises {n} (rate, value) pairs");
                    }
                    if kv.insert(key, v).is_some() {
                        bail!("{origin}: {key} is given twice");
                    }
                    continue;
                }
                "LINK_DOWN" => 3,
                k if APPLIED.contains(&k) || NO_EFFECT.contains(&k) => 1,
                "PAUSE_TIME" => bail!(
                    "{origin}: PAUSE_TIME: quench's PFC pauses until resumed, as ns-3 does with \
                     run.py's settings; a pause time is not modelled"
                ),
                _ => bail!("{origin}: unknown key {key} (quench reads the keys run.py writes)"),
            };
            let v: Vec<&str> = toks.by_ref().take(arity).collect();
            if v.len() != arity {
                bail!("{origin}: {key} without its value");
            }
            if kv.insert(key, v).is_some() {
                bail!("{origin}: {key} is given twice");
            }
        }
        let one = |k: &str| kv.get(k).map(|v| v[0]);

        // CC_MODE (third.cc default 1).
        match one("CC_MODE").unwrap_or("1") {
            "1" => {}
            m => {
                let name = match m {
                    "3" => " (HPCC)",
                    "7" => " (TIMELY)",
                    "8" => " (DCTCP)",
                    "10" => " (HPCC-PINT)",
                    _ => "",
                };
                bail!("{origin}: CC_MODE {m}{name}: quench models DCQCN (CC_MODE 1) only")
            }
        }
        for (key, want, why) in [
            (
                "ACK_HIGH_PRIO",
                "1",
                "quench's NICs always send ACKs, NACKs and CNPs ahead of data (ns-3's \
                 ACK_HIGH_PRIO 1, which only moves the NIC's ACK queue: ns-3's switches queue \
                 ACKs with their flow's data either way, and so do quench's under a config.txt)",
            ),
            (
                "RATE_BOUND",
                "1",
                "quench's senders are always rate-limited",
            ),
            ("HAS_WIN", "0", "quench's DCQCN senders have no window"),
            ("L2_BACK_TO_ZERO", "0", "quench retransmits go-back-N"),
            (
                "ENABLE_TRACE",
                "0",
                "quench does not write ns-3's binary packet trace",
            ),
        ] {
            if let Some(v) = one(key) {
                if v != want {
                    bail!("{origin}: {key} {v}: {why}; only {key} {want} is modelled");
                }
            }
        }
        if let Some(v) = kv.get("LINK_DOWN") {
            if v.iter().any(|x| *x != "0") {
                bail!(
                    "{origin}: LINK_DOWN {}: link failures (with ns-3's re-routing) are not \
                     modelled; only LINK_DOWN 0 0 0",
                    v.join(" ")
                );
            }
        }

        // The reaction point: hpcc-ns3.toml's mlx setting with config.txt's values over it.
        let mut sections: CcSections =
            toml::from_str(MLX_BASE).context("configs/hpcc-ns3.toml (built in)")?;
        let rp = sections.dcqcn_rp.get_or_insert_with(toml::Table::new);
        let int = |x: u64| toml::Value::Integer(x as i64);
        // third.cc's defaults where a key is absent: alpha_resume_interval 55,
        // rate_decrease_interval 4, fast_recovery_times 5, min_rate 100Mb/s, clamp 0, and
        // ewma_gain `1 / 16`, an integer division: 0.
        let g: f64 = parse_num(origin, "EWMA_GAIN", one("EWMA_GAIN").unwrap_or("0"))?;
        let g1024 = (1.0 - g) * 1024.0;
        if !(0.0..=1.0).contains(&g) || g1024.fract() != 0.0 {
            bail!(
                "{origin}: EWMA_GAIN {g}: quench keeps (1 - g) x 1024 as an integer \
                 (1/256 -> 1020, 1/16 -> 960)"
            );
        }
        rp.insert("dce_tcp_g".into(), int(g1024 as u64));
        let alpha = one("ALPHA_RESUME_INTERVAL").unwrap_or("55");
        rp.insert(
            "dce_tcp_rtt".into(),
            int(micros(origin, "ALPHA_RESUME_INTERVAL", alpha)?),
        );
        let dec = one("RATE_DECREASE_INTERVAL").unwrap_or("4");
        rp.insert(
            "rate_reduce_monitor_period".into(),
            int(micros(origin, "RATE_DECREASE_INTERVAL", dec)?),
        );
        let clamp = one("CLAMP_TARGET_RATE").unwrap_or("0");
        rp.insert(
            "clamp_tgt_rate".into(),
            toml::Value::Boolean(flag(origin, "CLAMP_TARGET_RATE", clamp)?),
        );
        let need = |k: &str| {
            one(k).with_context(|| format!("{origin}: {k} is missing (ns-3 has no default for it)"))
        };
        rp.insert(
            "rpg_time_reset".into(),
            int(micros(origin, "RP_TIMER", need("RP_TIMER")?)?),
        );
        let frt: u32 = parse_num(
            origin,
            "FAST_RECOVERY_TIMES",
            one("FAST_RECOVERY_TIMES").unwrap_or("5"),
        )?;
        rp.insert("rpg_threshold".into(), int(frt as u64));
        rp.insert(
            "rpg_ai_rate".into(),
            int(mbps(origin, "RATE_AI", need("RATE_AI")?)?),
        );
        rp.insert(
            "rpg_hai_rate".into(),
            int(mbps(origin, "RATE_HAI", need("RATE_HAI")?)?),
        );
        rp.insert(
            "rpg_min_rate".into(),
            int(mbps(
                origin,
                "MIN_RATE",
                one("MIN_RATE").unwrap_or("100Mb/s"),
            )?),
        );

        // Marking: ns-3 `ConfigEcn(port, kmin, kmax, pmax)` per port speed, K in KB (x 1000).
        let ecn = flag(origin, "ENABLE_QCN", one("ENABLE_QCN").unwrap_or("1"))?;
        let mut red = toml::Table::new();
        red.insert("mark_at".into(), toml::Value::String("dequeue".into()));
        let map = |k: &str| -> anyhow::Result<BTreeMap<u64, &str>> {
            let v = kv.get(k).with_context(|| {
                format!("{origin}: {k} is missing (ns-3 needs an entry for each link speed)")
            })?;
            let mut m = BTreeMap::new();
            for pair in v.chunks(2) {
                let rate: u64 = parse_num(origin, k, pair[0])?;
                if m.insert(rate, pair[1]).is_some() {
                    bail!("{origin}: {k}: {rate} b/s appears twice");
                }
            }
            Ok(m)
        };
        let (kmax, kmin, pmax) = (map("KMAX_MAP")?, map("KMIN_MAP")?, map("PMAX_MAP")?);
        let rates: Vec<u64> = kmax.keys().copied().collect();
        for (k, m) in [("KMIN_MAP", &kmin), ("PMAX_MAP", &pmax)] {
            if m.keys().copied().collect::<Vec<_>>() != rates {
                bail!("{origin}: {k} and KMAX_MAP name different link speeds");
            }
        }
        let mut by_rate = Vec::new();
        for r in rates {
            let mut e = toml::Table::new();
            e.insert("rate".into(), int(r));
            let kb = |k: &str, v: &str| -> anyhow::Result<toml::Value> {
                let x: u64 = parse_num(origin, k, v)?;
                Ok(int(x * 1000))
            };
            let p: f64 = parse_num(origin, "PMAX_MAP", pmax[&r])?;
            if ecn {
                e.insert("kmin_bytes".into(), kb("KMIN_MAP", kmin[&r])?);
                e.insert("kmax_bytes".into(), kb("KMAX_MAP", kmax[&r])?);
                e.insert("pmax".into(), toml::Value::Float(p));
            } else {
                // ENABLE_QCN 0: ns-3 switches never mark (EcnEnabled false).
                e.insert("kmin_bytes".into(), int(i64::MAX as u64));
                e.insert("kmax_bytes".into(), int(i64::MAX as u64));
                e.insert("pmax".into(), toml::Value::Float(0.0));
            }
            by_rate.push(toml::Value::Table(e));
        }
        red.insert("by_rate".into(), toml::Value::Array(by_rate));
        sections.red = Some(red);

        // PFC on every data priority (ns-3 pauses any queue but the control queue 0), dynamic
        // threshold, headroom per port from its speed and delay (the world computes it).
        let mut pfc = toml::Table::new();
        pfc.insert(
            "lossless_priorities".into(),
            toml::Value::Array((1..8).map(int).collect()),
        );
        pfc.insert("threshold".into(), toml::Value::String("dynamic".into()));
        sections.pfc = Some(pfc);

        let payload: u32 = parse_num(
            origin,
            "PACKET_PAYLOAD_SIZE",
            one("PACKET_PAYLOAD_SIZE").unwrap_or("1000"),
        )?;
        if !(64..=65_000).contains(&payload) {
            bail!("{origin}: PACKET_PAYLOAD_SIZE {payload}: must be 64..=65000");
        }
        // ns-3 acknowledges when the next expected octet passes a milestone that advances by
        // L2_ACK_INTERVAL octets: up to one payload, that is every packet.
        let ack: u64 = parse_num(
            origin,
            "L2_ACK_INTERVAL",
            one("L2_ACK_INTERVAL").unwrap_or("0"),
        )?;
        if ack == 0 || ack > payload as u64 {
            bail!(
                "{origin}: L2_ACK_INTERVAL {ack}: quench models an ACK per packet \
                 (1..={payload} octets); 0 (no ACKs) never completes a flow"
            );
        }
        let buffer_mb: u64 = parse_num(origin, "BUFFER_SIZE", one("BUFFER_SIZE").unwrap_or("16"))?;
        let stop_s: f64 = parse_num(
            origin,
            "SIMULATOR_STOP_TIME",
            one("SIMULATOR_STOP_TIME").unwrap_or("3.01"),
        )?;
        if !(stop_s > 0.0 && stop_s < 1e9) {
            bail!("{origin}: SIMULATOR_STOP_TIME {stop_s}: must be > 0 seconds");
        }
        let error_rate: f64 = parse_num(
            origin,
            "ERROR_RATE_PER_LINK",
            one("ERROR_RATE_PER_LINK").unwrap_or("0"),
        )?;
        if !(0.0..=1.0).contains(&error_rate) {
            bail!("{origin}: ERROR_RATE_PER_LINK {error_rate}: not a probability");
        }
        let qlen = match one("QLEN_MON_FILE") {
            None => None,
            Some(f) => {
                let ns = |k: &str, d: &str| -> anyhow::Result<Instant> {
                    Ok(Instant::from_nanos(parse_num(
                        origin,
                        k,
                        one(k).unwrap_or(d),
                    )?))
                };
                let window = QlenWindow {
                    start: ns("QLEN_MON_START", "2000000000")?,
                    end: ns("QLEN_MON_END", "2100000000")?,
                };
                Some((f.to_string(), window))
            }
        };
        Ok(Ns3Config {
            origin: origin.to_string(),
            sections,
            payload,
            buffer_bytes: buffer_mb * 1024 * 1024,
            stop: Instant::from_nanos((stop_s * 1e9).round() as u64),
            error_rate,
            topology_file: one("TOPOLOGY_FILE").map(str::to_string),
            flow_file: one("FLOW_FILE").map(str::to_string),
            fct_file: one("FCT_OUTPUT_FILE").map(str::to_string),
            pfc_file: one("PFC_OUTPUT_FILE").map(str::to_string),
            qlen,
        })
    }

    /// The run settings: payload, ns-3's frame sizes, ACK per packet, buffer, stop bound, the
    /// outputs' bookkeeping.
    pub fn apply(&self, cfg: &mut RunConfig) {
        cfg.host.mtu = self.payload;
        cfg.host.header_bytes = NS3_DATA_HEADER_BYTES;
        cfg.host.ctrl_bytes = NS3_ACK_BYTES;
        cfg.switch.pfc_frame_bytes = NS3_PFC_BYTES;
        cfg.tx_time = TxTime::Ns3;
        cfg.host.spacing = rp::Spacing::Ns3;
        cfg.switch.acks_with_data = true;
        cfg.host.ack_every = 1;
        cfg.switch.buffer_bytes = self.buffer_bytes;
        cfg.stop = Some(self.stop);
        cfg.qlen_window = self.qlen.as_ref().map(|(_, w)| *w);
        cfg.pfc_log = self.pfc_file.is_some();
    }

    /// `ERROR_RATE_PER_LINK` on the links whose own error rate is 0 (as third.cc installs its
    /// shared error model on them).
    pub fn apply_topology(&self, topo: &mut Topology) {
        if self.error_rate > 0.0 {
            for l in topo.links.iter_mut().filter(|l| l.err == 0.0) {
                l.err = self.error_rate;
            }
        }
    }

    /// The congestion control a config.txt selects (it only ever reaches here as DCQCN).
    pub fn kind(&self) -> CcKind {
        CcKind::Dcqcn
    }
}

/// A path from config.txt: absolute, or relative to `base` (ns-3's working directory).
pub fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// The presets that stand for a run.py `--cc`: name -> run.py's cc.
pub fn run_py_preset(name: &str) -> Option<&'static str> {
    match name {
        "hpcc-dcqcn" => Some("dcqcn"),
        "hpcc-dcqcn-paper" => Some("dcqcn_paper"),
        _ => None,
    }
}

/// The config.txt run.py writes for `--cc cc --bw bw_gbps`, without its file keys (topology,
/// flows, outputs) and its trace switches. Every value run.py derives from the bandwidth is
/// here: R_AI = 5 bw/25 and R_HAI = 50 bw/25 Mb/s, the buffer 16 bw/50 MB (Python 2 integer
/// division, as run.py runs under Python 2), Kmin/Kmax 100/400 KB per 25 Gb/s and Pmax 0.2 for
/// the NIC speed and for 4x it.
pub fn run_py_config(cc: &str, bw_gbps: u64) -> anyhow::Result<String> {
    if bw_gbps == 0 || bw_gbps > 100_000 {
        bail!("--bw {bw_gbps}: give the NIC speed in Gb/s (run.py --bw)");
    }
    let bw = bw_gbps;
    // run.py: dcqcn: t_alpha=1, t_dec=4, t_inc=300; dcqcn_paper: t_alpha=50, t_dec=50, t_inc=55.
    let (t_alpha, t_dec, t_inc) = match cc {
        "dcqcn" => (1, 4, 300),
        "dcqcn_paper" => (50, 50, 55),
        _ => bail!("run.py --cc {cc}: quench has presets for dcqcn and dcqcn_paper"),
    };
    let (ai, hai) = (5 * bw / 25, 50 * bw / 25);
    let bfsz = 16 * bw / 50;
    let g = 1e9 as u64;
    Ok(format!(
        "ENABLE_QCN 1\nUSE_DYNAMIC_PFC_THRESHOLD 1\nPACKET_PAYLOAD_SIZE 1000\n\
         SIMULATOR_STOP_TIME 4.00\nCC_MODE 1\nALPHA_RESUME_INTERVAL {t_alpha}\n\
         RATE_DECREASE_INTERVAL {t_dec}\nCLAMP_TARGET_RATE 0\nRP_TIMER {t_inc}\n\
         EWMA_GAIN 0.00390625\nFAST_RECOVERY_TIMES 1\nRATE_AI {ai}Mb/s\nRATE_HAI {hai}Mb/s\n\
         MIN_RATE 1000Mb/s\nDCTCP_RATE_AI 1000Mb/s\nERROR_RATE_PER_LINK 0.0000\n\
         L2_CHUNK_SIZE 4000\nL2_ACK_INTERVAL 1\nL2_BACK_TO_ZERO 0\nHAS_WIN 0\nGLOBAL_T 1\n\
         VAR_WIN 0\nFAST_REACT 0\nRATE_BOUND 1\nACK_HIGH_PRIO 1\nLINK_DOWN 0 0 0\n\
         ENABLE_TRACE 0\nKMAX_MAP 2 {r1} {kmax1} {r4} {kmax4}\n\
         KMIN_MAP 2 {r1} {kmin1} {r4} {kmin4}\nPMAX_MAP 2 {r1} 0.20 {r4} 0.20\n\
         BUFFER_SIZE {bfsz}\n",
        r1 = bw * g,
        r4 = bw * 4 * g,
        kmax1 = 400 * bw / 25,
        kmax4 = 400 * bw * 4 / 25,
        kmin1 = 100 * bw / 25,
        kmin4 = 100 * bw * 4 / 25,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::cc::CcSetup;

    /// What run.py writes for `--cc dcqcn --bw 100 --topo topo_incast --trace flow_incast`.
    fn written_by_run_py() -> String {
        let mut s = String::from(
            "TOPOLOGY_FILE mix/topo_incast.txt\nFLOW_FILE mix/flow_incast.txt\n\
             TRACE_FILE mix/trace.txt\nTRACE_OUTPUT_FILE mix/mix_topo_incast_flow_incast_dcqcn.tr\n\
             FCT_OUTPUT_FILE mix/fct_topo_incast_flow_incast_dcqcn.txt\n\
             PFC_OUTPUT_FILE mix/pfc_topo_incast_flow_incast_dcqcn.txt\n\n",
        );
        s += &run_py_config("dcqcn", 100).unwrap();
        s += "U_TARGET 0.95\nMI_THRESH 0\nINT_MULTI 1\nMULTI_RATE 0\nSAMPLE_FEEDBACK 0\n\
              PINT_LOG_BASE 1.01\nPINT_PROB 1.0\n\
              QLEN_MON_FILE mix/qlen_topo_incast_flow_incast_dcqcn.txt\n\
              QLEN_MON_START 2000000000\nQLEN_MON_END 3000000000\n";
        s
    }

    #[test]
    fn reads_what_run_py_writes() {
        let c = Ns3Config::parse(&written_by_run_py(), "config.txt").unwrap();
        assert_eq!(c.topology_file.as_deref(), Some("mix/topo_incast.txt"));
        assert_eq!(c.buffer_bytes, 32 * 1024 * 1024);
        assert_eq!(c.stop, Instant::from_nanos(4_000_000_000));
        let (f, w) = c.qlen.clone().unwrap();
        assert_eq!(f, "mix/qlen_topo_incast_flow_incast_dcqcn.txt");
        assert_eq!(w.end, Instant::from_nanos(3_000_000_000));
        let setup = CcSetup::new(c.kind(), &c.sections, "config.txt").unwrap();
        // The reaction point as hpcc-ns3.toml documents ns-3's values at 100G.
        let preset: CcSections = toml::from_str(MLX_BASE).unwrap();
        let base = CcSetup::new(CcKind::Dcqcn, &preset, "hpcc-ns3").unwrap();
        assert_eq!(format!("{:?}", setup.dcqcn), format!("{:?}", base.dcqcn));
        // RED per speed: 100G 400/1600 KB, 400G 1600/6400 KB, Pmax 0.2.
        let red = setup.red.as_ref().unwrap();
        let p100 = red.at(Rate::from_gbps(100)).unwrap();
        assert_eq!(p100.probability(400_000), 0.0);
        assert!((p100.probability(1_000_000) - 0.1).abs() < 1e-12);
        assert_eq!(p100.probability(1_600_001), 1.0);
        let p400 = red.at(Rate::from_gbps(400)).unwrap();
        assert!((p400.probability(4_000_000) - 0.1).abs() < 1e-12);
        assert!(red.at(Rate::from_gbps(25)).is_err());
        let pfc = setup.pfc.unwrap();
        assert_eq!(pfc.params.lossless_priorities, (1..8).collect::<Vec<u8>>());
        let mut cfg = RunConfig::default();
        c.apply(&mut cfg);
        assert_eq!((cfg.host.mtu, cfg.host.ack_every), (1000, 1));
        assert!(cfg.pfc_log && cfg.qlen_window.is_some());
    }

    #[test]
    fn paper_timers_and_bandwidth_scaling() {
        let c = Ns3Config::parse(&run_py_config("dcqcn_paper", 25).unwrap(), "p").unwrap();
        let rp = c.sections.dcqcn_rp.as_ref().unwrap();
        assert_eq!(rp["dce_tcp_rtt"].as_integer(), Some(50));
        assert_eq!(rp["rate_reduce_monitor_period"].as_integer(), Some(50));
        assert_eq!(rp["rpg_time_reset"].as_integer(), Some(55));
        assert_eq!(rp["rpg_ai_rate"].as_integer(), Some(5));
        assert_eq!(rp["rpg_hai_rate"].as_integer(), Some(50));
        // Python 2: 16 * 25 / 50 = 8 MB.
        assert_eq!(c.buffer_bytes, 8 * 1024 * 1024);
        let setup = CcSetup::new(CcKind::Dcqcn, &c.sections, "p").unwrap();
        let red = setup.red.unwrap();
        assert!((red.at(Rate::from_gbps(25)).unwrap().probability(250_000) - 0.1).abs() < 1e-12);
        assert!(run_py_config("hp", 100).is_err());
    }

    #[test]
    fn unsupported_modes_and_keys_are_errors_that_name_them() {
        let base = written_by_run_py();
        for (change, want) in [
            ("CC_MODE 1", "CC_MODE 3 (HPCC)"),
            ("ACK_HIGH_PRIO 1", "ACK_HIGH_PRIO 0"),
            ("HAS_WIN 0", "HAS_WIN 1"),
            ("LINK_DOWN 0 0 0", "LINK_DOWN 2000 1 3"),
            ("ENABLE_TRACE 0", "ENABLE_TRACE 1"),
            ("L2_ACK_INTERVAL 1", "L2_ACK_INTERVAL 4000"),
            ("L2_BACK_TO_ZERO 0", "L2_BACK_TO_ZERO 1"),
            ("RATE_BOUND 1", "RATE_BOUND 0"),
        ] {
            let to = match want {
                "CC_MODE 3 (HPCC)" => "CC_MODE 3",
                w => w,
            };
            assert!(base.contains(change), "{change}");
            let text = base.replace(change, to);
            let e = Ns3Config::parse(&text, "cfg.txt").err().unwrap();
            let m = format!("{e:#}");
            assert!(m.contains("cfg.txt") && m.contains(want), "{to}: {m}");
        }
        for (extra, want) in [
            ("PAUSE_TIME 5\n", "PAUSE_TIME"),
            ("NEW_KNOB 1\n", "unknown key NEW_KNOB"),
            ("RP_TIMER 55\n", "RP_TIMER is given twice"),
            ("KMAX_MAP 1 100000000000 1600\n", "KMAX_MAP is given twice"),
        ] {
            let e = Ns3Config::parse(&(base.clone() + extra), "cfg.txt")
                .err()
                .unwrap();
            let m = format!("{e:#}");
            assert!(m.contains(want), "{extra}: {m}");
        }
        let no_map = base.replace("PMAX_MAP 2 100000000000 0.20 400000000000 0.20\n", "");
        let e = Ns3Config::parse(&no_map, "c").err().unwrap();
        assert!(format!("{e:#}").contains("PMAX_MAP is missing"));
        let odd = base.replace("KMIN_MAP 2 100000000000", "KMIN_MAP 2 50000000000");
        let e = Ns3Config::parse(&odd, "c").err().unwrap();
        assert!(format!("{e:#}").contains("KMIN_MAP"));
        for cc in ["CC_MODE 7", "CC_MODE 8", "CC_MODE 10"] {
            let e = Ns3Config::parse(&base.replace("CC_MODE 1", cc), "c")
                .err()
                .unwrap();
            assert!(format!("{e:#}").contains(cc), "{e:#}");
        }
    }
}
