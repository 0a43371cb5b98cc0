//! The simulated network: nodes, ports, links, hosts, flows, and the event loop that drives them.
//!
//! Invariants:
//! - Every packet is forwarded, delivered or dropped (and counted) exactly once per hop.
//! - A port transmits one packet at a time: `busy` is set from the start of a transmission to its
//!   `TxDone`; the packet reaches the peer port one propagation delay after its last bit left.
//! - Timers of the algorithm state machines are deadlines: the world keeps, per component, the
//!   deadline it has an event queued for, and ignores events whose time no longer matches (lazy
//!   cancellation), so a spurious or stale timer never reaches an algorithm.
//! - Nothing here reads a clock or a global random source: the run is a function of the inputs
//!   and the seed.

use std::collections::VecDeque;

use units::{Duration, Instant, Rate, PRIORITIES};

use super::cc::{CcKind, PortCp, Receiver, Sender};
use super::config::RunConfig;
use super::event::EventQueue;
use super::packet::{ecn, Kind, Pkt};
use super::rng::{self, SimRng, Stream};
use super::topology::{ecmp_pick, Routes, Topology};
use super::traffic::FlowSpec;

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// `pkt` has fully arrived at `port` (the receiving end of a link).
    Arrive {
        port: u32,
        pkt: Pkt,
    },
    /// `port` finished serialising its packet.
    TxDone {
        port: u32,
    },
    /// A host's earliest pacer release time.
    HostWake {
        host: u32,
    },
    FlowStart {
        flow: u32,
    },
    /// A flow's reaction-point deadline.
    SenderTimer {
        flow: u32,
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
}

struct Node {
    first_port: u32,
    nports: u32,
    /// Host index, or `NONE` for a switch.
    host: u32,
    /// Switch: octets of data packets buffered.
    used: u64,
}

/// Counters and queue statistics of one port.
#[derive(Clone, Debug, Default)]
pub struct PortStats {
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
    /// Integral of queued octets over time within the statistics window (octet-nanoseconds).
    pub q_integral: u128,
    pub q_max: u64,
}

struct Port {
    node: u32,
    /// Global id of the port at the other end of the link.
    peer: u32,
    rate: Rate,
    delay: Duration,
    err: f64,
    busy: bool,
    /// Strict-priority control queue (PFC frames, ACKs, CNPs, CNMs).
    ctrl: VecDeque<Pkt>,
    /// Egress data queues per priority (switch ports).
    q: [VecDeque<Pkt>; PRIORITIES],
    qbytes: [u64; PRIORITIES],
    qtotal: u64,
    /// Egress paused for a priority by the peer's PFC.
    paused: [bool; PRIORITIES],
    rr: usize,
    cp: Vec<PortCp>,
    rng: SimRng,
    q_last: Instant,
    stats: PortStats,
}

struct Host {
    node: u32,
    port: u32,
    /// Flows with data to send or acknowledgements outstanding.
    flows: Vec<u32>,
    rr: usize,
    wake_at: Instant,
}

/// Per-flow state and results.
pub struct Flow {
    pub spec: FlowSpec,
    pub sport: u16,
    pub src_h: u32,
    pub dst_h: u32,
    hash: u64,
    snd_nxt: u64,
    snd_una: u64,
    next_avail: Instant,
    sender: Sender,
    timer_at: Instant,
    last_progress: Instant,
    started: bool,
    pub done: bool,
    pub finish: Instant,
    pub ideal_fct: Duration,
    // Receiver side.
    rcv_nxt: u64,
    since_ack: u32,
    nack_at: Instant,
    nack_seq: u64,
    receiver: Receiver,
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

/// One time-series row for a switch port.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueSample {
    pub t: Instant,
    pub port: u32,
    pub bytes: u64,
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
    events: EventQueue<Ev>,
    cfg: RunConfig,
    cc: CcKind,
    nodes: Vec<Node>,
    ports: Vec<Port>,
    hosts: Vec<Host>,
    routes: Routes,
    pub flows: Vec<Flow>,
    link_rngs: Vec<SimRng>,
    remaining: usize,
    pub flow_samples: Vec<FlowSample>,
    pub queue_samples: Vec<QueueSample>,
}

