use clap::{Parser, Subcommand};
use engine::cli;

/// quench: data-centre congestion control (QCN, DCQCN, PFC, TCD) on real Ethernet frames.
#[derive(Parser)]
#[command(name = "quench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// One variant per subcommand; each lives in engine/src/cli/<name>.rs with its own Args and run().
#[derive(Subcommand)]
enum Command {
    /// Writes one frame of each kind quench emits to a pcap file, or decodes a pcap file.
    Frames(cli::frames::Args),
    /// Software switch between AF_XDP / AF_PACKET ports (MAC learning, priority queues, shaping).
    Switch(cli::switch::Args),
    /// Live per-port and per-queue counters of a running `quench switch`.
    Stats(cli::stats::Args),
    /// Receives test flows: goodput, loss, reordering, latency; sends CNPs; writes reports.
    Recv(cli::recv::Args),
    /// Sends paced test flows rate-limited by QCN or DCQCN reaction points.
    Send(cli::send::Args),
    /// Fast AF_XDP traffic source for the forwarding benchmark.
    Blast(cli::blast::Args),
    /// Re-reads a run's interval log, JSON summary or report directory; prints or plots it.
    Report(cli::report::Args),
    /// Drives one algorithm (QCN/DCQCN CP or RP, PFC, TCD) from an event file; prints its state
    /// after every event as CSV.
    Replay(cli::replay::Args),
    /// Simulates a topology and flows in virtual time with the same cp/rp/np code.
    Sim(cli::sim::Args),
    /// Lists the presets and configurations built into this binary, a line each.
    Presets,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Frames(a) => cli::frames::run(a),
        Command::Switch(a) => cli::switch::run(a),
        Command::Stats(a) => cli::stats::run(a),
        Command::Recv(a) => cli::recv::run(a),
        Command::Blast(a) => cli::blast::run(a),
        Command::Report(a) => cli::report::run(a),
        Command::Send(a) => cli::send::run(a),
        Command::Replay(a) => cli::replay::run(a),
        Command::Sim(a) => cli::sim::run(a),
        Command::Presets => {
            print!("{}", engine::bundled::listing());
            Ok(())
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The reader of standard output has gone (`quench frames --decode f.pcap | head`).
        Err(e) if cli::closed_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}`: the context chain on one line (`--config f.toml: f.toml:3: key ...`).
            eprintln!("Error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
