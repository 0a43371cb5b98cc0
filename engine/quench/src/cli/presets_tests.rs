//! The configuration reference against the code: docs/config.md is the generated reference,
//! and every key table matches its parser (keys, defaults, ranges).

use std::path::Path;

use rand_xoshiro::rand_core::SeedableRng;
use units::keys::{KeyDefault, Range};
use units::Rate;

use super::*;
use quench_runtime::appliance::config::ApplianceConfig;
use quench_runtime::send::config::{host_rp, Cc, SendConfig};

/// How the tests read one section of a kind: `text` makes a whole file with `line` (one
/// `key = value`, or nothing) in the section, `read` reads and validates it as the command
/// does (a description of what it made, or the error).
struct Probe {
    section: &'static str,
    keys: &'static [&'static [Key]],
    text: fn(&str) -> String,
    read: fn(&str) -> Result<String, String>,
    /// Keys the section's reader takes out before its struct sees the rest (`enabled`).
    taken_out: &'static [&'static str],
    /// The tables whose defaults and ranges are checked through this probe (`None`: all of
    /// `keys`; the simulator's `[pfc]` and `[tcd]` fill some keys per switch, so their values
    /// are checked by the parameter tables' own probes).
    values: Option<&'static [&'static [Key]]>,
}

const PORT: &str = "[[ports]]\nname = \"a\"\niface = \"eth0\"\n";

fn read_switch(t: &str) -> Result<String, String> {
    quench_runtime::switch::config::SwitchConfig::parse(t, "t.toml")
        .map(|p| format!("{p:?}"))
        .map_err(|e| e.to_string())
}

const SEND: &str = "line_rate = \"1gbit\"\nsrc_ip = \"10.0.0.1\"\ndst_ip = \"10.0.0.2\"\n";
const FLOWS: &str = "[[flows]]\ndestination = \"02:00:00:00:00:01\"\nrate = \"1gbit\"\n";

fn read_send(t: &str) -> Result<String, String> {
    let cfg: SendConfig = quench_config::file::from_str(t, "t.toml")?;
    cfg.check().map_err(|e| e.to_string())?;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let flows = quench_node::flowgen::schedule(&cfg.flows, Path::new("."), 1, &mut rng)
        .map_err(|e| e.to_string())?;
    let line = Rate::parse(&cfg.line_rate).map_err(|e| e.to_string())?;
    for cc in [Cc::Qcn, Cc::Dcqcn] {
        host_rp(
            cc,
            cfg.qcn_rp.as_ref(),
            cfg.dcqcn_rp.as_ref(),
            units::Duration::ZERO,
            line,
        )
        .map_err(|e| e.to_string())?;
    }
    Ok(format!("{cfg:?} {flows:?}"))
}

fn read_appliance(t: &str) -> Result<String, String> {
    let c = ApplianceConfig::parse(t).map_err(|e| e.to_string())?;
    let table = c.table().map_err(|e| e.to_string())?;
    Ok(format!("{table:?} {c:?}"))
}

const TOPOLOGY: &str = "topology_text = \"3 1 2\\n2\\n0 2 10Gbps 1us 0\\n1 2 10Gbps 1us 0\\n\"\n";

fn read_scenario(t: &str) -> Result<String, String> {
    let e = |e: anyhow::Error| format!("{e:#}");
    let s = quench_sim::scenario::Scenario::parse(t, Path::new("t.toml")).map_err(e)?;
    let mut cfg = quench_sim::RunConfig::default();
    s.apply(&mut cfg).map_err(e)?;
    let mut warnings = Vec::new();
    let topo = s.topology(&mut warnings).map_err(e)?;
    let flows = s.flows(&mut warnings).map_err(e)?;
    let poisson = match &topo {
        Some(topo) => s.poisson_flows(topo, cfg.seed).map_err(e)?,
        None => Vec::new(),
    };
    let cc =
        quench_sim::cc::CcSetup::new(quench_sim::CcKind::Dcqcn, &s.file.cc_sections(), "t.toml")
            .map_err(e)?;
    Ok(format!("{cfg:?} {flows:?} {poisson:?} {cc:?}"))
}

