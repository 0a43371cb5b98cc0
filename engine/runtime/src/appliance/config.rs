//! configs/appliance.toml: the appliance's role, congestion control, flow table and
//! reaction-point tables ([`ApplianceConfig`], its keys [`KEYS`]).
use anyhow::Context as _;
use serde::Deserialize;
use units::keys::{key, Key, KeyDefault, Range, Type};
use units::{Duration, ParamError, Rate};

use super::table::{TableConfig, WhenFull, MAX_CATCH_UP};
use super::Role;
use crate::send::config::Cc;
use quench_config::reference;
use quench_node::host::rp::HostRp;

fn default_line_rate() -> String {
    "1gbit".into()
}
fn default_max_flows() -> usize {
    TableConfig::default().max_flows
}
fn default_queue_bytes() -> u32 {
    TableConfig::default().queue_bytes
}
fn default_idle_timeout_s() -> f64 {
    TableConfig::default().idle_timeout.as_secs_f64()
}
fn yes() -> bool {
    true
}
fn default_catch_up_us() -> u32 {
    (MAX_CATCH_UP.as_nanos() / 1000) as u32
}

/// The keys of [`ApplianceConfig`], as the configuration reference lists them;
/// [`ApplianceConfig::table`] checks the ranges given here.
pub const KEYS: &[Key] = &[
    Key {
        name: "role",
        ty: Type::OneOf(&["rp", "np"]),
        unit: "",
        default: KeyDefault::Value("\"rp\""),
        range: Range::Any,
        doc: "In front of senders (reaction points, per-flow pacing) or of a receiver (CE marks \
              become CNPs).",
    },
    crate::send::config::CC,
    Key {
        name: "line_rate",
        ty: Type::Rate,
        unit: "",
        default: KeyDefault::Value("\"1gbit\""),
        range: Range::Text("> 0"),
        doc: "The reaction points' line rate C: no flow leaves faster.",
    },
    Key {
        name: "cn_tag",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("true"),
        range: Range::Any,
        doc: "QCN: add a CN-TAG carrying the flow's RPID to frames that have none.",
    },
    Key {
        name: "ect0",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("true"),
        range: Range::Any,
        doc: "DCQCN: set ECT(0) on Not-ECT packets so that RED marks them instead of dropping.",
    },
    Key {
        name: "max_flows",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1048576"),
        range: Range::Int(1, 1 << 24),
        doc: "The flow table's size.",
    },
    Key {
        name: "queue_bytes",
        ty: Type::Integer,
        unit: "octets",
        default: KeyDefault::Value("1048576"),
        range: Range::Text("one largest frame (1522).."),
        doc: "What each flow may queue.",
    },
    Key {
        name: "idle_timeout_s",
        ty: Type::Float,
        unit: "s",
        default: KeyDefault::Value("10"),
        range: Range::Text("> 0"),
        doc: "A flow with an empty queue and no frame for this long is evicted.",
    },
    Key {
        name: "when_full",
        ty: Type::OneOf(&["bypass", "drop"]),
        unit: "",
        default: KeyDefault::Value("\"bypass\""),
        range: Range::Any,
        doc: "A new flow's frame when the table is full of busy flows: sent unpaced, or dropped.",
    },
    quench_config::keys::MAX_CATCH_UP_US,
    Key {
        name: "pfc",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("false"),
        range: Range::Any,
        doc: "Honour PFC PAUSE frames from the network on the outside port (RP role).",
    },
    Key {
        name: "control_socket",
        ty: Type::String,
        unit: "path",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "The control socket `quench stats` reads; none when absent.",
    },
    quench_config::keys::PRESET,
    quench_config::keys::QCN_RP,
    quench_config::keys::DCQCN_RP,
    quench_config::keys::NP,
];

const MAX_FLOWS: &Key = key(KEYS, "max_flows");
const MAX_CATCH_UP_US: &Key = key(KEYS, "max_catch_up_us");

/// configs/appliance.toml.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplianceConfig {
    /// `rp` (in front of senders) or `np` (in front of a receiver).
    #[serde(default)]
    pub role: Role,
    /// `none`, `qcn` or `dcqcn` (as `quench send`'s `cc`).
    #[serde(default)]
    pub cc: Cc,
    /// The RPs' line rate C, e.g. `1gbit`: no flow leaves faster.
    #[serde(default = "default_line_rate")]
    pub line_rate: String,
    /// QCN: add a CN-TAG carrying the flow's RPID to frames that have none.
    #[serde(default = "yes")]
    pub cn_tag: bool,
    /// DCQCN: set ECT(0) on Not-ECT packets so RED marks them instead of dropping.
    #[serde(default = "yes")]
    pub ect0: bool,
    /// Flow-table size.
    #[serde(default = "default_max_flows")]
    pub max_flows: usize,
    /// Octets each flow may queue.
    #[serde(default = "default_queue_bytes")]
    pub queue_bytes: u32,
    /// Seconds without a frame after which a flow with an empty queue is evicted.
    #[serde(default = "default_idle_timeout_s")]
    pub idle_timeout_s: f64,
    /// `bypass` (send unpaced) or `drop`: a new flow's frame when the table is full of busy
    /// flows.
    #[serde(default)]
    pub when_full: WhenFull,
    /// Microseconds of sending time a flow whose release the loop was late for catches up at
    /// once (more is given up, counted); as `quench send`'s key.
    #[serde(default = "default_catch_up_us")]
    pub max_catch_up_us: u32,
    /// Honour PFC PAUSE frames from the network on the outside port (RP role): the paused
    /// priority's flows hold their frames ([`super::Appliance::set_pfc`]).
    #[serde(default)]
    pub pfc: bool,
    /// Control socket for `quench stats` (none when absent).
    pub control_socket: Option<std::path::PathBuf>,
    /// A preset (bundled name or file, relative to this file) whose `[qcn_rp]` / `[dcqcn_rp]` /
    /// `[np]` stand where this file writes none ([`quench_config::bundled::PresetTables`]).
    pub preset: Option<String>,
    pub qcn_rp: Option<rp::QcnParams>,
    pub dcqcn_rp: Option<rp::DcqcnParams>,
    pub np: Option<np::NpParams>,
}

