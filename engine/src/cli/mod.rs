//! One module per `quench` subcommand, each with a clap `Args` and `run(args)`.
use anyhow::Context as _;

pub mod blast;
pub mod frames;
pub mod recv;
pub mod replay;
pub mod report;
pub mod send;
pub mod sim;
pub mod stats;
pub mod switch;

/// Reads table `table` of a TOML file such as a preset (configs/nvidia.toml holds `[dcqcn_rp]`
/// and `[np]`); the file's other tables are ignored. `None` when the table is absent.
pub(crate) fn preset_table<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    table: &str,
) -> anyhow::Result<Option<T>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let v: toml::Table = toml::from_str(&text).with_context(|| format!("{}", path.display()))?;
    v.get(table)
        .map(|t| t.clone().try_into())
        .transpose()
        .with_context(|| format!("{}: table [{table}]", path.display()))
}
