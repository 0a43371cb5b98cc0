//! `quench presets`: the presets and configurations built into the binary; with `--keys KIND`,
//! the configuration reference of a kind: every key, its type, unit, default and range.
//!
//! The reference is assembled from the key tables each parser keeps beside its struct
//! (`units::keys::Key`; the validations check their ranges with them), so it cannot drift from
//! the code: docs/config.md is `--keys all`, and the tests below hold every table to its
//! parser (the same keys, the documented default equal to the code's, a value past a range
//! refused naming the key) and the file to the output.

use units::keys::Key;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print this preset or configuration (a bundled file as it is built in; a run.py preset as
    /// the config.txt keys it stands for at `--bw`).
    #[arg(value_name = "NAME", value_parser = super::NameParser::any(), conflicts_with = "keys")]
    pub name: Option<String>,
    /// NIC speed of a run.py preset (`hpcc-dcqcn`, ...), as `quench sim --bw`.
    #[arg(long, value_name = "RATE", value_parser = super::sim::bw_arg, requires = "name",
          allow_hyphen_values = true)]
    pub bw: Option<u64>,
    /// Print the configuration reference of KIND instead: every key with its type, unit,
    /// default and range, as Markdown (`all` is docs/config.md).
    #[arg(long, value_enum, value_name = "KIND")]
    pub keys: Option<KeysOf>,
}

/// The configuration kinds of the reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KeysOf {
    /// `quench switch --config`.
    Switch,
    /// `quench send --config`.
    Send,
    /// `quench appliance --config`.
    Appliance,
    /// `quench sim --scenario` / `--config`.
    Scenario,
    /// `--preset` files: the parameter tables.
    Preset,
    /// Every kind, each parameter table once (docs/config.md).
    All,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(name) = &args.name {
        return out!("{}", preset_text(name, args.bw)?).map_err(Into::into);
    }
    match args.keys {
        None => out!("{}{}", quench_config::bundled::listing(), run_py_listing())?,
        Some(KeysOf::All) => out!("{}", reference())?,
        Some(k) => {
            let kind = KINDS
                .iter()
                .find(|x| x.of == k)
                .ok_or_else(|| anyhow::anyhow!("no reference for {k:?}"))?;
            out!("{}", kind_reference(kind, true))?;
        }
    }
    Ok(())
}

/// The run.py presets' lines of `quench presets`.
fn run_py_listing() -> String {
    let mut out = String::from("run.py presets (quench sim --preset NAME --bw RATE):\n");
    for p in quench_sim::ns3::RUN_PY_PRESETS {
        out.push_str(&format!("  {:<18} {}\n", p.name, p.summary));
    }
    out
}

/// `quench presets NAME`: a bundled file's text, or a run.py preset's config.txt keys at `bw`.
fn preset_text(name: &str, bw: Option<u64>) -> anyhow::Result<String> {
    if let Some(cc) = quench_sim::ns3::run_py_preset(name) {
        let bw = bw.ok_or_else(|| {
            anyhow::anyhow!(
                "{name} is run.py --cc {cc} at a NIC speed: give --bw, e.g. --bw 100gbit"
            )
        })?;
        return Ok(format!(
            "# {name}: what HPCC ns-3's run.py writes for --cc {cc} --bw {bw} (config.txt keys)\n{}",
            quench_sim::ns3::run_py_config(cc, bw)?
        ));
    }
    if bw.is_some() {
        anyhow::bail!(
            "--bw goes with a run.py preset ({}), not {name}",
            run_py_names()
        );
    }
    match quench_config::bundled::BUNDLED
        .iter()
        .find(|b| b.name == name)
    {
        Some(b) => Ok(b.text.to_string()),
        None => {
            anyhow::bail!("no preset or configuration named `{name}`: `quench presets` lists them")
        }
    }
}

fn run_py_names() -> String {
    let names: Vec<&str> = quench_sim::ns3::RUN_PY_PRESETS
        .iter()
        .map(|p| p.name)
        .collect();
    names.join(", ")
}

