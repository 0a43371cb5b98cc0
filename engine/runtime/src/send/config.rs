//! configs/send.toml: the sender's flows, addresses, congestion control and reaction-point
//! tables ([`SendConfig`], its keys [`KEYS`]), and one port's configuration with the command
//! line's overrides applied ([`PortConfig`]).
use std::net::Ipv4Addr;
use std::path::PathBuf;

use serde::Deserialize;
use units::keys::{key, Key, KeyDefault, Range, Type};
use units::{Duration, Rate};

use quench_config::bundled::{PresetTables, Source};
use quench_config::reference;
use quench_node::flowgen::FlowGroup;
use quench_node::host::core::PacingConfig;
use quench_node::host::rp::HostRp;
use quench_port::MAX_FRAME;
use quench_wire::ipv4::Ecn;

/// Which congestion control the sender runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Cc {
    #[default]
    None,
    Qcn,
    Dcqcn,
    /// The ACK-driven controls of ns-3 HPCC (`CC_MODE` 3, 8, 7): they need a receiver that
    /// acknowledges (`quench recv --ack-interval`); HPCC also a switch port that stamps INT.
    Hpcc,
    Dctcp,
    Timely,
}

impl Cc {
    pub fn name(self) -> &'static str {
        match self {
            Cc::None => "none",
            Cc::Qcn => "qcn",
            Cc::Dcqcn => "dcqcn",
            Cc::Hpcc => "hpcc",
            Cc::Dctcp => "dctcp",
            Cc::Timely => "timely",
        }
    }

    /// Driven by ACKs ([`quench_node::host::rp::Feedback::Ack`]).
    pub fn ack_driven(self) -> bool {
        matches!(self, Cc::Hpcc | Cc::Dctcp | Cc::Timely)
    }
}

fn default_base_rtt_us() -> u32 {
    100
}

/// ECN codepoint of the data frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EcnSetting {
    NotEct,
    Ect0,
    /// ECT(1), which TCD reads as "TCD-capable".
    Ect1,
}

fn default_frame_len() -> u32 {
    1500
}
fn default_vlan() -> u16 {
    1
}
pub fn default_catch_up_us() -> u32 {
    50
}

/// `cc`, the sender's and the appliance's.
pub const CC: Key = Key {
    name: "cc",
    ty: Type::OneOf(&["none", "qcn", "dcqcn", "hpcc", "dctcp", "timely"]),
    unit: "",
    default: KeyDefault::Value("\"none\""),
    range: Range::Any,
    doc: "The congestion control of the reaction points (`--cc` overrides it).",
};

/// The keys of [`SendConfig`] (its `[[flows]]`: `quench_node::flowgen::KEYS`), as the
/// configuration reference lists them; [`SendConfig::check`] checks the ranges given here.
pub const KEYS: &[Key] = &[
    CC,
    Key {
        name: "line_rate",
        ty: Type::Rate,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("> 0"),
        doc: "The reaction points' line rate C.",
    },
    Key {
        name: "frame_len",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("1500"),
        range: Range::Text("the headers (74)..=1522"),
        doc: "The frames' length (VLAN, IPv4, UDP, test header, filler).",
    },
    Key {
        name: "src_ip",
        ty: Type::String,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("an IPv4 address"),
        doc: "The frames' source address (`--src-ip` overrides it per port).",
    },
    Key {
        name: "dst_ip",
        ty: Type::String,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("an IPv4 address"),
        doc: "The frames' destination address.",
    },
    Key {
        name: "vlan",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1"),
        range: Range::Int(0, 4095),
        doc: "The frames' VLAN id.",
    },
    Key {
        name: "ecn",
        ty: Type::OneOf(&["not_ect", "ect0", "ect1"]),
        unit: "",
        default: KeyDefault::Text("\"ect0\" with DCQCN, else \"not_ect\""),
        range: Range::Any,
        doc: "The ECN codepoint of the frames.",
    },
    Key {
        name: "seed",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("0"),
        range: Range::Any,
        doc: "Seed of the flows' sizes and arrivals (port k of several uses seed + k).",
    },
    quench_config::keys::MAX_CATCH_UP_US,
    Key {
        name: "catch_up_speed",
        ty: Type::Float,
        unit: "",
        default: KeyDefault::Text("none (as fast as the loop polls)"),
        range: Range::Text("> 1"),
        doc: "While a flow catches up, it sends at most this many times its reaction point's \
              rate.",
    },
    quench_config::keys::PRESET,
    quench_config::keys::QCN_RP,
    quench_config::keys::DCQCN_RP,
    Key {
        name: "base_rtt_us",
        ty: Type::Integer,
        unit: "us",
        default: KeyDefault::Value("100"),
        range: Range::Int(1, 1000000),
        doc: "HPCC's base RTT: its window is one BDP of it at the line rate.",
    },
    Key {
        name: "flows",
        ty: Type::Tables,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Any,
        doc: "The flows: `[[flows]]` tables.",
    },
];

