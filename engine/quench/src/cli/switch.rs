//! `quench switch --config configs/switch.toml`: the software switch on real ports.
//!
//! Start-up: load and validate the configuration, calibrate the clock, spread the ports' device
//! queues over the workers (each pinned to a core), open the ports inside their workers (AF_XDP
//! pools are per worker), start the control socket. Stop on SIGINT/SIGTERM (or `--duration`):
//! workers leave their loops, free queued frames, close their sockets (which detaches the
//! AF_XDP program), and the final counters are printed.
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};

use anyhow::{bail, Context};
use units::Duration;

use quench_node::switch::depth::SharedDepth;
use quench_node::switch::fdb::{Fdb, PortIdx, DEFAULT_CAPACITY};
use quench_node::switch::sampling::SharedSampling;
use quench_port::any::AnyPort;
use quench_port::capture::Capture;
use quench_port::kfp::{self, FastProgram, FastTable};
use quench_port::packet::PacketPort;
use quench_port::worker;
use quench_port::xdp::{self, XdpOptions, XdpPool};
use quench_port::{device_queues, if_index, Capabilities, PortError, PortKind};
use quench_runtime::switch::config::{PortProfile, SwitchConfig, SwitchProfile};
use quench_runtime::switch::control::ControlSocket;
use quench_runtime::switch::fastpath::FastPath;
use quench_runtime::switch::forward::{links, OwnedPort, Worker};
use quench_runtime::switch::stats::{PortCounters, PortInfo, Registry, WorkerCounters};
use quench_wire::time::Clock;
use quench_wire::MacAddr;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The switch configuration: a bundled name (`switch-qcn`, `quench presets` lists them) or a
    /// TOML file.
    #[arg(long, value_name = "NAME|FILE", hide_possible_values = true,
          value_parser = super::NameParser::of(&[quench_config::bundled::Kind::Switch]))]
    pub config: String,
    /// Forwarding workers (pinned cores); overrides the file's `workers`.
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Write a port's rx and tx to pcap: `--capture PORT=FILE` (repeatable).
    #[arg(long, value_name = "PORT=FILE")]
    pub capture: Vec<String>,
    /// Control socket path (`quench stats --control-socket`); overrides the file's
    /// `control_socket`.
    #[arg(long, value_name = "PATH", alias = "control")]
    pub control_socket: Option<PathBuf>,
    /// Replace XDP programs already attached to the ports (not only stale quench ones).
    #[arg(long)]
    pub force_xdp: bool,
    /// Stop by itself after this long, e.g. `30s`.
    #[arg(long, value_name = "DURATION", value_parser = super::duration_or_secs_arg,
          allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// JSON lines on standard output: one progress object per second (totals and each port's
    /// counters), then the final snapshot; the human table goes to standard error.
    #[arg(long)]
    pub json: bool,
    /// What an idle worker does after a short spin: `auto` spins where the worker's core is
    /// its own (no other process's thread may run there: a CPU shielded by affinity, as
    /// scripts/testbed/cpu-shield.sh does, or isolated) and yields elsewhere (waits in the kernel with
    /// `--fast-path kernel`), so that on a shared machine the peers that produce its frames get
    /// the CPU; `spin` (never give the CPU up, as DPDK's lcores); `yield`; a duration, e.g.
    /// `50us`: sleep that long, so that its CPU goes idle and the scheduler can run others there
    /// (a machine with fewer CPUs than busy processes: scripts/testbed/appliance.sh; a frame arriving
    /// meanwhile waits up to this long, the egress shaper catches up what a sleep delayed); or
    /// `wait`: wait in the kernel (poll(2) on its ports' receive descriptors, AF_XDP and
    /// AF_PACKET) until a frame arrives, its shaper's next release while frames wait, at the
    /// latest 10 ms: its CPU goes idle and a frame is seen at once (a worker with other
    /// workers' crossings to take, or ports that cannot be waited on, yields instead).
    #[arg(long, value_name = worker::IDLE_VALUES, default_value = "auto")]
    pub idle: worker::Idle,
    /// `kernel`: forward frames between plain ports in the kernel. Each AF_XDP port gets
    /// quench's own XDP program (instead of libxdp's), which redirects a frame whose source
    /// and destination the switch has learned at plain ports straight to the egress device,
    /// and hands every other frame to the worker as before; the worker alone programs the
    /// program's table, from its MAC table. A plain port has no congestion point, no egress
    /// rate, no PFC and no `--capture`; ports that are not plain keep every frame on the
    /// worker's path. One worker, AF_XDP ports only. Default `off` (docs/design.md, "The
    /// kernel fast path").
    #[arg(long, value_enum, default_value = "off")]
    pub fast_path: FastPathArg,
}

