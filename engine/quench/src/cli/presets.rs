//! `quench presets`: the presets and configurations built into the binary; with `--keys KIND`,
//! the configuration reference of a kind: every key, its type, unit, default and range.
//!
//! The reference is assembled from the key tables each parser keeps beside its struct
//! (`units::keys::Key`; the validations check their ranges with them) and rendered by
//! [`quench_config::reference`], so it cannot drift from the code: docs/config.md is `--keys
//! all`, and the tests below hold every table to its parser (the same keys, the documented
//! default equal to the code's, a value past a range refused naming the key) and the file to
//! the output.

use quench_config::reference::{kind_reference, Kind};
#[cfg(test)]
use quench_config::reference::{Section, PARAMS};
#[cfg(test)]
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
    use clap::ValueEnum as _;
    if let Some(name) = &args.name {
        return out!("{}", preset_text(name, args.bw)?).map_err(Into::into);
    }
    match args.keys {
        None => out!("{}{}", quench_config::bundled::listing(), run_py_listing())?,
        Some(KeysOf::All) => out!("{}", reference())?,
        Some(k) => {
            let kind = KINDS
                .iter()
                .find(|x| {
                    k.to_possible_value()
                        .is_some_and(|v| v.get_name() == x.name)
                })
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

/// Every kind of configuration file, in the reference's order.
pub const KINDS: &[&Kind] = &[
    &quench_runtime::switch::config::KIND,
    &quench_runtime::send::config::KIND,
    &quench_runtime::appliance::config::KIND,
    &quench_sim::scenario::KIND,
    &quench_config::reference::PRESET,
];

/// docs/config.md: every kind, each parameter table once.
pub fn reference() -> String {
    quench_config::reference::reference(KINDS)
}

#[cfg(test)]
#[path = "presets_tests.rs"]
mod tests;