/// A parameter table read alone and validated into its profile.
macro_rules! read_params {
    ($t:expr, $ty:ty, $check:expr) => {{
        let p: $ty = toml::from_str($t).map_err(|e| e.to_string())?;
        #[allow(clippy::redundant_closure_call)]
        ($check)(&p).map_err(|e: units::ParamError| e.to_string())?;
        Ok(format!("{p:?}"))
    }};
}

fn line(l: &str) -> String {
    l.to_string()
}

const PROBES: &[Probe] = &[
    Probe {
        section: "switch top level",
        keys: &[quench_runtime::switch::config::SWITCH_KEYS],
        text: |l| format!("{l}\n{PORT}"),
        read: read_switch,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "switch [[ports]]",
        keys: &[quench_runtime::switch::config::PORT_KEYS],
        text: |l| format!("{PORT}{l}\n"),
        read: read_switch,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "switch [[static_macs]]",
        keys: &[quench_runtime::switch::config::STATIC_MAC_KEYS],
        text: |l| {
            format!("{PORT}[[static_macs]]\nmac = \"02:00:00:00:00:01\"\nport = \"a\"\n{l}\n")
        },
        read: read_switch,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "switch [[congestion]]",
        keys: &[quench_node::switch::cp::KEYS],
        text: |l| format!("{PORT}[[congestion]]\nport = \"a\"\n{l}\n"),
        read: read_switch,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "send top level",
        keys: &[quench_runtime::send::config::KEYS],
        text: |l| format!("{SEND}{l}\n{FLOWS}"),
        read: read_send,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "send [[flows]]",
        keys: &[quench_node::flowgen::KEYS],
        text: |l| format!("{SEND}{FLOWS}{l}\n"),
        read: read_send,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "appliance top level",
        keys: &[quench_runtime::appliance::config::KEYS],
        text: line,
        read: read_appliance,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "scenario top level",
        keys: &[quench_sim::scenario::KEYS],
        text: |l| format!("{TOPOLOGY}{l}\n"),
        read: read_scenario,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "scenario [host]",
        keys: &[quench_sim::scenario::HOST_KEYS],
        text: |l| format!("{TOPOLOGY}[host]\n{l}\n"),
        read: read_scenario,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "scenario [switch]",
        keys: &[quench_sim::scenario::SWITCH_KEYS],
        text: |l| format!("{TOPOLOGY}[switch]\n{l}\n"),
        read: read_scenario,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "scenario [[link_change]]",
        keys: &[quench_sim::scenario::LINK_CHANGE_KEYS],
        text: |l| {
            format!(
                "{TOPOLOGY}[[link_change]]\nat_ms = 1\nfrom = 2\nto = 1\nrate = \"1gbit\"\n{l}\n"
            )
        },
        read: read_scenario,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "scenario [[flow]]",
        keys: &[quench_sim::scenario::FLOW_KEYS],
        text: |l| format!("{TOPOLOGY}[[flow]]\nsrc = 0\ndst = 1\nbytes = 1000\n{l}\n"),
        read: read_scenario,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "scenario [[poisson]]",
        keys: &[quench_sim::scenario::POISSON_KEYS],
        text: |l| {
            format!(
                "{TOPOLOGY}[[poisson]]\ncdf = \"websearch\"\nload = 0.5\nduration_ms = 0.1\n{l}\n"
            )
        },
        read: read_scenario,
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "scenario [pfc]",
        keys: &[quench_sim::scenario::ENABLED_KEYS, cp::pfc::KEYS],
        text: |l| format!("{TOPOLOGY}[pfc]\n{l}\n"),
        read: read_scenario,
        taken_out: &["enabled"],
        values: Some(&[quench_sim::scenario::ENABLED_KEYS]),
    },
    Probe {
        section: "scenario [tcd]",
        keys: &[quench_sim::scenario::ENABLED_KEYS, cp::tcd::KEYS],
        text: |l| format!("{TOPOLOGY}[tcd]\n{l}\n"),
        read: read_scenario,
        taken_out: &["enabled"],
        values: Some(&[quench_sim::scenario::ENABLED_KEYS]),
    },
    Probe {
        section: "[dcqcn_rp]",
        keys: &[rp::dcqcn::KEYS],
        text: line,
        read: |t| {
            read_params!(t, rp::DcqcnParams, |p: &rp::DcqcnParams| p
                .profile(Rate::from_gbps(100))
                .map(|_| ()))
        },
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "[qcn_rp]",
        keys: &[rp::qcn::KEYS],
        text: line,
        read: |t| {
            read_params!(t, rp::QcnParams, |p: &rp::QcnParams| p
                .profile(Rate::from_gbps(10))
                .map(|_| ()))
        },
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "[hpcc_rp]",
        keys: &[rp::hpcc::KEYS],
        text: line,
        read: |t| {
            read_params!(t, rp::HpccParams, |p: &rp::HpccParams| {
                let path = rp::FlowPath {
                    window: 52_000,
                    base_rtt: units::Duration::from_nanos(4160),
                };
                p.profile(Rate::from_gbps(100), path).map(|_| ())
            })
        },
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "[timely_rp]",
        keys: &[rp::timely::KEYS],
        text: line,
        read: |t| {
            read_params!(t, rp::TimelyParams, |p: &rp::TimelyParams| p
                .profile(Rate::from_gbps(100))
                .map(|_| ()))
        },
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "[dctcp_rp]",
        keys: &[rp::dctcp::KEYS],
        text: line,
        read: |t| {
            read_params!(t, rp::DctcpParams, |p: &rp::DctcpParams| p
                .profile(Rate::from_gbps(100))
                .map(|_| ()))
        },
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "[pint_rp]",
        keys: &[rp::pint::KEYS],
        text: line,
        read: |t| {
            read_params!(t, rp::PintParams, |p: &rp::PintParams| p
                .profile(Rate::from_gbps(100))
                .map(|_| ()))
        },
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "[np]",
        keys: &[np::KEYS],
        text: line,
        read: |t| read_params!(t, np::NpParams, |p: &np::NpParams| p.profile().map(|_| ())),
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "[red]",
        keys: &[cp::red::KEYS],
        text: line,
        read: |t| {
            read_params!(t, cp::red::RedParams, |p| cp::red::RedProfile::new(p)
                .map(|_| ()))
        },
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "[qcn_cp]",
        keys: &[cp::qcn::KEYS],
        text: line,
        read: |t| {
            read_params!(t, cp::qcn::QcnCpParams, |p| cp::qcn::QcnCpProfile::new(p)
                .map(|_| ()))
        },
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "[pfc]",
        keys: &[cp::pfc::KEYS],
        text: line,
        read: |t| {
            read_params!(t, cp::pfc::PfcParams, |p| cp::pfc::PfcProfile::new(p)
                .map(|_| ()))
        },
        taken_out: &[],
        values: None,
    },
    Probe {
        section: "[tcd]",
        keys: &[cp::tcd::KEYS],
        text: line,
        read: |t| {
            read_params!(t, cp::tcd::TcdParams, |p| cp::tcd::TcdProfile::new(p)
                .map(|_| ()))
        },
        taken_out: &[],
        values: None,
    },
];

