//! The switch as a library: [`Switch::start`] takes a validated configuration and options and
//! returns a [`SwitchHandle`] for live counters, stop and join (`quench switch` is this plus
//! argument parsing and printing).
//!
//! Start-up: spread the ports' device queues over the workers ([`plan`]), each pinned to a core;
//! open the ports inside their workers (AF_XDP pools are per worker); once every worker has
//! opened its ports, bind and serve the control socket. Stop ([`SwitchHandle::stop`], or the
//! options' stop flag, e.g. set by SIGINT/SIGTERM): workers leave their loops, free queued
//! frames and close their sockets (which detaches the AF_XDP programs); [`SwitchHandle::join`]
//! returns the final counters.
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread::JoinHandle;

use anyhow::{bail, Context};

use super::config::{PortProfile, SwitchProfile};
use super::control::ControlSocket;
use super::fastpath::FastPath;
use super::forward::{links, Links, OwnedPort, Worker};
use super::plan;
use super::stats::{PortCounters, PortInfo, Registry, Snapshot, WorkerCounters};
use quench_node::switch::depth::SharedDepth;
use quench_node::switch::fdb::{Fdb, PortIdx, DEFAULT_CAPACITY};
use quench_node::switch::sampling::SharedSampling;
use quench_port::any::AnyPort;
use quench_port::capture::Capture;
use quench_port::kfp::{self, FastProgram, FastTable};
use quench_port::packet::PacketPort;
use quench_port::worker::{self, IdleMode};
use quench_port::xdp::{self, XdpOptions, XdpPool};
use quench_port::{device_queues, if_index, Capabilities, PortError, PortKind};
use quench_wire::time::Clock;
use quench_wire::MacAddr;

/// The switch's port type: any port, optionally captured.
pub type SwitchPort = Capture<AnyPort>;

/// Whether plain ports' frames may be forwarded in the kernel ([`quench_port::kfp`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FastPathMode {
    /// quench's XDP program on each plain port ([`plan::not_plain`]) redirects frames between
    /// plain ports, where at least two are and their devices send redirected frames
    /// ([`super::fastpath::sends_redirected`]); every other frame goes through the workers.
    #[default]
    Auto,
    /// Every frame through the workers.
    Off,
}

/// How to run a configuration: what `quench switch`'s flags say beside the file.
#[derive(Clone, Debug)]
pub struct SwitchOptions {
    /// Forwarding workers; overrides the configuration's `workers`.
    pub workers: Option<usize>,
    /// Ports whose rx and tx go to a pcap file: (port name or interface, file).
    pub captures: Vec<(String, PathBuf)>,
    /// Overrides the configuration's `control_socket`.
    pub control_socket: Option<PathBuf>,
    /// Replace XDP programs already attached to the ports (not only stale quench ones).
    pub force_xdp: bool,
    /// What an idle worker does (`worker::Idle::for_workers`, [`plan::shared_idle`]).
    pub idle: worker::Idle,
    pub fast_path: FastPathMode,
    /// A flag that stops the switch when set (e.g. by signal handlers); `None`: its own.
    pub stop: Option<Arc<AtomicBool>>,
    /// Where the configuration came from, for errors (a file name or a bundled one's).
    pub origin: String,
}

impl Default for SwitchOptions {
    fn default() -> Self {
        SwitchOptions {
            workers: None,
            captures: Vec::new(),
            control_socket: None,
            force_xdp: false,
            idle: worker::Idle::Auto,
            fast_path: FastPathMode::Auto,
            stop: None,
            origin: "the configuration".into(),
        }
    }
}

/// The switch's entry point (see the module docs).
pub struct Switch;

/// A running switch.
pub struct SwitchHandle {
    registry: Arc<Registry>,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    ctl: JoinHandle<std::io::Result<()>>,
    /// The AF_XDP ports' interfaces, cleaned of stale programs after the join.
    xdp_ifaces: Vec<String>,
    notes: Vec<String>,
}

/// What a stopped switch leaves: its final counters, and anything that went wrong on the way
/// out (the control socket's error, a worker that panicked).
#[derive(Debug)]
pub struct SwitchReport {
    pub snapshot: Snapshot,
    pub warnings: Vec<String>,
}

