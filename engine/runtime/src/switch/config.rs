//! `configs/switch.toml`: the switch's ports, MAC table and queues.
//!
//! Parsed with `deny_unknown_fields` and validated once into a [`SwitchProfile`]; every error
//! names the file and the key (`ports[1].rate`), so a typo never turns into a silent default.
use std::path::{Path, PathBuf};

use serde::Deserialize;
use units::keys::{key, Key, KeyDefault, Range, Type};
use units::{Duration, Rate};

use quench_config::reference;
use quench_node::switch::fdb::{PortIdx, DEFAULT_AGEING};
use quench_node::switch::queue::QueueLimits;
use quench_port::xdp::XdpMode;
use quench_port::{parse_mac, PortKind};
use quench_wire::MacAddr;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchConfig {
    /// Forwarding cores (each pinned); ports' queues are spread over them.
    #[serde(default = "one")]
    pub workers: usize,
    /// Seconds a learned MAC entry lives without being seen (802.1Q default 300).
    #[serde(default)]
    pub ageing_secs: Option<f64>,
    /// Octets each data priority of an egress port may queue.
    #[serde(default)]
    pub queue_bytes: Option<u64>,
    /// Octets the control class of an egress port may queue.
    #[serde(default)]
    pub control_queue_bytes: Option<u64>,
    /// Unix socket of the control plane (`quench stats`).
    #[serde(default)]
    pub control_socket: Option<PathBuf>,
    #[serde(default)]
    pub ports: Vec<PortConfig>,
    #[serde(default)]
    pub static_macs: Vec<StaticMac>,
    /// Congestion points on egress ports (QCN, RED/ECN, TCD): `[[congestion]]` tables.
    #[serde(default)]
    pub congestion: Vec<quench_node::switch::cp::CongestionConfig>,
    /// PFC (802.1Qbb) on every port: a `[pfc]` table with `cp::pfc::PfcParams`' keys
    /// (`lossless_priorities`, `threshold`, `xoff_bytes`, `xon_bytes`, `headroom_bytes`,
    /// `buffer_bytes`, `pause`, `pause_quanta`, `link_rate`, ...); `ports` is taken from the
    /// `[[ports]]` list. Absent: no PFC (PAUSE frames received are counted and dropped).
    #[serde(default)]
    pub pfc: Option<cp::pfc::PfcParams>,
    /// EAL arguments and pool sizes for `driver = "dpdk"` ports (cargo feature `dpdk`).
    #[cfg(feature = "dpdk")]
    #[serde(default)]
    pub dpdk: quench_port::dpdk::DpdkConfig,
}

fn one() -> usize {
    1
}

/// The keys of [`SwitchConfig`] (its tables' keys: [`PORT_KEYS`], [`STATIC_MAC_KEYS`],
/// `quench_node::switch::cp::KEYS`, `cp::pfc::KEYS`, [`DPDK_KEYS`]), as the configuration
/// reference lists them; the validation checks the ranges given here.
pub const SWITCH_KEYS: &[Key] = &[
    Key {
        name: "workers",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1"),
        range: Range::Int(1, 64),
        doc: "Forwarding cores, each pinned; the ports' queues are spread over them.",
    },
    Key {
        name: "ageing_secs",
        ty: Type::Float,
        unit: "s",
        default: KeyDefault::Value("300"),
        range: Range::Float(0.001, MAX_AGEING_SECS),
        doc: "How long a learned MAC entry lives without being seen (802.1Q's default 300 s).",
    },
    Key {
        name: "queue_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("262144"),
        range: Range::Int(MIN_QUEUE_BYTES, MAX_QUEUE_BYTES),
        doc: "What each data priority of an egress port may queue.",
    },
    Key {
        name: "control_queue_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("65536"),
        range: Range::Int(MIN_QUEUE_BYTES, MAX_QUEUE_BYTES),
        doc: "What the control class (PFC, CNMs) of an egress port may queue.",
    },
    Key {
        name: "control_socket",
        ty: Type::String,
        unit: "path",
        default: KeyDefault::Value("\"/run/quench/switch.sock\""),
        range: Range::Any,
        doc: "The control socket `quench stats` reads.",
    },
    Key {
        name: "ports",
        ty: Type::Tables,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("at least one"),
        doc: "The ports: `[[ports]]` tables.",
    },
    Key {
        name: "static_macs",
        ty: Type::Tables,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "MAC addresses bound to a port: `[[static_macs]]` tables.",
    },
    Key {
        name: "congestion",
        ty: Type::Tables,
        unit: "",
        default: KeyDefault::None,
        range: Range::Text("one per port"),
        doc: "Congestion points on egress ports: `[[congestion]]` tables.",
    },
    Key {
        name: "pfc",
        ty: Type::Table,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "PFC (802.1Qbb) on every port: the `[pfc]` parameter table (its `ports` is the port \
              count); absent, PAUSE frames received are counted and dropped.",
    },
    Key {
        name: "dpdk",
        ty: Type::Table,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "EAL arguments and pools for `driver = \"dpdk\"` ports (cargo feature `dpdk`).",
    },
];