impl ApplianceConfig {
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// Reads a configuration file; its tables are its own or, where it writes none, those of
    /// the preset its `preset` key names.
    pub fn read(src: &quench_config::bundled::Source) -> anyhow::Result<Self> {
        let mut cfg = Self::parse(&src.text).with_context(|| src.origin.clone())?;
        if let Some(p) = &cfg.preset {
            cfg.set_tables(
                quench_config::bundled::PresetTables::from_key(p, src)?,
                false,
            );
        }
        Ok(cfg)
    }

    /// Takes `t`'s tables: all it holds when `over`, else only those this config lacks.
    pub fn set_tables(&mut self, t: quench_config::bundled::PresetTables, over: bool) {
        let mine = quench_config::bundled::PresetTables {
            qcn_rp: self.qcn_rp.take(),
            dcqcn_rp: self.dcqcn_rp.take(),
            np: self.np.take(),
        };
        let t = if over { t.or(mine) } else { mine.or(t) };
        self.qcn_rp = t.qcn_rp;
        self.dcqcn_rp = t.dcqcn_rp;
        self.np = t.np;
    }

    /// The line rate.
    pub fn line(&self) -> Result<Rate, ParamError> {
        Rate::parse(&self.line_rate)
            .map_err(|e| ParamError::new("line_rate", &self.line_rate, e.to_string()))
    }

    /// The flow table's limits.
    pub fn table(&self) -> Result<TableConfig, ParamError> {
        MAX_FLOWS.within(self.max_flows as u64)?;
        if self.queue_bytes < quench_port::MAX_FRAME as u32 {
            return Err(ParamError::new(
                "queue_bytes",
                self.queue_bytes,
                format!(
                    "must hold one largest frame ({} octets)",
                    quench_port::MAX_FRAME
                ),
            ));
        }
        if !(self.idle_timeout_s.is_finite() && self.idle_timeout_s > 0.0) {
            return Err(ParamError::new(
                "idle_timeout_s",
                self.idle_timeout_s,
                "must be a positive number of seconds",
            ));
        }
        // The catch-up bound is a burst at the line rate: at most one second of it.
        MAX_CATCH_UP_US.within(self.max_catch_up_us.into())?;
        Ok(TableConfig {
            max_catch_up: Duration::from_micros(u64::from(self.max_catch_up_us)),
            max_flows: self.max_flows,
            queue_bytes: self.queue_bytes,
            idle_timeout: Duration::from_nanos((self.idle_timeout_s * 1e9) as u64),
            when_full: self.when_full,
            line_rate: self.line()?,
            ..TableConfig::default()
        })
    }

    /// The reaction points (the `[qcn_rp]` / `[dcqcn_rp]` tables, or their defaults).
    pub fn rp(&self) -> anyhow::Result<HostRp> {
        if self.cc.ack_driven() {
            anyhow::bail!(
                "cc {}: the appliance reads no ACKs, which HPCC, DCTCP and TIMELY react to;                  `quench send --cc {}` runs them",
                self.cc.name(),
                self.cc.name()
            );
        }
        crate::send::config::host_rp(
            self.cc,
            self.qcn_rp.as_ref(),
            self.dcqcn_rp.as_ref(),
            Duration::ZERO,
            self.line()?,
        )
    }

    /// The notification point of the NP role.
    pub fn np(&self) -> anyhow::Result<Option<np::Np>> {
        if self.role != Role::Np {
            return Ok(None);
        }
        self.notification_point().map(Some)
    }

    /// A notification point from the `[np]` table (or its defaults).
    pub fn notification_point(&self) -> anyhow::Result<np::Np> {
        let p = self
            .np
            .clone()
            .unwrap_or_default()
            .profile()
            .map_err(|e| anyhow::anyhow!("[np] {e}"))?;
        Ok(np::Np::new(p))
    }
}