/// `--fast-path`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FastPathArg {
    Off,
    Kernel,
}

/// Why port `p` is not plain (its frames must pass the switch core), `None` if it is. The
/// list is what the core does to a frame beyond forwarding it: a congestion point on any
/// priority (QCN, RED/ECN, TCD marks, CNMs, drops), an egress rate (shaping, and the strict
/// priority it lets matter), PFC (ingress accounting, PAUSE frames), a capture (the pcap).
fn not_plain(profile: &SwitchProfile, p: &PortProfile, captured: bool) -> Option<&'static str> {
    if p.congestion.is_some() {
        Some("congestion point")
    } else if p.rate.is_some() {
        Some("egress rate")
    } else if profile.pfc.is_some() {
        Some("PFC")
    } else if captured {
        Some("--capture")
    } else {
        None
    }
}

/// `--fast-path kernel`: each port's plainness, or why the switch cannot have the fast path.
fn fast_path_plan(
    profile: &SwitchProfile,
    captures: &[Option<PathBuf>],
) -> anyhow::Result<Vec<bool>> {
    if profile.workers != 1 {
        bail!(
            "--fast-path kernel: one worker only ({} configured): the kernel's table follows \
             one worker's MAC table",
            profile.workers
        );
    }
    if let Some(p) = profile.ports.iter().find(|p| p.kind != PortKind::Xdp) {
        bail!(
            "--fast-path kernel: port {:?} uses driver {}; the fast path is an XDP program on \
             AF_XDP ports (driver af_xdp), which DPDK and AF_PACKET ports do not have",
            p.name,
            p.kind
        );
    }
    Ok(profile
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| not_plain(profile, p, captures.get(i).is_some_and(|c| c.is_some())).is_none())
        .collect())
}

/// What `--idle auto` has a worker do on a core it shares: yield, or with the kernel fast path
/// wait in the kernel. The plain ports' frames no longer reach a fast-path worker, and one that
/// yields keeps its core busy for nothing (the scheduler then moves other processes to the
/// remaining cores: on the testbed, onto the sender's core, where the fast path's frames are
/// forwarded: docs/design.md, "The kernel fast path", has the measurement).
fn shared_idle(fast_path: bool) -> worker::IdleMode {
    if fast_path {
        worker::IdleMode::Wait
    } else {
        worker::IdleMode::Yield
    }
}

/// The progress status of the switch from a counters snapshot: forwarding rate over the
/// interval, totals of frames, drops, control frames it originated (CNMs, PFC) and PFC pauses.
#[derive(Default)]
struct SwitchProgress {
    rx_bytes: super::progress::Delta,
    tx_bytes: super::progress::Delta,
}

impl SwitchProgress {
    fn show(
        &mut self,
        p: &mut super::progress::Progress,
        now: units::Instant,
        snap: &quench_runtime::switch::stats::Snapshot,
    ) -> std::io::Result<()> {
        use super::progress::per_s;
        let sum = |f: fn(&quench_runtime::switch::stats::PortSnapshot) -> u64| -> u64 {
            snap.ports.iter().map(f).sum()
        };
        let (rx, tx) = (sum(|p| p.rx_pkts), sum(|p| p.tx_pkts));
        let drops = sum(|p| p.rx_drops + p.tx_drops + p.queue_drops + p.pfc_headroom_drops);
        let ctl = sum(|p| {
            p.queues
                .iter()
                .filter(|q| q.class == "ctl")
                .map(|q| q.counters.enq_pkts)
                .sum()
        });
        let (sent, got) = (sum(|p| p.pfc_pauses_sent), sum(|p| p.pfc_pauses_received));
        let (drx, dtx) = (
            self.rx_bytes.step(sum(|p| p.rx_bytes)),
            self.tx_bytes.step(sum(|p| p.tx_bytes)),
        );
        p.show(
            now,
            |dt| {
                format!(
                    "rx {:.1} Mb/s tx {:.1} Mb/s | {rx} in {tx} out | {drops} drops | {ctl} CNM/PFC frames sent | pauses {sent} sent {got} received",
                    per_s(drx * 8, dt, 1e6),
                    per_s(dtx * 8, dt, 1e6)
                )
            },
            |dt| {
                serde_json::json!({
                    "rx_bps": per_s(drx * 8, dt, 1.0), "tx_bps": per_s(dtx * 8, dt, 1.0),
                    "rx_frames": rx, "tx_frames": tx, "drops": drops, "control_frames": ctl,
                    "pauses_sent": sent, "pauses_received": got, "fdb_entries": snap.fdb_entries,
                    "ports": snap.ports,
                })
            },
        )
    }
}