/// The keys a serde struct with `deny_unknown_fields` accepts, from its "unknown field" error
/// ("expected one of `a`, `b`", "expected `a` or `b`", "expected `a`").
fn accepted(error: &str) -> Vec<String> {
    let Some(list) = error.split("unknown field `__probe`, expected").nth(1) else {
        return Vec::new();
    };
    let list = list.split(['\n', ';']).next().unwrap_or("");
    let mut keys: Vec<String> = list
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    keys.sort();
    keys
}

fn names(p: &Probe) -> Vec<&'static str> {
    p.keys
        .iter()
        .flat_map(|t| t.iter())
        .map(|k| k.name)
        .collect()
}

#[test]
fn docs_config_md_is_the_generated_reference() {
    let file = include_str!("../../../../docs/config.md");
    assert!(
        file == reference(),
        "docs/config.md differs from `quench presets --keys all`: run \
         `cargo run -p quench -- presets --keys all > docs/config.md`"
    );
}

#[test]
fn every_table_lists_the_keys_its_parser_takes() {
    for p in PROBES {
        let base = (p.read)(&(p.text)(""));
        assert!(base.is_ok(), "{}: the base file fails: {base:?}", p.section);
        let err = (p.read)(&(p.text)("__probe = 1")).expect_err(p.section);
        let mut taken = accepted(&err);
        assert!(!taken.is_empty(), "{}: no key list in {err}", p.section);
        taken.extend(p.taken_out.iter().map(|s| s.to_string()));
        taken.sort();
        let mut documented: Vec<String> = names(p)
            .into_iter()
            // `[dpdk]` is a key of builds with the cargo feature.
            .filter(|n| {
                cfg!(feature = "dpdk") || !(p.section == "switch top level" && *n == "dpdk")
            })
            .map(str::to_string)
            .collect();
        documented.sort();
        assert_eq!(documented, taken, "{}", p.section);
    }
    // Every section of every kind is probed here or is a parameter table probed alone, but
    // for two: `[[red.by_rate]]` (sim::cc's tests) and `[dpdk]` (the `dpdk` feature's build).
    let probed: Vec<String> = PROBES.iter().map(|p| p.section.to_string()).collect();
    for kind in KINDS {
        for s in kind.sections {
            if let Section::Own { title, .. } = s {
                let name = format!("{} {title}", kind.name);
                if name == "scenario [[red.by_rate]]" || name == "switch [dpdk]" {
                    continue;
                }
                assert!(probed.contains(&name), "{name} has no probe");
            }
        }
    }
    for params in PARAMS {
        assert!(
            probed.contains(&format!("[{}]", params.name)),
            "{} has no probe",
            params.name
        );
    }
}

