//! One module per `quench` subcommand, each with a clap `Args` and `run(args)`.
//!
//! One grammar for every command: durations and rates carry their unit (`--duration 10s`,
//! `--rate 300mbit`, parsed by [`units::Duration::parse`] and [`units::Rate::parse`]), choices
//! are clap value enums, presets and configurations take a bundled NAME or a FILE
//! ([`quench_config::bundled`]), and the switch's control socket is `--control-socket` everywhere.
//!
//! Standard output is written only through `outln!` / `out!`, which return the write's error
//! instead of panicking as `println!` does: a reader that closes the pipe early
//! (`quench frames --decode f.pcap | head`) makes the write fail with `BrokenPipe` (Rust ignores
//! SIGPIPE), the command unwinds through `?` (so reports are flushed and ports closed), and
//! `main` exits quietly with status 0 ([`closed_pipe`]).
#![deny(clippy::print_stdout)]

use units::{Duration, Rate};

// Defined above the `mod` lines, so every subcommand's module sees them (textual scope).

/// `println!` of the human report that returns the `std::io::Result` of the write (use it with
/// `?`): to standard output, or to standard error once a command with `--json` called
/// [`human_to_stderr`].
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!($crate::cli::Human, $($arg)*)
    }};
}
/// `print!` of the human report, as [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!($crate::cli::Human, $($arg)*)
    }};
}
/// A machine-readable JSON line on standard output: `value`'s fields with `"type": $kind`
/// added (a value that is not an object goes under the key `$kind`). Every JSON line quench
/// prints says what it is this way.
macro_rules! jsonln {
    ($kind:expr, $value:expr) => {
        $crate::cli::json_line($kind, $value)
    };
}

/// See [`jsonln!`].
pub fn json_line(kind: &str, value: serde_json::Value) -> std::io::Result<()> {
    use std::io::Write as _;
    let line = quench_report::summary::tagged(kind, value);
    writeln!(std::io::stdout().lock(), "{line}")
}

/// Machine-readable text (a CSV table) on standard output, wherever the human report goes.
pub fn machine_out(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    std::io::stdout().lock().write_all(text.as_bytes())
}