/// A parameter table shared by several kinds (a preset's sections).
pub struct Params {
    /// The table's name, `dcqcn_rp`.
    pub name: &'static str,
    pub about: &'static str,
    pub keys: &'static [Key],
}

/// A section of a configuration file: its own keys (possibly from several tables), or a
/// parameter table.
pub enum Section {
    Own {
        /// How it is written: `top level`, `[[ports]]`, `[pfc]`.
        title: &'static str,
        about: &'static str,
        keys: &'static [&'static [Key]],
    },
    /// `title` holds the keys of parameter table `params`, and `extra` besides.
    Params {
        title: &'static str,
        params: &'static Params,
        extra: &'static [Key],
    },
}

/// One kind of configuration file.
pub struct Kind {
    pub of: KeysOf,
    pub name: &'static str,
    pub about: &'static str,
    pub sections: &'static [Section],
}

pub const DCQCN_RP: Params = Params {
    name: "dcqcn_rp",
    about: "DCQCN reaction points (`rp::DcqcnParams`): NVIDIA's names and units, NVIDIA's \
            firmware defaults.",
    keys: rp::dcqcn::KEYS,
};
pub const QCN_RP: Params = Params {
    name: "qcn_rp",
    about: "QCN reaction points (`rp::QcnParams`): Linux dcbnl's names, IEEE8021-CN-MIB \
            defaults.",
    keys: rp::qcn::KEYS,
};
pub const NP: Params = Params {
    name: "np",
    about: "The DCQCN notification point (`np::NpParams`): CE marks to CNPs.",
    keys: np::KEYS,
};
pub const RED: Params = Params {
    name: "red",
    about: "RED/ECN marking at a switch queue for DCQCN (`cp::red::RedParams`).",
    keys: cp::red::KEYS,
};
pub const QCN_CP: Params = Params {
    name: "qcn_cp",
    about: "The QCN congestion point at a switch queue (`cp::qcn::QcnCpParams`): \
            IEEE8021-CN-MIB names and defaults.",
    keys: cp::qcn::KEYS,
};
pub const PFC: Params = Params {
    name: "pfc",
    about: "PFC, 802.1Qbb (`cp::pfc::PfcParams`).",
    keys: cp::pfc::KEYS,
};
pub const TCD: Params = Params {
    name: "tcd",
    about: "Ternary congestion detection at a switch port (`cp::tcd::TcdParams`, seed 004).",
    keys: cp::tcd::KEYS,
};

pub const HPCC_RP: Params = Params {
    name: "hpcc_rp",
    about: "HPCC reaction points (`rp::HpccParams`): ns-3 HPCC's config.txt names, `RdmaHw`'s \
            defaults; the window and base RTT come from the network.",
    keys: rp::hpcc::KEYS,
};
pub const TIMELY_RP: Params = Params {
    name: "timely_rp",
    about: "TIMELY reaction points (`rp::TimelyParams`): ns-3 HPCC's `RdmaHw` attributes and \
            defaults.",
    keys: rp::timely::KEYS,
};
pub const DCTCP_RP: Params = Params {
    name: "dctcp_rp",
    about: "DCTCP reaction points, rate-based as ns-3 HPCC's (`rp::DctcpParams`).",
    keys: rp::dctcp::KEYS,
};
pub const PINT_RP: Params = Params {
    name: "pint_rp",
    about: "HPCC-PINT reaction points (`rp::PintParams`): ns-3 HPCC's config.txt names.",
    keys: rp::pint::KEYS,
};

/// Every parameter table, in the reference's order.
pub const PARAMS: &[&Params] = &[
    &DCQCN_RP, &QCN_RP, &NP, &RED, &QCN_CP, &PFC, &TCD, &HPCC_RP, &TIMELY_RP, &DCTCP_RP, &PINT_RP,
];

const fn params(title: &'static str, params: &'static Params) -> Section {
    Section::Params {
        title,
        params,
        extra: &[],
    }
}