#[test]
fn documented_defaults_are_the_codes() {
    let mut checked = 0;
    for p in PROBES {
        let absent = (p.read)(&(p.text)("")).unwrap();
        for k in p.values.unwrap_or(p.keys).iter().flat_map(|t| t.iter()) {
            let KeyDefault::Value(v) = k.default else {
                continue;
            };
            let given = (p.read)(&(p.text)(&format!("{} = {v}", k.name)));
            assert_eq!(
                given.as_ref(),
                Ok(&absent),
                "{} `{}`: the documented default {v} is not the code's",
                p.section,
                k.name
            );
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked}");
}

#[test]
fn a_value_past_a_documented_range_is_refused_naming_the_key() {
    let mut checked = 0;
    for p in PROBES {
        for k in p.values.unwrap_or(p.keys).iter().flat_map(|t| t.iter()) {
            let outside: Vec<String> = match k.range {
                Range::Int(lo, hi) => {
                    let mut v = Vec::new();
                    if hi < i64::MAX as u64 {
                        v.push((hi + 1).to_string());
                    }
                    if lo > 0 {
                        v.push((lo - 1).to_string());
                    }
                    v
                }
                Range::Float(lo, hi) => vec![
                    format!("{:?}", hi + hi.abs().max(1.0)),
                    format!("{:?}", if lo > 0.0 { lo / 2.0 } else { lo - 1.0 }),
                ],
                _ => continue,
            };
            for v in outside {
                let r = (p.read)(&(p.text)(&format!("{} = {v}", k.name)));
                match r {
                    Err(e) => assert!(e.contains(k.name), "{} `{} = {v}`: {e}", p.section, k.name),
                    Ok(_) => panic!(
                        "{} `{} = {v}` is outside {:?} and taken",
                        p.section, k.name, k.range
                    ),
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 40, "{checked}");
}
