//! The HPCC ns-3 simulator's `config.txt` (alibaba-edu/High-Precision-Congestion-Control,
//! `simulation/mix/config_doc.txt`, written by `simulation/run.py`, read by `scratch/third.cc`),
//! and the run.py settings as presets (`hpcc-dcqcn`, `hpcc-dcqcn-paper` at a NIC speed).
//!
//! The file is whitespace-separated `KEY value...` pairs. ns-3 skips a key it does not know and
//! runs on; here every key is either applied, or known to have no effect in the modelled setting
//! (DCQCN, `CC_MODE 1`, no window), or an error that names it, so a config never runs with a
//! setting quietly dropped. An absent key takes third.cc's default. Every problem of a file is
//! reported in one pass, a line each.
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
//! | `ACK_HIGH_PRIO` | 0 (third.cc's default): a PFC pause of priority 3 also holds the NIC's ACKs, NACKs and CNPs (ns-3's `ack_q_idx` 3); non-zero: nothing holds them |
//! | `ENABLE_TRACE` | 1 (third.cc's default): a warning that ns-3's binary packet trace is not written; 0 |
//! | `HAS_WIN` | 0; non-zero, or absent (third.cc's default is 1), is an error: quench's senders have no window |
//! | `RATE_BOUND` 1, `L2_BACK_TO_ZERO` 0, `LINK_DOWN 0 0 0` | the modelled behaviour; other values are errors |
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
use super::config::{IntMode, RunConfig, TxTime};
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

/// The NIC's ACK queue index under `ACK_HIGH_PRIO 0` (`RdmaEgressQueue::ack_q_idx`): its
/// ACKs, NACKs and CNPs wait while this priority is paused.
pub const NS3_ACK_QUEUE_PRIO: u8 = 3;

/// ns-3's RDMA defaults that config.txt tunes: configs/hpcc-ns3.toml (the "mlx" event flow,
/// per-packet CNP flags). Built in, so the preset works wherever the binary runs.
const MLX_BASE: &str = include_str!("../../../configs/hpcc-ns3.toml");

/// How many values a key takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arity {
    One,
    /// `LINK_DOWN`'s time and two nodes.
    Three,
    /// A count `n`, then `n` (rate, value) pairs (`KMAX_MAP`, `KMIN_MAP`, `PMAX_MAP`).
    Map,
}

/// The keys of a config.txt and the values each takes; the module table says how each is
/// applied. A key not here is an error naming it.
const KEYS: &[(&str, Arity)] = {
    use Arity::*;
    &[
        ("CC_MODE", One),
        ("ALPHA_RESUME_INTERVAL", One),
        ("RATE_DECREASE_INTERVAL", One),
        ("CLAMP_TARGET_RATE", One),
        ("RP_TIMER", One),
        ("EWMA_GAIN", One),
        ("FAST_RECOVERY_TIMES", One),
        ("RATE_AI", One),
        ("RATE_HAI", One),
        ("MIN_RATE", One),
        ("KMAX_MAP", Map),
        ("KMIN_MAP", Map),
        ("PMAX_MAP", Map),
        ("ENABLE_QCN", One),
        ("BUFFER_SIZE", One),
        ("PACKET_PAYLOAD_SIZE", One),
        ("L2_ACK_INTERVAL", One),
        ("ERROR_RATE_PER_LINK", One),
        ("SIMULATOR_STOP_TIME", One),
        ("TOPOLOGY_FILE", One),
        ("FLOW_FILE", One),
        ("FCT_OUTPUT_FILE", One),
        ("PFC_OUTPUT_FILE", One),
        ("QLEN_MON_FILE", One),
        ("QLEN_MON_START", One),
        ("QLEN_MON_END", One),
        ("ACK_HIGH_PRIO", One),
        ("RATE_BOUND", One),
        ("HAS_WIN", One),
        ("L2_BACK_TO_ZERO", One),
        ("LINK_DOWN", Three),
        ("ENABLE_TRACE", One),
        ("DCTCP_RATE_AI", One),
        ("GLOBAL_T", One),
        ("VAR_WIN", One),
        ("FAST_REACT", One),
        ("U_TARGET", One),
        ("MI_THRESH", One),
        ("INT_MULTI", One),
        ("MULTI_RATE", One),
        ("SAMPLE_FEEDBACK", One),
        ("PINT_LOG_BASE", One),
        ("PINT_PROB", One),
        // No effect in any mode quench models (the module table).
        ("DATA_RATE", One),
        ("LINK_DELAY", One),
        ("L2_CHUNK_SIZE", One),
        ("USE_DYNAMIC_PFC_THRESHOLD", One),
        ("TRACE_FILE", One),
        ("TRACE_OUTPUT_FILE", One),
    ]
};

/// A config.txt as read: everything a run needs besides the topology and flows themselves.
#[derive(Clone, Debug)]
pub struct Ns3Config {
    /// Names the file in errors.
    pub origin: String,
    /// `CC_MODE`: 1 DCQCN, 3 HPCC, 7 TIMELY, 8 DCTCP, 10 HPCC-PINT.
    pub kind: CcKind,
    /// What data packets collect and ACKs echo (`IntHeader::mode` for the `CC_MODE`).
    pub int: IntMode,
    /// `HAS_WIN 1`: `Some(VAR_WIN)`.
    pub window: Option<bool>,
    pub sections: CcSections,
    pub payload: u32,
    pub buffer_bytes: u64,
    pub stop: Instant,
    /// `ERROR_RATE_PER_LINK`: loss on links whose own error rate is 0.
    pub error_rate: f64,
    /// `ACK_HIGH_PRIO` non-zero: no PFC pause holds the NIC's ACK queue; 0 (third.cc's
    /// default): a pause of priority 3 does.
    pub ack_high_prio: bool,
    /// What is read but not acted on, a sentence each (the CLI prints them as warnings).
    pub warnings: Vec<String>,
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
    /// Reads config.txt text; `origin` names it in errors. Every problem of the file is
    /// reported at once, a line each; what quench reads but does not act on is in
    /// [`Ns3Config::warnings`].
    pub fn parse(text: &str, origin: &str) -> anyhow::Result<Ns3Config> {
        Ns3Config::read(text, origin, false)
    }