/// The keys of a `[[ports]]` table.
pub const PORT_KEYS: &[Key] = &[
    Key {
        name: "name",
        ty: Type::String,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("unique, not empty"),
        doc: "The port's name in `static_macs`, `[[congestion]]`, `--capture` and stats.",
    },
    Key {
        name: "iface",
        ty: Type::String,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("1..=15 characters"),
        doc: "The network interface (for `driver = \"dpdk\"`, the ethdev name).",
    },
    Key {
        name: "driver",
        ty: Type::OneOf(&["af_xdp", "af_packet", "mem", "dpdk"]),
        unit: "",
        default: KeyDefault::Value("\"af_xdp\""),
        range: Range::Any,
        doc: "How the port moves frames (`dpdk` with the cargo feature; `mem` for tests).",
    },
    Key {
        name: "xdp_mode",
        ty: Type::OneOf(&["auto", "native", "generic"]),
        unit: "",
        default: KeyDefault::Value("\"auto\""),
        range: Range::Any,
        doc: "AF_XDP attach mode: native zero-copy, else native copy, else generic; or one of \
              them only.",
    },
    Key {
        name: "rate",
        ty: Type::Rate,
        unit: "",
        default: KeyDefault::None,
        range: Range::Text("> 0"),
        doc: "Egress rate limit.",
    },
    Key {
        name: "queue_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Text("the top-level `queue_bytes`"),
        range: Range::Int(MIN_QUEUE_BYTES, MAX_QUEUE_BYTES),
        doc: "This port's data queue limit.",
    },
];

/// The keys of a `[[static_macs]]` table.
pub const STATIC_MAC_KEYS: &[Key] = &[
    Key {
        name: "mac",
        ty: Type::String,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("a MAC address"),
        doc: "The address (`02:00:00:00:00:01`).",
    },
    Key {
        name: "port",
        ty: Type::String,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("a `[[ports]]` name"),
        doc: "The port it is bound to.",
    },
];

/// The keys of the `[dpdk]` table (`quench_port::dpdk::DpdkConfig`, cargo feature `dpdk`).
pub const DPDK_KEYS: &[Key] = &[
    Key {
        name: "eal",
        ty: Type::Strings,
        unit: "",
        default: KeyDefault::Value("[]"),
        range: Range::Any,
        doc: "Arguments to rte_eal_init, a list of strings (`[\"--no-huge\", \"-m\", \"256\", \
              \"--vdev=net_null0\"]`).",
    },
    Key {
        name: "mbufs",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("8191"),
        range: Range::Text(">= rx_queues x descriptors + 2048"),
        doc: "Mbufs in each port's pool (DPDK recommends 2^k - 1).",
    },
    Key {
        name: "mbuf_cache",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("256"),
        range: Range::Text("0..=512 and <= mbufs / 1.5"),
        doc: "Per-lcore cache of each pool; 0 disables it.",
    },
    Key {
        name: "descriptors",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1024"),
        range: Range::Int(1, 65535),
        doc: "Receive and transmit descriptors per queue (the driver may round it).",
    },
    Key {
        name: "rx_queues",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1"),
        range: Range::Int(1, 65535),
        doc: "Receive queues per port.",
    },
    Key {
        name: "tx_queues",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1"),
        range: Range::Int(1, 65535),
        doc: "Transmit queues per port.",
    },
];

const WORKERS: &Key = key(SWITCH_KEYS, "workers");
const AGEING_SECS: &Key = key(SWITCH_KEYS, "ageing_secs");
const QUEUE_BYTES: &Key = key(SWITCH_KEYS, "queue_bytes");
const CONTROL_QUEUE_BYTES: &Key = key(SWITCH_KEYS, "control_queue_bytes");
const PORT_QUEUE_BYTES: &Key = key(PORT_KEYS, "queue_bytes");