/// The switch's port type: any port, optionally captured.
type SwitchPort = Capture<AnyPort>;

/// Which worker polls which (port, device queue): the device queues of all ports, dealt round
/// the workers in turn (an AF_XDP port has its device's queues, a DPDK port `dpdk.rx_queues`,
/// an AF_PACKET port one). The first worker holding a port holds its egress alone when the
/// egress keeps state that must be seen whole ([`whole_egress`]); otherwise every worker
/// holding the port queues and transmits on its own queue. With PFC, worker 0 takes every
/// port's queue 0 (it holds every egress: PFC accounts a frame to its ingress port at
/// whichever egress queue it waits), and the other queues are dealt round all workers.
fn assign(profile: &SwitchProfile, workers: usize) -> Vec<Vec<(usize, Vec<u16>)>> {
    let mut units = Vec::new();
    for (i, p) in profile.ports.iter().enumerate() {
        let queues = match p.kind {
            PortKind::Xdp => device_queues(&p.iface),
            #[cfg(feature = "dpdk")]
            PortKind::Dpdk => profile.dpdk.rx_queues,
            _ => 1,
        };
        units.extend((0..queues).map(|q| (i, q)));
    }
    let mut per: Vec<Vec<(usize, Vec<u16>)>> = vec![Vec::new(); workers];
    let pfc = profile.pfc.is_some();
    let mut k = 0;
    for (port, q) in units {
        let w = if pfc && q == 0 {
            0
        } else {
            k += 1;
            (k - 1) % workers
        };
        let w = &mut per[w];
        match w.iter_mut().find(|(p, _)| *p == port) {
            Some((_, qs)) => qs.push(q),
            None => w.push((port, vec![q])),
        }
    }
    per
}

/// Whether port `p`'s egress must be held by one worker: a pacer's rate and PFC's ingress
/// accounts are the port's (switch's) whole traffic, kept by one worker (frames for it cross).
/// A congestion point does not need it: every worker holding the port runs one on its own
/// queue, deciding on the port's depth summed over the workers (`switch::depth`).
fn whole_egress(profile: &SwitchProfile, p: &PortProfile) -> bool {
    p.rate.is_some() || profile.pfc.is_some()
}

/// The kernel fast path's table and each AF_XDP port's program (by port index), for the
/// ports `units` (the worker's: port and device queues).
fn fast_programs(
    profile: &SwitchProfile,
    units: &[(usize, Vec<u16>)],
) -> Result<(FastTable, Vec<Option<FastProgram>>), PortError> {
    let table = FastTable::new()?;
    let mut progs: Vec<Option<FastProgram>> = (0..profile.ports.len()).map(|_| None).collect();
    for (pi, queues) in units {
        let slots = queues.iter().max().map_or(1, |&q| u32::from(q) + 1);
        progs[*pi] = Some(FastProgram::load(&table, *pi as u32, slots)?);
    }
    Ok((table, progs))
}

