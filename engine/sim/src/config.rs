//! The simulator's validated run configuration (what the scenario file and CLI produce).
//!
//! Defaults are defined once, here, and follow the HPCC ns-3 simulator where it has a value
//! (../shared/reference/dcqcn.md): 1000-octet payloads, a 32 MB shared switch buffer, one ACK per
//! data packet, control frames in a strict-priority queue.

pub use units::TxTime;
use units::{Duration, Instant, Rate};

/// End-host (NIC) behaviour.
#[derive(Clone, Debug, PartialEq)]
pub struct HostConfig {
    /// Payload octets per data packet (ns-3 `PACKET_PAYLOAD_SIZE`).
    pub mtu: u32,
    /// Header octets added to each data packet: 14 Ethernet + 20 IPv4 + 14 UDP/sequence, the
    /// ns-3 `CustomHeader::GetStaticWholeHeaderSize()` without INT.
    pub header_bytes: u32,
    /// Octets of an ACK, NACK, CNP or CNM frame on the wire (an ns-3 config.txt sets ns-3's:
    /// `sim::ns3::NS3_ACK_BYTES`).
    pub ctrl_bytes: u32,
    /// One ACK per this many data packets; 0 = no ACKs (a flow then completes when its last
    /// octet reaches the receiver).
    pub ack_every: u32,
    /// The PFC priority whose pause also holds the NIC's control frames (ACKs, NACKs, CNPs),
    /// which otherwise leave ahead of data whatever is paused: ns-3's `ACK_HIGH_PRIO 0` puts
    /// them in queue 3 (`sim::ns3::NS3_ACK_QUEUE_PRIO`). `None`: never held.
    pub ack_pause_prio: Option<u8>,
    /// Minimum spacing of NACKs for the same gap (ns-3 `NACK_INTERVAL`, 500 us).
    pub nack_interval: Duration,
    /// Retransmission timeout: with no ACK progress for this long, go back to the first
    /// unacknowledged octet (covers tail loss, which a NACK cannot report).
    pub rto: Duration,
    /// How the NIC spaces a flow's frames: exactly (quench's own), or as ns-3 HPCC's `RdmaHw`
    /// does, whole nanoseconds (`rp::Spacing::Ns3`, set with the rest of ns-3's arithmetic by
    /// `sim::ns3::Ns3Config::apply`). Either way a rate change applies from the next frame on.
    pub spacing: rp::Spacing,
    /// What data packets collect on their way and ACKs echo (ns-3's `IntHeader::Mode`, by
    /// `CC_MODE`); [`IntMode::None`] for DCQCN and QCN.
    pub int: IntMode,
    /// Each flow's window (ns-3 `HAS_WIN 1`): `Some(var)` bounds the bytes in flight by one BDP
    /// of the network (third.cc's `maxBdp`, `GLOBAL_T 1`), scaled by the flow's rate when `var`
    /// (`VAR_WIN 1`); `None`: rate only.
    pub window: Option<bool>,
}

/// In-band telemetry, as ns-3's `IntHeader::Mode` for each `CC_MODE` (third.cc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IntMode {
    /// `NONE`: nothing (DCQCN, DCTCP, QCN).
    None,
    /// `NORMAL` (HPCC): every switch egress pushes an INT hop; `multi` is `INT_MULTI`.
    Hops { multi: u32 },
    /// `TS` (TIMELY): the sender's transmit time.
    Ts,
    /// `PINT` (HPCC-PINT): each switch egress keeps the largest utilisation code.
    Pint { code: rp::Pint },
}

impl IntMode {
    /// Octets the header adds to a data packet and to an ACK's `qbbHeader`
    /// (`IntHeader::GetStaticSize`).
    pub fn bytes(self) -> u32 {
        match self {
            IntMode::None => 0,
            IntMode::Hops { .. } => rp::int::INT_HOPS_BYTES,
            IntMode::Ts => 8,
            IntMode::Pint { code } => code.bytes,
        }
    }
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            mtu: 1000,
            header_bytes: 48,
            ctrl_bytes: 64,
            ack_every: 1,
            ack_pause_prio: None,
            nack_interval: Duration::from_micros(500),
            rto: Duration::from_millis(4),
            spacing: rp::Spacing::Exact,
            int: IntMode::None,
            window: None,
        }
    }
}

/// Switch buffer and queue behaviour.
#[derive(Clone, Debug, PartialEq)]
pub struct SwitchConfig {
    /// Shared packet buffer per switch (ns-3 `BUFFER_SIZE` 32 MB).
    pub buffer_bytes: u64,
    /// Optional tail-drop limit per egress (port, priority) queue: the IEEE 802.1Qau simulations
    /// use a per-port buffer of a few hundred KB.
    pub queue_limit_bytes: Option<u64>,
    /// Octets of a PFC frame on the wire (a minimum Ethernet frame; ns-3's are 43).
    pub pfc_frame_bytes: u32,
    /// Switches queue ACKs and NACKs in their flow's data priority, behind its data (and
    /// PFC-accounted, RED-counted like it), instead of the strict-priority control class.
    /// HPCC's ns-3 switches do: `SwitchNode::m_ackHighPrio` defaults to 0 and third.cc never
    /// sets it (its `ACK_HIGH_PRIO` only moves the NIC's ACK queue), so `SendToDev` takes
    /// "qIndex = ... ch.udp.pg", which for an ACK is its `ack.pg`, the data's priority.
    pub acks_with_data: bool,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            buffer_bytes: 32 * 1024 * 1024,
            queue_limit_bytes: None,
            pfc_frame_bytes: 64,
            acks_with_data: false,
        }
    }
}

/// A change of one link direction's rate at a point in time.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkChange {
    pub at: Instant,
    pub from: u32,
    pub to: u32,
    pub rate: Rate,
}

/// Everything a run needs besides topology, flows and the congestion-control choice.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    pub seed: u64,
    /// Stop at this time even if flows are unfinished. An upper bound: a run ends when its
    /// last flow completes (as ns-3's `SIMULATOR_STOP_TIME` is one; nothing happens after).
    pub stop: Option<Instant>,
    /// Time-series sampling period.
    pub sample: Duration,
    /// Statistics (throughput, Jain, queue mean/p99) cover [stats_from, end].
    pub stats_from: Instant,
    pub host: HostConfig,
    pub switch: SwitchConfig,
    pub link_changes: Vec<LinkChange>,
    /// ns-3's queue-length monitor (`QLEN_MON_FILE`), if wanted.
    pub qlen_window: Option<super::monitor::QlenWindow>,
    /// Keep ns-3's PFC log (`PFC_OUTPUT_FILE`): one record per PFC frame received.
    pub pfc_log: bool,
    /// Serialisation time of a frame on a link.
    pub tx_time: TxTime,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            seed: 1,
            stop: None,
            sample: Duration::from_micros(10),
            stats_from: Instant::ZERO,
            host: HostConfig::default(),
            switch: SwitchConfig::default(),
            link_changes: Vec::new(),
            qlen_window: None,
            pfc_log: false,
            tx_time: TxTime::Ceil,
        }
    }
}