/// `quench appliance --config`: the configuration reference's kind (`quench presets --keys
/// appliance`).
pub const KIND: reference::Kind = reference::Kind {
    name: "appliance",
    about: "`quench appliance --config NAME|FILE` (bundled: `appliance`).",
    sections: &[
        reference::own("top level", &[KEYS]),
        reference::params("[qcn_rp]", &reference::QCN_RP),
        reference::params("[dcqcn_rp]", &reference::DCQCN_RP),
        reference::params("[np]", &reference::NP),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_config_parses_and_validates() {
        let src = quench_config::bundled::open(
            "appliance",
            quench_config::bundled::Kind::Appliance,
            None,
        )
        .unwrap();
        let c = ApplianceConfig::read(&src).unwrap();
        c.table().unwrap();
        c.rp().unwrap();
        c.np().unwrap();
    }

    /// The appliance and `quench send` run the testbed's reaction points from one preset: the
    /// tables they end up with are the preset's, not the code's defaults.
    #[test]
    fn the_shipped_appliance_and_sender_share_their_rp_tables() {
        use quench_config::bundled::{open, Kind, PresetTables};
        let ap = ApplianceConfig::read(&open("appliance", Kind::Appliance, None).unwrap()).unwrap();
        let send = crate::send::config::load(&open("send", Kind::Send, None).unwrap()).unwrap();
        let preset = PresetTables::from_option("testbed-1g").unwrap();
        assert!(preset.qcn_rp.is_some() && preset.dcqcn_rp.is_some());
        assert_eq!(ap.qcn_rp, preset.qcn_rp);
        assert_eq!(ap.dcqcn_rp, preset.dcqcn_rp);
        assert_eq!(send.qcn_rp, preset.qcn_rp);
        assert_eq!(send.dcqcn_rp, preset.dcqcn_rp);
        assert_ne!(ap.qcn_rp, Some(rp::QcnParams::default()));
        assert_ne!(ap.dcqcn_rp, Some(rp::DcqcnParams::default()));
    }

    /// A table the file writes stands over its preset's; `--preset` stands over both; a preset
    /// that cannot be read is an error naming the file and the key.
    #[test]
    fn tables_come_from_the_command_line_then_the_file_then_its_preset() {
        use quench_config::bundled::{PresetTables, Source};
        let src = |text: &str| Source {
            text: text.to_string().into(),
            origin: "mine.toml".into(),
            dir: ".".into(),
        };
        let c = ApplianceConfig::read(&src("preset = \"testbed-1g\"\n[qcn_rp]\nrpg_ai_rate = 7\n"))
            .unwrap();
        assert_eq!(c.qcn_rp.as_ref().unwrap().rpg_ai_rate, 7);
        // The file's table is whole: the preset's other QCN keys do not fill it in.
        assert_eq!(
            c.qcn_rp.as_ref().unwrap().rpg_time_reset,
            rp::QcnParams::default().rpg_time_reset
        );
        let preset = PresetTables::from_option("testbed-1g").unwrap();
        assert_eq!(c.dcqcn_rp, preset.dcqcn_rp);
        let mut c = c;
        c.set_tables(PresetTables::from_option("nvidia").unwrap(), true);
        let nvidia = PresetTables::from_option("nvidia").unwrap();
        assert_eq!(c.dcqcn_rp, nvidia.dcqcn_rp);
        assert_eq!(c.qcn_rp.as_ref().unwrap().rpg_ai_rate, 7);
        let e = ApplianceConfig::read(&src("preset = \"testbed-10g\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("mine.toml") && e.contains("`preset`"), "{e}");
        assert!(
            e.contains("testbed-1g"),
            "the known presets are listed: {e}"
        );
    }

    #[test]
    fn errors_name_the_key() {
        let e = ApplianceConfig::parse("cc = \"qcn\"\nmax_flow = 3\n").unwrap_err();
        assert!(e.to_string().contains("max_flow"), "{e}");
        let e = ApplianceConfig::parse("when_full = \"later\"\n").unwrap_err();
        assert!(
            e.to_string().contains("when_full") || e.to_string().contains("later"),
            "{e}"
        );
        let c = ApplianceConfig::parse("max_flows = 0\n").unwrap();
        assert_eq!(c.table().unwrap_err().param, "max_flows");
        let c = ApplianceConfig::parse("queue_bytes = 100\n").unwrap();
        assert_eq!(c.table().unwrap_err().param, "queue_bytes");
        let c = ApplianceConfig::parse("line_rate = \"fast\"\n").unwrap();
        assert_eq!(c.table().unwrap_err().param, "line_rate");
        let c = ApplianceConfig::parse("idle_timeout_s = -1.0\n").unwrap();
        assert_eq!(c.table().unwrap_err().param, "idle_timeout_s");
        let c = ApplianceConfig::parse("max_catch_up_us = 0\n").unwrap();
        assert_eq!(c.table().unwrap_err().param, "max_catch_up_us");
        let c = ApplianceConfig::parse("max_catch_up_us = 250\npfc = true\n").unwrap();
        assert_eq!(c.table().unwrap().max_catch_up, Duration::from_micros(250));
        assert!(c.pfc);
    }
}