fn open_port(
    all: &SwitchProfile,
    p: &PortProfile,
    pool: &mut Option<XdpPool>,
    queues: &[u16],
    force: bool,
    program: Option<xdp::XdpProgram>,
) -> Result<AnyPort, PortError> {
    match p.kind {
        PortKind::Xdp => {
            if pool.is_none() {
                // Per port: fill ring + tx ring + queue slack, 4096 frames (8 MiB of 2 KiB
                // chunks). A frame moves between the worker's ports without a copy, so every
                // chunk holds the largest MTU of the switch's AF_XDP ports.
                let mtu = all
                    .ports
                    .iter()
                    .filter(|q| q.kind == PortKind::Xdp)
                    .filter_map(|q| quench_port::device_mtu(&q.iface))
                    .max()
                    .unwrap_or(1500);
                *pool = Some(XdpPool::for_mtu(4096 * 4, mtu)?);
            }
            let pool = pool.as_ref().ok_or_else(|| PortError::Unsupported {
                name: p.iface.clone(),
                what: "no UMEM".into(),
            })?;
            let opts = XdpOptions {
                mode: p.xdp_mode,
                force,
                queues: Some(queues.to_vec()),
                program,
            };
            xdp::XdpPort::open(pool, &p.iface, &opts).map(AnyPort::Xdp)
        }
        PortKind::Packet => PacketPort::open(&p.iface).map(AnyPort::Packet),
        // The EAL starts with the `[dpdk]` table's arguments on the first DPDK port opened.
        #[cfg(feature = "dpdk")]
        PortKind::Dpdk => {
            quench_port::dpdk::DpdkPort::open_queues(&p.iface, &all.dpdk, Some(queues))
                .map(AnyPort::Dpdk)
                .map_err(PortError::from)
        }
        #[cfg(not(feature = "dpdk"))]
        PortKind::Dpdk => Err(PortError::Unsupported {
            name: p.iface.clone(),
            what: "driver dpdk: this quench was built without DPDK; rebuild with \
                   `cargo build --release --features dpdk`"
                .into(),
        }),
        PortKind::Mem => Err(PortError::Unsupported {
            name: p.iface.clone(),
            what: format!("driver {} cannot be opened by `quench switch`", p.kind),
        }),
    }
}