    /// [`Ns3Config::parse`] of a whole config.txt, which names its inputs: without
    /// `TOPOLOGY_FILE` and `FLOW_FILE` ns-3 reads no network and runs no flow.
    pub fn parse_file(text: &str, origin: &str) -> anyhow::Result<Ns3Config> {
        Ns3Config::read(text, origin, true)
    }

    fn read(text: &str, origin: &str, whole_file: bool) -> anyhow::Result<Ns3Config> {
        let mut r = Reader::new(text, origin);
        let kind = r.cc_mode();
        let (window, ack_high_prio) = r.modelled_settings(kind);
        // The reaction point: hpcc-ns3.toml's mlx setting with config.txt's values over it.
        let mut sections: CcSections =
            toml::from_str(MLX_BASE).context("configs/hpcc-ns3.toml (built in)")?;
        let (g, rates) = r.dcqcn_rp(kind, &mut sections);
        let int = r.ack_driven_rp(kind, g, rates, &mut sections);
        if kind != CcKind::Dcqcn {
            sections.dcqcn_rp = None;
        }
        sections.red = Some(r.red());
        // PFC on every data priority (ns-3 pauses any queue but the control queue 0), dynamic
        // threshold, headroom per port from its speed and delay (the world computes it).
        let mut pfc = toml::Table::new();
        pfc.insert(
            "lossless_priorities".into(),
            toml::Value::Array((1..8).map(int_value).collect()),
        );
        pfc.insert("threshold".into(), toml::Value::String("dynamic".into()));
        sections.pfc = Some(pfc);
        let run = r.run_settings(&mut sections);
        let qlen = r.qlen();
        // A config.txt names its inputs: without them ns-3 reads nothing and runs no flow.
        for key in ["TOPOLOGY_FILE", "FLOW_FILE"] {
            if r.one(key).is_none() && whole_file {
                r.errs.push(format!(
                    "{origin}: {key} is missing (ns-3 would run without {})",
                    if key == "FLOW_FILE" {
                        "a flow"
                    } else {
                        "a network"
                    }
                ));
            }
        }
        if !r.errs.is_empty() {
            let n = r.errs.len();
            bail!(
                "{}{}",
                if n > 1 {
                    format!("{n} problems:\n")
                } else {
                    String::new()
                },
                r.errs.join("\n")
            );
        }
        let file = |k: &str| r.one(k).map(str::to_string);
        Ok(Ns3Config {
            origin: origin.to_string(),
            kind,
            int,
            window,
            sections,
            payload: run.payload,
            buffer_bytes: run.buffer_mb * 1024 * 1024,
            stop: Instant::from_nanos((run.stop_s * 1e9).round() as u64),
            error_rate: run.error_rate,
            ack_high_prio,
            topology_file: file("TOPOLOGY_FILE"),
            flow_file: file("FLOW_FILE"),
            fct_file: file("FCT_OUTPUT_FILE"),
            pfc_file: file("PFC_OUTPUT_FILE"),
            qlen,
            warnings: r.warnings,
        })
    }

    /// The run settings: payload, ns-3's frame sizes, ACK per packet, buffer, stop bound, the
    /// outputs' bookkeeping.
    pub fn apply(&self, cfg: &mut RunConfig) {
        cfg.host.mtu = self.payload;
        // INT rides in the data packet's SeqTsHeader and in the ACK's qbbHeader; an ACK is
        // padded to 60 octets ("std::max(60-14-20-(int)seqh.GetSerializedSize(), 0)").
        let int = self.int.bytes();
        cfg.host.header_bytes = NS3_DATA_HEADER_BYTES + int;
        cfg.host.ctrl_bytes = NS3_ACK_BYTES.max(NS3_ACK_BYTES - 14 + int);
        cfg.host.int = self.int;
        cfg.host.window = self.window;
        cfg.switch.pfc_frame_bytes = NS3_PFC_BYTES;
        cfg.tx_time = TxTime::Ns3;
        cfg.host.spacing = rp::Spacing::Ns3;
        cfg.switch.acks_with_data = true;
        cfg.host.ack_every = 1;
        cfg.host.ack_pause_prio = (!self.ack_high_prio).then_some(NS3_ACK_QUEUE_PRIO);
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

    /// The congestion control a config.txt selects (`CC_MODE`).
    pub fn kind(&self) -> CcKind {
        self.kind
    }
}

fn int_value(x: u64) -> toml::Value {
    toml::Value::Integer(x as i64)
}

/// The run settings config.txt gives besides the controls' sections.
struct RunSettings {
    payload: u32,
    buffer_mb: u64,
    stop_s: f64,
    error_rate: f64,
}

/// A config.txt's keys and values as read, and the problems found so far: each step of
/// [`Ns3Config::read`] reads its keys, notes every problem (a line naming the key) and goes on
/// with a fallback, so one pass reports all of a file's problems.
struct Reader<'a> {
    origin: &'a str,
    kv: BTreeMap<&'a str, Vec<&'a str>>,
    errs: Vec<String>,
    /// What is read but not acted on, a sentence each.
    warnings: Vec<String>,
}