/// One `[[ports]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// Name used in `static_macs`, `--capture` and stats.
    pub name: String,
    /// Network interface.
    pub iface: String,
    /// `af_xdp` (default), `af_packet`, `dpdk` (cargo feature `dpdk`; `iface` is the ethdev
    /// name, e.g. `net_af_packet0` created by `--vdev=net_af_packet0,iface=veth0` in `[dpdk]`).
    #[serde(default)]
    pub driver: Option<String>,
    /// AF_XDP attach mode: `auto` (default), `native`, `generic`.
    #[serde(default)]
    pub xdp_mode: Option<XdpMode>,
    /// Egress rate limit, e.g. `1gbit`, `100mbit`.
    #[serde(default)]
    pub rate: Option<String>,
    /// Per-port override of the top-level `queue_bytes`.
    #[serde(default)]
    pub queue_bytes: Option<u64>,
}

/// One `[[static_macs]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticMac {
    pub mac: String,
    pub port: String,
}

/// A validated port.
#[derive(Clone, Debug, PartialEq)]
pub struct PortProfile {
    pub name: String,
    pub iface: String,
    pub kind: PortKind,
    pub xdp_mode: XdpMode,
    pub rate: Option<Rate>,
    pub limits: QueueLimits,
    /// The congestion point on this port's egress queues, if any (validated).
    pub congestion: Option<quench_node::switch::cp::CongestionConfig>,
}

/// The validated configuration (params -> profile).
#[derive(Clone, Debug, PartialEq)]
pub struct SwitchProfile {
    pub workers: usize,
    pub ageing: Duration,
    pub control_socket: PathBuf,
    pub ports: Vec<PortProfile>,
    pub static_macs: Vec<(MacAddr, PortIdx)>,
    /// PFC on every port (`[pfc]`), validated.
    pub pfc: Option<cp::pfc::PfcProfile>,
    /// The `[dpdk]` table (EAL arguments, pools), used when a port has `driver = "dpdk"`.
    #[cfg(feature = "dpdk")]
    pub dpdk: quench_port::dpdk::DpdkConfig,
}

/// Largest `ageing_secs`: 802.1Q's upper bound for the ageing time.
pub const MAX_AGEING_SECS: f64 = 1_000_000.0;
/// Queue limits: at least one frame of the largest size a port carries, at most 1 GiB (the
/// frames are held in memory).
pub const MIN_QUEUE_BYTES: u64 = 2048;
pub const MAX_QUEUE_BYTES: u64 = 1 << 30;

/// Default control socket.
pub const DEFAULT_CONTROL_SOCKET: &str = "/run/quench/switch.sock";

/// A configuration that cannot be used; always names the file, and the key when there is one.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {file}: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// Syntax errors, wrong types and unknown keys: `message` names the file, line and key
    /// ([`quench_config::file`]).
    #[error("{message}")]
    Parse { file: String, message: String },
    #[error("{file}: key `{key}`: {why}")]
    Invalid {
        file: String,
        key: String,
        why: String,
    },
}