/// The main thread's longest sleep: how late it sees the stop flag and a deadline, and how
/// often it wakes (progress is shown each second).
const MAIN_NAP: Duration = Duration::from_millis(100);

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.json {
        super::human_to_stderr();
    }
    let src =
        quench_config::bundled::open(&args.config, quench_config::bundled::Kind::Switch, None)
            .with_context(|| format!("--config {}", args.config))?;
    let mut profile = SwitchConfig::parse(&src.text, &src.origin)?;
    if let Some(w) = args.workers {
        if w == 0 {
            bail!("--workers must be at least 1");
        }
        profile.workers = w;
    }
    if let Some(c) = &args.control_socket {
        profile.control_socket = c.clone();
    }
    let mut captures: Vec<Option<PathBuf>> = vec![None; profile.ports.len()];
    for c in &args.capture {
        let (name, file) = c
            .split_once('=')
            .with_context(|| format!("--capture {c:?}: expected PORT=FILE"))?;
        let i = profile
            .ports
            .iter()
            .position(|p| p.name == name || p.iface == name)
            .with_context(|| format!("--capture {c:?}: no port named {name:?}"))?;
        captures[i] = Some(PathBuf::from(file));
    }
    // Fail early, in the main thread, with the interface named.
    // DPDK ports are ethdev names (`net_af_packet0`), not kernel interfaces.
    for p in profile.ports.iter().filter(|p| p.kind != PortKind::Dpdk) {
        if_index(&p.iface).with_context(|| format!("port {:?} in {}", p.name, src.origin))?;
    }
    let stop = worker::stop_on_signals().context("installing signal handlers")?;
    let clock = Clock::new();
    let workers = profile.workers;
    let plan = assign(&profile, workers);
    let mut owner = vec![0usize; profile.ports.len()];
    for (w, units) in plan.iter().enumerate().rev() {
        for (p, _) in units {
            owner[*p] = w;
        }
    }
    // counters[port][worker]: each worker writes its own (see switch::stats).
    let counters: Vec<Vec<Arc<PortCounters>>> = profile
        .ports
        .iter()
        .map(|_| (0..workers).map(|_| Arc::default()).collect())
        .collect();
    let worker_counters: Vec<Arc<WorkerCounters>> = (0..workers).map(|_| Arc::default()).collect();
    // A congestion-point port whose egress several workers hold: their depths, shared
    // (a slot per worker).
    let depths: Vec<Option<Arc<SharedDepth>>> = profile
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let holders = plan.iter().filter(|u| u.iter().any(|(q, _)| *q == i));
            let shared = p.congestion.is_some() && !whole_egress(&profile, p);
            (shared && holders.count() > 1).then(|| SharedDepth::new(workers))
        })
        .collect();
    // Their QCN sampling, port-wide (switch::sampling): the one-worker congestion point's
    // (its MAC does not enter the sampling; a config error is reported by the workers).
    let samplings: Vec<Option<Arc<SharedSampling>>> = profile
        .ports
        .iter()
        .zip(&depths)
        .enumerate()
        .map(|(i, (p, d))| {
            let c = p.congestion.as_ref().filter(|_| d.is_some())?;
            let cp = quench_node::switch::cp::CpHook::from_config(i, c, MacAddr::zero()).ok()?;
            cp.shared_sampling()
        })
        .collect();
    let fast_plan = match args.fast_path {
        FastPathArg::Off => None,
        FastPathArg::Kernel => {
            let plain = fast_path_plan(&profile, &captures)?;
            let line: Vec<String> = profile
                .ports
                .iter()
                .enumerate()
                .map(
                    |(i, p)| match not_plain(&profile, p, captures[i].is_some()) {
                        None => format!("{} plain", p.name),
                        Some(why) => format!("{} not ({why})", p.name),
                    },
                )
                .collect();
            eprintln!("quench switch: kernel fast path: {}", line.join(", "));
            Some(plain)
        }
    };
    let idle = args
        .idle
        .for_workers(workers, shared_idle(fast_plan.is_some()));
    let mut links = links(workers).into_iter();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<Vec<(usize, Capabilities)>, String>>();
    let mut handles = Vec::new();
    for (w, units) in plan.into_iter().enumerate() {
        let profile = profile.clone();
        let owner = owner.clone();
        let counters = counters.clone();
        let depths = depths.clone();
        let samplings = samplings.clone();
        let links = links.next().context("a worker's links")?;
        let stop = stop.clone();
        let ready = ready_tx.clone();
        let captures = captures.clone();
        let counters_w = worker_counters[w].clone();
        let force = args.force_xdp;
        let idle_mode = idle[w].0;
        let fast_plan = fast_plan.clone();
        let h = worker::spawn_pinned(w, format!("quench-w{w}"), move || {
            let mut pool = None;
            let mut ports: Vec<Option<OwnedPort<SwitchPort>>> =
                (0..profile.ports.len()).map(|_| None).collect();
            let mut caps = Vec::new();
            let fast = match fast_plan.as_ref().map(|_| fast_programs(&profile, &units)) {
                None => None,
                Some(Ok(f)) => Some(f),
                Some(Err(e)) => {
                    let _ = ready.send(Err(e.to_string()));
                    return;
                }
            };
            for (pi, queues) in &units {
                let p = &profile.ports[*pi];
                let program = fast.as_ref().and_then(|(_, progs)| {
                    let (prog_fd, xskmap_fd) = progs.get(*pi)?.as_ref()?.fds();
                    Some(xdp::XdpProgram { prog_fd, xskmap_fd })
                });
                let port = match open_port(&profile, p, &mut pool, queues, force, program) {
                    Ok(port) => port,
                    Err(e) => {
                        let _ = ready.send(Err(format!("port {:?}: {e}", p.name)));
                        return;
                    }
                };
                caps.push((*pi, quench_port::Port::caps(&port).clone()));
                let port = match &captures[*pi] {
                    Some(f) => match Capture::to_file(port, f, clock) {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = ready.send(Err(format!("port {:?}: {e}", p.name)));
                            return;
                        }
                    },
                    None => Capture::off(port),
                };
                let rx_queues = (0..queues.len() as u16).collect();
                let is_owner = owner[*pi] == w;
                let mut owned = OwnedPort::new(
                    port,
                    rx_queues,
                    p.limits,
                    if is_owner { p.rate } else { None },
                    counters[*pi][w].clone(),
                );
                owned.egress = is_owner || !whole_egress(&profile, p);
                if let Some(c) = p.congestion.as_ref().filter(|_| owned.egress) {
                    // The CP's MAC: the port's own, else a locally administered one per port.
                    let mac = caps
                        .last()
                        .and_then(|(_, c)| c.mac)
                        .unwrap_or(MacAddr(0x02, 0x71, 0x6e, 0xff, 0x00, *pi as u8));
                    match quench_node::switch::cp::CpHook::from_config(*pi, c, mac) {
                        Ok(mut h) => {
                            if let Some(s) = &samplings[*pi] {
                                h = h.with_shared_sampling(s);
                            }
                            owned.cp = Some(h.for_worker(w));
                            owned.depth = depths[*pi].as_ref().map(|d| d.share(w));
                        }
                        Err(e) => {
                            let _ = ready.send(Err(format!("port {:?}: {e}", p.name)));
                            return;
                        }
                    }
                }
                ports[*pi] = Some(owned);
            }
            #[cfg(feature = "dpdk")]
            if units
                .iter()
                .any(|(pi, _)| profile.ports[*pi].kind == PortKind::Dpdk)
            {
                // The pools' per-lcore caches: workers sharing a pool do not contend on its
                // ring for every burst.
                if let Err(e) = quench_port::dpdk::register_thread() {
                    let _ = ready.send(Err(format!("worker {w}: {e}")));
                    return;
                }
            }
            let mut fdb = Fdb::new(profile.ageing, DEFAULT_CAPACITY);
            for &(mac, port) in &profile.static_macs {
                fdb.add_static(mac, port as PortIdx);
            }
            let mut wk = Worker::new(w, ports, owner, links, fdb, counters_w);
            if let (Some((table, progs)), Some(plain)) = (fast, fast_plan) {
                for (i, p) in profile.ports.iter().enumerate().filter(|(i, _)| plain[*i]) {
                    let set = if_index(&p.iface).and_then(|ix| table.set_device(i as u32, ix));
                    if let Err(e) = set {
                        let _ = ready.send(Err(format!("port {:?}: {e}", p.name)));
                        return;
                    }
                }
                let mut fast = FastPath::new(Box::new(table), progs, plain.clone());
                for (i, p) in profile.ports.iter().enumerate().filter(|(i, _)| plain[*i]) {
                    fast.watch_egress(i, &p.name, &p.iface);
                }
                // The static entries, before the first frame (they do not age: any time will do).
                fast.sync_all(units::Instant::ZERO, &wk.fdb);
                wk.fast = Some(fast);
            }
            if let Some(pfc) = &profile.pfc {
                // Quanta are bit times of the receiving port: its egress rate if it has one
                // (a veth standing in for a slower link), else the [pfc] link_rate.
                let rates: Vec<units::Rate> = profile
                    .ports
                    .iter()
                    .map(|p| p.rate.unwrap_or(pfc.link_rate()))
                    .collect();
                let mut macs: Vec<MacAddr> = (0..profile.ports.len())
                    .map(|i| MacAddr(0x02, 0x71, 0x6e, 0xfe, 0x00, i as u8))
                    .collect();
                for (pi, c) in &caps {
                    if let (Some(m), Some(slot)) = (c.mac, macs.get_mut(*pi)) {
                        *slot = m;
                    }
                }
                wk.set_pfc(pfc.clone(), &rates, &macs);
            }
            let _ = ready.send(Ok(caps));
            let mut idle = worker::Backoff::new(idle_mode, wk.rx_fds());
            // A waiting worker waits up to its next deadline; a sleeping one sleeps its whole
            // sleep (with other workers its deadline is always now: their crossings).
            let waits = idle.waits();
            worker::run_loop(
                &clock,
                &stop,
                &mut idle,
                &mut wk,
                |wk, now| wk.poll(now),
                |wk, now| if waits { wk.next_deadline(now) } else { None },
            );
            wk.shutdown();
            for op in wk.ports.iter_mut().flatten() {
                op.port.flush();
            }
        })?;
        handles.push(h);
    }
    drop(ready_tx);
    let mut info: Vec<Option<PortInfo>> = vec![None; profile.ports.len()];
    let mut failure = None;
    for _ in 0..workers {
        match ready_rx.recv() {
            Ok(Ok(caps)) => {
                for (pi, c) in caps {
                    let p = &profile.ports[pi];
                    if info[pi].is_none() {
                        info[pi] = Some(PortInfo {
                            name: p.name.clone(),
                            iface: p.iface.clone(),
                            kind: c.kind.to_string(),
                            mode: c.mode.clone(),
                            worker: owner[pi],
                            rate_bps: p.rate.map(|r| r.as_bps()),
                        });
                    }
                }
            }
            Ok(Err(e)) => failure = Some(e),
            Err(_) => failure = Some("a worker exited during start-up".into()),
        }
    }
    // Bound once the ports are open (their errors, e.g. missing privileges, come first) and
    // before anything is served, so a bad `control_socket` path stops the start cleanly.
    let bound = match failure {
        Some(e) => Err(e),
        None => ControlSocket::bind(&profile.control_socket)
            .map_err(|e| format!("control_socket {}: {e}", profile.control_socket.display())),
    };
    let ctl_socket = match bound {
        Ok(s) => s,
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            for h in handles {
                let _ = h.join();
            }
            bail!("{e} (config {})", src.origin);
        }
    };
    let registry = Arc::new(Registry {
        info: info.into_iter().flatten().collect(),
        counters: counters.clone(),
        workers: worker_counters.clone(),
        clock,
    });
    for p in &registry.info {
        eprintln!(
            "quench switch: port {} ({}) {} {} on worker {}{}",
            p.name,
            p.iface,
            p.kind,
            p.mode,
            p.worker,
            p.rate_bps
                .map(|r| format!(", egress {}", units::Rate::from_bps(r)))
                .unwrap_or_default()
        );
    }
    // The threads that only wait and report (this one and the control socket's, spawned
    // below) run where no worker polls, when the machine has a core to spare.
    worker::keep_off_workers(workers);
    let ctl_path = profile.control_socket.clone();
    let ctl = {
        let (r, s) = (registry.clone(), stop.clone());
        std::thread::Builder::new()
            .name("quench-ctl".into())
            .spawn(move || ctl_socket.serve(r, s))?
    };
    eprintln!(
        "quench switch: {} workers, clock {:?}, control socket {}",
        workers,
        clock.source(),
        ctl_path.display()
    );
    for (w, (mode, why)) in idle.iter().enumerate() {
        eprintln!(
            "quench switch: worker {w} {} when idle ({why})",
            mode.what()
        );
    }
    let deadline = args.duration.map(|d| clock.now() + d);
    let mut progress = super::progress::Progress::new("switch", args.json, clock.now());
    let mut status = SwitchProgress::default();
    while !stop.load(Ordering::Relaxed) {
        let now = clock.now();
        if deadline.is_some_and(|d| now >= d) {
            stop.store(true, Ordering::Relaxed);
            break;
        }
        if progress.due(now) {
            // A closed standard output does not stop the switch: the workers go on.
            let _ = status.show(&mut progress, now, &registry.snapshot());
        }
        // The main thread only waits and reports (progress each second, the stop flag, the
        // deadline): the workers do the work. Each wake-up may take a worker's CPU.
        let nap = deadline.map_or(MAIN_NAP, |d| MAIN_NAP.min(d - now));
        std::thread::sleep(std::time::Duration::from_nanos(nap.as_nanos()));
    }
    progress.done();
    for h in handles {
        let _ = h.join();
    }
    match ctl.join() {
        Ok(Err(e)) => eprintln!("quench switch: control socket: {e}"),
        Err(_) => eprintln!("quench switch: control socket thread panicked"),
        Ok(Ok(())) => {}
    }
    // The sockets are closed, so libxdp has detached its program; remove any that a failed
    // close left behind, so the next start finds the devices clean.
    for p in profile.ports.iter().filter(|p| p.kind == PortKind::Xdp) {
        if let Ok(ifindex) = if_index(&p.iface) {
            for prog in xdp::attached_programs(ifindex) {
                if prog.name.starts_with("xsk_def_prog") || prog.name.starts_with(kfp::PROG_NAME) {
                    let _ = xdp::detach_program(ifindex, prog.mode);
                }
            }
        }
    }
    let snap = registry.snapshot();
    outln!("{}", crate::cli::stats::table(&snap, None))?;
    if args.json {
        jsonln!("counters", serde_json::to_value(&snap)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(extra: &str) -> SwitchProfile {
        let mut t = String::from("workers = 2\n");
        for (i, rate) in ["", "rate = \"1gbit\"\n", ""].iter().enumerate() {
            t += &format!(
                "[[ports]]\nname = \"p{i}\"\niface = \"qn-p{i}\"\ndriver = \"af_packet\"\n{rate}"
            );
        }
        SwitchConfig::parse(&(t + extra), "t.toml").unwrap()
    }

    /// On a shared core `auto` yields, or with the fast path waits; a fixed `--idle` stays.
    #[test]
    fn the_fast_path_waits_where_auto_would_yield() {
        use worker::{Idle, IdleMode};
        assert_eq!(shared_idle(false), IdleMode::Yield);
        assert_eq!(shared_idle(true), IdleMode::Wait);
        let fixed = Idle::Fixed(IdleMode::Yield).for_workers(1, shared_idle(true));
        assert_eq!(fixed[0].0, IdleMode::Yield);
    }

    /// `--fast-path kernel` refuses several workers and non-AF_XDP drivers, naming them; on
    /// AF_XDP ports a port is plain unless it has a congestion point, a rate, PFC or a capture.
    #[test]
    fn the_fast_path_names_what_it_refuses_and_which_ports_are_plain() {
        let mut p = profile("");
        let e = fast_path_plan(&p, &[]).unwrap_err().to_string();
        assert!(e.contains("one worker only (2 configured)"), "{e}");
        p.workers = 1;
        let e = fast_path_plan(&p, &[]).unwrap_err().to_string();
        assert!(e.contains("port \"p0\" uses driver af_packet"), "{e}");
        for q in &mut p.ports {
            q.kind = PortKind::Xdp;
        }
        assert_eq!(fast_path_plan(&p, &[]).unwrap(), vec![true, false, true]);
        let captured = [None, None, Some(PathBuf::from("x.pcap"))];
        assert_eq!(
            fast_path_plan(&p, &captured).unwrap(),
            vec![true, false, false]
        );
        let mut cp = profile("[[congestion]]\nport = \"p0\"\nqcn = {}\n");
        cp.workers = 1;
        for q in &mut cp.ports {
            q.kind = PortKind::Xdp;
        }
        assert_eq!(fast_path_plan(&cp, &[]).unwrap(), vec![false, false, true]);
        assert_eq!(
            not_plain(&cp, &cp.ports[0], false),
            Some("congestion point")
        );
    }

    #[test]
    fn queues_are_dealt_round_the_workers_and_pfc_keeps_every_egress_on_worker_0() {
        let p = profile("");
        let plan = assign(&p, 2);
        assert_eq!(plan[0], vec![(0, vec![0]), (2, vec![0])]);
        assert_eq!(plan[1], vec![(1, vec![0])]);
        // A plain port's egress is on every worker that holds it; a paced one's on one.
        assert!(!whole_egress(&p, &p.ports[0]));
        assert!(whole_egress(&p, &p.ports[1]));
        // A congestion point's port is every worker's (its depth shared: switch::depth).
        let p = profile("[[congestion]]\nport = \"p2\"\nqcn = {}\n");
        assert!(p.ports[2].congestion.is_some() && !whole_egress(&p, &p.ports[2]));
        let p = profile("[pfc]\nthreshold = \"static\"\nxoff_bytes = 40000\nxon_bytes = 37000\nheadroom_bytes = 30000\n");
        let plan = assign(&p, 2);
        assert_eq!(plan[0], vec![(0, vec![0]), (1, vec![0]), (2, vec![0])]);
        assert!(plan[1].is_empty());
        assert!(p.ports.iter().all(|q| whole_egress(&p, q)));
    }

    /// `--idle` takes the policy's values (the flags it replaced: main's `RETIRED`).
    #[test]
    fn idle_parses() {
        use worker::{Idle, IdleMode};
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            a: Args,
        }
        let parse = |v: &[&str]| {
            <Cli as clap::Parser>::try_parse_from(
                ["quench", "--config", "c.toml"].iter().chain(v.iter()),
            )
        };
        assert_eq!(parse(&[]).unwrap().a.idle, Idle::Auto);
        assert_eq!(
            parse(&["--idle", "50us"]).unwrap().a.idle,
            Idle::Fixed(IdleMode::Sleep(std::time::Duration::from_micros(50)))
        );
        assert!(parse(&["--idle", "soon"]).is_err());
    }
}