impl<'a> Reader<'a> {
    /// Splits `text` into keys and their values by [`KEYS`]: an unknown key, a key without its
    /// values or given twice is an error naming it.
    fn new(text: &'a str, origin: &'a str) -> Reader<'a> {
        let mut r = Reader {
            origin,
            kv: BTreeMap::new(),
            errs: Vec::new(),
            warnings: Vec::new(),
        };
        let mut toks = text.split_whitespace().peekable();
        // A key's value is never a KEY-like word; after an unknown key, its values are skipped
        // up to the next key so one unknown key is one error.
        let key_like = |t: &str| {
            t.starts_with(|c: char| c.is_ascii_uppercase())
                && t.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        };
        while let Some(key) = toks.next() {
            let arity = match KEYS.iter().find(|(k, _)| *k == key) {
                Some((_, Arity::Map)) => {
                    let Some(n) = toks.next() else {
                        r.errs
                            .push(format!("{origin}: {key} without its entry count"));
                        break;
                    };
                    let n: usize = r.note(parse_num(origin, key, n), 0);
                    if n > 1024 {
                        r.errs
                            .push(format!("{origin}: {key} {n}: too many entries"));
                        continue;
                    }
                    2 * n
                }
                Some((_, Arity::Three)) => 3,
                Some((_, Arity::One)) => 1,
                None => {
                    r.errs.push(if key == "PAUSE_TIME" {
                        format!(
                            "{origin}: PAUSE_TIME: quench's PFC pauses until resumed, as ns-3 \
                             does with run.py's settings; a pause time is not modelled"
                        )
                    } else {
                        format!("{origin}: unknown key {key} (quench reads the keys run.py writes)")
                    });
                    while toks.peek().is_some_and(|t| !key_like(t)) {
                        toks.next();
                    }
                    continue;
                }
            };
            let v: Vec<&str> = toks.by_ref().take(arity).collect();
            if v.len() != arity {
                r.errs.push(if key.ends_with("_MAP") {
                    format!("{origin}: {key} promises {} (rate, value) pairs", arity / 2)
                } else {
                    format!("{origin}: {key} without its value")
                });
            } else if r.kv.insert(key, v).is_some() {
                r.errs.push(format!("{origin}: {key} is given twice"));
            }
        }
        r
    }

    /// The value, or the error noted and `fallback` used so the rest of the file is still
    /// checked.
    fn note<T>(&mut self, r: anyhow::Result<T>, fallback: T) -> T {
        match r {
            Ok(v) => v,
            Err(e) => {
                self.errs.push(format!("{e:#}"));
                fallback
            }
        }
    }

    fn one(&self, k: &str) -> Option<&'a str> {
        self.kv.get(k).map(|v| v[0])
    }

    /// The number `key` holds, or third.cc's `default` when the file does not set it; an
    /// error noted gives `fallback`.
    fn value<T: std::str::FromStr>(&mut self, key: &str, default: &str, fallback: T) -> T {
        let v = self.one(key).unwrap_or(default);
        let r = parse_num(self.origin, key, v);
        self.note(r, fallback)
    }

    /// A switch third.cc reads as an unsigned integer and tests for non-zero; an error noted
    /// gives `fallback`.
    fn switch(&mut self, key: &str, default: u32, fallback: bool) -> bool {
        let v = self
            .one(key)
            .unwrap_or(if default == 0 { "0" } else { "1" });
        let r = parse_num::<u32>(self.origin, key, v).map(|x| x != 0);
        self.note(r, fallback)
    }

    /// A key third.cc has no default for.
    fn need(&mut self, k: &str) -> Option<&'a str> {
        let v = self.one(k);
        if v.is_none() {
            self.errs.push(format!(
                "{}: {k} is missing (ns-3 has no default for it)",
                self.origin
            ));
        }
        v
    }

    /// CC_MODE (third.cc default 1).
    fn cc_mode(&mut self) -> CcKind {
        match self.one("CC_MODE").unwrap_or("1") {
            "1" => CcKind::Dcqcn,
            "3" => CcKind::Hpcc,
            "7" => CcKind::Timely,
            "8" => CcKind::Dctcp,
            "10" => CcKind::Pint,
            m => {
                self.errs.push(format!(
                    "{}: CC_MODE {m}: quench models 1 (DCQCN), 3 (HPCC), 7 (TIMELY), \
                     8 (DCTCP) and 10 (HPCC-PINT)",
                    self.origin
                ));
                CcKind::Dcqcn
            }
        }
    }

    /// The window (`HAS_WIN 1`: `Some(VAR_WIN)`) and `ACK_HIGH_PRIO`; the keys whose other
    /// values are not modelled (`GLOBAL_T`, `RATE_BOUND`, `L2_BACK_TO_ZERO`, `LINK_DOWN`) and
    /// `ENABLE_TRACE`'s warning.
    fn modelled_settings(&mut self, kind: CcKind) -> (Option<bool>, bool) {
        let origin = self.origin;
        // ACK_HIGH_PRIO (third.cc default 0) picks the NIC's ACK queue index: 0, which no PFC
        // pause holds, or 3, whose pause holds the NIC's ACKs, NACKs and CNPs too (qbb-net-
        // device.cc: "if (!paused[ack_q_idx] && m_ackQ->GetNPackets() > 0)"). Either way the
        // NIC sends them ahead of data, and switches queue them with their flow's data.
        let ack_high_prio = self.switch("ACK_HIGH_PRIO", 0, true);
        let has_win = self.switch("HAS_WIN", 1, false);
        let enable_trace = self.switch("ENABLE_TRACE", 1, false);
        // HAS_WIN (third.cc default 1) gives each flow a window of one BDP (`maxBdp` with
        // GLOBAL_T 1), VAR_WIN (default 0) scales it with the flow's rate.
        let var_win = self.switch("VAR_WIN", 0, false);
        let window = has_win.then_some(var_win);
        if has_win || kind == CcKind::Hpcc {
            let global_t = self.one("GLOBAL_T").unwrap_or("1");
            if global_t != "1" {
                self.errs.push(format!(
                    "{origin}: GLOBAL_T {global_t}: per host pair windows and base RTTs are not \
                     modelled; only GLOBAL_T 1 (the network's largest)"
                ));
            }
        }
        if kind == CcKind::Hpcc && !has_win {
            self.errs.push(format!(
                "{origin}: CC_MODE 3 with HAS_WIN 0: HPCC's rule divides by the window (ns-3 \
                 divides by zero); give HAS_WIN 1"
            ));
        }
        // ENABLE_TRACE (third.cc default 1) writes the binary packet trace of TRACE_FILE's
        // nodes to TRACE_OUTPUT_FILE: an output only, which quench does not write.
        let trace_out = self.one("TRACE_OUTPUT_FILE");
        if enable_trace && (self.one("ENABLE_TRACE").is_some() || trace_out.is_some()) {
            self.warnings.push(format!(
                "{origin}: ENABLE_TRACE {}: ns-3's binary packet trace{} is not written; the \
                 run is the same without it",
                self.one("ENABLE_TRACE").unwrap_or("1"),
                trace_out.map_or(String::new(), |f| format!(" ({f})"))
            ));
        }
        for (key, want, why) in [
            (
                "RATE_BOUND",
                "1",
                "quench's senders are always rate-limited",
            ),
            ("L2_BACK_TO_ZERO", "0", "quench retransmits go-back-N"),
        ] {
            if let Some(v) = self.one(key) {
                if v != want {
                    self.errs.push(format!(
                        "{origin}: {key} {v}: {why}; only {key} {want} is modelled"
                    ));
                }
            }
        }
        if let Some(v) = self.kv.get("LINK_DOWN") {
            if v.iter().any(|x| *x != "0") {
                let e = format!(
                    "{origin}: LINK_DOWN {}: link failures (with ns-3's re-routing) are not \
                     modelled; only LINK_DOWN 0 0 0",
                    v.join(" ")
                );
                self.errs.push(e);
            }
        }
        (window, ack_high_prio)
    }

    /// DCQCN's reaction point (`[dcqcn_rp]`); returns `EWMA_GAIN` and the values of
    /// `RATE_AI` and `RATE_HAI` where the mode reads them.
    fn dcqcn_rp(
        &mut self,
        kind: CcKind,
        sections: &mut CcSections,
    ) -> (f64, (Option<&'a str>, Option<&'a str>)) {
        let origin = self.origin;
        let rp = sections.dcqcn_rp.get_or_insert_with(toml::Table::new);
        // third.cc's defaults where a key is absent: alpha_resume_interval 55,
        // rate_decrease_interval 4, fast_recovery_times 5, min_rate 100Mb/s, clamp 0, and
        // ewma_gain `1 / 16`, an integer division: 0.
        let g: f64 = self.value("EWMA_GAIN", "0", 0.0);
        let g1024 = (1.0 - g) * 1024.0;
        if !(0.0..=1.0).contains(&g) || (kind == CcKind::Dcqcn && g1024.fract() != 0.0) {
            self.errs.push(format!(
                "{origin}: EWMA_GAIN {g}: quench keeps (1 - g) x 1024 as an integer \
                 (1/256 -> 1020, 1/16 -> 960)"
            ));
        }
        rp.insert("dce_tcp_g".into(), int_value(g1024 as u64));
        for (key, default, name) in [
            ("ALPHA_RESUME_INTERVAL", "55", "dce_tcp_rtt"),
            ("RATE_DECREASE_INTERVAL", "4", "rate_reduce_monitor_period"),
        ] {
            let m = micros(origin, key, self.one(key).unwrap_or(default));
            rp.insert(name.into(), int_value(self.note(m, 0)));
        }
        let uses_ai = kind != CcKind::Dctcp;
        let uses_hai = matches!(kind, CcKind::Dcqcn | CcKind::Timely);
        let rp_timer = if kind == CcKind::Dcqcn {
            self.need("RP_TIMER")
        } else {
            self.one("RP_TIMER")
        };
        let rate_ai = if uses_ai {
            self.need("RATE_AI")
        } else {
            self.one("RATE_AI")
        };
        let rate_hai = if uses_hai {
            self.need("RATE_HAI")
        } else {
            self.one("RATE_HAI")
        };
        let clamp = self.one("CLAMP_TARGET_RATE").unwrap_or("0");
        let clamp = flag(origin, "CLAMP_TARGET_RATE", clamp);
        rp.insert(
            "clamp_tgt_rate".into(),
            toml::Value::Boolean(self.note(clamp, false)),
        );
        if let Some(v) = rp_timer {
            let m = micros(origin, "RP_TIMER", v);
            rp.insert("rpg_time_reset".into(), int_value(self.note(m, 0)));
        }
        let frt: u32 = self.value("FAST_RECOVERY_TIMES", "5", 0);
        rp.insert("rpg_threshold".into(), int_value(frt as u64));
        for (key, v, name) in [
            ("RATE_AI", rate_ai, "rpg_ai_rate"),
            ("RATE_HAI", rate_hai, "rpg_hai_rate"),
            (
                "MIN_RATE",
                Some(self.one("MIN_RATE").unwrap_or("100Mb/s")),
                "rpg_min_rate",
            ),
        ] {
            if let Some(v) = v {
                let m = mbps(origin, key, v);
                rp.insert(name.into(), int_value(self.note(m, 0)));
            }
        }
        (g, (rate_ai, rate_hai))
    }

    /// The ACK-driven controls' sections (rdma-hw.cc attributes as third.cc sets them); returns
    /// what data packets collect and ACKs echo. A bad rate was reported by DCQCN's section,
    /// which reads them too.
    fn ack_driven_rp(
        &mut self,
        kind: CcKind,
        g: f64,
        (rate_ai, rate_hai): (Option<&str>, Option<&str>),
        sections: &mut CcSections,
    ) -> IntMode {
        let origin = self.origin;
        let rate = |key: &str, v: Option<&str>| v.map_or(0, |v| mbps(origin, key, v).unwrap_or(0));
        let min_rate = rate("MIN_RATE", Some(self.one("MIN_RATE").unwrap_or("100Mb/s")));
        let (ai, hai) = (rate("RATE_AI", rate_ai), rate("RATE_HAI", rate_hai));
        let mut t = toml::Table::new();
        t.insert("min_rate".into(), int_value(min_rate));
        let mut int_mode = IntMode::None;
        match kind {
            CcKind::Hpcc | CcKind::Pint => {
                let u = self.value("U_TARGET", "0.95", 0.95);
                t.insert("u_target".into(), toml::Value::Float(u));
                let mi: u64 = self.value("MI_THRESH", "5", 5);
                t.insert("mi_thresh".into(), int_value(mi));
                t.insert("rate_ai".into(), int_value(ai));
                if kind == CcKind::Hpcc {
                    let multi: u32 = self.value("INT_MULTI", "1", 1);
                    t.insert("int_multi".into(), int_value(u64::from(multi)));
                    for (k, name, d) in [
                        ("FAST_REACT", "fast_react", 1),
                        ("MULTI_RATE", "multi_rate", 1),
                        ("SAMPLE_FEEDBACK", "sample_feedback", 0),
                    ] {
                        t.insert(name.into(), toml::Value::Boolean(self.switch(k, d, false)));
                    }
                    int_mode = IntMode::Hops { multi };
                    sections.hpcc_rp = Some(t);
                } else {
                    let base = self.value("PINT_LOG_BASE", "1.05", 1.05);
                    t.insert("log_base".into(), toml::Value::Float(base));
                    let prob = self.value("PINT_PROB", "1.0", 1.0);
                    t.insert("prob".into(), toml::Value::Float(prob));
                    match rp::Pint::new(base) {
                        Some(code) => int_mode = IntMode::Pint { code },
                        None => self.errs.push(format!(
                            "{origin}: PINT_LOG_BASE {base}: must be above 1 with a code of at \
                             most 16 bits"
                        )),
                    }
                    sections.pint_rp = Some(t);
                }
            }
            CcKind::Timely => {
                t.insert("rate_ai".into(), int_value(ai));
                t.insert("rate_hai".into(), int_value(hai));
                int_mode = IntMode::Ts;
                sections.timely_rp = Some(t);
            }
            CcKind::Dctcp => {
                let dai = self.one("DCTCP_RATE_AI").unwrap_or("1000Mb/s");
                let m = mbps(origin, "DCTCP_RATE_AI", dai);
                t.insert("rate_ai".into(), int_value(self.note(m, 0)));
                t.insert("g".into(), toml::Value::Float(g));
                sections.dctcp_rp = Some(t);
            }
            _ => {}
        }
        int_mode
    }

    /// A `*_MAP` key's entries by link speed (b/s).
    fn map(&mut self, k: &str) -> BTreeMap<u64, &'a str> {
        let origin = self.origin;
        let mut m = BTreeMap::new();
        let Some(v) = self.kv.get(k).cloned() else {
            self.errs.push(format!(
                "{origin}: {k} is missing (ns-3 needs an entry for each link speed)"
            ));
            return m;
        };
        for pair in v.chunks(2) {
            let Some(rate) = self.note(parse_num::<u64>(origin, k, pair[0]).map(Some), None) else {
                continue;
            };
            if m.insert(rate, pair[1]).is_some() {
                self.errs
                    .push(format!("{origin}: {k}: {rate} b/s appears twice"));
            }
        }
        m
    }

    /// Marking: ns-3 `ConfigEcn(port, kmin, kmax, pmax)` per port speed, K in KB (x 1000).
    fn red(&mut self) -> toml::Table {
        let origin = self.origin;
        let ecn = flag(origin, "ENABLE_QCN", self.one("ENABLE_QCN").unwrap_or("1"));
        let ecn = self.note(ecn, true);
        let mut red = toml::Table::new();
        red.insert("mark_at".into(), toml::Value::String("dequeue".into()));
        let (kmax, kmin, pmax) = (
            self.map("KMAX_MAP"),
            self.map("KMIN_MAP"),
            self.map("PMAX_MAP"),
        );
        let rates: Vec<u64> = kmax.keys().copied().collect();
        for (k, m) in [("KMIN_MAP", &kmin), ("PMAX_MAP", &pmax)] {
            if !m.is_empty() && !rates.is_empty() && m.keys().copied().collect::<Vec<_>>() != rates
            {
                self.errs.push(format!(
                    "{origin}: {k} and KMAX_MAP name different link speeds"
                ));
            }
        }
        let mut by_rate = Vec::new();
        for r in rates {
            let (Some(kmin_v), Some(pmax_v)) = (kmin.get(&r), pmax.get(&r)) else {
                continue;
            };
            let mut e = toml::Table::new();
            e.insert("rate".into(), int_value(r));
            let mut kb = |k: &str, v: &str| -> toml::Value {
                let x = parse_num::<u64>(origin, k, v);
                int_value(self.note(x, 0).saturating_mul(1000))
            };
            let (kmin_b, kmax_b) = (kb("KMIN_MAP", kmin_v), kb("KMAX_MAP", kmax[&r]));
            let p = parse_num(origin, "PMAX_MAP", pmax_v);
            let p: f64 = self.note(p, 0.0);
            if ecn {
                e.insert("kmin_bytes".into(), kmin_b);
                e.insert("kmax_bytes".into(), kmax_b);
                e.insert("pmax".into(), toml::Value::Float(p));
            } else {
                // ENABLE_QCN 0: ns-3 switches never mark (EcnEnabled false).
                e.insert("kmin_bytes".into(), int_value(i64::MAX as u64));
                e.insert("kmax_bytes".into(), int_value(i64::MAX as u64));
                e.insert("pmax".into(), toml::Value::Float(0.0));
            }
            by_rate.push(toml::Value::Table(e));
        }
        red.insert("by_rate".into(), toml::Value::Array(by_rate));
        red
    }

    /// Payload, ACK interval, buffer, stop time and link loss.
    fn run_settings(&mut self, sections: &mut CcSections) -> RunSettings {
        let origin = self.origin;
        let payload: u32 = self.value("PACKET_PAYLOAD_SIZE", "1000", 1000);
        if let Some(t) = sections.dctcp_rp.as_mut() {
            // DCTCP counts a window's packets in `Mtu` = PACKET_PAYLOAD_SIZE.
            t.insert("mtu".into(), int_value(u64::from(payload)));
        }
        if !(64..=65_000).contains(&payload) {
            self.errs.push(format!(
                "{origin}: PACKET_PAYLOAD_SIZE {payload}: must be 64..=65000"
            ));
        }
        // ns-3 acknowledges when the next expected octet passes a milestone that advances by
        // L2_ACK_INTERVAL octets: up to one payload, that is every packet.
        let ack: u64 = self.value("L2_ACK_INTERVAL", "0", 1);
        if ack == 0 || ack > payload as u64 {
            self.errs.push(format!(
                "{origin}: L2_ACK_INTERVAL {ack}: quench models an ACK per packet \
                 (1..={payload} octets); 0 (no ACKs) never completes a flow"
            ));
        }
        let buffer_mb: u64 = self.value("BUFFER_SIZE", "16", 16);
        let stop_s: f64 = self.value("SIMULATOR_STOP_TIME", "3.01", 3.01);
        if !(stop_s > 0.0 && stop_s < 1e9) {
            self.errs.push(format!(
                "{origin}: SIMULATOR_STOP_TIME {stop_s}: must be > 0 seconds"
            ));
        }
        let error_rate: f64 = self.value("ERROR_RATE_PER_LINK", "0", 0.0);
        if !(0.0..=1.0).contains(&error_rate) {
            self.errs.push(format!(
                "{origin}: ERROR_RATE_PER_LINK {error_rate}: not a probability"
            ));
        }
        RunSettings {
            payload,
            buffer_mb,
            stop_s,
            error_rate,
        }
    }

    /// ns-3's queue-length monitor: its file and window.
    fn qlen(&mut self) -> Option<(String, QlenWindow)> {
        let f = self.one("QLEN_MON_FILE")?;
        let mut ns = |k: &str, d: &str| -> Instant { Instant::from_nanos(self.value(k, d, 0)) };
        let window = QlenWindow {
            start: ns("QLEN_MON_START", "2000000000"),
            end: ns("QLEN_MON_END", "2100000000"),
        };
        Some((f.to_string(), window))
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

/// A preset that stands for a run.py `--cc` at a NIC speed (`--bw`).
pub struct RunPyPreset {
    /// The preset's name, `hpcc-dcqcn`.
    pub name: &'static str,
    /// run.py's `--cc` value.
    pub cc: &'static str,
    /// One line for `quench presets`.
    pub summary: &'static str,
}

/// Every run.py preset: `quench presets` lists them, `--preset NAME --bw RATE` runs one.
pub const RUN_PY_PRESETS: &[RunPyPreset] = &[
    RunPyPreset {
        name: "hpcc-dcqcn",
        cc: "dcqcn",
        summary: "HPCC ns-3's run.py --cc dcqcn at --bw: DCQCN, its timers 1/4/300 us, ECN maps",
    },
    RunPyPreset {
        name: "hpcc-dcqcn-paper",
        cc: "dcqcn_paper",
        summary: "HPCC ns-3's run.py --cc dcqcn_paper at --bw: DCQCN, the paper's 50/50/55 us",
    },
    RunPyPreset {
        name: "hpcc-dcqcn-vwin",
        cc: "dcqcn_vwin",
        summary: "HPCC ns-3's run.py --cc dcqcn_vwin at --bw: DCQCN with a window (VAR_WIN)",
    },
    RunPyPreset {
        name: "hpcc-hp",
        cc: "hp",
        summary: "HPCC ns-3's run.py --cc hp at --bw: HPCC with INT, eta 0.95, a window",
    },
    RunPyPreset {
        name: "hpcc-timely",
        cc: "timely",
        summary: "HPCC ns-3's run.py --cc timely at --bw: TIMELY, no window",
    },
    RunPyPreset {
        name: "hpcc-dctcp",
        cc: "dctcp",
        summary: "HPCC ns-3's run.py --cc dctcp at --bw: DCTCP, ECN at one threshold, a window",
    },
    RunPyPreset {
        name: "hpcc-pint",
        cc: "hpccPint",
        summary: "HPCC ns-3's run.py --cc hpccPint at --bw: HPCC-PINT, log base 1.01, a window",
    },
];

/// The presets that stand for a run.py `--cc`: name -> run.py's cc.
pub fn run_py_preset(name: &str) -> Option<&'static str> {
    RUN_PY_PRESETS.iter().find(|p| p.name == name).map(|p| p.cc)
}