impl SwitchConfig {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<SwitchProfile, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            file: file.clone(),
            source: e,
        })?;
        Self::parse(&text, &file)
    }

    /// Parses and validates `text`, attributing errors to `file`.
    pub fn parse(text: &str, file: &str) -> Result<SwitchProfile, ConfigError> {
        let cfg: SwitchConfig =
            quench_config::file::from_str(text, file).map_err(|message| ConfigError::Parse {
                file: file.to_string(),
                message,
            })?;
        cfg.validate(file)
    }

    fn validate(self, file: &str) -> Result<SwitchProfile, ConfigError> {
        self.profile()
            .map_err(|Refusal(key, why)| ConfigError::Invalid {
                file: file.to_string(),
                key,
                why,
            })
    }

    /// The checks in the order a file's first error is reported: workers, ports, ageing,
    /// queue limits, each port, static MACs, congestion points, PFC, DPDK.
    fn profile(self) -> Result<SwitchProfile, Refusal> {
        WORKERS
            .within(self.workers as u64)
            .map_err(|e| Refusal::new("workers", e.why()))?;
        if self.ports.is_empty() {
            return Err(Refusal::new("ports", "at least one [[ports]] is needed"));
        }
        let ageing = ageing(self.ageing_secs)?;
        let base = self.queue_limits()?;
        let mut ports = Vec::new();
        for (i, p) in self.ports.iter().enumerate() {
            let port = port_profile(i, p, base, &ports)?;
            ports.push(port);
        }
        let static_macs = static_macs(&self.static_macs, &ports)?;
        attach_congestion(&self.congestion, &mut ports)?;
        let pfc = self.pfc.map(|p| pfc_profile(p, &ports)).transpose()?;
        Ok(SwitchProfile {
            pfc,
            workers: self.workers,
            ageing,
            control_socket: self
                .control_socket
                .unwrap_or_else(|| PathBuf::from(DEFAULT_CONTROL_SOCKET)),
            ports,
            static_macs,
            #[cfg(feature = "dpdk")]
            dpdk: {
                if let Err(e) = self.dpdk.validate() {
                    return Err(Refusal::new("dpdk", e.to_string()));
                }
                self.dpdk
            },
        })
    }

    /// The top-level queue limits, every port's unless it sets its own `queue_bytes`.
    fn queue_limits(&self) -> Result<QueueLimits, Refusal> {
        let defaults = QueueLimits::default();
        let base = QueueLimits {
            data_bytes: self.queue_bytes.unwrap_or(defaults.data_bytes),
            control_bytes: self.control_queue_bytes.unwrap_or(defaults.control_bytes),
        };
        for (k, v) in [
            (QUEUE_BYTES, base.data_bytes),
            (CONTROL_QUEUE_BYTES, base.control_bytes),
        ] {
            k.within(v).map_err(|e| Refusal::new(k.name, e.why()))?;
        }
        Ok(base)
    }
}

/// A key a configuration cannot use, and why ([`ConfigError::Invalid`] once the file is named).
struct Refusal(String, String);

impl Refusal {
    fn new(key: impl Into<String>, why: impl Into<String>) -> Self {
        Refusal(key.into(), why.into())
    }
}

/// The FDB's ageing time. 802.1Q-2018 12.7.1.2 (dot1qFdbAgingTime): 10..=1,000,000 s;
/// shorter ages are accepted down to 1 ms for tests.
fn ageing(secs: Option<f64>) -> Result<Duration, Refusal> {
    match secs {
        None => Ok(DEFAULT_AGEING),
        Some(s) => {
            let s = AGEING_SECS
                .within_f64(s)
                .map_err(|e| Refusal::new("ageing_secs", e.why()))?;
            Ok(Duration::from_nanos((s * 1e9) as u64))
        }
    }
}

/// `[[ports]]` number `i`, given the ports before it and the top-level queue limits.
fn port_profile(
    i: usize,
    p: &PortConfig,
    base: QueueLimits,
    before: &[PortProfile],
) -> Result<PortProfile, Refusal> {
    let key = |k: &str| format!("ports[{i}].{k}");
    if p.name.is_empty() || before.iter().any(|q| q.name == p.name) {
        return Err(Refusal::new(
            key("name"),
            format!("{:?} is empty or repeated", p.name),
        ));
    }
    if p.iface.is_empty() || p.iface.len() > 15 {
        return Err(Refusal::new(key("iface"), "must be 1..=15 characters"));
    }
    let kind = match p.driver.as_deref().unwrap_or("af_xdp") {
        "af_xdp" => PortKind::Xdp,
        "af_packet" => PortKind::Packet,
        "mem" => PortKind::Mem,
        #[cfg(feature = "dpdk")]
        "dpdk" => PortKind::Dpdk,
        #[cfg(not(feature = "dpdk"))]
        "dpdk" => {
            return Err(Refusal::new(
                key("driver"),
                "this quench was built without DPDK: `cargo build --features dpdk`",
            ))
        }
        other => {
            return Err(Refusal::new(
                key("driver"),
                format!("{other:?}: expected af_xdp, af_packet, mem or dpdk"),
            ))
        }
    };
    let rate = match &p.rate {
        None => None,
        Some(r) => match Rate::parse(r) {
            Ok(r) if r.as_bps() > 0 => Some(r),
            Ok(_) => return Err(Refusal::new(key("rate"), "must be > 0")),
            Err(e) => return Err(Refusal::new(key("rate"), format!("{r:?}: {e}"))),
        },
    };
    let data_bytes = p.queue_bytes.unwrap_or(base.data_bytes);
    PORT_QUEUE_BYTES
        .within(data_bytes)
        .map_err(|e| Refusal::new(key("queue_bytes"), e.why()))?;
    Ok(PortProfile {
        name: p.name.clone(),
        iface: p.iface.clone(),
        kind,
        xdp_mode: p.xdp_mode.unwrap_or_default(),
        rate,
        limits: QueueLimits { data_bytes, ..base },
        congestion: None,
    })
}

