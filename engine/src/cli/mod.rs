//! One module per `quench` subcommand, each with a clap `Args` and `run(args)`.
//!
//! Standard output is written only through `outln!` / `out!`, which return the write's error
//! instead of panicking as `println!` does: a reader that closes the pipe early
//! (`quench frames --decode f.pcap | head`) makes the write fail with `BrokenPipe` (Rust ignores
//! SIGPIPE), the command unwinds through `?` (so reports are flushed and ports closed), and
//! `main` exits quietly with status 0 ([`closed_pipe`]).
#![deny(clippy::print_stdout)]

use crate::port::netns::NsPort;

// Defined above the `mod` lines, so every subcommand's module sees them (textual scope).

/// `println!` that returns the `std::io::Result` of the write (use it with `?`).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}
/// `print!` that returns the `std::io::Result` of the write (use it with `?`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// True when `e` comes from writing to a pipe whose reader has gone (`| head`): not a failure of
/// the command, which then ends quietly with status 0.
pub fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

pub mod blast;
pub mod frames;
pub mod recv;
pub mod replay;
pub mod report;
pub mod send;
pub mod sim;
pub mod stats;
pub mod sweep;
pub mod switch;

/// How `quench send` and `quench recv` open their one port: the switch's drivers.
#[derive(clap::Args, Debug, Clone)]
pub struct PortArgs {
    /// Port driver: af_packet (mmap'd TPACKET rings, any kernel), af_xdp (native mode, falling
    /// back to generic), or dpdk (cargo feature `dpdk`; `--iface` names the ethdev, e.g.
    /// net_af_packet0, and `--dpdk-eal` starts the EAL).
    #[arg(long, default_value = "af_packet", value_parser = ["af_packet", "af_xdp", "dpdk"])]
    pub driver: String,
    /// EAL arguments for `--driver dpdk`, one string, e.g.
    /// "--no-huge -m 256 --no-pci --no-shconf --vdev=net_af_packet0,iface=eth0".
    #[arg(long, allow_hyphen_values = true)]
    pub dpdk_eal: Option<String>,
}

impl PortArgs {
    /// Opens `label` (`[NETNS/]IFACE`) with these drivers.
    pub(crate) fn open(&self, label: &str) -> anyhow::Result<NsPort> {
        NsPort::open(label, &self.driver, self.dpdk_eal.as_deref())
    }
}