/// One Gb/s in bit/s.
const GBPS: u64 = 1_000_000_000;

/// What run.py's `--bw` takes.
const RUN_PY_BW: &str = "run.py's --bw is a whole number of Gb/s above 0 (at most 100000), \
                         e.g. 100gbit";

/// run.py's `--bw`, in Gb/s, for a NIC speed of `bps` bit/s: a whole number of Gb/s, 1 to
/// 100,000; the message says what it takes.
pub fn run_py_bw(bps: u64) -> Result<u64, &'static str> {
    match bps / GBPS {
        g @ 1..=100_000 if bps % GBPS == 0 => Ok(g),
        _ => Err(RUN_PY_BW),
    }
}

/// The config.txt run.py writes for `--cc cc --bw bw_gbps` (with its other options at their
/// defaults: `--utgt 95 --mi 0 --hpai 0 --pint_log_base 1.01 --pint_prob 1.0`), without its
/// file keys (topology, flows, outputs) and its trace switches. Every value run.py derives from
/// the bandwidth is here, in Python 2's integer division (run.py runs under Python 2): the
/// buffer 16 bw/50 MB; DCQCN's R_AI = 5 bw/25 and R_HAI = 50 bw/25 Mb/s; HPCC's and PINT's
/// R_AI = 10 bw/25 Mb/s and INT_MULTI bw/25; TIMELY's R_AI 10 bw/10 and R_HAI 50 bw/10; Kmin /
/// Kmax 100/400 KB per 25 Gb/s and Pmax 0.2 for the NIC speed and for 4x it, but for DCTCP
/// Kmin = Kmax = 30 KB per 10 Gb/s and Pmax 1.
pub fn run_py_config(cc: &str, bw_gbps: u64) -> anyhow::Result<String> {
    let bw = bw_gbps
        .checked_mul(GBPS)
        .and_then(|bps| run_py_bw(bps).ok())
        .ok_or_else(|| anyhow::anyhow!("--bw {bw_gbps}: {RUN_PY_BW}"))?;
    // run.py's arguments to its template: mode, t_alpha, t_dec, t_inc, g, ai, hai, dctcp_ai,
    // has_win, vwin, us (FAST_REACT), int_multi, ack_prio.
    let (mode, t_alpha, t_dec, t_inc) = match cc {
        "dcqcn" | "dcqcn_vwin" => (1, 1, 4, 300),
        "dcqcn_paper" => (1, 50, 50, 55),
        "hp" => (3, 1, 4, 300),
        "timely" => (7, 1, 4, 300),
        "dctcp" => (8, 1, 4, 300),
        "hpccPint" => (10, 1, 4, 300),
        _ => bail!(
            "run.py --cc {cc}: quench has presets for {}",
            RUN_PY_PRESETS
                .iter()
                .map(|p| p.cc)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let g = if cc == "dctcp" {
        "0.0625"
    } else {
        "0.00390625"
    };
    let (ai, hai) = match cc {
        "hp" | "hpccPint" => (10 * bw / 25, 10 * bw / 25),
        "timely" => (10 * bw / 10, 50 * bw / 10),
        "dctcp" => (10, 10),
        _ => (5 * bw / 25, 50 * bw / 25),
    };
    let dctcp_ai = if cc == "dctcp" { 615 } else { 1000 };
    let window = matches!(cc, "dcqcn_vwin" | "hp" | "dctcp" | "hpccPint");
    let fast_react = matches!(cc, "hp" | "hpccPint");
    let int_multi = if fast_react { bw / 25 } else { 1 };
    let ack_prio = matches!(cc, "dcqcn" | "dcqcn_paper" | "timely");
    let bfsz = 16 * bw / 50;
    let gbps = 1e9 as u64;
    let (kmin, kmax, pmax) = if cc == "dctcp" {
        (
            (30 * bw / 10, 30 * bw * 4 / 10),
            (30 * bw / 10, 30 * bw * 4 / 10),
            "1.00",
        )
    } else {
        (
            (100 * bw / 25, 100 * bw * 4 / 25),
            (400 * bw / 25, 400 * bw * 4 / 25),
            "0.20",
        )
    };
    let mut text = format!(
        "ENABLE_QCN 1\nUSE_DYNAMIC_PFC_THRESHOLD 1\nPACKET_PAYLOAD_SIZE 1000\n\
         SIMULATOR_STOP_TIME 4.00\nCC_MODE {mode}\nALPHA_RESUME_INTERVAL {t_alpha}\n\
         RATE_DECREASE_INTERVAL {t_dec}\nCLAMP_TARGET_RATE 0\nRP_TIMER {t_inc}\n\
         EWMA_GAIN {g}\nFAST_RECOVERY_TIMES 1\nRATE_AI {ai}Mb/s\nRATE_HAI {hai}Mb/s\n\
         MIN_RATE 1000Mb/s\nDCTCP_RATE_AI {dctcp_ai}Mb/s\nERROR_RATE_PER_LINK 0.0000\n\
         L2_CHUNK_SIZE 4000\nL2_ACK_INTERVAL 1\nL2_BACK_TO_ZERO 0\nHAS_WIN {w}\nGLOBAL_T 1\n\
         VAR_WIN {w}\nFAST_REACT {us}\nRATE_BOUND 1\nACK_HIGH_PRIO {ap}\nLINK_DOWN 0 0 0\n\
         ENABLE_TRACE 0\nKMAX_MAP 2 {r1} {kmax1} {r4} {kmax4}\n\
         KMIN_MAP 2 {r1} {kmin1} {r4} {kmin4}\nPMAX_MAP 2 {r1} {pmax} {r4} {pmax}\n\
         BUFFER_SIZE {bfsz}\n",
        w = u8::from(window),
        us = u8::from(fast_react),
        ap = u8::from(ack_prio),
        r1 = bw * gbps,
        r4 = bw * 4 * gbps,
        kmax1 = kmax.0,
        kmax4 = kmax.1,
        kmin1 = kmin.0,
        kmin4 = kmin.1,
    );
    if mode != 1 {
        text += &format!(
            "U_TARGET 0.95\nMI_THRESH 0\nINT_MULTI {int_multi}\nMULTI_RATE 0\n\
             SAMPLE_FEEDBACK 0\nPINT_LOG_BASE 1.01\nPINT_PROB 1.0\n"
        );
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::CcSetup;

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
    fn ack_high_prio_enable_trace_and_has_win_as_ns3_reads_them() {
        let base = written_by_run_py();
        // ACK_HIGH_PRIO 1 (run.py's): no pause holds the NIC's ACKs. 0, and third.cc's default
        // when the key is absent: a pause of priority 3 does.
        let mut cfg = RunConfig::default();
        Ns3Config::parse(&base, "c").unwrap().apply(&mut cfg);
        assert_eq!(cfg.host.ack_pause_prio, None);
        for text in [
            base.replace("ACK_HIGH_PRIO 1", "ACK_HIGH_PRIO 0"),
            base.replace("ACK_HIGH_PRIO 1", ""),
        ] {
            let mut cfg = RunConfig::default();
            Ns3Config::parse(&text, "c").unwrap().apply(&mut cfg);
            assert_eq!(cfg.host.ack_pause_prio, Some(NS3_ACK_QUEUE_PRIO));
        }
        let e = Ns3Config::parse(&base.replace("ACK_HIGH_PRIO 1", "ACK_HIGH_PRIO x"), "c");
        assert!(format!("{:#}", e.err().unwrap()).contains("ACK_HIGH_PRIO `x`"));
        // ENABLE_TRACE 1 runs, with a warning that the binary trace is not written.
        let c = Ns3Config::parse(&base.replace("ENABLE_TRACE 0", "ENABLE_TRACE 1"), "c").unwrap();
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("ENABLE_TRACE 1") && c.warnings[0].contains("dcqcn.tr)"));
        assert!(Ns3Config::parse(&base, "c").unwrap().warnings.is_empty());
        // HAS_WIN absent is third.cc's default, a window (of fixed size with VAR_WIN 0).
        let c = Ns3Config::parse(&base.replace("HAS_WIN 0", ""), "c").unwrap();
        assert_eq!(c.window, Some(false));
        let c = Ns3Config::parse(&base.replace("HAS_WIN 0", "HAS_WIN 2"), "c").unwrap();
        assert_eq!(
            c.window,
            Some(false),
            "non-zero is on, as third.cc tests it"
        );
        assert_eq!(Ns3Config::parse(&base, "c").unwrap().window, None);
        // EWMA_GAIN absent: third.cc's `1 / 16` is an integer division, g = 0.
        let c = Ns3Config::parse(&base.replace("EWMA_GAIN 0.00390625\n", ""), "c").unwrap();
        let setup = CcSetup::new(c.kind(), &c.sections, "c").unwrap();
        assert_eq!(setup.dcqcn.dce_tcp_g, 1024);
    }

    #[test]
    fn every_problem_of_a_config_in_one_pass() {
        // HPCC's own mix/config.txt's settings that quench does not model, with two more
        // mistakes: each is listed, and the unknown key's value is not read as a key.
        let text = written_by_run_py()
            .replace("CC_MODE 1", "CC_MODE 5")
            .replace("HAS_WIN 0", "HAS_WIN 1")
            .replace("GLOBAL_T 1", "GLOBAL_T 0")
            .replace("RATE_AI 20Mb/s", "RATE_AI fast")
            .replace("TOPOLOGY_FILE mix/topo_incast.txt\n", "")
            + "NEW_KNOB 1 2\n";
        let e = Ns3Config::parse_file(&text, "cfg.txt").err().unwrap();
        let m = format!("{e:#}");
        assert!(m.starts_with("5 problems:\n"), "{m}");
        for want in [
            "cfg.txt: CC_MODE 5: quench models 1 (DCQCN), 3 (HPCC)",
            "cfg.txt: GLOBAL_T 0",
            "cfg.txt: RATE_AI `fast`",
            "cfg.txt: TOPOLOGY_FILE is missing",
            "cfg.txt: unknown key NEW_KNOB",
        ] {
            assert!(m.contains(want), "{want}: {m}");
        }
        // A config.txt without FLOW_FILE runs no flow in ns-3: an error, not an empty run.
        let e = Ns3Config::parse_file(
            &written_by_run_py().replace("FLOW_FILE mix/flow_incast.txt\n", ""),
            "cfg.txt",
        )
        .err()
        .unwrap();
        assert!(format!("{e:#}").contains("cfg.txt: FLOW_FILE is missing"));
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
        assert!(run_py_config("hp_cubic", 100).is_err());
    }

    #[test]
    fn unsupported_modes_and_keys_are_errors_that_name_them() {
        let base = written_by_run_py();
        for (change, want) in [
            ("CC_MODE 1", "CC_MODE 4"),
            ("LINK_DOWN 0 0 0", "LINK_DOWN 2000 1 3"),
            ("L2_ACK_INTERVAL 1", "L2_ACK_INTERVAL 4000"),
            ("L2_BACK_TO_ZERO 0", "L2_BACK_TO_ZERO 1"),
            ("RATE_BOUND 1", "RATE_BOUND 0"),
        ] {
            let to = want;
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
        // HPCC without a window divides by zero in ns-3: an error.
        let e = Ns3Config::parse(&base.replace("CC_MODE 1", "CC_MODE 3"), "c")
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("HAS_WIN 0"), "{e:#}");
    }

    /// Every run.py `--cc` quench has a preset for reads back into its control, INT mode and
    /// window, with run.py's values in the control's section.
    #[test]
    fn every_run_py_cc_reads_as_its_control() {
        let int_hops = IntMode::Hops { multi: 4 };
        let want = [
            ("dcqcn", CcKind::Dcqcn, IntMode::None, None),
            ("dcqcn_paper", CcKind::Dcqcn, IntMode::None, None),
            ("dcqcn_vwin", CcKind::Dcqcn, IntMode::None, Some(true)),
            ("hp", CcKind::Hpcc, int_hops, Some(true)),
            ("timely", CcKind::Timely, IntMode::Ts, None),
            ("dctcp", CcKind::Dctcp, IntMode::None, Some(true)),
        ];
        for (cc, kind, int, window) in want {
            let c = Ns3Config::parse(&run_py_config(cc, 100).unwrap(), cc).unwrap();
            assert_eq!((c.kind(), c.int, c.window), (kind, int, window), "{cc}");
            CcSetup::new(c.kind(), &c.sections, cc).unwrap();
        }
        let c = Ns3Config::parse(&run_py_config("hp", 100).unwrap(), "hp").unwrap();
        let hp = c.sections.hpcc_rp.as_ref().unwrap();
        assert_eq!(hp["rate_ai"].as_integer(), Some(40));
        assert_eq!(hp["mi_thresh"].as_integer(), Some(0));
        assert_eq!(hp["multi_rate"].as_bool(), Some(false));
        assert_eq!(hp["fast_react"].as_bool(), Some(true));
        let mut cfg = RunConfig::default();
        c.apply(&mut cfg);
        // INT: 42 octets in the data header and in the ACK (60 - 14 + 42).
        assert_eq!((cfg.host.header_bytes, cfg.host.ctrl_bytes), (90, 88));
        let c = Ns3Config::parse(&run_py_config("dctcp", 100).unwrap(), "d").unwrap();
        let d = c.sections.dctcp_rp.as_ref().unwrap();
        assert_eq!(d["rate_ai"].as_integer(), Some(615));
        assert_eq!(d["g"].as_float(), Some(0.0625));
        assert_eq!(d["mtu"].as_integer(), Some(1000));
        let c = Ns3Config::parse(&run_py_config("timely", 100).unwrap(), "t").unwrap();
        let t = c.sections.timely_rp.as_ref().unwrap();
        assert_eq!(
            (t["rate_ai"].as_integer(), t["rate_hai"].as_integer()),
            (Some(100), Some(500))
        );
        let c = Ns3Config::parse(&run_py_config("hpccPint", 100).unwrap(), "p").unwrap();
        assert!(matches!(c.int, IntMode::Pint { code } if code.bytes == 2));
        assert!(c.sections.dcqcn_rp.is_none());
    }
}