/// Where the human report goes: set once, by a command given `--json`, before it prints.
static HUMAN_TO_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--json`: the human report (tables, notes) goes to standard error from now on, so standard
/// output carries only JSON lines (progress and summaries).
pub fn human_to_stderr() {
    HUMAN_TO_STDERR.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The human report's stream (see [`outln!`]).
pub struct Human;

impl std::io::Write for Human {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if HUMAN_TO_STDERR.load(std::sync::atomic::Ordering::Relaxed) {
            std::io::stderr().lock().write(buf)
        } else {
            std::io::stdout().lock().write(buf)
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if HUMAN_TO_STDERR.load(std::sync::atomic::Ordering::Relaxed) {
            std::io::stderr().lock().write_all(buf)
        } else {
            std::io::stdout().lock().write_all(buf)
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().flush()?;
        std::io::stderr().flush()
    }
}

/// True when `e` comes from writing to a pipe whose reader has gone (`| head`): not a failure of
/// the command, which then ends quietly with status 0.
pub fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

pub mod appliance;
pub mod blast;
pub mod frames;
pub mod presets;
pub mod progress;
pub mod recv;
pub mod replay;
pub mod report;
pub mod send;
pub mod sim;
pub mod stats;
pub mod sweep;
pub mod switch;

/// Value parser of every duration option: a number and a unit, `10s`, `100ms`, `50us`.
pub(crate) fn duration_arg(s: &str) -> Result<Duration, String> {
    Duration::parse(s).map_err(|e| e.to_string())
}

/// Value parser of an option that once took bare seconds (`--duration 10`): a duration with its
/// unit, or a bare number read as seconds with a deprecation hint.
pub(crate) fn duration_or_secs_arg(s: &str) -> Result<Duration, String> {
    let (d, bare) = Duration::parse_or_secs(s).map_err(|e| e.to_string())?;
    if let Some(secs) = bare {
        eprintln!("warning: a duration without a unit is deprecated: write {secs}s");
    }
    Ok(d)
}

/// Value parser of every rate option: a number and a unit, `300mbit`, `1gbit`, `125MBps`.
pub(crate) fn rate_arg(s: &str) -> Result<Rate, String> {
    Rate::parse(s).map_err(|e| e.to_string())
}

/// How a port moves frames (`--driver`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// AF_PACKET sockets with mmap'd TPACKET rings: any kernel, any interface.
    AfPacket,
    /// AF_XDP sockets, native mode falling back to generic.
    AfXdp,
    /// DPDK poll-mode drivers (cargo feature `dpdk`).
    Dpdk,
}

impl Driver {
    /// The name `--driver` and the switch configuration's `driver` key use.
    pub fn name(self) -> &'static str {
        match self {
            Driver::AfPacket => "af_packet",
            Driver::AfXdp => "af_xdp",
            Driver::Dpdk => "dpdk",
        }
    }
}

impl clap::ValueEnum for Driver {
    /// Every driver quench has; a build without the cargo feature `dpdk` refuses `dpdk` with
    /// how to get it ([`DriverParser`]), so help and the error say the same.
    fn value_variants<'a>() -> &'a [Self] {
        &[Driver::AfPacket, Driver::AfXdp, Driver::Dpdk]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        let v = PossibleValue::new(self.name());
        Some(match self {
            Driver::AfPacket => v.alias("af-packet"),
            Driver::AfXdp => v.alias("af-xdp"),
            Driver::Dpdk => v,
        })
    }
}

/// `--driver`'s parser: the value enum, and for `dpdk` in a build without it an error that says
/// how to get it rather than "invalid value".
#[derive(Clone)]
pub(crate) struct DriverParser;

impl clap::builder::TypedValueParser for DriverParser {
    type Value = Driver;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Driver, clap::Error> {
        if value == "dpdk" && !cfg!(feature = "dpdk") {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::InvalidValue,
                "--driver dpdk: this quench was built without DPDK; install it with \
                 `cargo install --path engine/quench --features dpdk` (needs libdpdk-dev: \
                 scripts/setup-dpdk.sh)\n",
            )
            .with_cmd(cmd));
        }
        clap::builder::EnumValueParser::<Driver>::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        use clap::ValueEnum as _;
        Some(Box::new(
            Driver::value_variants()
                .iter()
                .filter_map(Driver::to_possible_value),
        ))
    }
}

/// How `quench send` and `quench recv` open their one port: the switch's drivers.
#[derive(clap::Args, Debug, Clone)]
pub struct PortArgs {
    /// Port driver: af_packet (mmap'd TPACKET rings, any kernel), af_xdp (native mode, falling
    /// back to generic), or dpdk (only in a build with the cargo feature `dpdk`, which
    /// `quench --version` lists; `--iface` names the ethdev, e.g. net_af_packet0, and
    /// `--dpdk-eal` starts the EAL).
    #[arg(long, default_value = "af_packet", value_parser = DriverParser)]
    pub driver: Driver,
    /// EAL arguments for `--driver dpdk`, one string, e.g.
    /// "--no-huge -m 256 --no-pci --no-shconf --vdev=net_af_packet0,iface=eth0".
    #[arg(long, value_name = "EAL_ARGS", allow_hyphen_values = true)]
    pub dpdk_eal: Option<String>,
}

impl PortArgs {
    /// The runtimes' port driver from these flags.
    pub(crate) fn driver(&self) -> quench_runtime::PortDriver {
        quench_runtime::PortDriver {
            driver: self.driver.name().into(),
            dpdk_eal: self.dpdk_eal.clone(),
        }
    }
}

/// The parser of a `NAME|FILE` option (`--preset`, `--config`, `--scenario`): any text is taken
/// (a name or a path, told apart by [`quench_config::bundled::is_name`] when the file is
/// opened), and the bundled names of its kinds are its possible values, so shell completion
/// offers them. Arguments using it set `hide_possible_values`: the help names `quench presets`.
#[derive(Clone)]
pub(crate) struct NameParser {
    kinds: &'static [quench_config::bundled::Kind],
    /// The run.py presets (`hpcc-dcqcn`, ...) are names too.
    run_py: bool,
}

impl NameParser {
    /// Names of `kinds`.
    pub(crate) const fn of(kinds: &'static [quench_config::bundled::Kind]) -> Self {
        NameParser {
            kinds,
            run_py: false,
        }
    }

    /// Parameter presets: the bundled ones and run.py's.
    pub(crate) const fn presets() -> Self {
        NameParser {
            kinds: &[quench_config::bundled::Kind::Preset],
            run_py: true,
        }
    }

    /// Every bundled name and run.py preset (`quench presets NAME`).
    pub(crate) const fn any() -> Self {
        NameParser {
            kinds: quench_config::bundled::Kind::ALL,
            run_py: true,
        }
    }

    fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        let run_py = quench_sim::ns3::RUN_PY_PRESETS
            .iter()
            .filter(|_| self.run_py);
        quench_config::bundled::names_of(self.kinds).chain(run_py.map(|p| p.name))
    }
}

impl clap::builder::TypedValueParser for NameParser {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            self.names().map(clap::builder::PossibleValue::new),
        ))
    }
}
