//! The configuration reference: every key of every configuration file quench reads, with its
//! type, unit, default and range, rendered as Markdown (docs/config.md is `quench presets --keys
//! all`). Each kind of file is a [`Kind`] declared beside its parser (the switch's, the
//! sender's and the appliance's in quench-runtime, the scenario's in quench-sim, [`PRESET`]
//! here); its sections hold the key tables (`units::keys::Key`) the parser validates with, so
//! the reference cannot drift from the code.

use units::keys::Key;

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
    /// `switch`, as `quench presets --keys` names it.
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

/// A section of its own keys, with nothing to say besides.
pub const fn own(title: &'static str, keys: &'static [&'static [Key]]) -> Section {
    Section::Own {
        title,
        about: "",
        keys,
    }
}

pub const fn params(title: &'static str, params: &'static Params) -> Section {
    Section::Params {
        title,
        params,
        extra: &[],
    }
}

/// `--preset` files: the parameter tables.
pub const PRESET: Kind = Kind {
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
};

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
pub fn kind_reference(kind: &Kind, inline: bool) -> String {
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

/// docs/config.md: every kind of `kinds` but [`PRESET`], then each parameter table once.
pub fn reference(kinds: &[&Kind]) -> String {
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
    for kind in kinds.iter().filter(|k| k.name != PRESET.name) {
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