/// Errors building a world from inputs that do not fit together.
#[derive(Debug, thiserror::Error, PartialEq)]
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
}

/// ns-3's `node_id_to_ip`: 11.x.y.1 with x.y the node id.
pub fn node_ip(id: u32) -> u32 {
    0x0b00_0001 + (id / 256) * 0x0001_0000 + (id % 256) * 0x0000_0100
}

impl World {
    pub fn new(
        topo: &Topology,
        flows: &[FlowSpec],
        cc: CcKind,
        cfg: RunConfig,
    ) -> Result<World, WorldError> {
        if !(64..=65_000).contains(&cfg.host.mtu) {
            return Err(WorldError::Mtu(cfg.host.mtu));
        }
        if cfg.sample == Duration::ZERO {
            return Err(WorldError::Sample);
        }
        let n = topo.nodes as usize;
        // Ports in link order per node: node-local index = order of appearance.
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
                used: 0,
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
                ports[me as usize] = Some(Port {
                    node,
                    peer,
                    rate: l.rate,
                    delay: l.delay,
                    err: l.err,
                    busy: false,
                    ctrl: VecDeque::new(),
                    q: Default::default(),
                    qbytes: [0; PRIORITIES],
                    qtotal: 0,
                    paused: [false; PRIORITIES],
                    rr: 0,
                    cp: if is_switch {
                        (0..PRIORITIES).map(|_| PortCp::new(cc, l.rate)).collect()
                    } else {
                        Vec::new()
                    },
                    rng: rng::stream(cfg.seed, Stream::Port, me as u64),
                    q_last: Instant::ZERO,
                    stats: PortStats::default(),
                });
            }
        }
        let ports: Vec<Port> = ports.into_iter().flatten().collect();
        let routes = Routes::compute(topo, &peers, &host_nodes);
        let hosts: Vec<Host> = host_nodes
            .iter()
            .map(|&h| Host {
                node: h,
                port: nodes[h as usize].first_port,
                flows: Vec::new(),
                rr: 0,
                wake_at: Instant::MAX,
            })
            .collect();
        let link_rngs = (0..ports.len())
            .map(|i| rng::stream(cfg.seed, Stream::Link, i as u64))
            .collect();
        let mut w = World {
            now: Instant::ZERO,
            events: EventQueue::new(),
            cc,
            nodes,
            ports,
            hosts,
            routes,
            flows: Vec::with_capacity(flows.len()),
            link_rngs,
            remaining: flows.len(),
            flow_samples: Vec::new(),
            queue_samples: Vec::new(),
            cfg,
        };
        let mut next_sport = vec![10_000u32; n];
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
            let sport = next_sport[f.src as usize] as u16;
            next_sport[f.src as usize] += 1;
            let hash = rng::mix64(
                ((node_ip(f.src) as u64) << 32 | node_ip(f.dst) as u64)
                    ^ ((sport as u64) << 16 | f.dport as u64).rotate_left(17),
            );
            let line = w.ports[w.hosts[src_h as usize].port as usize].rate;
            let ideal_fct = w
                .ideal_fct(f, src_h, dst_h, hash)
                .ok_or(WorldError::Unreachable {
                    flow: i,
                    src: f.src,
                    dst: f.dst,
                })?;
            w.flows.push(Flow {
                spec: f.clone(),
                sport,
                src_h,
                dst_h,
                hash,
                snd_nxt: 0,
                snd_una: 0,
                next_avail: Instant::ZERO,
                sender: Sender::new(cc, line),
                timer_at: Instant::MAX,
                last_progress: Instant::ZERO,
                started: false,
                done: false,
                finish: Instant::ZERO,
                ideal_fct,
                rcv_nxt: 0,
                since_ack: 0,
                nack_at: Instant::ZERO,
                nack_seq: u64::MAX,
                receiver: Receiver::new(cc),
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
            w.events.push(f.start, Ev::FlowStart { flow: i as u32 });
        }
        for c in w.cfg.link_changes.clone() {
            let port = w.port_towards(c.from, c.to).ok_or(WorldError::NoSuchLink {
                at_ns: c.at.as_nanos(),
                from: c.from,
                to: c.to,
            })?;
            w.events.push(c.at, Ev::LinkRate { port, rate: c.rate });
        }
        w.events.push(Instant::ZERO, Ev::Sample);
        Ok(w)
    }

    fn port_towards(&self, from: u32, to: u32) -> Option<u32> {
        let node = self.nodes.get(from as usize)?;
        (node.first_port..node.first_port + node.nports)
            .find(|&p| self.ports[self.ports[p as usize].peer as usize].node == to)
    }

    /// The ns-3 scratch program's standalone FCT: `base_rtt + total_bytes * 8 / b`, with
    /// base_rtt = 2 x (sum of one-way delays) + one MTU-payload serialisation per hop, total_bytes
    /// = size plus one header per packet, and b the sender's NIC rate.
    fn ideal_fct(&self, f: &FlowSpec, src_h: u32, dst_h: u32, hash: u64) -> Option<Duration> {
        let mut node = f.src;
        let mut delay = Duration::ZERO;
        let mut txd = Duration::ZERO;
        let mut hops = 0;
        while node != f.dst {
            let n = &self.nodes[node as usize];
            let port = if n.host != NONE {
                if n.host != src_h {
                    return None;
                }
                n.first_port
            } else {
                let nh = self.routes.next_hops(node, dst_h);
                if nh.is_empty() {
                    return None;
                }
                n.first_port + nh[ecmp_pick(hash, node, nh.len())] as u32
            };
            let p = &self.ports[port as usize];
            delay = delay + p.delay;
            txd = txd + p.rate.tx_time(self.cfg.host.mtu as u64);
            node = self.ports[p.peer as usize].node;
            hops += 1;
            if hops > self.nodes.len() {
                return None;
            }
        }
        let b = self.ports[self.hosts[src_h as usize].port as usize].rate;
        let pkts = f.bytes.max(1).div_ceil(self.cfg.host.mtu as u64);
        let total = f.bytes + pkts * self.cfg.host.header_bytes as u64;
        Some(delay.saturating_mul(2) + txd + b.tx_time(total))
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn events_processed(&self) -> u64 {
        self.events.popped()
    }

    /// Runs until every flow completed or the stop time; `progress` is called now and then.
    pub fn run(&mut self, progress: &mut dyn FnMut(Progress)) {
        let stop = self.cfg.stop.unwrap_or(Instant::MAX);
        let mut tick = 0u32;
        while let Some((t, ev)) = self.events.pop() {
            if t > stop {
                self.now = stop;
                break;
            }
            self.now = t;
            self.handle(ev);
            if self.remaining == 0 && self.cfg.stop.is_none() {
                break;
            }
            tick = tick.wrapping_add(1);
            if tick & 0x3_ffff == 0 {
                progress(self.progress());
            }
        }
        // Close the queue integrals at the end time.
        for p in 0..self.ports.len() {
            self.account_queue(p as u32);
        }
        progress(self.progress());
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
                self.ports[port as usize].busy = false;
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
            Ev::SenderTimer { flow } => {
                let f = &mut self.flows[flow as usize];
                if f.done || f.timer_at != self.now {
                    return;
                }
                f.timer_at = Instant::MAX;
                f.sender.on_timeout(self.now);
                self.arm_sender(flow);
                let port = self.hosts[self.flows[flow as usize].src_h as usize].port;
                self.kick(port);
            }
            Ev::Rto { flow } => self.rto(flow),
            Ev::LinkRate { port, rate } => self.ports[port as usize].rate = rate,
            Ev::Sample => self.sample(),
        }
    }

    fn flow_start(&mut self, flow: u32) {
        let now = self.now;
        let f = &mut self.flows[flow as usize];
        f.started = true;
        f.next_avail = now;
        f.last_progress = now;
        let h = f.src_h;
        if f.spec.bytes == 0 {
            f.done = true;
            f.finish = now;
            self.remaining -= 1;
            return;
        }
        self.hosts[h as usize].flows.push(flow);
        self.arm_sender(flow);
        if self.cfg.host.ack_every > 0 {
            self.events.push(now + self.cfg.host.rto, Ev::Rto { flow });
        }
        let port = self.hosts[h as usize].port;
        self.kick(port);
    }

    fn arm_sender(&mut self, flow: u32) {
        let f = &mut self.flows[flow as usize];
        if let Some(d) = f.sender.next_deadline() {
            // A deadline in the past is due now.
            let at = d.max(self.now);
            if at != f.timer_at {
                f.timer_at = at;
                self.events.push(at, Ev::SenderTimer { flow });
            }
        }
    }

    fn rto(&mut self, flow: u32) {
        let now = self.now;
        let rto = self.cfg.host.rto;
        let f = &mut self.flows[flow as usize];
        if f.done {
            return;
        }
        if now - f.last_progress >= rto && f.snd_nxt > f.snd_una {
            f.snd_nxt = f.snd_una;
            f.retransmits += 1;
            f.last_progress = now;
            let port = self.hosts[f.src_h as usize].port;
            self.kick(port);
        }
        let f = &self.flows[flow as usize];
        let next = (f.last_progress + rto).max(now + Duration::from_nanos(1));
        self.events.push(next, Ev::Rto { flow });
    }

    /// Starts a transmission on `port` if it is idle and has something to send.
    fn kick(&mut self, port: u32) {
        if self.ports[port as usize].busy {
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
        let tx = p.rate.tx_time(pkt.size as u64);
        p.busy = true;
        p.stats.tx_bytes += pkt.size as u64;
        p.stats.tx_pkts += 1;
        let done = now + tx;
        self.events.push(done, Ev::TxDone { port });
        let peer = p.peer;
        self.events
            .push(done + p.delay, Ev::Arrive { port: peer, pkt });
    }

    /// The NIC scheduler: control frames first, then round robin over flows whose pacer has
    /// released them and whose priority is not paused.
    fn host_next(&mut self, h: u32) -> Option<Pkt> {
        let now = self.now;
        let port = self.hosts[h as usize].port;
        if let Some(p) = self.ports[port as usize].ctrl.pop_front() {
            return Some(p);
        }
        let n = self.hosts[h as usize].flows.len();
        let mut earliest = Instant::MAX;
        for k in 0..n {
            let idx = (self.hosts[h as usize].rr + 1 + k) % n;
            let fi = self.hosts[h as usize].flows[idx];
            let f = &mut self.flows[fi as usize];
            if f.snd_nxt >= f.spec.bytes || self.ports[port as usize].paused[f.spec.pg as usize] {
                continue;
            }
            if f.next_avail > now {
                earliest = earliest.min(f.next_avail);
                continue;
            }
            self.hosts[h as usize].rr = idx;
            let payload = (f.spec.bytes - f.snd_nxt).min(self.cfg.host.mtu as u64) as u32;
            let size = payload + self.cfg.host.header_bytes;
            let pkt = Pkt {
                flow: fi,
                dst: f.dst_h,
                seq: f.snd_nxt,
                size,
                payload,
                kind: Kind::Data,
                prio: f.spec.pg,
                ecn: ecn::ECT1,
                in_port: 0,
                aux: 0,
            };
            f.snd_nxt += payload as u64;
            f.next_avail = f.sender.on_send(now, size);
            self.arm_sender(fi);
            return Some(pkt);
        }
        let host = &mut self.hosts[h as usize];
        if earliest != Instant::MAX && (host.wake_at <= now || earliest < host.wake_at) {
            host.wake_at = earliest;
            self.events.push(earliest, Ev::HostWake { host: h });
        }
        None
    }

    fn switch_next(&mut self, port: u32) -> Option<Pkt> {
        let now = self.now;
        let p = &mut self.ports[port as usize];
        if let Some(pkt) = p.ctrl.pop_front() {
            return Some(pkt);
        }
        for k in 0..PRIORITIES {
            let prio = (p.rr + 1 + k) % PRIORITIES;
            if p.paused[prio] || p.q[prio].is_empty() {
                continue;
            }
            p.rr = prio;
            self.account_queue(port);
            let p = &mut self.ports[port as usize];
            let mut pkt = p.q[prio].pop_front()?;
            p.qbytes[prio] -= pkt.size as u64;
            p.qtotal -= pkt.size as u64;
            let qlen = p.qbytes[prio];
            let act = p.cp[prio].on_dequeue(now, qlen, &pkt, &mut p.rng);
            if let Some(e) = act.ecn {
                if e != pkt.ecn {
                    pkt.ecn = e;
                    p.stats.marks += 1;
                }
            }
            let node = p.node;
            self.nodes[node as usize].used -= pkt.size as u64;
            return Some(pkt);
        }
        None
    }

    /// Adds the queue's occupancy since the last change to its integral.
    fn account_queue(&mut self, port: u32) {
        let from = self.cfg.stats_from;
        let now = self.now;
        let p = &mut self.ports[port as usize];
        let start = p.q_last.max(from);
        if now > start {
            p.stats.q_integral += p.qtotal as u128 * (now - start).as_nanos() as u128;
        }
        p.q_last = now;
    }

    fn arrive(&mut self, port: u32, pkt: Pkt) {
        let p = &self.ports[port as usize];
        if p.err > 0.0 && pkt.kind != Kind::Pause {
            let err = p.err;
            if rng::unit(&mut self.link_rngs[port as usize]) < err {
                self.ports[port as usize].stats.drops += 1;
                return;
            }
        }
        if pkt.kind == Kind::Pause {
            let p = &mut self.ports[port as usize];
            let prio = pkt.prio as usize % PRIORITIES;
            let pause = pkt.aux != 0;
            p.paused[prio] = pause;
            if pause {
                p.stats.pauses_received += 1;
            } else {
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
        let hops = self.routes.next_hops(node, pkt.dst);
        if hops.is_empty() {
            let first = self.nodes[node as usize].first_port;
            self.ports[(first + in_port) as usize].stats.drops += 1;
            return;
        }
        let hash = self.flows[pkt.flow as usize].hash;
        let out =
            self.nodes[node as usize].first_port + hops[ecmp_pick(hash, node, hops.len())] as u32;
        if pkt.kind != Kind::Data {
            self.ports[out as usize].ctrl.push_back(pkt);
            self.kick(out);
            return;
        }
        let prio = pkt.prio as usize % PRIORITIES;
        let size = pkt.size as u64;
        let over_buffer = self.nodes[node as usize].used + size > self.cfg.switch.buffer_bytes;
        let p = &mut self.ports[out as usize];
        let over_queue = self
            .cfg
            .switch
            .queue_limit_bytes
            .is_some_and(|l| p.qbytes[prio] + size > l);
        if over_buffer || over_queue {
            p.stats.drops += 1;
            return;
        }
        pkt.in_port = in_port as u16;
        let qlen = p.qbytes[prio];
        let act = p.cp[prio].on_enqueue(now, qlen, &pkt, &mut p.rng);
        if let Some(e) = act.ecn {
            if e != pkt.ecn {
                pkt.ecn = e;
                p.stats.marks += 1;
            }
        }
        self.account_queue(out);
        let p = &mut self.ports[out as usize];
        p.q[prio].push_back(pkt);
        p.qbytes[prio] += size;
        p.qtotal += size;
        p.stats.q_max = p.stats.q_max.max(p.qtotal);
        self.nodes[node as usize].used += size;
        if let Some(fb) = act.cnm {
            self.ports[out as usize].stats.cnms += 1;
            let f = &self.flows[pkt.flow as usize];
            let cnm = Pkt {
                flow: pkt.flow,
                dst: f.src_h,
                seq: 0,
                size: self.cfg.host.ctrl_bytes,
                payload: 0,
                kind: Kind::Cnm,
                prio: pkt.prio,
                ecn: ecn::NOT_ECT,
                in_port: 0,
                aux: fb,
            };
            // The CNM leaves this switch towards the sampled frame's source.
            self.switch_receive(node, in_port, cnm);
        }
        self.kick(out);
    }

    fn send_ctrl(&mut self, h: u32, pkt: Pkt) {
        let port = self.hosts[h as usize].port;
        self.ports[port as usize].ctrl.push_back(pkt);
        self.kick(port);
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
                if pkt.kind == Kind::Nack && pkt.seq < f.snd_nxt {
                    f.snd_nxt = pkt.seq.max(f.snd_una);
                    f.retransmits += 1;
                }
                if pkt.kind == Kind::Ack && pkt.aux & 1 != 0 {
                    f.notifications_received += 1;
                    f.sender.on_feedback(now, &pkt);
                    self.arm_sender(fi);
                }
                let f = &self.flows[fi as usize];
                if f.snd_una >= f.spec.bytes {
                    self.complete(fi);
                } else if pkt.kind == Kind::Nack {
                    let port = self.hosts[h as usize].port;
                    self.kick(port);
                }
            }
            Kind::Cnp | Kind::Cnm => {
                let f = &mut self.flows[fi as usize];
                if f.done {
                    return;
                }
                f.notifications_received += 1;
                f.sender.on_feedback(now, &pkt);
                self.arm_sender(fi);
            }
            Kind::Pause => {}
        }
    }

    fn receive_data(&mut self, h: u32, pkt: Pkt) {
        let now = self.now;
        let fi = pkt.flow;
        let cfg = &self.cfg.host;
        let f = &mut self.flows[fi as usize];
        debug_assert_eq!(f.dst_h, h);
        match pkt.ecn {
            ecn::CE => f.ce_received += 1,
            ecn::ECT0 => f.ue_received += 1,
            _ => {}
        }
        let notify = f.receiver.on_data(now, pkt.ecn);
        if notify {
            f.notifications_sent += 1;
        }
        let mut reply: Option<Pkt> = None;
        let ctrl = |kind, seq, aux| Pkt {
            flow: fi,
            dst: f.src_h,
            seq,
            size: cfg.ctrl_bytes,
            payload: 0,
            kind,
            prio: pkt.prio,
            ecn: ecn::NOT_ECT,
            in_port: 0,
            aux,
        };
        if pkt.seq == f.rcv_nxt {
            f.rcv_nxt += pkt.payload as u64;
            if now >= self.cfg.stats_from {
                f.window_bytes += pkt.payload as u64;
                f.first_window_delivery.get_or_insert(now);
            }
            f.last_delivery = now;
            f.sample_bytes += pkt.payload as u64;
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
                reply = Some(ctrl(Kind::Nack, f.rcv_nxt, 0));
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
        if notify && !flagged {
            let cnp = ctrl(Kind::Cnp, 0, 0);
            self.send_ctrl(h, cnp);
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
        let h = &mut self.hosts[f.src_h as usize];
        if let Some(pos) = h.flows.iter().position(|&x| x == fi) {
            h.flows.remove(pos);
            if h.rr >= pos && h.rr > 0 {
                h.rr -= 1;
            }
        }
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
            self.flow_samples.push(FlowSample {
                t: now,
                flow: i as u32,
                rate: if f.done { Rate::ZERO } else { f.sender.rate() },
                goodput,
            });
        }
        for (i, p) in self.ports.iter().enumerate() {
            if self.nodes[p.node as usize].host == NONE && (p.stats.tx_pkts > 0 || p.qtotal > 0) {
                self.queue_samples.push(QueueSample {
                    t: now,
                    port: i as u32,
                    bytes: p.qtotal,
                });
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

    pub fn port_is_switch(&self, port: u32) -> bool {
        self.nodes[self.ports[port as usize].node as usize].host == NONE
    }

    pub fn port_stats(&self, port: u32) -> &PortStats {
        &self.ports[port as usize].stats
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

    pub fn cc(&self) -> CcKind {
        self.cc
    }
}