pub const KINDS: &[Kind] = &[
    Kind {
        of: KeysOf::Switch,
        name: "switch",
        about: "`quench switch --config NAME|FILE` (bundled: `switch`, `switch-qcn`, \
                `switch-dcqcn`, `switch-pfc`).",
        sections: &[
            Section::Own {
                title: "top level",
                about: "",
                keys: &[quench_runtime::switch::config::SWITCH_KEYS],
            },
            Section::Own {
                title: "[[ports]]",
                about: "One per port.",
                keys: &[quench_runtime::switch::config::PORT_KEYS],
            },
            Section::Own {
                title: "[[static_macs]]",
                about: "",
                keys: &[quench_runtime::switch::config::STATIC_MAC_KEYS],
            },
            Section::Own {
                title: "[[congestion]]",
                about: "A congestion point on one egress port.",
                keys: &[quench_node::switch::cp::KEYS],
            },
            params("[congestion.qcn]", &QCN_CP),
            params("[congestion.red]", &RED),
            params("[congestion.tcd]", &TCD),
            params("[pfc]", &PFC),
            Section::Own {
                title: "[dpdk]",
                about: "With the cargo feature `dpdk` (`quench_port::dpdk::DpdkConfig`).",
                keys: &[quench_runtime::switch::config::DPDK_KEYS],
            },
        ],
    },
    Kind {
        of: KeysOf::Send,
        name: "send",
        about: "`quench send --config NAME|FILE` (bundled: `send`).",
        sections: &[
            Section::Own {
                title: "top level",
                about: "",
                keys: &[quench_runtime::send::config::KEYS],
            },
            Section::Own {
                title: "[[flows]]",
                about: "A group of flows.",
                keys: &[quench_node::flowgen::KEYS],
            },
            params("[qcn_rp]", &QCN_RP),
            params("[dcqcn_rp]", &DCQCN_RP),
        ],
    },
    Kind {
        of: KeysOf::Appliance,
        name: "appliance",
        about: "`quench appliance --config NAME|FILE` (bundled: `appliance`).",
        sections: &[
            Section::Own {
                title: "top level",
                about: "",
                keys: &[quench_runtime::appliance::config::KEYS],
            },
            params("[qcn_rp]", &QCN_RP),
            params("[dcqcn_rp]", &DCQCN_RP),
            params("[np]", &NP),
        ],
    },
    Kind {
        of: KeysOf::Scenario,
        name: "scenario",
        about: "`quench sim --scenario NAME|FILE` (bundled: `incast`), and `quench sim \
                --overrides FILE` (the same keys, over the command line's inputs).",
        sections: &[
            Section::Own {
                title: "top level",
                about: "",
                keys: &[quench_sim::scenario::KEYS],
            },
            Section::Own {
                title: "[host]",
                about: "",
                keys: &[quench_sim::scenario::HOST_KEYS],
            },
            Section::Own {
                title: "[switch]",
                about: "",
                keys: &[quench_sim::scenario::SWITCH_KEYS],
            },
            Section::Own {
                title: "[[link_change]]",
                about: "",
                keys: &[quench_sim::scenario::LINK_CHANGE_KEYS],
            },
            Section::Own {
                title: "[[flow]]",
                about: "",
                keys: &[quench_sim::scenario::FLOW_KEYS],
            },
            Section::Own {
                title: "[[poisson]]",
                about: "",
                keys: &[quench_sim::scenario::POISSON_KEYS],
            },
            params("[dcqcn_rp]", &DCQCN_RP),
            params("[qcn_rp]", &QCN_RP),
            params("[np]", &NP),
            params("[hpcc_rp]", &HPCC_RP),
            params("[timely_rp]", &TIMELY_RP),
            params("[dctcp_rp]", &DCTCP_RP),
            params("[pint_rp]", &PINT_RP),
            Section::Params {
                title: "[red]",
                params: &RED,
                extra: quench_sim::scenario::RED_KEYS,
            },
            Section::Own {
                title: "[[red.by_rate]]",
                about: "Values for one link speed: `rate` and any `[red]` key.",
                keys: &[quench_sim::scenario::RED_BY_RATE_KEYS],
            },
            params("[qcn_cp]", &QCN_CP),
            Section::Params {
                title: "[pfc]",
                params: &PFC,
                extra: quench_sim::scenario::ENABLED_KEYS,
            },
            Section::Params {
                title: "[tcd]",
                params: &TCD,
                extra: quench_sim::scenario::ENABLED_KEYS,
            },
        ],
    },
    Kind {
        of: KeysOf::Preset,
        name: "preset",
        about: "`--preset NAME|FILE` (bundled: `dcqcn-paper`, `hpcc-ns3`, `ieee-8021qau`, \
                `nvidia`, `testbed-1g`): any of the parameter tables.",
        sections: &[
            params("[dcqcn_rp]", &DCQCN_RP),
            params("[qcn_rp]", &QCN_RP),
            params("[np]", &NP),
            params("[red]", &RED),
            params("[qcn_cp]", &QCN_CP),
            params("[pfc]", &PFC),
            params("[tcd]", &TCD),
            params("[hpcc_rp]", &HPCC_RP),
            params("[timely_rp]", &TIMELY_RP),
            params("[dctcp_rp]", &DCTCP_RP),
            params("[pint_rp]", &PINT_RP),
        ],
    },
];