/// What every worker thread shares (read-only).
struct Shared {
    profile: SwitchProfile,
    owner: Vec<usize>,
    /// `counters[port][worker]`: each worker writes its own (see `switch::stats`).
    counters: Vec<Vec<Arc<PortCounters>>>,
    depths: Vec<Option<Arc<SharedDepth>>>,
    samplings: Vec<Option<Arc<SharedSampling>>>,
    captures: Vec<Option<PathBuf>>,
    /// The kernel fast path's table and programs; `None` without it.
    fast: Option<KernelFast>,
    /// With the fast path, where the workers meet once every port is open (worker 0 then checks
    /// the plain ports' devices and programs the table).
    opened: Option<Barrier>,
    force_xdp: bool,
    clock: Clock,
    stop: Arc<AtomicBool>,
}

/// The kernel fast path as loaded at start: its table, each plain port's program (attached by
/// the port's first socket), and which ports are plain.
struct KernelFast {
    table: Arc<FastTable>,
    programs: Arc<Vec<Option<FastProgram>>>,
    plain: Vec<bool>,
}

impl KernelFast {
    /// The table and a program per plain port, with a socket slot per device queue.
    fn load(profile: &SwitchProfile, plain: Vec<bool>) -> Result<KernelFast, PortError> {
        let table = FastTable::new()?;
        let mut programs = Vec::with_capacity(plain.len());
        for (i, p) in profile.ports.iter().enumerate() {
            programs.push(match plain[i] {
                true => Some(FastProgram::load(
                    &table,
                    i as u32,
                    u32::from(device_queues(&p.iface)),
                )?),
                false => None,
            });
        }
        Ok(KernelFast {
            table: Arc::new(table),
            programs: Arc::new(programs),
            plain,
        })
    }
}

/// One worker's own start: its (port, device queues) and idle mode.
struct WorkerStart {
    w: usize,
    units: Vec<(usize, Vec<u16>)>,
    idle: IdleMode,
    counters: Arc<WorkerCounters>,
}

/// The capabilities of a worker's ports, by port index.
type PortCaps = Vec<(usize, Capabilities)>;

/// A worker's handles on the switch's ports, by port index (`None`: not one it polls).
type WorkerPorts = Vec<Option<OwnedPort<SwitchPort>>>;

/// A worker's answer once its ports are open: their capabilities and what it found to say
/// (worker 0: the fast path's checks), or why not.
type Ready = mpsc::Sender<Result<(PortCaps, Vec<String>), String>>;

impl Switch {
    /// Starts `profile` as `options` say; returns once every worker has opened its ports and
    /// the control socket is served, or with the first error (nothing left running).
    pub fn start(profile: SwitchProfile, options: SwitchOptions) -> anyhow::Result<SwitchHandle> {
        let (shared, plan, idle, mut notes) = prepare(profile, &options)?;
        let shared = Arc::new(shared);
        let (workers, stop) = (plan.len(), shared.stop.clone());
        let worker_counters: Vec<Arc<WorkerCounters>> =
            (0..workers).map(|_| Arc::default()).collect();
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut handles = Vec::new();
        for ((w, units), links) in plan.into_iter().enumerate().zip(links(workers)) {
            let start = WorkerStart {
                w,
                units,
                idle: idle[w].0,
                counters: worker_counters[w].clone(),
            };
            let (sh, ready) = (shared.clone(), ready_tx.clone());
            let spawned = worker::spawn_pinned(w, format!("quench-w{w}"), move || {
                worker_thread(&sh, start, links, ready)
            });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    stop_and_join(&stop, handles);
                    return Err(e.into());
                }
            }
        }
        drop(ready_tx);
        // Bound once the ports are open (their errors, e.g. missing privileges, come first) and
        // before anything is served, so a bad `control_socket` path stops the start cleanly.
        let bound = collect_ready(&shared, &ready_rx, workers).and_then(|(info, said)| {
            let path = &shared.profile.control_socket;
            let s = ControlSocket::bind(path)
                .map_err(|e| format!("control_socket {}: {e}", path.display()))?;
            notes.extend(said);
            Ok((info, s))
        });
        let registry = bound.map(|(info, socket)| {
            let registry = Arc::new(Registry {
                info,
                counters: shared.counters.clone(),
                workers: worker_counters,
                clock: shared.clock,
            });
            (registry, socket)
        });
        let ctl = registry.and_then(|(registry, socket)| {
            let (r, s) = (registry.clone(), stop.clone());
            let ctl = std::thread::Builder::new()
                .name("quench-ctl".into())
                .spawn(move || {
                    // It only waits and answers: off the workers' cores when there is a core
                    // to spare (worker::keep_off_workers).
                    worker::keep_off_workers(workers);
                    socket.serve(r, s)
                });
            ctl.map(|c| (registry, c))
                .map_err(|e| format!("control socket thread: {e}"))
        });
        let (registry, ctl) = match ctl {
            Ok(x) => x,
            Err(e) => {
                stop_and_join(&stop, handles);
                bail!("{e} (config {})", options.origin);
            }
        };
        notes.extend(start_lines(&shared, &registry, &idle));
        let xdp_ifaces = (shared.profile.ports.iter())
            .filter(|p| p.kind == PortKind::Xdp)
            .map(|p| p.iface.clone())
            .collect();
        Ok(SwitchHandle {
            registry,
            stop,
            workers: handles,
            ctl,
            xdp_ifaces,
            notes,
        })
    }
}

