//! The simulated network: nodes, ports, links, hosts, flows, and the event loop that drives them.
//!
//! Invariants:
//! - Every packet is forwarded, delivered or dropped (and counted) exactly once per hop.
//! - A port transmits one packet at a time: it is busy from the start of a transmission until
//!   its `TxDone` slot (reserved in the event order when the transmission starts); the packet
//!   reaches the peer port one propagation delay after its last bit left. The `TxDone` event
//!   itself is only pushed when something may be waiting for the port (its queue or host had
//!   more, or a `kick` found it busy): into the reserved slot, so events pop in the same order
//!   as if every transmission had pushed one, and a port with nothing waiting costs no event.
//! - Timers of the algorithm state machines are deadlines: the world keeps, per component, the
//!   deadline it has an event queued for, and ignores events whose time no longer matches (lazy
//!   cancellation), so a spurious or stale timer never reaches an algorithm.
//! - Nothing here reads a clock or a global random source: the run is a function of the inputs
//!   and the seed.

use units::{Duration, Ecn, FlowId, Instant, Rate, PRIORITIES};

use quench_node::switch::core::{CpProfiles, Event, Handled, PortCp, SwitchCore};
use quench_node::switch::queue::{Class, QueueLimits};

use super::cc::{self, CcKind, CcSetup};
use super::config::{IntMode, RunConfig};
use super::monitor::{PfcRecord, QlenMonitor};
use super::packet::{Kind, Pkt};
use super::rng::{self, SimRng, Stream};
use super::series::{QueueDist, Series, Which};
use super::topology::{ecmp_pick, EcmpKey, Routes, Topology};
use super::traffic::FlowSpec;
use quench_node::host::core::{FlowHandle, HostCore, PacingConfig, Source};
use quench_node::host::rp::{Ack, Echo, Feedback};
use quench_node::wheel::{Slot, Wheel};
use rand_core::RngCore;

const NONE: u32 = u32::MAX;

/// Switches a flow's cached route holds per direction (HPCC's fat tree: 5 on the longest path).
const ROUTE_HOPS: usize = 8;

/// What a switch needs to route a flow's packets, apart from the flow's other state (read on
/// every switch hop): per direction, the egress port (node-local) at each switch of its path.
/// The ECMP pick depends only on the switch, the destination and the
/// flow's key, so the path is computed once ([`World::path`]) and every packet that starts at
/// an end follows it; [`Pkt::hop`] says how far it is. A path longer than [`ROUTE_HOPS`]
/// switches is not cached (its `len` is 0) and is routed by table at every hop.
#[derive(Clone, Copy, Debug)]
struct FlowRoute {
    /// Data (from the sender) and the rest (from the receiver).
    fwd: Hops,
    rev: Hops,
}

#[derive(Clone, Copy, Debug, Default)]
struct Hops {
    len: u8,
    out: [u16; ROUTE_HOPS],
}

impl Hops {
    /// The switch egress ports (node-local) of `path` (the global ports a packet leaves by,
    /// its sender's first); empty when too long.
    fn of(path: &[u32], ports: &[Port]) -> Hops {
        let mut h = Hops::default();
        let switch_ports = path.get(1..).unwrap_or_default();
        if switch_ports.len() <= ROUTE_HOPS {
            for (i, &p) in switch_ports.iter().enumerate() {
                h.out[i] = ports[p as usize].local as u16;
            }
            h.len = switch_ports.len() as u8;
        }
        h
    }
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// `pkt` has fully arrived at `port` (the receiving end of a link). The packet rides in
    /// the event (32 octets): the wheel writes an event once and reads it once, so a packet
    /// kept apart (a slab indexed by the event) only added a second cold line per hop.
    Arrive {
        port: u32,
        pkt: Pkt,
    },
    /// `port` finished serialising its packet.
    TxDone {
        port: u32,
    },
    /// A host core's earliest release time.
    HostWake {
        host: u32,
    },
    FlowStart {
        flow: u32,
    },
    /// A host's earliest reaction-point deadline (its flows' and QCN's limiter pool's).
    HostTimer {
        host: u32,
    },
    /// A pause received on `port` runs out.
    PauseExpiry {
        port: u32,
    },
    /// A flow's retransmission check.
    Rto {
        flow: u32,
    },
    LinkRate {
        port: u32,
        rate: Rate,
    },
    Sample,
    /// ns-3's queue-length monitor prints its histograms.
    QlenDump,
}

// The wheel stores every pending event by value (with its sequence number): keep the largest,
// `Arrive`, at half a cache line.
const _: () = assert!(std::mem::size_of::<Ev>() <= 32);

struct Node {
    first_port: u32,
    nports: u32,
    /// Host index, or `NONE` for a switch.
    host: u32,
    /// The node's egress queues with their congestion points, PFC accounting and the pauses
    /// its ports received: the switch core `quench switch` runs (a host's has one port and no
    /// congestion point). Indexed by node-local port.
    core: SwitchCore<Pkt>,
}

/// Counters and queue statistics of one port. The first four fields change on every
/// transmission and queue change of the port and share a cache line (`repr(C)` keeps them
/// first, in [`Port`]'s second line).
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct PortStats {
    /// Integral of queued octets over time within the statistics window (octet-nanoseconds).
    pub q_integral: u128,
    pub q_max: u64,
    pub tx_bytes: u64,
    pub tx_pkts: u64,
    pub drops: u64,
    /// Data packets whose ECN codepoint a congestion point changed.
    pub marks: u64,
    /// CNMs this port's congestion points generated.
    pub cnms: u64,
    /// PFC XOFF frames sent upstream from this port / received on it.
    pub pauses_sent: u64,
    pub pauses_received: u64,
}

/// A port of the simulated network. A packet's hop reads the receiving port's `node` and
/// `lossy` and the sending port's fields up to the first four of `stats`: they fill the first
/// line and the start of the second (`repr(C)`, aligned to a line), so a hop touches at most
/// three lines of ports.
#[repr(C, align(64))]
struct Port {
    node: u32,
    /// Node-local index (the port's number in its node's core).
    local: u32,
    /// Global id of the port at the other end of the link.
    peer: u32,
    /// The `TxDone` event was pushed into `done`.
    done_pushed: bool,
    /// `err` is above zero: arrivals draw whether they are lost.
    lossy: bool,
    rate: Rate,
    delay: Duration,
    /// Where the current transmission's `TxDone` sits in the event order; the port is busy
    /// while it is pending ([`Wheel::is_pending`]).
    done: Slot,
    /// Octets of data queued (all data classes).
    qtotal: u64,
    q_last: Instant,
    stats: PortStats,
    /// Probability that a packet arriving here was lost on the link.
    err: f64,
    pause_at: Instant,
}

const _: () = assert!(std::mem::offset_of!(Port, stats) == 64);

/// A host: its port and its host core (the flows it sends, their reaction points and pacing,
/// the receive side's notification point), and the deadlines it has events queued for.
struct Host {
    node: u32,
    port: u32,
    core: HostCore<SimSource>,
    timer_at: Instant,
    wake_at: Instant,
}

/// How a simulated host paces (ns-3 HPCC's `RdmaHw`): releases to the nanosecond (a wheel of
/// 1 ns ticks, 2 of them before the heap: a host's frames are 20-83 ns apart at 100-400 Gb/s,
/// so nearly every release waits in the heap whatever the wheel's size, and more slots only
/// spread the releases over more queue headers, each cold when its tick comes; the order is
/// (tick, insertion) for any size); no catch-up: a frame that leaves late (the port was
/// busy with another flow's frame or a control frame) pushes the flow's schedule; a PFC pause
/// does not move the schedule: the frame it held leaves when it ends; a rate change spaces the
/// flow's next frame and leaves the release already timed alone (ns-3's DCQCN and the QCN
/// pseudocode: [`PacingConfig::retime`]). Frames are spaced exactly unless the run's
/// [`HostConfig::spacing`](super::config::HostConfig::spacing) says ns-3's way.
const SIM_PACING: PacingConfig = PacingConfig {
    tick: Duration::from_nanos(1),
    wheel_slots: 2,
    max_catch_up: Duration::ZERO,
    catch_up_speed: None,
    pause_shifts_schedule: false,
    spacing: rp::Spacing::Exact,
    retime: false,
};

/// A simulated flow's data as its host core sends it: payloads of at most an MTU from
/// `snd_nxt` up to `bytes`, each with one header's octets (the receiver takes them off again);
/// go-back-N moves `snd_nxt` back.
#[derive(Clone, Copy, Debug)]
pub struct SimSource {
    pub snd_nxt: u64,
    bytes: u64,
    mtu: u32,
    header: u32,
    /// The first unacknowledged octet (the window counts from it).
    snd_una: u64,
    /// The flow's window (`bytes` 0: none) and the rate a variable window scales from.
    window: rp::Window,
    max_rate: Rate,
}

impl SimSource {
    fn payload(&self) -> u32 {
        (self.bytes - self.snd_nxt).min(u64::from(self.mtu)) as u32
    }
}

impl Source for SimSource {
    /// The payload's sequence number (its length is the frame's less the header).
    type Item = u64;