/// A Markdown table cell: pipes escaped, newlines none.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn table(out: &mut String, tables: &[&[Key]]) {
    out.push_str("| key | type | unit | default | range | meaning |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    for k in tables.iter().flat_map(|t| t.iter()) {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            k.name,
            cell(&k.ty.describe()),
            cell(k.unit),
            cell(&k.describe_default()),
            cell(&k.describe_range()),
            cell(k.doc)
        ));
    }
}

/// A parameter table's heading anchor in the reference (`#dcqcn_rp`).
fn anchor(p: &Params) -> String {
    format!("#{}", p.name)
}

/// One kind's sections; a parameter table in full when `inline`, else a link to it.
fn kind_reference(kind: &Kind, inline: bool) -> String {
    let mut out = format!("## {}\n\n{}\n", kind.name, kind.about);
    for s in kind.sections {
        match s {
            Section::Own { title, about, keys } => {
                out.push_str(&format!("\n### {} {title}\n\n", kind.name));
                if !about.is_empty() {
                    out.push_str(about);
                    out.push_str("\n\n");
                }
                table(&mut out, keys);
            }
            Section::Params {
                title,
                params,
                extra,
            } => {
                out.push_str(&format!("\n### {} {title}\n\n", kind.name));
                if inline {
                    out.push_str(params.about);
                    out.push_str("\n\n");
                    table(&mut out, &[extra, params.keys]);
                } else {
                    out.push_str(&format!(
                        "The keys of the [`{}`]({}) parameter table",
                        params.name,
                        anchor(params)
                    ));
                    if extra.is_empty() {
                        out.push_str(".\n");
                    } else {
                        out.push_str(", and:\n\n");
                        table(&mut out, &[extra]);
                    }
                }
            }
        }
    }
    out
}

/// docs/config.md: every kind, then each parameter table once.
pub fn reference() -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         Every key of every configuration file quench reads, with its type, unit, default and\n\
         range. Generated by `quench presets --keys all` from the key tables beside the code\n\
         that parses each file (`quench presets --keys KIND` prints one kind, its parameter\n\
         tables in full); a test checks this file against that output, and each table against\n\
         its parser: the keys it accepts, its defaults, its ranges.\n\n\
         Rates carry their unit (`\"10gbit\"`, bits; `\"125MBps\"`, bytes). A key that is\n\
         absent takes its default; an unknown key is an error naming it. Ranges are inclusive.\n\n",
    );
    for kind in KINDS.iter().filter(|k| k.of != KeysOf::Preset) {
        out.push_str(&kind_reference(kind, false));
        out.push('\n');
    }
    out.push_str(
        "## Parameter tables\n\nThe algorithms' parameters: the sections of a `--preset` file,\n\
         and the tables the kinds above name.\n",
    );
    for p in PARAMS {
        out.push_str(&format!("\n### {}\n\n{}\n\n", p.name, p.about));
        table(&mut out, &[p.keys]);
    }
    out
}

#[cfg(test)]
#[path = "presets_tests.rs"]
mod tests;
