//! Configuration files built into the binary: the parameter presets, the example configurations
//! and the flow-size distributions of `configs/`, so that an installed `quench` runs from any
//! directory and never reads a path of the machine it was built on.
//!
//! Every option that takes one of these files takes either a bundled NAME or a PATH:
//! - an argument without `/` and without `.` (`nvidia`, `send`, `websearch`) is a bundled name;
//! - anything else (`configs/send.toml`, `./mine`, `/etc/quench/switch.toml`) is a file, a
//!   relative one read from the working directory (or, inside a configuration file, from that
//!   file's directory).
//!
//! `quench presets` lists the bundled files with a line each.
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// What a bundled file is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Congestion-control parameter tables (`[qcn_rp]`, `[dcqcn_rp]`, `[np]`): `--preset`.
    Preset,
    /// `quench send --config`.
    Send,
    /// `quench switch --config`.
    Switch,
    /// `quench appliance --config`.
    Appliance,
    /// `quench sim --scenario`.
    Scenario,
    /// A flow-size distribution in the ns-3 HPCC `traffic_gen` format (`size_cdf`, `cdf`).
    Cdf,
}

impl Kind {
    /// Every kind, in `quench presets`' order.
    pub const ALL: &'static [Kind] = &[
        Kind::Preset,
        Kind::Send,
        Kind::Switch,
        Kind::Appliance,
        Kind::Scenario,
        Kind::Cdf,
    ];

    /// What an option of this kind is called in messages.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Preset => "preset",
            Kind::Send => "sender configuration",
            Kind::Switch => "switch configuration",
            Kind::Appliance => "appliance configuration",
            Kind::Scenario => "simulation scenario",
            Kind::Cdf => "flow-size distribution",
        }
    }
}

/// One file built into the binary.
#[derive(Debug)]
pub struct Bundled {
    pub name: &'static str,
    pub kind: Kind,
    /// One line: what it holds and where its values come from.
    pub summary: &'static str,
    pub text: &'static str,
}

macro_rules! bundled {
    ($name:literal, $kind:ident, $file:literal, $summary:literal) => {
        Bundled {
            name: $name,
            kind: Kind::$kind,
            summary: $summary,
            text: include_str!(concat!("../../../configs/", $file)),
        }
    };
}

/// Every bundled file, presets first.
pub const BUNDLED: &[Bundled] = &[
    bundled!(
        "dcqcn-paper",
        Preset,
        "dcqcn-paper.toml",
        "DCQCN as in Zhu et al., SIGCOMM 2015: 40 Gb/s, g = 1/256, 55 us timers (dcqcn_rp, np)"
    ),
    bundled!(
        "hpcc-ns3",
        Preset,
        "hpcc-ns3.toml",
        "DCQCN of the HPCC ns-3 simulator (run.py --cc dcqcn), 100 Gb/s (dcqcn_rp, np)"
    ),
    bundled!(
        "ieee-8021qau",
        Preset,
        "ieee-8021qau.toml",
        "IEEE 802.1Qau QCN reaction-point defaults from IEEE8021-CN-MIB (qcn_rp)"
    ),
    bundled!(
        "nvidia",
        Preset,
        "nvidia.toml",
        "NVIDIA (Mellanox) NIC DCQCN firmware defaults, 100 Gb/s (dcqcn_rp, np)"
    ),
    bundled!(
        "testbed-1g",
        Preset,
        "testbed-1g.toml",
        "the 1 Gbit/s testbed's RPs: QCN as tune-qcn.py chose, DCQCN paper scaled (qcn_rp, dcqcn_rp)"
    ),
    bundled!(
        "send",
        Send,
        "send.toml",
        "quench send: one QCN flow at 1 Gbit/s, priority 3, to the testbed's receiver"
    ),
    bundled!(
        "switch",
        Switch,
        "switch.toml",
        "quench switch: the testbed's three ports, no congestion point"
    ),
    bundled!(
        "switch-qcn",
        Switch,
        "switch-qcn.toml",
        "quench switch: the testbed's ports with a QCN congestion point on the bottleneck"
    ),
    bundled!(
        "switch-dcqcn",
        Switch,
        "switch-dcqcn.toml",
        "quench switch: the testbed's ports with RED/ECN marking for DCQCN on the bottleneck"
    ),
    bundled!(
        "switch-hpcc",
        Switch,
        "switch-hpcc.toml",
        "quench switch: the testbed's ports with HPCC's INT stamping on the bottleneck"
    ),
    bundled!(
        "switch-dctcp",
        Switch,
        "switch-dctcp.toml",
        "quench switch: the testbed's ports with ECN marking at K for DCTCP on the bottleneck"
    ),
    bundled!(
        "switch-pfc",
        Switch,
        "switch-pfc.toml",
        "quench switch: the testbed's ports with PFC on priority 3, 1 Gbit/s to the receiver"
    ),
    bundled!(
        "appliance",
        Appliance,
        "appliance.toml",
        "quench appliance: reaction points for the hosts behind it, 1 Gbit/s line rate"
    ),
    bundled!(
        "incast",
        Scenario,
        "scenarios/incast.toml",
        "quench sim: 3-to-1 incast of 4 MB flows at 40 Gb/s under DCQCN (preset dcqcn-paper)"
    ),
    bundled!(
        "websearch",
        Cdf,
        "cdf/websearch.txt",
        "web-search flow sizes of Alizadeh et al. (DCTCP, SIGCOMM 2010), ns-3 HPCC format"
    ),
];