/// `[[static_macs]]`: each a MAC and the index of a port named in `ports`.
fn static_macs(
    macs: &[StaticMac],
    ports: &[PortProfile],
) -> Result<Vec<(MacAddr, PortIdx)>, Refusal> {
    let mut out = Vec::new();
    for (i, m) in macs.iter().enumerate() {
        let mac = parse_mac(&m.mac).ok_or_else(|| {
            Refusal::new(
                format!("static_macs[{i}].mac"),
                format!("{:?} is not a MAC", m.mac),
            )
        })?;
        let port = ports.iter().position(|p| p.name == m.port).ok_or_else(|| {
            Refusal::new(
                format!("static_macs[{i}].port"),
                format!("no port named {:?}", m.port),
            )
        })?;
        out.push((mac, port as PortIdx));
    }
    Ok(out)
}

/// `[[congestion]]`: each validated and put on its port, at most one per port.
fn attach_congestion(
    congestion: &[quench_node::switch::cp::CongestionConfig],
    ports: &mut [PortProfile],
) -> Result<(), Refusal> {
    for (i, c) in congestion.iter().enumerate() {
        let Some(p) = ports.iter_mut().find(|p| p.name == c.port) else {
            return Err(Refusal::new(
                format!("congestion[{i}].port"),
                format!("{:?} is not a [[ports]] name", c.port),
            ));
        };
        if p.congestion.is_some() {
            return Err(Refusal::new(
                format!("congestion[{i}].port"),
                format!("{:?} already has a congestion point", c.port),
            ));
        }
        quench_node::switch::cp::CpHook::from_config(i, c, quench_wire::MacAddr::zero())
            .and_then(|h| h.with_int_config(i, c, p.rate))
            .map_err(|e| Refusal::new(format!("congestion[{i}].{}", e.key), e.why))?;
        p.congestion = Some(c.clone());
    }
    Ok(())
}

/// `[pfc]` on every port, and the queues it needs: with PFC the lossless priorities must never
/// be tail-dropped at an egress queue, and the worst case is every ingress port's whole
/// allowance (XOFF or the shared buffer, plus headroom) waiting at one egress priority.
fn pfc_profile(
    mut params: cp::pfc::PfcParams,
    ports: &[PortProfile],
) -> Result<cp::pfc::PfcProfile, Refusal> {
    if params.ports > 1 && usize::from(params.ports) != ports.len() {
        return Err(Refusal::new(
            "pfc.ports",
            format!("leave it out: the switch has {} ports", ports.len()),
        ));
    }
    params.ports = ports.len() as u16;
    let profile = cp::pfc::PfcProfile::new(&params)
        .map_err(|e| Refusal::new(format!("pfc.{}", e.param), e.why()))?;
    let n = ports.len() as u64;
    let (need, what) = match params.threshold {
        // PfcProfile bounds XOFF and headroom by units::MAX_BUFFER_BYTES and the ports by
        // 4096; the shared buffer may be as large as u64 holds.
        cp::pfc::ThresholdMode::Static => (
            n * (params.xoff_bytes + params.headroom_bytes),
            "xoff_bytes",
        ),
        cp::pfc::ThresholdMode::Dynamic => (
            params
                .buffer_bytes
                .saturating_add(n * params.headroom_bytes),
            "buffer_bytes",
        ),
    };
    if let Some(p) = ports.iter().find(|p| p.limits.data_bytes < need) {
        return Err(Refusal::new(
            "queue_bytes",
            format!(
                "{} octets at port {:?} cannot hold what PFC lets in ({need}: {what} and every \
                 port's headroom); raise queue_bytes or lower the PFC thresholds",
                p.limits.data_bytes, p.name
            ),
        ));
    }
    Ok(profile)
}