    fn peek(&self) -> Option<u32> {
        (self.snd_nxt < self.bytes).then(|| self.payload() + self.header)
    }

    fn take(&mut self) -> u64 {
        let seq = self.snd_nxt;
        self.snd_nxt += u64::from(self.payload());
        seq
    }

    /// ns-3's NIC sends from a queue pair while `GetBytesLeft() > 0 && !IsWinBound()`
    /// (qbb-net-device.cc `GetNextQindex`).
    fn peek_within(&self, rate: impl FnOnce() -> Rate) -> Option<u32> {
        let len = self.peek()?;
        if self.window.bytes > 0
            && self
                .window
                .is_bound(self.snd_nxt - self.snd_una, rate(), self.max_rate)
        {
            return None;
        }
        Some(len)
    }
}

/// What one data packet collected and its ACK echoes back (ns-3 carries it in the packet's
/// `IntHeader`; here it waits beside the flow, found by the packet's sequence number).
#[derive(Clone, Copy, Debug, Default)]
struct Collected {
    hops: rp::IntHops,
    sent: Instant,
    power: u16,
}

/// A flow's echoes, one per packet from the first unacknowledged one on: packet `k` (payload
/// offset `k x mtu`: every data packet starts at a multiple of the payload, go-back-N
/// included) is `ring[k - base]`. An ACK answers the packet ending at its sequence number; a
/// NACK names the packet that showed the gap by its distance in packets (the ACK's `aux` from
/// bit 1). A packet sent again starts its echo afresh (an ACK of the first copy still in flight
/// then reads the second's: only under loss).
#[derive(Clone, Debug, Default)]
struct EchoRing {
    base: u64,
    ring: std::collections::VecDeque<Collected>,
}

impl EchoRing {
    fn slot(&mut self, k: u64) -> Option<&mut Collected> {
        let i = usize::try_from(k.checked_sub(self.base)?).ok()?;
        if i >= self.ring.len() {
            self.ring.resize(i + 1, Collected::default());
        }
        self.ring.get_mut(i)
    }

    fn get(&self, k: u64) -> Option<&Collected> {
        self.ring
            .get(usize::try_from(k.checked_sub(self.base)?).ok()?)
    }

    /// Forgets the packets before `k` (acknowledged).
    fn release_before(&mut self, k: u64) {
        while self.base < k && !self.ring.is_empty() {
            self.ring.pop_front();
            self.base += 1;
        }
        self.base = self.base.max(k);
    }
}

/// A switch egress's INT state (ns-3 `SwitchNode`: `m_txBytes`, and for PINT `m_lastPktSize`,
/// `m_lastPktTs`, `m_u`).
#[derive(Clone, Copy, Debug, Default)]
struct IntPort {
    tx_bytes: u64,
    last_size: u32,
    last_ts: u64,
    u: f64,
}

/// Per-flow state and results.
pub struct Flow {
    pub spec: FlowSpec,
    pub sport: u16,
    pub src_h: u32,
    pub dst_h: u32,
    /// What switches hash to route the flow's data (its reverse routes the flow's ACKs).
    ecmp: EcmpKey,
    /// The flow in its source host's core (from its start until it completes).
    handle: FlowHandle,
    snd_una: u64,
    last_progress: Instant,
    last_tx: Instant,
    started: bool,
    pub done: bool,
    pub finish: Instant,
    pub ideal_fct: Duration,
    // Receiver side.
    rcv_nxt: u64,
    since_ack: u32,
    nack_at: Instant,
    nack_seq: u64,
    // Statistics.
    /// Payload octets delivered in order within the statistics window.
    pub window_bytes: u64,
    pub first_window_delivery: Option<Instant>,
    pub last_delivery: Instant,
    sample_bytes: u64,
    pub notifications_sent: u64,
    pub notifications_received: u64,
    pub ce_received: u64,
    pub ue_received: u64,
    pub retransmits: u64,
}

/// One time-series row for a flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowSample {
    pub t: Instant,
    pub flow: u32,
    /// The reaction point's current rate.
    pub rate: Rate,
    /// In-order payload delivered at the receiver in the last period, as bits per second.
    pub goodput: Rate,
}

/// Progress of a run, reported every few hundred thousand events.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub now: Instant,
    pub flows_done: usize,
    pub flows: usize,
    pub events: u64,
}

/// The network and its event loop.
pub struct World {
    now: Instant,
    events: Wheel<Ev>,
    cfg: RunConfig,
    cc: CcSetup,
    nodes: Vec<Node>,
    ports: Vec<Port>,
    hosts: Vec<Host>,
    routes: Routes,
    pub flows: Vec<Flow>,
    /// Indexed as `flows`.
    flow_routes: Vec<FlowRoute>,
    link_rngs: Vec<SimRng>,
    remaining: usize,
    /// `flows.csv` and `queues.csv`, streamed as they are sampled.
    series: Series,
    /// Per port: the queue lengths sampled within the statistics window.
    queue_dist: Vec<QueueDist>,
    /// ns-3's queue-length monitor (`RunConfig::qlen_window`).
    qlen: Option<QlenMonitor>,
    /// PFC frames received (`RunConfig::pfc_log`).
    pfc_log: Option<Vec<PfcRecord>>,
    /// Per flow, the echoes of its packets in flight (INT modes only; else empty).
    echoes: Vec<EchoRing>,
    /// Per port, INT state (INT modes only; else empty).
    int_ports: Vec<IntPort>,
    /// Each flow's window, octets (`HostConfig::window`; 0: none).
    window: u64,
    /// ns-3's `maxRtt`, ns: the largest base RTT of any host pair (HPCC's and PINT's T).
    max_rtt: u64,
    /// Coins for HPCC-PINT's random rounding and ACK sampling.
    pint_rng: SimRng,
}

/// Errors building a world from inputs that do not fit together.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    #[error("flow {flow}: node {node} is not a host of the topology")]
    NotAHost { flow: usize, node: u32 },
    #[error("flow {flow}: source and destination are the same host {node}")]
    SelfFlow { flow: usize, node: u32 },
    #[error("flow {flow}: host {dst} is unreachable from host {src}")]
    Unreachable { flow: usize, src: u32, dst: u32 },
    #[error("host {node} has {ports} links; a host needs exactly one")]
    HostPorts { node: u32, ports: u32 },
    #[error("link change at {at_ns} ns: no link from node {from} to node {to}")]
    NoSuchLink { at_ns: u64, from: u32, to: u32 },
    #[error("mtu {0} must be between 64 and 65000 octets")]
    Mtu(u32),
    #[error("sample period must be positive")]
    Sample,
    #[error("{0:#}")]
    Cc(anyhow::Error),
}