/// A configuration file's text and where it came from.
#[derive(Debug)]
pub struct Source {
    pub text: Cow<'static, str>,
    /// `bundled preset nvidia` or the path as given; prefixes every error about the text.
    pub origin: String,
    /// The directory relative paths inside the file start from: the file's own, or the working
    /// directory for a bundled file.
    pub dir: PathBuf,
}

/// Why a configuration argument could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "`{arg}` is not a bundled {noun} (they are: {names}; `quench presets` lists them); \
         to read a file, give a path containing `/` or `.`, e.g. ./{arg}.toml"
    )]
    UnknownName {
        arg: String,
        noun: &'static str,
        names: String,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

/// The bundled names of `kinds`, in [`BUNDLED`]'s order.
pub fn names_of(kinds: &[Kind]) -> impl Iterator<Item = &'static str> + '_ {
    BUNDLED
        .iter()
        .filter(|b| kinds.contains(&b.kind))
        .map(|b| b.name)
}

/// Whether `arg` is a bundled name rather than a path (see the module documentation).
pub fn is_name(arg: &str) -> bool {
    !arg.is_empty() && !arg.contains(['/', '.'])
}

/// The bundled file `name` of kind `kind`.
pub fn get(name: &str, kind: Kind) -> Option<&'static Bundled> {
    BUNDLED.iter().find(|b| b.kind == kind && b.name == name)
}

/// Reads `arg`, a bundled name of kind `kind` or a path; a relative path starts from `base`
/// (`None`: the working directory).
pub fn open(arg: &str, kind: Kind, base: Option<&Path>) -> Result<Source, OpenError> {
    if is_name(arg) {
        let b = get(arg, kind).ok_or_else(|| OpenError::UnknownName {
            arg: arg.to_string(),
            noun: kind.noun(),
            names: BUNDLED
                .iter()
                .filter(|b| b.kind == kind)
                .map(|b| b.name)
                .collect::<Vec<_>>()
                .join(", "),
        })?;
        return Ok(Source {
            text: Cow::Borrowed(b.text),
            origin: format!("bundled {} {}", kind.noun(), b.name),
            dir: PathBuf::from("."),
        });
    }
    let path = match base {
        Some(b) if Path::new(arg).is_relative() => b.join(arg),
        _ => PathBuf::from(arg),
    };
    let text = std::fs::read_to_string(&path).map_err(|source| OpenError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Ok(Source {
        text: Cow::Owned(text),
        origin: path.display().to_string(),
        dir: path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf(),
    })
}

/// Table `table` of a preset-like TOML source (configs/nvidia.toml holds `[dcqcn_rp]` and
/// `[np]`); the file's other tables are ignored. `None` when the table is absent.
pub fn table<T: serde::de::DeserializeOwned>(
    src: &Source,
    table: &str,
) -> anyhow::Result<Option<T>> {
    use anyhow::Context as _;
    let v: toml::Table =
        crate::file::from_str(&src.text, &src.origin).map_err(anyhow::Error::msg)?;
    v.get(table)
        .map(|t| t.clone().try_into())
        .transpose()
        .with_context(|| format!("{}: table [{table}]", src.origin))
}

/// The congestion-control tables of a preset: `[qcn_rp]`, `[dcqcn_rp]`, `[np]`, each `None` when
/// the file has none. `quench send` and `quench appliance` take theirs from three places, each
/// table whole (a table is never merged key by key): `--preset` on the command line, else the
/// table written in the configuration file, else the one of the preset its `preset` key names,
/// else the table's defaults.
#[derive(Debug, Default)]
pub struct PresetTables {
    pub qcn_rp: Option<rp::QcnParams>,
    pub dcqcn_rp: Option<rp::DcqcnParams>,
    pub np: Option<np::NpParams>,
}

impl PresetTables {
    /// The tables of `src`, a preset's text.
    pub fn read(src: &Source) -> anyhow::Result<Self> {
        Ok(PresetTables {
            qcn_rp: table(src, "qcn_rp")?,
            dcqcn_rp: table(src, "dcqcn_rp")?,
            np: table(src, "np")?,
        })
    }

    /// The tables of `--preset arg` (a bundled name or a file from the working directory).
    pub fn from_option(arg: &str) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let src = open(arg, Kind::Preset, None).with_context(|| format!("--preset {arg}"))?;
        Self::read(&src)
    }

    /// The tables of the preset a configuration file's `preset` key names (`config` is that
    /// file: a relative path is read from its directory). Errors name the file and the key.
    pub fn from_key(arg: &str, config: &Source) -> anyhow::Result<Self> {
        let src = open(arg, Kind::Preset, Some(&config.dir)).map_err(|e| {
            anyhow::anyhow!(
                "{}: key `preset`: must be a bundled preset or a preset file: {e}",
                config.origin
            )
        })?;
        Self::read(&src)
            .map_err(|e| anyhow::anyhow!("{}: key `preset` = {arg:?}: {e:#}", config.origin))
    }

    /// Each table of `self` that is `None` taken from `under`.
    pub fn or(self, under: PresetTables) -> PresetTables {
        PresetTables {
            qcn_rp: self.qcn_rp.or(under.qcn_rp),
            dcqcn_rp: self.dcqcn_rp.or(under.dcqcn_rp),
            np: self.np.or(under.np),
        }
    }
}