/// `quench switch --config`: the configuration reference's kind (`quench presets --keys switch`).
pub const KIND: reference::Kind = reference::Kind {
    name: "switch",
    about: "`quench switch --config NAME|FILE` (bundled: `switch`, `switch-qcn`, \
            `switch-dcqcn`, `switch-hpcc`, `switch-dctcp`, `switch-pfc`).",
    sections: &[
        reference::own("top level", &[SWITCH_KEYS]),
        reference::Section::Own {
            title: "[[ports]]",
            about: "One per port.",
            keys: &[PORT_KEYS],
        },
        reference::own("[[static_macs]]", &[STATIC_MAC_KEYS]),
        reference::Section::Own {
            title: "[[congestion]]",
            about: "A congestion point on one egress port.",
            keys: &[quench_node::switch::cp::KEYS],
        },
        reference::params("[congestion.qcn]", &reference::QCN_CP),
        reference::params("[congestion.red]", &reference::RED),
        reference::params("[congestion.tcd]", &reference::TCD),
        reference::params("[pfc]", &reference::PFC),
        reference::Section::Own {
            title: "[dpdk]",
            about: "With the cargo feature `dpdk` (`quench_port::dpdk::DpdkConfig`).",
            keys: &[DPDK_KEYS],
        },
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
workers = 1
ageing_secs = 10
[[ports]]
name = "a"
iface = "qn-sw0"
rate = "1gbit"
[[ports]]
name = "b"
iface = "qn-sw1"
driver = "af_packet"
[[static_macs]]
mac = "02:00:00:00:00:01"
port = "b"
"#;

    #[test]
    fn shipped_config_validates() {
        let p = SwitchConfig::load(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../configs/switch.toml"
        )))
        .unwrap();
        assert!(!p.ports.is_empty());
    }

    #[test]
    fn good_config_becomes_a_profile() {
        let p = SwitchConfig::parse(GOOD, "t.toml").unwrap();
        assert_eq!(p.ports[0].rate, Some(Rate::from_gbps(1)));
        assert_eq!(p.ports[1].kind, PortKind::Packet);
        assert_eq!(p.static_macs, vec![(MacAddr(2, 0, 0, 0, 0, 1), 1)]);
        assert_eq!(p.ageing, Duration::from_secs(10));
    }

    #[test]
    fn unknown_key_names_key_and_file() {
        let bad = GOOD.replace("rate = \"1gbit\"", "rat = \"1gbit\"");
        let e = SwitchConfig::parse(&bad, "conf/x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("conf/x.toml") && e.contains("rat"), "{e}");
    }

    #[test]
    fn bad_values_name_the_key() {
        let bad = GOOD.replace("1gbit", "fast");
        let e = SwitchConfig::parse(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.contains("ports[0].rate"), "{e}");
        let bad = GOOD.replace("port = \"b\"", "port = \"zz\"");
        let e = SwitchConfig::parse(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.contains("static_macs[0].port"), "{e}");
    }

    #[test]
    fn pfc_table_is_validated() {
        let with = |extra: &str| format!("{GOOD}{extra}");
        let p = SwitchConfig::parse(
            &with("[pfc]\nthreshold = \"static\"\nxoff_bytes = 40000\nxon_bytes = 37000\nheadroom_bytes = 30000\n"),
            "x.toml",
        )
        .unwrap();
        assert!(p.pfc.as_ref().is_some_and(|p| p.is_lossless(3)));
        // A PFC key that does not exist, a bad value, too small a queue.
        for (extra, want) in [
            ("[pfc]\nxof_bytes = 1\n", "xof_bytes"),
            (
                "[pfc]\nthreshold = \"static\"\nxoff_bytes = 10\nxon_bytes = 20\n",
                "pfc.xon_bytes",
            ),
            (
                "[pfc]\nlossless_priorities = [9]\n",
                "pfc.lossless_priorities",
            ),
            (
                "[pfc]\nthreshold = \"static\"\nxoff_bytes = 400000\nxon_bytes = 390000\n",
                "queue_bytes",
            ),
        ] {
            let e = SwitchConfig::parse(&with(extra), "x.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(want) && e.contains("x.toml"), "{extra}: {e}");
        }
        // Several workers: worker 0 then holds every port's egress (`switch::plan::assign`).
        let two = with("[pfc]\nthreshold = \"static\"\nxoff_bytes = 40000\nxon_bytes = 37000\nheadroom_bytes = 30000\n")
            .replace("workers = 1", "workers = 2");
        assert!(SwitchConfig::parse(&two, "x.toml").unwrap().pfc.is_some());
    }

    #[test]
    fn shipped_pfc_config_validates() {
        let p = SwitchConfig::load(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../configs/switch-pfc.toml"
        )))
        .unwrap();
        assert!(p.pfc.is_some());
    }
}