/// Everything decided before the workers start: what they share, which queues each polls,
/// each one's idle mode (and why), and the notes so far.
type Prepared = (Shared, plan::Plan, Vec<(IdleMode, String)>, Vec<String>);

/// The decisions of [`Switch::start`] before any thread starts (see [`plan`]).
fn prepare(profile: SwitchProfile, options: &SwitchOptions) -> anyhow::Result<Prepared> {
    let (profile, captures) = resolve(profile, options)?;
    let workers = profile.workers;
    let plan = plan::assign(&profile, workers);
    let mut notes = Vec::new();
    let fast = match options.fast_path {
        FastPathMode::Off => None,
        FastPathMode::Auto => {
            let loaded = plan::fast_path_plan(&profile, &captures)
                .and_then(|plain| KernelFast::load(&profile, plain).map_err(|e| e.to_string()));
            match loaded {
                Ok(k) => {
                    notes.push(fast_path_line(&profile, &captures));
                    Some(k)
                }
                Err(why) => {
                    notes.push(format!("kernel fast path: off ({why})"));
                    None
                }
            }
        }
    };
    let idle = (options.idle).for_workers(workers, plan::shared_idle(fast.is_some()));
    let depths = plan::shared_depths(&profile, &plan);
    let shared = Shared {
        owner: plan::owners(&plan, profile.ports.len()),
        counters: (profile.ports.iter())
            .map(|_| (0..workers).map(|_| Arc::default()).collect())
            .collect(),
        samplings: plan::shared_samplings(&profile, &depths),
        depths,
        captures,
        opened: fast.as_ref().map(|_| Barrier::new(workers)),
        fast,
        force_xdp: options.force_xdp,
        clock: Clock::new(),
        stop: options.stop.clone().unwrap_or_default(),
        profile,
    };
    Ok((shared, plan, idle, notes))
}

impl SwitchHandle {
    /// The counters now (what `quench stats` shows).
    pub fn stats(&self) -> Snapshot {
        self.registry.snapshot()
    }

    /// The ports as started: interface, driver, mode, worker, egress rate.
    pub fn ports(&self) -> &[PortInfo] {
        &self.registry.info
    }

    /// What the start decided, one line each: the fast path's plan, each port, the workers'
    /// idle modes and why.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The switch's clock (the snapshots' time base).
    pub fn clock(&self) -> Clock {
        self.registry.clock
    }

    /// Workers started.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Whether the switch was told to stop.
    pub fn is_stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Tells the workers and the control socket to stop; [`SwitchHandle::join`] waits for them.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Waits until the switch is stopped and every thread has left, and returns the final
    /// counters. AF_XDP programs a failed close left behind are removed, so the next start
    /// finds the devices clean.
    pub fn join(self) -> anyhow::Result<SwitchReport> {
        let mut warnings = Vec::new();
        for (w, h) in self.workers.into_iter().enumerate() {
            if h.join().is_err() {
                warnings.push(format!("worker {w} panicked"));
            }
        }
        match self.ctl.join() {
            Ok(Err(e)) => warnings.push(format!("control socket: {e}")),
            Err(_) => warnings.push("control socket thread panicked".into()),
            Ok(Ok(())) => {}
        }
        for iface in &self.xdp_ifaces {
            if let Ok(ifindex) = if_index(iface) {
                for prog in xdp::attached_programs(ifindex) {
                    if prog.name.starts_with("xsk_def_prog")
                        || prog.name.starts_with(kfp::PROG_NAME)
                    {
                        let _ = xdp::detach_program(ifindex, prog.mode);
                    }
                }
            }
        }
        Ok(SwitchReport {
            snapshot: self.registry.snapshot(),
            warnings,
        })
    }
}

