//! One module per `quench` subcommand, each with a clap `Args` and `run(args)`.
//!
//! Standard output is written only through `outln!` / `out!`, which return the write's error
//! instead of panicking as `println!` does: a reader that closes the pipe early
//! (`quench frames --decode f.pcap | head`) makes the write fail with `BrokenPipe` (Rust ignores
//! SIGPIPE), the command unwinds through `?` (so reports are flushed and ports closed), and
//! `main` exits quietly with status 0 ([`closed_pipe`]).
#![deny(clippy::print_stdout)]
use anyhow::Context as _;

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

/// A port opened by a `[NETNS/]IFACE` argument: opened inside that network namespace (see
/// [`crate::port::netns`]) and, on drop, closed there too (an AF_XDP port detaches its program
/// through a netlink socket of the namespace it is in).
pub(crate) struct NsPort {
    netns: Option<String>,
    port: Option<crate::port::any::AnyPort>,
}

impl NsPort {
    pub(crate) fn open(label: &str, args: &PortArgs) -> anyhow::Result<NsPort> {
        let (netns, iface) = crate::port::netns::split_port_arg(label);
        let port = crate::port::netns::in_netns(netns, || open_port(iface, args))
            .with_context(|| format!("--iface {label}"))?
            .with_context(|| format!("--iface {label}"))?;
        Ok(NsPort {
            netns: netns.map(String::from),
            port: Some(port),
        })
    }
}

impl std::ops::Deref for NsPort {
    type Target = crate::port::any::AnyPort;
    fn deref(&self) -> &Self::Target {
        self.port.as_ref().expect("open until drop")
    }
}

impl std::ops::DerefMut for NsPort {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.port.as_mut().expect("open until drop")
    }
}

impl Drop for NsPort {
    fn drop(&mut self) {
        if let Some(port) = self.port.take() {
            // A namespace deleted meanwhile: the port is then closed here, which for sockets is
            // the same thing.
            let _ = crate::port::netns::in_netns(self.netns.as_deref(), move || drop(port));
        }
    }
}

/// Opens `iface` with the driver `args` name, as one port with one queue.
pub(crate) fn open_port(
    iface: &str,
    args: &PortArgs,
) -> Result<crate::port::any::AnyPort, crate::port::PortError> {
    use crate::port::any::AnyPort;
    match args.driver.as_str() {
        "af_xdp" => {
            let pool = crate::port::xdp::XdpPool::new(4096)?;
            let opts = crate::port::xdp::XdpOptions {
                mode: Default::default(),
                force: false,
                queues: Some(vec![0]),
            };
            crate::port::xdp::XdpPort::open(&pool, iface, &opts).map(AnyPort::Xdp)
        }
        #[cfg(feature = "dpdk")]
        "dpdk" => {
            let cfg = crate::port::dpdk::DpdkConfig {
                eal: args
                    .dpdk_eal
                    .as_deref()
                    .unwrap_or("")
                    .split_whitespace()
                    .map(String::from)
                    .collect(),
                ..Default::default()
            };
            crate::port::dpdk::DpdkPort::open(iface, &cfg)
                .map(AnyPort::Dpdk)
                .map_err(crate::port::PortError::from)
        }
        #[cfg(not(feature = "dpdk"))]
        "dpdk" => Err(crate::port::PortError::Unsupported {
            name: iface.to_string(),
            what: "--driver dpdk: this quench was built without DPDK; rebuild with \
                   `cargo build --release --features dpdk`"
                .into(),
        }),
        _ => crate::port::packet::PacketPort::open(iface).map(AnyPort::Packet),
    }
}
