use clap::{CommandFactory as _, Parser, Subcommand};
mod cli;
#[cfg(test)]
mod config_tests;
#[cfg(test)]
mod grammar_tests;

/// The top-level help's description (the crate's own description is about its modules).
const ABOUT: &str = "quench: data-centre congestion control (QCN, DCQCN, PFC, TCD) on real \
                     Ethernet frames and in virtual time";

const LONG_ABOUT: &str = "\
quench runs the IEEE 802.1Qau QCN, DCQCN, PFC and TCD algorithms on real frames: a software \
switch with congestion points between NICs (AF_XDP, AF_PACKET or DPDK), a traffic sender \
whose reaction points obey the CNMs and CNPs that come back, a receiver that measures \
goodput, loss and latency, and a simulator that runs the same algorithms in virtual time \
on ns-3 HPCC topologies.";

const EXAMPLES: &str = "\
Examples:
  quench presets                                     the bundled presets and configurations
  quench sim --scenario incast --out /tmp/incast     a DCQCN incast in virtual time
  quench switch --config switch-qcn                  a switch with a QCN congestion point
  quench send --iface eth0 --cc dcqcn --preset nvidia --duration 10s
  quench recv --iface eth0 --duration 10s --out /tmp/r && quench report /tmp/r
  quench completions bash > /etc/bash_completion.d/quench

Durations and rates carry their unit: 10s, 500ms, 50us, 1h; 300mbit, 1gbit, 125MBps.
Exit status: 0 done, 1 the run failed, 2 the command line is wrong; either way the reason is on
standard error after `error:`.";

// The cargo features this binary was built with, for `--version`.
#[cfg(feature = "dpdk")]
macro_rules! features {
    () => {
        "dpdk"
    };
}
#[cfg(not(feature = "dpdk"))]
macro_rules! features {
    () => {
        "none"
    };
}

/// `quench --version`: the package version, the git commit of the build (build.rs) and the
/// features, so a report can name the binary that produced it.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("QUENCH_GIT_COMMIT"),
    ", features: ",
    features!(),
    ")"
);

#[derive(Parser)]
#[command(name = "quench", version = VERSION, about = ABOUT, long_about = LONG_ABOUT,
          after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// One variant per subcommand; each lives in engine/quench/src/cli/<name>.rs with its own Args and run().