/// The options applied to `profile` (workers, control socket) and each port's capture file;
/// every interface checked to exist, so a typo fails here, naming the port.
fn resolve(
    mut profile: SwitchProfile,
    options: &SwitchOptions,
) -> anyhow::Result<(SwitchProfile, Vec<Option<PathBuf>>)> {
    if let Some(w) = options.workers {
        if w == 0 {
            bail!("--workers must be at least 1");
        }
        profile.workers = w;
    }
    if let Some(c) = &options.control_socket {
        profile.control_socket = c.clone();
    }
    let mut captures: Vec<Option<PathBuf>> = vec![None; profile.ports.len()];
    for (name, file) in &options.captures {
        let i = (profile.ports.iter())
            .position(|p| &p.name == name || &p.iface == name)
            .with_context(|| {
                format!(
                    "--capture {name}={}: no port named {name:?}",
                    file.display()
                )
            })?;
        captures[i] = Some(file.clone());
    }
    // DPDK ports are ethdev names (`net_af_packet0`), not kernel interfaces.
    for p in profile.ports.iter().filter(|p| p.kind != PortKind::Dpdk) {
        if_index(&p.iface).with_context(|| format!("port {:?} in {}", p.name, options.origin))?;
    }
    Ok((profile, captures))
}

/// The fast path's start-up line: each port plain or why not.
fn fast_path_line(profile: &SwitchProfile, captures: &[Option<PathBuf>]) -> String {
    let line: Vec<String> = (profile.ports.iter().enumerate())
        .map(
            |(i, p)| match plan::not_plain(profile, p, captures[i].is_some()) {
                None => format!("{} plain", p.name),
                Some(why) => format!("{} not ({why})", p.name),
            },
        )
        .collect();
    format!("kernel fast path: {}", line.join(", "))
}

/// Each port's start-up line, then the workers', then each worker's idle mode.
fn start_lines(shared: &Shared, registry: &Registry, idle: &[(IdleMode, String)]) -> Vec<String> {
    let mut out: Vec<String> = (registry.info.iter())
        .map(|p| {
            let rate = p
                .rate_bps
                .map(|r| format!(", egress {}", units::Rate::from_bps(r)));
            format!(
                "port {} ({}) {} {} on worker {}{}",
                p.name,
                p.iface,
                p.kind,
                p.mode,
                p.worker,
                rate.unwrap_or_default()
            )
        })
        .collect();
    out.push(format!(
        "{} workers, clock {:?}, control socket {}",
        idle.len(),
        shared.clock.source(),
        shared.profile.control_socket.display()
    ));
    for (w, (mode, why)) in idle.iter().enumerate() {
        out.push(format!("worker {w} {} when idle ({why})", mode.what()));
    }
    out
}

/// Sets `stop` and waits for `handles`.
fn stop_and_join(stop: &AtomicBool, handles: Vec<JoinHandle<()>>) {
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
}