/// configs/send.toml.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendConfig {
    #[serde(default)]
    pub cc: Cc,
    /// The RPs' line rate C, e.g. `1gbit`.
    pub line_rate: String,
    #[serde(default = "default_frame_len")]
    pub frame_len: u32,
    #[serde(deserialize_with = "quench_config::file::ipv4")]
    pub src_ip: Ipv4Addr,
    #[serde(deserialize_with = "quench_config::file::ipv4")]
    pub dst_ip: Ipv4Addr,
    #[serde(default = "default_vlan")]
    pub vlan: u16,
    /// Default: ECT(0) with DCQCN, Not-ECT otherwise.
    pub ecn: Option<EcnSetting>,
    #[serde(default)]
    pub seed: u64,
    /// How far, in microseconds, a flow may fall behind its release times (the loop was off
    /// the CPU) and still catch up by sending the frames it owes at once: the rate limiter's
    /// burst tolerance. Lag beyond it is given up. Default 50.
    #[serde(default = "default_catch_up_us")]
    pub max_catch_up_us: u32,
    /// While a flow catches up, it sends at most this many times its RP rate (a peak rate
    /// over the committed one), so a long `max_catch_up_us` does not become a line-rate burst.
    /// Absent: frames owed leave as fast as the loop polls. Must be above 1.
    pub catch_up_speed: Option<f64>,
    /// A preset (bundled name or file, relative to this file) whose `[qcn_rp]` / `[dcqcn_rp]`
    /// stand where this file writes none ([`quench_config::bundled::PresetTables`]).
    pub preset: Option<String>,
    pub qcn_rp: Option<rp::QcnParams>,
    pub dcqcn_rp: Option<rp::DcqcnParams>,
    /// HPCC's base RTT in microseconds: its window is one BDP of it at the line rate.
    #[serde(default = "default_base_rtt_us")]
    pub base_rtt_us: u32,
    pub flows: Vec<FlowGroup>,
}

const VLAN: &Key = key(KEYS, "vlan");
const MAX_CATCH_UP_US: &Key = key(KEYS, "max_catch_up_us");
const BASE_RTT_US: &Key = key(KEYS, "base_rtt_us");

impl SendConfig {
    /// The ranges of [`KEYS`] a value must keep whatever the port: an error naming the key.
    pub fn check(&self) -> Result<(), units::ParamError> {
        VLAN.within(self.vlan.into())?;
        MAX_CATCH_UP_US.within(self.max_catch_up_us.into())?;
        BASE_RTT_US.within(self.base_rtt_us.into())?;
        if self.frame_len as usize > MAX_FRAME {
            return Err(units::ParamError::new(
                "frame_len",
                self.frame_len,
                format!("must be at most {MAX_FRAME} octets (the largest frame a port sends)"),
            ));
        }
        Ok(())
    }
}

/// Reads a send configuration; its reaction-point tables are its own or, where it writes none,
/// those of the preset its `preset` key names.
pub fn load(src: &Source) -> anyhow::Result<SendConfig> {
    let mut cfg: SendConfig =
        quench_config::file::from_str(&src.text, &src.origin).map_err(anyhow::Error::msg)?;
    cfg.check()
        .map_err(|e| anyhow::anyhow!("{}: {e}", src.origin))?;
    if let Some(p) = &cfg.preset {
        let t = PresetTables::from_key(p, src)?;
        cfg.qcn_rp = cfg.qcn_rp.or(t.qcn_rp);
        cfg.dcqcn_rp = cfg.dcqcn_rp.or(t.dcqcn_rp);
    }
    Ok(cfg)
}

/// The host's reaction points for `cc` at line rate `line`, from the `[qcn_rp]` /
/// `[dcqcn_rp]` tables (their defaults when absent); an invalid table is an error naming it.
/// HPCC, DCTCP and TIMELY run with ns-3 HPCC's defaults, HPCC with a window of one BDP of
/// `base_rtt` at `line`. `quench send` and `quench appliance` both build theirs here.
pub fn host_rp(
    cc: Cc,
    qcn: Option<&rp::QcnParams>,
    dcqcn: Option<&rp::DcqcnParams>,
    base_rtt: Duration,
    line: Rate,
) -> anyhow::Result<HostRp> {
    Ok(match cc {
        Cc::None => HostRp::None,
        Cc::Qcn => HostRp::qcn(
            qcn.cloned()
                .unwrap_or_default()
                .profile(line)
                .map_err(|e| anyhow::anyhow!("[qcn_rp] {e}"))?,
        ),
        Cc::Dcqcn => HostRp::Dcqcn(
            dcqcn
                .cloned()
                .unwrap_or_default()
                .profile(line)
                .map_err(|e| anyhow::anyhow!("[dcqcn_rp] {e}"))?,
        ),
        Cc::Hpcc => {
            let path = rp::FlowPath {
                window: (u128::from(line.as_bps()) * u128::from(base_rtt.as_nanos())
                    / 8_000_000_000) as u64,
                base_rtt,
            };
            HostRp::Hpcc(
                rp::HpccParams::default()
                    .profile(line, path)
                    .map_err(|e| anyhow::anyhow!("hpcc (base_rtt_us): {e}"))?,
            )
        }
        Cc::Dctcp => HostRp::Dctcp(
            rp::DctcpParams::default()
                .profile(line)
                .map_err(|e| anyhow::anyhow!("dctcp: {e}"))?,
        ),
        Cc::Timely => HostRp::Timely(
            rp::TimelyParams::default()
                .profile(line)
                .map_err(|e| anyhow::anyhow!("timely: {e}"))?,
        ),
    })
}