/// `quench presets`: one line per bundled file.
pub fn listing() -> String {
    let mut out = String::new();
    for &kind in Kind::ALL {
        let head = match kind {
            Kind::Preset => "Presets (--preset NAME):",
            Kind::Send => "Sender configurations (quench send --config NAME):",
            Kind::Switch => "Switch configurations (quench switch --config NAME):",
            Kind::Appliance => "Appliance configurations (quench appliance --config NAME):",
            Kind::Scenario => "Simulation scenarios (quench sim --scenario NAME):",
            Kind::Cdf => "Flow-size distributions (size_cdf = \"NAME\", cdf = \"NAME\"):",
        };
        out.push_str(head);
        out.push('\n');
        for b in BUNDLED.iter().filter(|b| b.kind == kind) {
            out.push_str(&format!("  {:<14} {}\n", b.name, b.summary));
        }
    }
    out.push_str("A NAME has no `/` or `.`; anything else is read as a file path.\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths_are_told_apart() {
        assert!(is_name("nvidia"));
        assert!(is_name("switch-pfc"));
        assert!(!is_name("configs/nvidia.toml"));
        assert!(!is_name("nvidia.toml"));
        assert!(!is_name("./nvidia"));
        assert!(!is_name(""));
    }

    #[test]
    fn every_bundled_toml_parses_and_names_are_unique() {
        for (i, b) in BUNDLED.iter().enumerate() {
            assert!(is_name(b.name), "{}", b.name);
            assert!(
                BUNDLED[..i].iter().all(|o| o.name != b.name),
                "duplicate {}",
                b.name
            );
            if b.kind != Kind::Cdf {
                toml::from_str::<toml::Table>(b.text).unwrap_or_else(|e| panic!("{}: {e}", b.name));
            }
        }
    }

    #[test]
    fn unknown_name_lists_the_known_ones_of_its_kind() {
        let e = open("nvidai", Kind::Preset, None).unwrap_err().to_string();
        assert!(e.contains("`nvidai` is not a bundled preset"), "{e}");
        assert!(e.contains("nvidia") && e.contains("dcqcn-paper"), "{e}");
        assert!(!e.contains("switch-pfc"), "{e}");
        // A switch configuration is not a preset.
        assert!(open("switch", Kind::Preset, None).is_err());
    }

    #[test]
    fn paths_are_read_relative_to_the_base() {
        let dir = std::env::temp_dir().join(format!("quench-bundled-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("p.toml"), "[np]\n").unwrap();
        let s = open("p.toml", Kind::Preset, Some(&dir)).unwrap();
        assert_eq!(s.text, "[np]\n");
        assert_eq!(s.dir, dir);
        let e = open("missing.toml", Kind::Preset, Some(&dir)).unwrap_err();
        assert!(e.to_string().contains("missing.toml"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn listing_has_a_line_per_file() {
        let l = listing();
        for b in BUNDLED {
            assert!(
                l.lines()
                    .any(|line| line.trim_start().starts_with(b.name) && line.contains(b.summary)),
                "{}",
                b.name
            );
        }
    }
}