/// Waits for every worker's answer; the ports' facts by port index and the workers' notes, or
/// the last error.
fn collect_ready(
    shared: &Shared,
    ready: &mpsc::Receiver<Result<(PortCaps, Vec<String>), String>>,
    workers: usize,
) -> Result<(Vec<PortInfo>, Vec<String>), String> {
    let profile = &shared.profile;
    let mut info: Vec<Option<PortInfo>> = vec![None; profile.ports.len()];
    let mut notes = Vec::new();
    let mut failure = None;
    for _ in 0..workers {
        match ready.recv() {
            Ok(Ok((caps, said))) => {
                notes.extend(said);
                for (pi, c) in caps {
                    let p = &profile.ports[pi];
                    info[pi].get_or_insert_with(|| PortInfo {
                        name: p.name.clone(),
                        iface: p.iface.clone(),
                        kind: c.kind.to_string(),
                        mode: c.mode.clone(),
                        worker: shared.owner[pi],
                        rate_bps: p.rate.map(|r| r.as_bps()),
                    });
                }
            }
            Ok(Err(e)) => failure = Some(e),
            Err(_) => failure = Some("a worker exited during start-up".into()),
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok((info.into_iter().flatten().collect(), notes)),
    }
}

/// A worker thread: build the worker (open its ports), say so on `ready`, poll until stopped,
/// then stop it.
fn worker_thread(sh: &Shared, start: WorkerStart, links: Links, ready: Ready) {
    let mut wk = match build_worker(sh, &start, links) {
        Ok((wk, caps, notes)) => {
            let _ = ready.send(Ok((caps, notes)));
            wk
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    run_worker(sh, &start, &mut wk);
    wk.shutdown();
    for op in wk.ports.iter_mut().flatten() {
        op.port.flush();
    }
}

/// The worker of `start`: its ports open, its fast path (worker 0) and PFC set up; with what
/// it found to say.
fn build_worker(
    sh: &Shared,
    start: &WorkerStart,
    links: Links,
) -> Result<(Worker<SwitchPort>, PortCaps, Vec<String>), String> {
    let profile = &sh.profile;
    let opened = open_ports(sh, start);
    if let Some(b) = &sh.opened {
        // Every worker passes here once, opened or not, so none waits for ever.
        b.wait();
    }
    let (ports, caps) = opened?;
    #[cfg(feature = "dpdk")]
    if (start.units.iter()).any(|(pi, _)| profile.ports[*pi].kind == PortKind::Dpdk) {
        // The pools' per-lcore caches: workers sharing a pool do not contend on its ring for
        // every burst.
        quench_port::dpdk::register_thread().map_err(|e| format!("worker {}: {e}", start.w))?;
    }
    let mut fdb = Fdb::new(profile.ageing, DEFAULT_CAPACITY);
    for &(mac, port) in &profile.static_macs {
        fdb.add_static(mac, port as PortIdx);
    }
    let (w, owner, counters) = (start.w, sh.owner.clone(), start.counters.clone());
    let mut wk = Worker::new(w, ports, owner, links, fdb, counters);
    let mut notes = Vec::new();
    if let Some(k) = sh.fast.as_ref().filter(|_| w == 0) {
        let (fast, said) = fast_path(sh, k, &wk.fdb)?;
        wk.fast = Some(fast);
        notes = said;
    }
    if let Some(pfc) = &profile.pfc {
        // Quanta are bit times of the receiving port: its egress rate if it has one (a veth
        // standing in for a slower link), else the [pfc] link_rate.
        let rates: Vec<units::Rate> = (profile.ports.iter())
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
    Ok((wk, caps, notes))
}

/// Polls `wk` until the switch stops, idling as the worker's mode says.
fn run_worker(sh: &Shared, start: &WorkerStart, wk: &mut Worker<SwitchPort>) {
    let mut idle = worker::Backoff::new(start.idle, wk.wait_handle());
    // A waiting worker waits up to its next deadline; a sleeping one sleeps its whole sleep
    // (with other workers its deadline is always now: their crossings).
    let waits = idle.waits();
    worker::run_loop(
        &sh.clock,
        &sh.stop,
        &mut idle,
        wk,
        |wk, now| wk.poll(now),
        |wk, now| if waits { wk.next_deadline(now) } else { None },
    );
}

/// Opens the worker's ports (by port index), with their capabilities.
fn open_ports(sh: &Shared, start: &WorkerStart) -> Result<(WorkerPorts, PortCaps), String> {
    let profile = &sh.profile;
    let mut pool = None;
    let mut ports: WorkerPorts = (0..profile.ports.len()).map(|_| None).collect();
    let mut caps = Vec::new();
    for (pi, queues) in &start.units {
        let p = &profile.ports[*pi];
        let named = |e: &dyn std::fmt::Display| format!("port {:?}: {e}", p.name);
        let program = sh.fast.as_ref().and_then(|k| {
            let (prog_fd, xskmap_fd) = k.programs.get(*pi)?.as_ref()?.fds();
            Some(xdp::XdpProgram { prog_fd, xskmap_fd })
        });
        let port = open_port(profile, p, &mut pool, queues, sh.force_xdp, program)
            .map_err(|e| named(&e))?;
        let c = quench_port::Port::caps(&port).clone();
        let port = match &sh.captures[*pi] {
            Some(f) => Capture::to_file(port, f, sh.clock).map_err(|e| named(&e))?,
            None => Capture::off(port),
        };
        let owned = own_port(sh, start.w, *pi, port, queues.len(), c.mac).map_err(|e| named(&e))?;
        caps.push((*pi, c));
        ports[*pi] = Some(owned);
    }
    Ok((ports, caps))
}

/// Worker `w`'s handle on port `pi` (`queues` device queues): its egress if it holds it, with
/// the port's congestion point (its MAC `mac`, else a locally administered one per port).
fn own_port(
    sh: &Shared,
    w: usize,
    pi: usize,
    port: SwitchPort,
    queues: usize,
    mac: Option<MacAddr>,
) -> Result<OwnedPort<SwitchPort>, quench_node::switch::cp::CpConfigError> {
    let p = &sh.profile.ports[pi];
    let is_owner = sh.owner[pi] == w;
    let rate = if is_owner { p.rate } else { None };
    let rx_queues = (0..queues as u16).collect();
    let mut owned = OwnedPort::new(port, rx_queues, p.limits, rate, sh.counters[pi][w].clone());
    owned.egress = is_owner || !plan::whole_egress(&sh.profile, p);
    if let Some(c) = p.congestion.as_ref().filter(|_| owned.egress) {
        let mac = mac.unwrap_or(MacAddr(0x02, 0x71, 0x6e, 0xff, 0x00, pi as u8));
        let mut h = quench_node::switch::cp::CpHook::from_config(pi, c, mac)?
            .with_int_config(pi, c, p.rate)?;
        if let Some(s) = &sh.samplings[pi] {
            h = h.with_shared_sampling(s);
        }
        owned.cp = Some(h.for_worker(w));
        owned.depth = sh.depths[pi].as_ref().map(|d| d.share(w));
    }
    Ok(owned)
}

/// The fast path as worker 0 drives it: each plain port whose device sends redirected frames
/// ([`super::fastpath::sends_redirected`]; checked once every port is open, so a device that
/// needs an XDP program to take redirects has it) a redirect target and watched, the others
/// left to the workers with a note saying why; the static entries installed before the first
/// frame. Its counts go into worker 0's counters of every port.
fn fast_path(sh: &Shared, k: &KernelFast, fdb: &Fdb) -> Result<(FastPath, Vec<String>), String> {
    let profile = &sh.profile;
    let mut plain = k.plain.clone();
    let mut notes = Vec::new();
    for (i, p) in profile.ports.iter().enumerate() {
        if !plain[i] {
            continue;
        }
        let mac = quench_port::device_mac(&p.iface)
            .map_or([0x02, 0x71, 0x6e, 0xfd, 0, i as u8], |m| m.octets());
        let why = match super::fastpath::sends_redirected(&p.iface, mac) {
            Ok(true) => None,
            Ok(false) => Some(
                "its device sent no frame redirected to it (a veth does only while its peer \
                 has GRO on, `ethtool -K PEER gro on`, or an XDP program)"
                    .to_string(),
            ),
            Err(e) => Some(format!("its device's redirects cannot be checked: {e}")),
        };
        let set = || {
            if_index(&p.iface)
                .and_then(|ix| k.table.set_device(i as u32, ix))
                .map_err(|e| format!("port {:?}: {e}", p.name))
        };
        match why {
            None => set()?,
            Some(why) => {
                notes.push(format!("kernel fast path: port {} not ({why})", p.name));
                plain[i] = false;
            }
        }
    }
    let counters = (sh.counters.iter()).map(|c| c[0].clone()).collect();
    let mut fast = FastPath::new(
        Box::new(k.table.clone()),
        k.programs.clone(),
        plain,
        counters,
    );
    for (i, p) in profile.ports.iter().enumerate() {
        if fast.is_plain(i) {
            fast.watch_egress(i, &p.name, &p.iface);
        }
    }
    // The static entries do not age: any time will do.
    fast.sync_all(units::Instant::ZERO, fdb);
    Ok((fast, notes))
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
                let mtu = (all.ports.iter())
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
