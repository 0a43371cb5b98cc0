//! `quench replay --algo ALGO --config FILE --events EVENTS.csv [--seed N]`: drives one
//! algorithm from an event file and prints its state after every event as CSV on stdout.
//! The formats are documented in [`quench_runtime::replay`] and docs/usage.md ("quench replay").
use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;

use quench_runtime::replay::{self, Algo, ReplayConfig};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The algorithm to drive.
    #[arg(long, value_enum, value_name = "ALGO")]
    pub algo: Algo,
    /// The algorithm's parameters (`[qcn_cp]`, `[red]`, `[pfc]`, `[tcd]`, `[qcn_rp]`,
    /// `[dcqcn_rp]`, `[np]`): a TOML file or a bundled preset name (`quench presets`).
    #[arg(long, value_name = "NAME|FILE", hide_possible_values = true,
          value_parser = super::NameParser::of(&[quench_config::bundled::Kind::Preset]))]
    pub config: String,
    /// CSV events with the header `time_ns,event,value`.
    #[arg(long, value_name = "FILE")]
    pub events: PathBuf,
    /// Seed of the random generator handed to the algorithm (QCN sampling, RED marking).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let src =
        quench_config::bundled::open(&args.config, quench_config::bundled::Kind::Preset, None)
            .with_context(|| format!("--config {}", args.config))?;
    let cfg = ReplayConfig::parse(&src.text, &src.origin)?;
    // Every table, before any event: a config error names the config file, not the events.
    cfg.check(&src.origin)?;
    let text = std::fs::read_to_string(&args.events)
        .with_context(|| format!("reading {}", args.events.display()))?;
    let events = replay::parse_events(&text, args.algo)
        .with_context(|| format!("{}", args.events.display()))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    replay::replay(args.algo, &cfg, &events, args.seed, &mut out)
        .with_context(|| format!("{}", args.events.display()))?;
    out.flush()?;
    Ok(())
}
