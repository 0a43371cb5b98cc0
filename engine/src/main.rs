use clap::{Parser, Subcommand};

/// quench: data-centre congestion control (QCN, DCQCN, PFC, TCD) on real Ethernet frames.
#[derive(Parser)]
#[command(name = "quench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// One variant per subcommand; each lives in engine/src/cli/<name>.rs with its own Args and run().
#[derive(Subcommand)]
enum Command {}

#[allow(unreachable_code, unused_variables)] // until the first subcommand lands
fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {}
}