/// One port's configuration: `--config` with the command line's overrides applied.
pub struct PortConfig {
    pub cfg: SendConfig,
    pub file: String,
    /// The config file's directory: relative CDF paths in it are read from there.
    pub dir: PathBuf,
    pub cc: Cc,
    pub line: Rate,
    pub ecn: Ecn,
    pub pacing: PacingConfig,
}

impl PortConfig {
    /// The configuration `src` with the overrides: `cc`, every flow group's `rate`, the
    /// reaction-point tables of `preset` (a bundled name or a file).
    pub fn resolve(
        src: Source,
        cc: Option<Cc>,
        rate: Option<&Rate>,
        preset: Option<&str>,
    ) -> anyhow::Result<PortConfig> {
        let mut cfg = load(&src)?;
        let file = src.origin.clone();
        let cc = cc.unwrap_or(cfg.cc);
        if let Some(r) = rate {
            for g in &mut cfg.flows {
                g.rate = r.to_string();
            }
        }
        if let Some(p) = preset {
            let t = PresetTables::from_option(p)?;
            // A preset without the table `cc` reads would leave its defaults in place unsaid.
            let (applies, table) = match cc {
                Cc::None => (false, "none"),
                Cc::Qcn => (t.qcn_rp.is_some(), "[qcn_rp]"),
                Cc::Dcqcn => (t.dcqcn_rp.is_some(), "[dcqcn_rp]"),
                Cc::Hpcc | Cc::Dctcp | Cc::Timely => (false, "[qcn_rp] or [dcqcn_rp]"),
            };
            if !applies {
                anyhow::bail!(
                    "--preset {p} does not apply to cc {}: it has no {table} table{}",
                    cc.name(),
                    if cc == Cc::None {
                        " (no reaction point runs)"
                    } else {
                        " (`quench presets` lists the presets)"
                    }
                );
            }
            cfg.qcn_rp = t.qcn_rp.or(cfg.qcn_rp);
            cfg.dcqcn_rp = t.dcqcn_rp.or(cfg.dcqcn_rp);
        }
        let line =
            Rate::parse(&cfg.line_rate).map_err(|e| anyhow::anyhow!("{file}: line_rate: {e}"))?;
        let ecn = match cfg.ecn {
            Some(EcnSetting::NotEct) => Ecn::NotEct,
            Some(EcnSetting::Ect0) => Ecn::Ect0,
            Some(EcnSetting::Ect1) => Ecn::Ect1,
            None if cc == Cc::Dcqcn || cc == Cc::Dctcp => Ecn::Ect0,
            None => Ecn::NotEct,
        };
        if let Some(k) = cfg.catch_up_speed {
            if !(k.is_finite() && k > 1.0) {
                anyhow::bail!(
                "{file}: catch_up_speed = {k}: must be above 1 (the peak rate of a flow catching \
                 up, in multiples of its RP rate)"
            );
            }
        }
        let pacing = PacingConfig {
            max_catch_up: Duration::from_micros(u64::from(cfg.max_catch_up_us)),
            catch_up_speed: cfg.catch_up_speed,
            ..PacingConfig::default()
        };
        Ok(PortConfig {
            cfg,
            file,
            dir: src.dir,
            cc,
            line,
            ecn,
            pacing,
        })
    }
}

/// `quench send --config`: the configuration reference's kind (`quench presets --keys send`).
pub const KIND: reference::Kind = reference::Kind {
    name: "send",
    about: "`quench send --config NAME|FILE` (bundled: `send`).",
    sections: &[
        reference::own("top level", &[KEYS]),
        reference::Section::Own {
            title: "[[flows]]",
            about: "A group of flows.",
            keys: &[quench_node::flowgen::KEYS],
        },
        reference::params("[qcn_rp]", &reference::QCN_RP),
        reference::params("[dcqcn_rp]", &reference::DCQCN_RP),
    ],
};