/// Serialisation time rounded down, as ns-3's integer `bytes * 8000000000 / bw` in the
/// standalone FCT (the links themselves take [`Rate::tx_time`], rounded up).
fn floor_tx_time(rate: Rate, bytes: u64) -> Duration {
    if rate == Rate::ZERO {
        return Duration::MAX;
    }
    let ns = u128::from(bytes) * 8_000_000_000 / u128::from(rate.as_bps());
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

/// ns-3's `maxRtt` and `maxBdp` (third.cc `CalculateRoute` per host, then the largest over
/// host pairs): from each host a breadth-first search through switches, the first path found to
/// each node summing link delays and `payload x 8e9 / bw` of serialisation per link (integer
/// ns), the slowest link's rate; per pair `rtt = 2 x delay + txDelay`, `bdp = rtt x bw / 8e9`.
fn ns3_max_rtt_bdp(topo: &Topology, hosts: &[u32], payload: u32) -> (u64, u64) {
    let n = topo.nodes as usize;
    let mut adj: Vec<Vec<(u32, u64, u64)>> = vec![Vec::new(); n];
    for l in &topo.links {
        let (bw, d) = (l.rate.as_bps(), l.delay.as_nanos());
        adj[l.a as usize].push((l.b, bw, d));
        adj[l.b as usize].push((l.a, bw, d));
    }
    let (mut max_rtt, mut max_bdp) = (0u64, 0u64);
    for &h in hosts {
        // (delay, txDelay, bw) per node reached
        let mut seen: Vec<Option<(u64, u64, u64)>> = vec![None; n];
        seen[h as usize] = Some((0, 0, u64::MAX));
        let mut q = std::collections::VecDeque::from([h]);
        while let Some(now) = q.pop_front() {
            let (d, t, b) = seen[now as usize].unwrap_or((0, 0, u64::MAX));
            for &(next, bw, delay) in &adj[now as usize] {
                if seen[next as usize].is_some() || bw == 0 {
                    continue;
                }
                let tx = u64::from(payload) * 8_000_000_000 / bw;
                seen[next as usize] = Some((d + delay, t + tx, b.min(bw)));
                if topo.is_switch[next as usize] {
                    q.push_back(next);
                }
            }
        }
        for &o in hosts {
            if let (true, Some((d, t, b))) = (o != h, seen[o as usize]) {
                let rtt = d * 2 + t;
                let bdp = (u128::from(rtt) * u128::from(b) / 8_000_000_000) as u64;
                max_rtt = max_rtt.max(rtt);
                max_bdp = max_bdp.max(bdp);
            }
        }
    }
    (max_rtt, max_bdp)
}

/// ns-3's `node_id_to_ip`: 11.x.y.1 with x.y the node id.
pub fn node_ip(id: u32) -> u32 {
    0x0b00_0001 + (id / 256) * 0x0001_0000 + (id % 256) * 0x0000_0100
}

/// The network's nodes and ports as the topology's links lay them out.
struct Layout {
    /// Per node, the nodes its ports lead to, in port order.
    peers: Vec<Vec<u32>>,
    /// The hosts' node ids, in host order.
    host_nodes: Vec<u32>,
    /// Per node, its host index or `NONE`.
    host_of: Vec<u32>,
    nodes: Vec<Node>,
    ports: Vec<Port>,
}

impl Layout {
    /// Ports in link order per node (node-local index = order of appearance), each attached
    /// to its node's core with its congestion point (switch ports only).
    fn of(topo: &Topology, cc: &CcSetup, cfg: &RunConfig) -> Result<Layout, WorldError> {
        let n = topo.nodes as usize;
        let mut peers: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut local: Vec<(u32, u32)> = Vec::with_capacity(topo.links.len()); // (idx at a, idx at b)
        for l in &topo.links {
            let ia = peers[l.a as usize].len() as u32;
            peers[l.a as usize].push(l.b);
            let ib = peers[l.b as usize].len() as u32;
            peers[l.b as usize].push(l.a);
            local.push((ia, ib));
        }
        let host_nodes = topo.hosts();
        let mut host_of = vec![NONE; n];
        for (i, &h) in host_nodes.iter().enumerate() {
            host_of[h as usize] = i as u32;
            if peers[h as usize].len() != 1 {
                return Err(WorldError::HostPorts {
                    node: h,
                    ports: peers[h as usize].len() as u32,
                });
            }
        }
        let mut nodes = Vec::with_capacity(n);
        let mut first = 0u32;
        for (i, p) in peers.iter().enumerate() {
            nodes.push(Node {
                first_port: first,
                nports: p.len() as u32,
                host: host_of[i],
                core: SwitchCore::new(p.len()),
            });
            first += p.len() as u32;
        }
        let mut ports: Vec<Option<Port>> = (0..first).map(|_| None).collect();
        for (li, l) in topo.links.iter().enumerate() {
            let (ia, ib) = local[li];
            let pa = nodes[l.a as usize].first_port + ia;
            let pb = nodes[l.b as usize].first_port + ib;
            for (me, peer, node) in [(pa, pb, l.a), (pb, pa, l.b)] {
                let is_switch = topo.is_switch[node as usize];
                let rng = rng::stream(cfg.seed, Stream::Port, me as u64);
                // Hosts' NIC ports carry no congestion point.
                let profiles = if is_switch {
                    cc.cp_profiles(l.rate).map_err(WorldError::Cc)?
                } else {
                    CpProfiles::none()
                };
                let limits = QueueLimits {
                    data_bytes: cfg.switch.queue_limit_bytes.unwrap_or(u64::MAX),
                    control_bytes: u64::MAX,
                };
                let n = &mut nodes[node as usize];
                let local = me - n.first_port;
                n.core
                    .attach(local as usize, limits, PortCp::new(&profiles, rng), l.rate);
                ports[me as usize] = Some(Port {
                    node,
                    peer,
                    rate: l.rate,
                    delay: l.delay,
                    lossy: l.err > 0.0,
                    err: l.err,
                    done: Slot::PAST,
                    done_pushed: false,
                    local,
                    pause_at: Instant::MAX,
                    qtotal: 0,
                    q_last: Instant::ZERO,
                    stats: PortStats::default(),
                });
            }
        }
        let ports: Vec<Port> = ports.into_iter().flatten().collect();
        Ok(Layout {
            peers,
            host_nodes,
            host_of,
            nodes,
            ports,
        })
    }
}

/// Each host's core: its reaction point for its port's rate, paced as ns-3's NIC.
fn new_hosts(
    host_nodes: &[u32],
    nodes: &[Node],
    ports: &[Port],
    cc: &CcSetup,
    cfg: &RunConfig,
) -> Result<Vec<Host>, WorldError> {
    let mut hosts: Vec<Host> = Vec::with_capacity(host_nodes.len());
    for &h in host_nodes {
        let port = nodes[h as usize].first_port;
        let rp = cc::host_rp(cc, ports[port as usize].rate).map_err(WorldError::Cc)?;
        let pacing = PacingConfig {
            spacing: cfg.host.spacing,
            ..SIM_PACING
        };
        let core =
            HostCore::new(pacing, rp, cc::receiver(cc)).map_err(|e| WorldError::Cc(e.into()))?;
        hosts.push(Host {
            node: h,
            port,
            core,
            timer_at: Instant::MAX,
            wake_at: Instant::MAX,
        });
    }
    Ok(hosts)
}

/// The switches' shared buffer, and their PFC when the run has it: headroom and threshold
/// shift per port from its speed and delay against the NIC's (`nic_rate`).
fn set_switch_buffers(
    nodes: &mut [Node],
    ports: &[Port],
    topo: &Topology,
    cc: &CcSetup,
    cfg: &RunConfig,
    nic_rate: Rate,
) -> Result<(), WorldError> {
    if let Some(pfc) = &cc.pfc {
        for (i, node) in nodes.iter_mut().enumerate() {
            if !topo.is_switch[i] || node.nports == 0 {
                continue;
            }
            let first = node.first_port as usize;
            let mine = &ports[first..first + node.nports as usize];
            let mut p = pfc.params.clone();
            p.ports = node.nports as u16;
            p.link_rate = mine.iter().map(|x| x.rate).max().unwrap_or(Rate::ZERO);
            p.buffer_bytes = cfg.switch.buffer_bytes;
            // dcqcn.md: "headroom per port = 3 x rate x one-way delay" (at least 3000
            // octets here), and the threshold shift per port as third.cc sets them
            // (`PfcProfile::with_ports`).
            let per_port: Vec<cp::pfc::PortPfc> = mine
                .iter()
                .map(|x| {
                    let mut shift = p.alpha_shift;
                    let mut rate = x.rate.as_bps();
                    while rate > nic_rate.as_bps() && shift > 0 {
                        shift -= 1;
                        rate /= 2;
                    }
                    cp::pfc::PortPfc {
                        headroom_bytes: (x.rate.bytes_in(x.delay) * 3).max(3000),
                        alpha_shift: shift,
                    }
                })
                .collect();
            if !pfc.headroom_given {
                p.headroom_bytes = per_port.iter().map(|x| x.headroom_bytes).max().unwrap_or(0);
            }
            let err = |e| WorldError::Cc(anyhow::anyhow!("[pfc] at switch {i}: {e}"));
            let mut prof = cp::pfc::PfcProfile::new(&p).map_err(err)?;
            if !pfc.headroom_given {
                prof = prof.with_ports(&per_port).map_err(err)?;
            }
            node.core.set_pfc(prof);
        }
    }
    for (i, node) in nodes.iter_mut().enumerate() {
        if topo.is_switch[i] {
            node.core.set_buffer(cfg.switch.buffer_bytes);
        }
    }
    Ok(())
}

impl World {
    pub fn new(
        topo: &Topology,
        flows: &[FlowSpec],
        cc: CcSetup,
        cfg: RunConfig,
    ) -> Result<World, WorldError> {
        if !(64..=65_000).contains(&cfg.host.mtu) {
            return Err(WorldError::Mtu(cfg.host.mtu));
        }
        if cfg.sample == Duration::ZERO {
            return Err(WorldError::Sample);
        }
        let Layout {
            peers,
            host_nodes,
            host_of,
            mut nodes,
            ports,
        } = Layout::of(topo, &cc, &cfg)?;
        let routes = Routes::compute(topo, &peers, &host_nodes);
        // ns-3's maxRtt and maxBdp (third.cc, `GLOBAL_T 1`): the window and HPCC's base RTT.
        let (max_rtt, max_bdp) = if cfg.host.window.is_some() || cfg.host.int != IntMode::None {
            ns3_max_rtt_bdp(topo, &host_nodes, cfg.host.mtu)
        } else {
            (0, 0)
        };
        let mut cc = cc;
        if cfg.host.window.is_some() {
            cc.path = Some(rp::FlowPath {
                window: max_bdp,
                base_rtt: Duration::from_nanos(max_rtt),
            });
        }
        let hosts = new_hosts(&host_nodes, &nodes, &ports, &cc, &cfg)?;
        // ns-3's `get_nic_rate`: the first host's link speed.
        let nic_rate = hosts
            .first()
            .map_or(Rate::ZERO, |h| ports[h.port as usize].rate);
        set_switch_buffers(&mut nodes, &ports, topo, &cc, &cfg, nic_rate)?;
        let link_rngs = (0..ports.len())
            .map(|i| rng::stream(cfg.seed, Stream::Link, i as u64))
            .collect();
        let nports = ports.len();
        let int_on = cfg.host.int != IntMode::None;
        let mut w = World {
            now: Instant::ZERO,
            events: Wheel::nanoseconds(),
            cc,
            nodes,
            ports,
            hosts,
            routes,
            flows: Vec::with_capacity(flows.len()),
            flow_routes: Vec::with_capacity(flows.len()),
            link_rngs,
            remaining: flows.len(),
            series: Series::default(),
            queue_dist: vec![QueueDist::default(); nports],
            qlen: None,
            pfc_log: cfg.pfc_log.then(Vec::new),
            echoes: if int_on {
                vec![EchoRing::default(); flows.len()]
            } else {
                Vec::new()
            },
            int_ports: if int_on {
                vec![IntPort::default(); nports]
            } else {
                Vec::new()
            },
            window: if cfg.host.window.is_some() {
                max_bdp
            } else {
                0
            },
            max_rtt,
            pint_rng: rng::stream(cfg.seed, Stream::Pint, 0),
            cfg,
        };
        // The first events, in this order (their sequence numbers break ties): the queue
        // monitor's first dump, each flow's start, the link changes, the first sample.
        w.start_qlen_monitor();
        w.add_flows(flows, &host_of)?;
        for c in w.cfg.link_changes.clone() {
            let port = w.port_towards(c.from, c.to).ok_or(WorldError::NoSuchLink {
                at_ns: c.at.as_nanos(),
                from: c.from,
                to: c.to,
            })?;
            w.events.push(c.at, Ev::LinkRate { port, rate: c.rate });
        }
        // Sampling starts with the first flow (ns-3 flow files often start at 2 s).
        let first = flows.iter().map(|f| f.start).min().unwrap_or(Instant::ZERO);
        w.events.push(first, Ev::Sample);
        Ok(w)
    }

    /// ns-3's queue-length monitor over the switch ports, with its first dump queued.
    fn start_qlen_monitor(&mut self) {
        let Some(win) = self.cfg.qlen_window else {
            return;
        };
        let names: Vec<Option<(u32, u32)>> = (0..self.ports.len() as u32)
            .map(|p| {
                let (node, local, _) = self.port_name(p);
                // ns-3 interface indices start at 1 (0 is the loopback device).
                self.port_is_switch(p).then_some((node, local + 1))
            })
            .collect();
        self.qlen = Some(QlenMonitor::new(win, &names));
        if let Some(at) = win.next_dump(Instant::ZERO) {
            self.events.push(at, Ev::QlenDump);
        }
    }

    /// The flows with their ports, ECMP keys and cached routes, each start queued in file
    /// order.
    fn add_flows(&mut self, flows: &[FlowSpec], host_of: &[u32]) -> Result<(), WorldError> {
        let mut next_sport: std::collections::HashMap<(u32, u32), u16> =
            std::collections::HashMap::new();
        for (i, f) in flows.iter().enumerate() {
            let (src_h, dst_h) = (
                host_of.get(f.src as usize).copied().unwrap_or(NONE),
                host_of.get(f.dst as usize).copied().unwrap_or(NONE),
            );
            if src_h == NONE {
                return Err(WorldError::NotAHost {
                    flow: i,
                    node: f.src,
                });
            }
            if dst_h == NONE {
                return Err(WorldError::NotAHost {
                    flow: i,
                    node: f.dst,
                });
            }
            if src_h == dst_h {
                return Err(WorldError::SelfFlow {
                    flow: i,
                    node: f.src,
                });
            }
            // ns-3 third.cc: "each host pair use port number from 10000".
            let next = next_sport.entry((f.src, f.dst)).or_insert(10_000u16);
            let sport = *next;
            *next = next.wrapping_add(1);
            let ecmp = EcmpKey::new(node_ip(f.src), node_ip(f.dst), sport, f.dport);
            let fwd = self
                .path(f.src, f.dst, dst_h, &ecmp)
                .ok_or(WorldError::Unreachable {
                    flow: i,
                    src: f.src,
                    dst: f.dst,
                })?;
            let ideal_fct = self.ideal_fct(f, &fwd);
            // A receiver that cannot reach its sender leaves the reverse path to the tables
            // (whose empty next hops drop what it sends back).
            let rev = self
                .path(f.dst, f.src, src_h, &ecmp.reverse())
                .unwrap_or_default();
            self.flow_routes.push(FlowRoute {
                fwd: Hops::of(&fwd, &self.ports),
                rev: Hops::of(&rev, &self.ports),
            });
            self.flows.push(Flow {
                spec: f.clone(),
                sport,
                src_h,
                dst_h,
                ecmp,
                handle: FlowHandle(u32::MAX),
                snd_una: 0,
                last_progress: Instant::ZERO,
                last_tx: Instant::ZERO,
                started: false,
                done: false,
                finish: Instant::ZERO,
                ideal_fct,
                rcv_nxt: 0,
                since_ack: 0,
                nack_at: Instant::ZERO,
                nack_seq: u64::MAX,
                window_bytes: 0,
                first_window_delivery: None,
                last_delivery: Instant::ZERO,
                sample_bytes: 0,
                notifications_sent: 0,
                notifications_received: 0,
                ce_received: 0,
                ue_received: 0,
                retransmits: 0,
            });
            self.events.push(f.start, Ev::FlowStart { flow: i as u32 });
        }
        Ok(())
    }

    fn port_towards(&self, from: u32, to: u32) -> Option<u32> {
        let node = self.nodes.get(from as usize)?;
        (node.first_port..node.first_port + node.nports)
            .find(|&p| self.ports[self.ports[p as usize].peer as usize].node == to)
    }

    /// The global ports a packet from host node `from` to host node `to` (host index `to_h`)
    /// leaves by, its sender's first, as the switches route it with `key` (what
    /// [`World::switch_receive`] picks at each); `None` when it cannot get there.
    fn path(&self, from: u32, to: u32, to_h: u32, key: &EcmpKey) -> Option<Vec<u32>> {
        let mut node = from;
        let mut path = Vec::new();
        while node != to {
            let n = &self.nodes[node as usize];
            let port = if n.host != NONE {
                if node != from {
                    return None;
                }
                n.first_port
            } else {
                let nh = self.routes.next_hops(node, to_h);
                if nh.is_empty() {
                    return None;
                }
                n.first_port + nh[ecmp_pick(key, node, nh.len())] as u32
            };
            path.push(port);
            node = self.ports[self.ports[port as usize].peer as usize].node;
            if path.len() > self.nodes.len() {
                return None;
            }
        }
        Some(path)
    }

    /// The ns-3 scratch program's standalone FCT: `base_rtt + total_bytes * 8 / b`, with
    /// base_rtt = 2 x (sum of one-way delays) + one MTU-payload serialisation per hop, total_bytes
    /// = size plus one header per packet, and b the slowest link of the path (`pairBw`).
    fn ideal_fct(&self, f: &FlowSpec, path: &[u32]) -> Duration {
        let mut delay = Duration::ZERO;
        let mut txd = Duration::ZERO;
        let mut b = Rate::from_bps(u64::MAX);
        for &port in path {
            let p = &self.ports[port as usize];
            delay = delay + p.delay;
            txd = txd + floor_tx_time(p.rate, self.cfg.host.mtu as u64);
            b = b.min(p.rate);
        }
        let pkts = f.bytes.max(1).div_ceil(self.cfg.host.mtu as u64);
        // ns-3's qp_finish counts the header without INT.
        let header = self.cfg.host.header_bytes - self.cfg.host.int.bytes();
        let total = f.bytes + pkts * header as u64;
        delay.saturating_mul(2) + txd + floor_tx_time(b, total)
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn events_processed(&self) -> u64 {
        self.events.popped()
    }

    /// Runs until every flow completed or the stop time; `progress` is called now and then.
    pub fn run(&mut self, progress: &mut dyn FnMut(Progress)) {
        self.run_while(progress, &|| true);
    }

    /// As [`World::run`], but asks `go_on` every 4096 events and ends the run at the virtual
    /// time reached when it says no (SIGINT): the queue integrals are closed there, so the
    /// outputs describe the run up to it. Returns whether the run ended by itself.
    pub fn run_while(
        &mut self,
        progress: &mut dyn FnMut(Progress),
        go_on: &dyn Fn() -> bool,
    ) -> bool {
        let stop = self.cfg.stop.unwrap_or(Instant::MAX);
        let mut tick = 0u32;
        let mut interrupted = false;
        while let Some((t, ev)) = self.events.pop() {
            if t > stop {
                self.now = stop;
                break;
            }
            self.now = t;
            self.handle(ev);
            // The run ends with its last flow: nothing after it changes a queue or a rate, and
            // running on to `stop` would only sample idle ports (ns-3's `SIMULATOR_STOP_TIME`
            // is such a bound too). The queue monitor's remaining dumps are written below.
            if self.remaining == 0 {
                break;
            }
            tick = tick.wrapping_add(1);
            if tick & 0xfff == 0 && !go_on() {
                interrupted = true;
                break;
            }
            if tick & 0x3_ffff == 0 {
                progress(self.progress());
            }
        }
        // Close the queue integrals at the end time.
        for p in 0..self.ports.len() {
            self.account_queue(p as u32);
        }
        // The error, if any, is the outputs' to report (`World::series_result`).
        let _ = self.series.flush();
        // ns-3 runs on to its stop time; nothing changes after the last flow, so the queue
        // monitor's remaining dumps see the queues as they are now (not so when interrupted).
        if let (Some(m), Some(stop), false) = (&mut self.qlen, self.cfg.stop, interrupted) {
            let mut from = self.now + Duration::from_nanos(1);
            while let Some(at) = m.window().next_dump(from) {
                if at > stop {
                    break;
                }
                let ports = &self.ports;
                m.dump(at, |p| ports[p as usize].qtotal);
                from = at + Duration::from_nanos(1);
            }
        }
        progress(self.progress());
        !interrupted
    }

    pub fn progress(&self) -> Progress {
        Progress {
            now: self.now,
            flows_done: self.flows.len() - self.remaining,
            flows: self.flows.len(),
            events: self.events.popped(),
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { port, pkt } => self.arrive(port, pkt),
            Ev::TxDone { port } => {
                self.ports[port as usize].done_pushed = false;
                self.kick(port);
            }
            Ev::HostWake { host } => {
                let h = &mut self.hosts[host as usize];
                if h.wake_at == self.now {
                    h.wake_at = Instant::MAX;
                    let port = h.port;
                    self.kick(port);
                }
            }
            Ev::FlowStart { flow } => self.flow_start(flow),
            Ev::HostTimer { host } => {
                let h = &mut self.hosts[host as usize];
                if h.timer_at != self.now {
                    return;
                }
                h.timer_at = Instant::MAX;
                h.core.handle_timeout(self.now);
                self.arm_host(host);
                self.arm_wake(host);
            }
            Ev::PauseExpiry { port } => {
                let p = &mut self.ports[port as usize];
                if p.pause_at != self.now {
                    return;
                }
                p.pause_at = Instant::MAX;
                let (node, local) = (p.node as usize, p.local as usize);
                let expired = self.nodes[node].core.handle_port_timeout(self.now, local);
                let host = self.nodes[node].host;
                if host != NONE {
                    for prio in (0..PRIORITIES as u8).filter(|p| expired & (1 << p) != 0) {
                        self.hosts[host as usize]
                            .core
                            .handle_pause(self.now, prio, None);
                    }
                }
                self.arm_pause(port);
                self.kick(port);
            }
            Ev::Rto { flow } => self.rto(flow),
            Ev::LinkRate { port, rate } => self.link_rate(port, rate),
            Ev::Sample => self.sample(),
            Ev::QlenDump => {
                if let Some(m) = &mut self.qlen {
                    let ports = &self.ports;
                    m.dump(self.now, |p| ports[p as usize].qtotal);
                    if let Some(at) = m.window().next_dump(self.now + Duration::from_nanos(1)) {
                        self.events.push(at, Ev::QlenDump);
                    }
                }
            }
        }
    }

    /// A link's rate changes; a host's flows are capped at its port's rate.
    fn link_rate(&mut self, port: u32, rate: Rate) {
        self.ports[port as usize].rate = rate;
        let host = self.nodes[self.ports[port as usize].node as usize].host;
        if host == NONE {
            return;
        }
        let core = &mut self.hosts[host as usize].core;
        let flows: Vec<FlowHandle> = core.flows().map(|(h, _)| h).collect();
        for f in flows {
            core.set_cap(self.now, f, rate);
        }
        self.arm_wake(host);
    }

    fn flow_start(&mut self, flow: u32) {
        let now = self.now;
        let f = &mut self.flows[flow as usize];
        f.started = true;
        f.last_progress = now;
        let h = f.src_h;
        if f.spec.bytes == 0 {
            f.done = true;
            f.finish = now;
            self.remaining -= 1;
            return;
        }
        let spec = quench_node::host::core::FlowSpec {
            id: FlowId(flow),
            priority: f.spec.pg,
            cap: self.ports[self.hosts[h as usize].port as usize].rate,
            start: now,
        };
        let source = SimSource {
            snd_nxt: 0,
            bytes: f.spec.bytes,
            mtu: self.cfg.host.mtu,
            header: self.cfg.host.header_bytes,
            snd_una: 0,
            window: rp::Window {
                bytes: self.window,
                var: self.cfg.host.window == Some(true),
            },
            max_rate: spec.cap,
        };
        // Flow ids are the world's flow indices: unique per host core.
        if let Ok(handle) = self.hosts[h as usize].core.add_flow(spec, source) {
            f.handle = handle;
        }
        self.arm_host(h);
        if self.cfg.host.ack_every > 0 {
            self.events.push(now + self.cfg.host.rto, Ev::Rto { flow });
        }
        let port = self.hosts[h as usize].port;
        self.kick(port);
    }

    /// Queues an event for the host core's earliest reaction-point deadline if it changed.
    fn arm_host(&mut self, host: u32) {
        let h = &mut self.hosts[host as usize];
        if let Some(d) = h.core.next_timer() {
            // A deadline in the past is due now.
            let at = d.max(self.now);
            if at != h.timer_at {
                h.timer_at = at;
                self.events.push(at, Ev::HostTimer { host });
            }
        }
    }

    /// Queues a wake-up for the host core's earliest release if it is earlier than the one
    /// queued (a pause ended, a source was woken).
    ///
    /// ns-3's NIC (`QbbNetDevice`) schedules its next send (`m_nextSend`) only when its link is
    /// idle (`DequeueAndTransmit` finds no queue pair due) or to bring a pending one forward
    /// (`UpdateNextAvail`); while a frame is on the wire, its `TransmitComplete` looks. So with
    /// none queued and the port busy, the wake-up waits for the transmission's end: the order
    /// of two hosts' sends in one nanosecond is the order in which they were scheduled.
    fn arm_wake(&mut self, host: u32) {
        let now = self.now;
        let port = self.hosts[host as usize].port;
        let h = &mut self.hosts[host as usize];
        if let Some(at) = h.core.next_release() {
            let at = at.max(now);
            // `wake_at` is MAX once the queued wake-up has run, a past time if it was never set.
            let queued = h.wake_at > now && h.wake_at != Instant::MAX;
            if !queued && self.events.is_pending(self.ports[port as usize].done) {
                let p = &mut self.ports[port as usize];
                if !p.done_pushed {
                    p.done_pushed = true;
                    self.events.push_reserved(p.done, Ev::TxDone { port });
                }
                return;
            }
            if !queued || at < h.wake_at {
                h.wake_at = at;
                self.events.push(at, Ev::HostWake { host });
            }
        }
    }

    /// The flow's next payload octet to send (what go-back-N rewinds).
    fn snd_nxt(&self, flow: u32) -> u64 {
        let f = &self.flows[flow as usize];
        self.hosts[f.src_h as usize]
            .core
            .flow(f.handle)
            .map_or(f.spec.bytes, |c| c.source.snd_nxt)
    }

    /// Go-back-N: the flow sends again from `seq`.
    fn rewind(&mut self, flow: u32, seq: u64) {
        let now = self.now;
        let f = &self.flows[flow as usize];
        let core = &mut self.hosts[f.src_h as usize].core;
        if let Some(src) = core.source_mut(f.handle) {
            src.snd_nxt = seq;
            core.wake(now, f.handle);
        }
    }

    fn arm_pause(&mut self, port: u32) {
        let p = &mut self.ports[port as usize];
        if let Some(d) = self.nodes[p.node as usize]
            .core
            .port_deadline(p.local as usize)
        {
            let at = d.max(self.now);
            if at != p.pause_at {
                p.pause_at = at;
                self.events.push(at, Ev::PauseExpiry { port });
            }
        }
    }

    /// Retransmission check: only when the flow has sent nothing and heard nothing new for a
    /// whole `rto` (a slow, rate-limited flow that keeps sending is never timed out: a gap in
    /// its sequence reaches the receiver with its next packet and comes back as a NACK).
    fn rto(&mut self, flow: u32) {
        let now = self.now;
        let rto = self.cfg.host.rto;
        let f = &mut self.flows[flow as usize];
        if f.done {
            return;
        }
        let quiet_since = f.last_progress.max(f.last_tx);
        let snd_una = f.snd_una;
        if self.snd_nxt(flow) == snd_una {
            // Nothing outstanding: nothing to time.
            self.flows[flow as usize].last_progress = now;
        } else if now - quiet_since >= rto {
            self.rewind(flow, snd_una);
            let f = &mut self.flows[flow as usize];
            f.retransmits += 1;
            f.last_progress = now;
            let port = self.hosts[f.src_h as usize].port;
            self.kick(port);
        }
        let f = &self.flows[flow as usize];
        let next = (f.last_progress.max(f.last_tx) + rto).max(now + Duration::from_nanos(1));
        self.events.push(next, Ev::Rto { flow });
    }

    /// Starts a transmission on `port` if it is idle and has something to send.
    fn kick(&mut self, port: u32) {
        let p = &mut self.ports[port as usize];
        if self.events.is_pending(p.done) {
            if !p.done_pushed {
                p.done_pushed = true;
                self.events.push_reserved(p.done, Ev::TxDone { port });
            }
            return;
        }
        let node = self.ports[port as usize].node;
        let host = self.nodes[node as usize].host;
        let pkt = if host != NONE {
            self.host_next(host)
        } else {
            self.switch_next(port)
        };
        if let Some(pkt) = pkt {
            self.transmit(port, pkt);
        }
    }

    fn transmit(&mut self, port: u32, pkt: Pkt) {
        let now = self.now;
        let p = &mut self.ports[port as usize];
        let tx = self.cfg.tx_time.of(p.rate, pkt.size as u64);
        p.stats.tx_bytes += pkt.size as u64;
        p.stats.tx_pkts += 1;
        let done = now + tx;
        p.done = self.events.reserve_at(done);
        p.done_pushed = false;
        let (peer, delay) = (p.peer, p.delay);
        self.events
            .push(done + delay, Ev::Arrive { port: peer, pkt });
        if self.may_have_more(port) {
            let p = &mut self.ports[port as usize];
            p.done_pushed = true;
            self.events.push_reserved(p.done, Ev::TxDone { port });
        }
    }

    /// Whether `port` may have something to send when its transmission ends: frames queued
    /// (paused ones too), or at a host, flows with data. When not, whatever later gives it
    /// something kicks it.
    fn may_have_more(&self, port: u32) -> bool {
        let p = &self.ports[port as usize];
        let node = &self.nodes[p.node as usize];
        let queued = node
            .core
            .queue(p.local as usize)
            .is_some_and(|q| !q.is_empty());
        queued || (node.host != NONE && !self.hosts[node.host as usize].core.is_empty())
    }

    /// The NIC scheduler: control frames first, then the host core's next release (its flows
    /// in release-time order, paused priorities held back).
    fn host_next(&mut self, h: u32) -> Option<Pkt> {
        let now = self.now;
        let node = self.hosts[h as usize].node as usize;
        // Control frames go first, unless the NIC's ACK queue shares a paused priority
        // (`HostConfig::ack_pause_prio`); the resume or the pause's end kicks the port.
        let held = self
            .cfg
            .host
            .ack_pause_prio
            .is_some_and(|prio| self.hosts[h as usize].core.paused(now, prio));
        if !held {
            if let Some((_, p)) = self.nodes[node].core.poll_transmit(now, 0) {
                return Some(p);
            }
        }
        let Some(t) = self.hosts[h as usize].core.poll_transmit(now) else {
            self.arm_wake(h);
            return None;
        };
        let seq = t.item;
        let fi = t.id.0;
        if let Some(e) = self.echoes.get_mut(fi as usize) {
            // SeqTsHeader: the INT header starts empty, TIMELY's stamp is the send time.
            if let Some(slot) = e.slot(seq / u64::from(self.cfg.host.mtu)) {
                *slot = Collected {
                    sent: now,
                    ..Collected::default()
                };
            }
        }
        let f = &mut self.flows[fi as usize];
        f.last_tx = now;
        let pkt = Pkt {
            flow: fi,
            seq,
            size: t.len,
            kind: Kind::Data,
            prio: f.spec.pg,
            ecn: Ecn::Ect1,
            in_port: 0,
            aux: 0,
            hop: 0,
        };
        self.arm_host(h);
        Some(pkt)
    }

    /// A switch egress dequeued `pkt` (ns-3 `SwitchNode::SwitchNotifyDequeue`): a data packet
    /// gets the port's INT hop (HPCC: time, octets sent before it, the queue left behind, the
    /// line rate) or its PINT code (the larger of the packet's and this port's); every packet
    /// counts towards the octets sent.
    fn stamp(&mut self, port: u32, pkt: &Pkt) {
        let now = self.now.as_nanos();
        let (rate, qlen) = {
            let p = &self.ports[port as usize];
            (p.rate, p.qtotal)
        };
        let ip = self.int_ports[port as usize];
        if pkt.kind == Kind::Data {
            let k = pkt.seq / u64::from(self.cfg.host.mtu);
            match self.cfg.host.int {
                IntMode::Hops { multi } => {
                    let qlen = u32::try_from(qlen).unwrap_or(u32::MAX);
                    let hop = rp::IntHop::new(now, ip.tx_bytes, qlen, rate, multi);
                    if let (Some(hop), Some(e)) = (
                        hop,
                        self.echoes
                            .get_mut(pkt.flow as usize)
                            .and_then(|r| r.slot(k)),
                    ) {
                        e.hops.push(hop);
                    }
                }
                IntMode::Pint { code } => {
                    let dt = now.saturating_sub(ip.last_ts).min(self.max_rtt);
                    let rng = &mut self.pint_rng;
                    let u = rp::int::pint_switch_u(
                        &mut || rng.next_u32(),
                        rp::int::PintPort {
                            dt,
                            max_rtt: self.max_rtt,
                            line_rate: rate,
                            qlen,
                            last_size: ip.last_size,
                            u: ip.u,
                        },
                    );
                    let coin = (self.pint_rng.next_u32()) % 65536;
                    let power = code.encode(u, coin);
                    if let Some(e) = self
                        .echoes
                        .get_mut(pkt.flow as usize)
                        .and_then(|r| r.slot(k))
                    {
                        if power > e.power {
                            e.power = power;
                        }
                    }
                    self.int_ports[port as usize].u = u;
                }
                _ => {}
            }
        }
        let ip = &mut self.int_ports[port as usize];
        ip.tx_bytes += u64::from(pkt.size);
        ip.last_size = pkt.size;
        ip.last_ts = now;
    }

    fn switch_next(&mut self, port: u32) -> Option<Pkt> {
        let now = self.now;
        self.account_queue(port);
        let p = &self.ports[port as usize];
        let (node, local) = (p.node, p.local as usize);
        let (class, pkt) = self.nodes[node as usize].core.poll_transmit(now, local)?;
        if let Class::Data(_) = class {
            self.ports[port as usize].qtotal -= pkt.size as u64;
        }
        if !self.int_ports.is_empty() {
            self.stamp(port, &pkt);
        }
        self.core_events(node, local as u32);
        Some(pkt)
    }

    /// Carries out what node `node`'s core decided: PFC frames out of its ports, CNMs back to
    /// the sampled packet's sender (routed as if received on `in_port`).
    fn core_events(&mut self, node: u32, in_port: u32) {
        let first = self.nodes[node as usize].first_port;
        while let Some(ev) = self.nodes[node as usize].core.poll_event() {
            match ev {
                Event::Pfc { port, action } => self.send_pfc(first + port as u32, action),
                Event::Cnm { cnm, .. } => {
                    let pkt = Pkt {
                        flow: cnm.flow,
                        seq: 0,
                        size: self.cfg.host.ctrl_bytes,
                        kind: Kind::Cnm,
                        prio: cnm.prio,
                        ecn: Ecn::NotEct,
                        in_port: 0,
                        aux: u16::from(cnm.qntz_fb),
                        hop: Pkt::UNROUTED,
                    };
                    // The CNM leaves this switch towards the sampled frame's source.
                    self.switch_receive(node, in_port, pkt);
                }
            }
        }
    }

    /// Queues `pkt` in the control class of `port` and starts sending if the link is idle.
    fn send_control(&mut self, port: u32, pkt: Pkt) {
        let p = &self.ports[port as usize];
        let (node, local) = (p.node as usize, p.local as usize);
        let _ = self.nodes[node]
            .core
            .handle_frame(self.now, local, local, Class::Control, pkt);
        self.kick(port);
    }

    /// Sends a PFC frame out of `port` (towards the upstream that fills this ingress).
    fn send_pfc(&mut self, port: u32, action: cp::pfc::PfcAction) {
        let (prio, quanta) = match action {
            cp::pfc::PfcAction::Pause { prio, quanta } => (prio, quanta),
            cp::pfc::PfcAction::Resume { prio } => (prio, 0),
        };
        if quanta > 0 {
            self.ports[port as usize].stats.pauses_sent += 1;
        }
        let size = self.cfg.switch.pfc_frame_bytes;
        self.send_control(port, Pkt::pause(prio, quanta, size));
    }

    /// Adds the queue's occupancy since the last change to its integral.
    fn account_queue(&mut self, port: u32) {
        let from = self.cfg.stats_from;
        let now = self.now;
        let p = &mut self.ports[port as usize];
        if let Some(m) = &mut self.qlen {
            m.advance(port, p.qtotal, now);
        }
        let start = p.q_last.max(from);
        if now > start {
            p.stats.q_integral += p.qtotal as u128 * (now - start).as_nanos() as u128;
        }
        p.q_last = now;
    }

    fn arrive(&mut self, port: u32, pkt: Pkt) {
        let p = &self.ports[port as usize];
        if p.lossy && pkt.kind != Kind::Pause {
            let err = p.err;
            if rng::unit(&mut self.link_rngs[port as usize]) < err {
                self.ports[port as usize].stats.drops += 1;
                return;
            }
        }
        if pkt.kind == Kind::Pause {
            if let Some(log) = &mut self.pfc_log {
                log.push(PfcRecord {
                    t: self.now,
                    port,
                    pause: pkt.aux > 0,
                });
            }
            let p = &self.ports[port as usize];
            let (node, local) = (p.node as usize, p.local as usize);
            let paused = self.nodes[node]
                .core
                .handle_pause(self.now, local, pkt.prio, pkt.aux);
            if paused {
                self.ports[port as usize].stats.pauses_received += 1;
            }
            // A host's flows of the priority stop while its port's queue holds it paused (until
            // the pause runs out or is lifted: `Ev::PauseExpiry`, a resume).
            let host = self.nodes[node].host;
            if host != NONE {
                let until = paused.then_some(Instant::MAX);
                self.hosts[host as usize]
                    .core
                    .handle_pause(self.now, pkt.prio, until);
            }
            self.arm_pause(port);
            if !paused {
                self.kick(port);
            }
            return;
        }
        let node = self.ports[port as usize].node;
        let host = self.nodes[node as usize].host;
        if host != NONE {
            self.host_receive(host, pkt);
        } else {
            let in_port = port - self.nodes[node as usize].first_port;
            self.switch_receive(node, in_port, pkt);
        }
    }

    fn switch_receive(&mut self, node: u32, in_port: u32, mut pkt: Pkt) {
        let now = self.now;
        let first = self.nodes[node as usize].first_port;
        // Data goes to the flow's receiver; everything else (ACK, NACK, CNP, CNM) back to its
        // sender, with the addresses and ports swapped.
        let r = &self.flow_routes[pkt.flow as usize];
        let forward = pkt.towards_receiver();
        let cached = if forward { &r.fwd } else { &r.rev };
        let local = if pkt.hop < cached.len {
            let local = cached.out[pkt.hop as usize];
            pkt.hop += 1;
            u32::from(local)
        } else {
            let f = &self.flows[pkt.flow as usize];
            let hops = self
                .routes
                .next_hops(node, if forward { f.dst_h } else { f.src_h });
            if hops.is_empty() {
                self.ports[(first + in_port) as usize].stats.drops += 1;
                return;
            }
            let key = if forward { f.ecmp } else { f.ecmp.reverse() };
            pkt.hop = Pkt::UNROUTED;
            hops[ecmp_pick(&key, node, hops.len())] as u32
        };
        let out = first + local;
        let class = match pkt.kind {
            Kind::Data => Class::Data(pkt.prio.min(PRIORITIES as u8 - 1)),
            Kind::Ack | Kind::Nack if self.cfg.switch.acks_with_data => {
                Class::Data(pkt.prio.min(PRIORITIES as u8 - 1))
            }
            _ => Class::Control,
        };
        let size = pkt.size as u64;
        if class != Class::Control {
            self.account_queue(out);
        }
        let core = &mut self.nodes[node as usize].core;
        match core.handle_frame(now, in_port as usize, local as usize, class, pkt) {
            Handled::Queued if class != Class::Control => {
                let p = &mut self.ports[out as usize];
                p.qtotal += size;
                p.stats.q_max = p.stats.q_max.max(p.qtotal);
            }
            Handled::Queued => {}
            Handled::Dropped(..) => self.ports[out as usize].stats.drops += 1,
        }
        self.core_events(node, in_port);
        self.kick(out);
    }

    fn send_ctrl(&mut self, h: u32, pkt: Pkt) {
        self.send_control(self.hosts[h as usize].port, pkt);
    }

    fn host_receive(&mut self, h: u32, pkt: Pkt) {
        let now = self.now;
        let fi = pkt.flow;
        match pkt.kind {
            Kind::Data => self.receive_data(h, pkt),
            Kind::Ack | Kind::Nack => {
                let f = &mut self.flows[fi as usize];
                if f.done {
                    return;
                }
                if pkt.seq > f.snd_una {
                    f.snd_una = pkt.seq;
                    f.last_progress = now;
                }
                if pkt.kind == Kind::Nack && pkt.seq < self.snd_nxt(fi) {
                    let f = &mut self.flows[fi as usize];
                    f.retransmits += 1;
                    let to = pkt.seq.max(f.snd_una);
                    self.rewind(fi, to);
                }
                let ack_driven = self.cc.kind.ack_driven();
                if pkt.kind == Kind::Ack && pkt.aux & 1 != 0 && !ack_driven {
                    self.feedback(h, fi, Feedback::Cnp);
                }
                let f = &self.flows[fi as usize];
                if f.snd_una >= f.spec.bytes {
                    self.complete(fi);
                } else if ack_driven || self.window > 0 {
                    self.ack_feedback(h, &pkt, ack_driven);
                } else if pkt.kind == Kind::Nack {
                    let port = self.hosts[h as usize].port;
                    self.kick(port);
                }
            }
            Kind::Cnp => {
                let fb = if pkt.aux & 1 != 0 {
                    Feedback::Ue
                } else {
                    Feedback::Cnp
                };
                self.feedback(h, fi, fb);
            }
            Kind::Cnm => self.feedback(h, fi, Feedback::Cnm(pkt.aux as u8)),
            Kind::Pause => {}
        }
    }

    /// An ACK or NACK of flow `pkt.flow` at its sender `h` under an ACK-driven control or a
    /// window (`RdmaHw::ReceiveAck` after `Acknowledge` and a NACK's `RecoverQueue`): the
    /// reaction point reads it, and the window it may have opened lets the flow send again
    /// (`TriggerTransmit`).
    fn ack_feedback(&mut self, h: u32, pkt: &Pkt, ack_driven: bool) {
        let now = self.now;
        let fi = pkt.flow;
        let mtu = u64::from(self.cfg.host.mtu);
        let snd_una = self.flows[fi as usize].snd_una;
        if ack_driven {
            self.ack_reaction(h, pkt);
        }
        if let Some(r) = self.echoes.get_mut(fi as usize) {
            r.release_before(snd_una / mtu);
        }
        let handle = self.flows[fi as usize].handle;
        let core = &mut self.hosts[h as usize].core;
        if let Some(src) = core.source_mut(handle) {
            src.snd_una = snd_una;
        }
        core.wake(now, handle);
        self.arm_wake(h);
        let port = self.hosts[h as usize].port;
        self.kick(port);
    }

    /// The reaction point of an ACK-driven control reads an ACK with what its data packet
    /// collected.
    fn ack_reaction(&mut self, h: u32, pkt: &Pkt) {
        let fi = pkt.flow;
        let mtu = u64::from(self.cfg.host.mtu);
        let echoed = match pkt.kind {
            Kind::Nack => pkt.seq / mtu + u64::from(pkt.aux >> 1),
            _ => pkt.seq.saturating_sub(1) / mtu,
        };
        let e = self
            .echoes
            .get(fi as usize)
            .and_then(|r| r.get(echoed))
            .copied()
            .unwrap_or_default();
        let echo = match self.cfg.host.int {
            IntMode::Hops { .. } => Echo::Int(e.hops),
            IntMode::Ts => Echo::Sent(e.sent),
            IntMode::Pint { .. } => Echo::Pint {
                power: e.power,
                coin: self.pint_rng.next_u32() % 65536,
            },
            IntMode::None => Echo::None,
        };
        let ack = Ack {
            seq: pkt.seq,
            snd_nxt: self.snd_nxt(fi),
            ecn: pkt.aux & 1 != 0,
            echo,
        };
        let handle = self.flows[fi as usize].handle;
        let before = self.hosts[h as usize].core.rate(handle);
        self.react(h, fi, Feedback::Ack(ack));
        if matches!(self.cc.kind, CcKind::Hpcc | CcKind::Pint) {
            // HPCC's and PINT's updates go through `ChangeRate`, which moves the release.
            let now = self.now;
            let len = self.cfg.host.mtu + self.cfg.host.header_bytes;
            let core = &mut self.hosts[h as usize].core;
            let after = core.rate(handle);
            core.move_release(now, handle, before, after, len);
        }
    }

    /// A congestion notification for flow `fi` reached its sender `h`.
    fn feedback(&mut self, h: u32, fi: u32, fb: Feedback) {
        self.react(h, fi, fb);
        self.arm_wake(h);
    }

    /// [`Self::feedback`] without the wake-up: an ACK's caller arms it once the release has
    /// moved (ns-3 schedules the NIC's next send after `ChangeRate`, in `TriggerTransmit`).
    fn react(&mut self, h: u32, fi: u32, fb: Feedback) {
        let now = self.now;
        let f = &mut self.flows[fi as usize];
        if f.done {
            return;
        }
        f.notifications_received += 1;
        // Feedback the host's congestion control does not use (a CNM at a DCQCN host) or that
        // its reaction point refuses changes nothing; the simulator counts it as received.
        let _ = self.hosts[h as usize]
            .core
            .handle_feedback(now, f.handle, fb);
        self.arm_host(h);
    }

    fn receive_data(&mut self, h: u32, pkt: Pkt) {
        let now = self.now;
        let fi = pkt.flow;
        let cfg = &self.cfg.host;
        let f = &mut self.flows[fi as usize];
        debug_assert_eq!(f.dst_h, h);
        match pkt.ecn {
            Ecn::Ce => f.ce_received += 1,
            Ecn::Ect0 => f.ue_received += 1,
            _ => {}
        }
        let decision = self.hosts[h as usize]
            .core
            .handle_data(now, FlowId(fi), pkt.ecn);
        let notify = decision == Some(Feedback::Cnp);
        if decision.is_some() {
            f.notifications_sent += 1;
        }
        let mut reply: Option<Pkt> = None;
        let ctrl = |kind, seq, aux| Pkt {
            flow: fi,
            seq,
            size: cfg.ctrl_bytes,
            kind,
            prio: pkt.prio,
            ecn: Ecn::NotEct,
            in_port: 0,
            aux,
            hop: 0,
        };
        if pkt.seq == f.rcv_nxt {
            // Every data packet carries one header ([`SimSource`]).
            let payload = u64::from(pkt.size.saturating_sub(cfg.header_bytes));
            f.rcv_nxt += payload;
            if now >= self.cfg.stats_from {
                f.window_bytes += payload;
                f.first_window_delivery.get_or_insert(now);
            }
            f.last_delivery = now;
            f.sample_bytes += payload;
            f.since_ack += 1;
            let last = f.rcv_nxt >= f.spec.bytes;
            if cfg.ack_every > 0 && (f.since_ack >= cfg.ack_every || last || notify) {
                f.since_ack = 0;
                reply = Some(ctrl(Kind::Ack, f.rcv_nxt, notify as u16));
            }
        } else if pkt.seq > f.rcv_nxt && cfg.ack_every > 0 {
            if now >= f.nack_at || f.nack_seq != f.rcv_nxt {
                f.nack_at = now + cfg.nack_interval;
                f.nack_seq = f.rcv_nxt;
                // With INT, the packet that showed the gap, for its echo (`EchoRing`).
                let gap = if cfg.int == IntMode::None {
                    0
                } else {
                    let mtu = u64::from(cfg.mtu);
                    (pkt.seq / mtu - f.rcv_nxt / mtu).min(0x7fff) as u16
                };
                reply = Some(ctrl(Kind::Nack, f.rcv_nxt, gap << 1));
            }
        } else if cfg.ack_every > 0 {
            reply = Some(ctrl(Kind::Ack, f.rcv_nxt, notify as u16));
        }
        let flagged = matches!(
            reply,
            Some(Pkt {
                kind: Kind::Ack,
                aux: 1,
                ..
            })
        );
        let separate = match decision {
            Some(Feedback::Cnp) if !flagged => Some(ctrl(Kind::Cnp, 0, 0)),
            // TCD: "undetermined encountered" goes back as a CNP with the UE flag.
            Some(Feedback::Ue) => Some(ctrl(Kind::Cnp, 0, 1)),
            _ => None,
        };
        if let Some(c) = separate {
            self.send_ctrl(h, c);
        }
        if let Some(r) = reply {
            self.send_ctrl(h, r);
        }
        let f = &self.flows[fi as usize];
        if self.cfg.host.ack_every == 0 && f.rcv_nxt >= f.spec.bytes {
            self.complete(fi);
        }
    }

    fn complete(&mut self, fi: u32) {
        let f = &mut self.flows[fi as usize];
        if f.done {
            return;
        }
        f.done = true;
        f.finish = self.now;
        self.remaining -= 1;
        self.hosts[f.src_h as usize].core.remove_flow(f.handle);
    }

    fn sample(&mut self) {
        let now = self.now;
        let period = self.cfg.sample;
        for (i, f) in self.flows.iter_mut().enumerate() {
            if !f.started || (f.done && f.sample_bytes == 0) {
                continue;
            }
            let goodput = Rate::from_bps_f64(f.sample_bytes as f64 * 8.0 / period.as_secs_f64());
            f.sample_bytes = 0;
            let rate = if f.done {
                Rate::ZERO
            } else {
                self.hosts[f.src_h as usize].core.rate(f.handle)
            };
            self.series.row(
                Which::Flows,
                format_args!(
                    "{},{},{},{}",
                    now.as_nanos(),
                    i,
                    rate.as_bps(),
                    goodput.as_bps()
                ),
            );
        }
        let in_window = now >= self.cfg.stats_from;
        for (i, p) in self.ports.iter().enumerate() {
            let node = &self.nodes[p.node as usize];
            if node.host == NONE && (p.stats.tx_pkts > 0 || p.qtotal > 0) {
                let local = i as u32 - node.first_port;
                self.series.row(
                    Which::Queues,
                    format_args!("{},{},{},{}", now.as_nanos(), p.node, local, p.qtotal),
                );
                if in_window {
                    self.queue_dist[i].add(p.qtotal);
                }
            }
        }
        let more = self.remaining > 0 || self.cfg.stop.is_some();
        if more {
            self.events.push(now + period, Ev::Sample);
        }
    }

    /// (node, node-local port index, peer node) of a global port id.
    pub fn port_name(&self, port: u32) -> (u32, u32, u32) {
        let p = &self.ports[port as usize];
        let local = port - self.nodes[p.node as usize].first_port;
        (p.node, local, self.ports[p.peer as usize].node)
    }

    /// The global id of `node`'s port `local`.
    pub fn port_id(&self, node: u32, local: u32) -> Option<u32> {
        let n = self.nodes.get(node as usize)?;
        (local < n.nports).then_some(n.first_port + local)
    }

    /// From now on `flows.csv` and `queues.csv` are written into `dir` as the run samples them
    /// (see [`super::series`]).
    pub fn stream_series_to(&mut self, dir: &std::path::Path) -> std::io::Result<()> {
        self.series.stream_to(dir)
    }

    /// The time series as recorded so far ([`Series::for_each_row`] reads them back).
    pub fn series(&self) -> &Series {
        &self.series
    }

    /// The first error writing the time series, if any (flushes what is buffered).
    pub fn series_result(&mut self) -> std::io::Result<()> {
        self.series.flush()
    }

    /// The queue lengths port `port` was sampled at within the statistics window.
    pub fn queue_dist(&self, port: u32) -> &QueueDist {
        &self.queue_dist[port as usize]
    }

    /// Every flow sample, read back: all of them in memory (tests, short runs).
    pub fn flow_samples(&self) -> std::io::Result<Vec<FlowSample>> {
        let mut out = Vec::new();
        let mut bad = None;
        self.series.for_each_row(Which::Flows, |f| {
            let row = (|| {
                Some(FlowSample {
                    t: Instant::from_nanos(f.first()?.parse().ok()?),
                    flow: f.get(1)?.parse().ok()?,
                    rate: Rate::from_bps(f.get(2)?.parse().ok()?),
                    goodput: Rate::from_bps(f.get(3)?.parse().ok()?),
                })
            })();
            match row {
                Some(r) => out.push(r),
                None => bad = Some(f.join(",")),
            }
        })?;
        match bad {
            None => Ok(out),
            Some(row) => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("flows.csv: unreadable row `{row}`"),
            )),
        }
    }

    pub fn port_is_switch(&self, port: u32) -> bool {
        self.nodes[self.ports[port as usize].node as usize].host == NONE
    }

    pub fn port_stats(&self, port: u32) -> PortStats {
        let p = &self.ports[port as usize];
        let mut s = p.stats.clone();
        if let Some(q) = self.nodes[p.node as usize].core.queue(p.local as usize) {
            let c = q.hook().counters();
            s.marks = c.marks;
            s.cnms = c.cnms;
        }
        s
    }

    /// ns-3's `QLEN_MON_FILE` text, if the run kept the monitor.
    pub fn qlen_text(&self) -> Option<&str> {
        self.qlen.as_ref().map(QlenMonitor::text)
    }

    /// ns-3's `PFC_OUTPUT_FILE` text, if the run kept the log:
    /// `time node node_type ifindex type` (type 1 pause, 0 resume; node type 0 host, 1 switch).
    pub fn pfc_text(&self) -> Option<String> {
        use std::fmt::Write as _;
        let log = self.pfc_log.as_ref()?;
        let mut s = String::new();
        for r in log {
            let (node, local, _) = self.port_name(r.port);
            let _ = writeln!(
                s,
                "{} {} {} {} {}",
                r.t.as_nanos(),
                node,
                u8::from(self.port_is_switch(r.port)),
                local + 1,
                u8::from(r.pause)
            );
        }
        Some(s)
    }

    pub fn port_count(&self) -> u32 {
        self.ports.len() as u32
    }

    pub fn port_rate(&self, port: u32) -> Rate {
        self.ports[port as usize].rate
    }

    pub fn host_node(&self, h: u32) -> u32 {
        self.hosts[h as usize].node
    }

    pub fn config(&self) -> &RunConfig {
        &self.cfg
    }

    pub fn cc(&self) -> super::CcKind {
        self.cc.kind
    }
}

#[cfg(test)]
#[path = "equivalence_tests.rs"]
mod equivalence_tests;

#[cfg(test)]
#[path = "host_equivalence_tests.rs"]
mod host_equivalence_tests;