#[derive(Subcommand)]
enum Command {
    /// Writes one frame of each kind quench emits to a pcap file, or decodes a pcap file.
    Frames(cli::frames::Args),
    /// Software switch between AF_XDP / AF_PACKET ports (MAC learning, priority queues, shaping).
    #[command(after_help = "Examples:\n  quench switch --config switch-qcn\n  \
        quench switch --config ./my-switch.toml --duration 60s --capture s0=/tmp/s0.pcap\n  \
        quench stats --watch")]
    Switch(cli::switch::Args),
    /// Live per-port and per-queue counters of a running `quench switch`.
    #[command(after_help = "Examples:\n  quench stats\n  \
        quench stats --watch --interval 500ms --control-socket /run/quench/switch.sock")]
    Stats(cli::stats::Args),
    /// Receives test flows: goodput, loss, reordering, latency; sends CNPs; writes reports.
    #[command(
        after_help = "Examples:\n  quench recv --iface eth0 --duration 10s --out /tmp/r\n  \
        quench recv --iface eth0 --preset nvidia --duration 30s"
    )]
    Recv(cli::recv::Args),
    /// Sends paced test flows rate-limited by QCN or DCQCN reaction points.
    #[command(
        after_help = "Examples:\n  quench send --iface eth0 --duration 10s\n  \
        quench send --iface eth0 --cc dcqcn --preset nvidia --rate 500mbit --duration 10s\n  \
        quench send --iface eth0 --config ./my-flows.toml --sink eth1 --sink-out /tmp/r"
    )]
    Send(cli::send::Args),
    /// Rate-limiting sender appliance between unmodified hosts and the network: per-flow
    /// queues released at QCN / DCQCN reaction-point rates; or, in front of a receiver, CE -> CNP.
    Appliance(cli::appliance::Args),
    /// Fast AF_XDP traffic source for the forwarding benchmark.
    Blast(cli::blast::Args),
    /// Re-reads a run's interval log, JSON summary or report directory; prints or plots it.
    #[command(
        after_help = "Examples:\n  quench report /tmp/r\n  quench report /tmp/r/intervals.hlog --hgrm"
    )]
    Report(cli::report::Args),
    /// Drives one algorithm (QCN/DCQCN CP or RP, PFC, TCD) from an event file; prints its state
    /// after every event as CSV.
    Replay(cli::replay::Args),
    /// Simulates a topology and flows in virtual time with the same cp/rp/np code.
    #[command(
        after_help = "Examples:\n  quench sim --scenario incast --out /tmp/incast\n  \
        quench sim --topology topo.txt --flows flows.txt --cc dcqcn --preset hpcc-ns3 --out /tmp/s"
    )]
    Sim(cli::sim::Args),
    /// Lists the presets and configurations built into this binary, a line each; with `--keys
    /// KIND`, every key of a configuration kind (type, unit, default, range).
    Presets(cli::presets::Args),
    /// Prints a shell completion script: `quench completions bash > /etc/bash_completion.d/quench`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(msg) = retired(&args) {
        eprintln!("error: {msg}");
        return std::process::ExitCode::from(2);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Frames(a) => cli::frames::run(a),
        Command::Switch(a) => cli::switch::run(a),
        Command::Stats(a) => cli::stats::run(a),
        Command::Recv(a) => cli::recv::run(a),
        Command::Blast(a) => cli::blast::run(a),
        Command::Report(a) => cli::report::run(a),
        Command::Send(a) => cli::send::run(a),
        Command::Appliance(a) => cli::appliance::run(a),
        Command::Replay(a) => cli::replay::run(a),
        Command::Sim(a) => cli::sim::run(a),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "quench", &mut std::io::stdout());
            Ok(())
        }
        Command::Presets(a) => cli::presets::run(a),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The reader of standard output has gone (`quench frames --decode f.pcap | head`).
        Err(e) if cli::closed_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}`: the context chain on one line (`--config f.toml: f.toml:3: key ...`).
            // `error:` as clap's own usage errors, which exit with 2.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Flags that are gone, per subcommand (`*`: every one), with what to write instead. They are
/// not clap arguments, so help and shell completion never offer them; [`retired`] finds one on
/// the command line before clap does and says what replaced it.
const RETIRED: &[(&str, &str, &str)] = &[
    ("*", "--stop-ms", "--stop with its unit, e.g. --stop 50ms"),
    (
        "*",
        "--duration-s",
        "--duration with its unit, e.g. --duration 10s",
    ),
    (
        "*",
        "--interval-ms",
        "--interval with its unit, e.g. --interval 100ms",
    ),
    (
        "*",
        "--sink-linger-ms",
        "--sink-linger with its unit, e.g. --sink-linger 100ms",
    ),
    ("*", "--busy-poll", "--idle spin"),
    (
        "*",
        "--idle-sleep",
        "--idle with a duration, e.g. --idle 100us",
    ),
    (
        "*",
        "--napi-busy-poll",
        "--idle spin (a veth's AF_XDP socket has no NAPI id to busy-poll; docs/design.md, \
         \"Switch runtime\")",
    ),
    (
        "sim",
        "--config",
        "--overrides FILE (--config names a command's main file everywhere)",
    ),
    (
        "frames",
        "--pcap",
        "--out FILE to write the frames (--decode FILE reads a file)",
    ),
    ("blast", "--pcap", "--from-pcap FILE"),
];

/// The message for the first retired flag in `args` (the command line without the program
/// name): `--flag is gone: write ...`.
fn retired(args: &[String]) -> Option<String> {
    let sub = args.first()?;
    args.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .find_map(|a| {
            let flag = a.split_once('=').map_or(a.as_str(), |(f, _)| f);
            RETIRED
                .iter()
                .find(|(s, f, _)| (*s == "*" || s == sub) && *f == flag)
                .map(|(_, f, hint)| format!("{f} is gone: write {hint}"))
        })
}
