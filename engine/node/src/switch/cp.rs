//! The congestion points of `quench switch` as configured: the `[[congestion]]` entries of
//! `configs/switch.toml`, validated into the profiles of the switch core's [`PortCp`] (which
//! runs QCN, RED/ECN and TCD on an egress port's queues; see [`super::core`]).
//!
//! - **QCN**: a CNM (EtherType 0x22E7) to the sampled frame's source for each feedback
//!   ([`cnm_frame`]), with CPID = CP MAC + priority.
//! - **RED/ECN (DCQCN)**: [`cp::red::RedProfile`] on the class's octets, at dequeue (ns-3 HPCC)
//!   or enqueue as configured; a CE mark rewrites the IPv4 ECN field in place
//!   (`wire::ipv4::set_ecn`, RFC 1624).
//! - **TCD**: a [`cp::tcd::TcdPort`] per watched priority, told of the PFC pauses and resumes
//!   of that egress priority.
use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Deserialize;

use cp::qcn::{QcnCpParams, QcnCpProfile};
use cp::red::{RedParams, RedProfile};
use cp::tcd::{TcdParams, TcdProfile};
use units::keys::{key, Key, KeyDefault, Range, Type};
use units::{Rate, PRIORITIES};

pub use super::core::CpCounters;
use super::core::{CnmSource, CpProfiles, IntStamp, PortCp};
use cp::qcn::QcnFeedback;
use quench_wire::cnm::{self, CnmRepr};
use quench_wire::ethernet::L2Repr;
use quench_wire::frame::{cnm_l2, emit_cnm};
use quench_wire::MacAddr;

/// The congestion points of a port of `quench switch`: their CNMs are wire frames.
pub type CpHook = PortCp<Vec<u8>>;

/// Octets of the sampled frame a CNM carries (protocols.md: "Encapsulated MSDU ... 0-64").
const CNM_MSDU_OCTETS: usize = cnm::MAX_MSDU_LEN;
/// Where the encapsulated MSDU starts in the sampled frame: after DA and SA. (U: protocols.md
/// does not say where the MSDU starts; quench starts after DA and SA, so the tags and the
/// EtherType are included.)
const MSDU_OFFSET: usize = 12;

/// The CNM (EtherType 0x22E7) answering `sampled` (data priority `prio`): to the sampled frame's
/// source MAC, copying its VLAN tag and CN-TAG (the flow id the RP looks up), with CPID = CP MAC
/// plus priority, QntzFb, QOffset, QDelta, the sampled frame's priority and DA, and its first
/// 64 octets after the MAC addresses as the encapsulated MSDU. The sampled frame's L2 header is
/// read here, once per CNM (one frame in a sampling interval), to be copied into the reply.
pub fn cnm_frame(sampled: &[u8], src: &CnmSource, prio: u8, fb: &QcnFeedback) -> Option<Vec<u8>> {
    let (l2, _) = L2Repr::parse(sampled).ok()?;
    let msdu_end = sampled.len().min(MSDU_OFFSET + CNM_MSDU_OCTETS);
    let repr = CnmRepr {
        version: cnm::VERSION,
        reserved_v: 0,
        qntz_fb: fb.qntz_fb,
        cpid: cnm::cpid(src.cp_mac, u16::from(prio)),
        q_offset: fb.qoffset,
        q_delta: fb.qdelta,
        encap_priority: cnm::encap_priority(prio),
        encap_da: l2.dst,
        encap_msdu: sampled.get(MSDU_OFFSET..msdu_end).unwrap_or_default(),
    };
    let hdr = cnm_l2(&l2, src.cp_mac, src.priority);
    let mut buf = vec![0u8; hdr.buffer_len() + repr.buffer_len() + 64];
    let n = emit_cnm(&hdr, &repr, &mut buf).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// The `[[congestion]]` entries of `configs/switch.toml`: which congestion point runs on which
/// egress port and priorities.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CongestionConfig {
    /// Egress port name, as in the switch's `[[ports]]`.
    pub port: String,
    /// Data priorities (802.1p) the congestion point watches; default all eight.
    #[serde(default = "all_priorities")]
    pub priorities: Vec<u8>,
    /// QCN congestion point (IEEE8021-CN-MIB names).
    pub qcn: Option<QcnCpParams>,
    /// RED/ECN marking (DCQCN).
    pub red: Option<RedParams>,
    /// Ternary congestion detection.
    pub tcd: Option<TcdParams>,
    /// The CP's MAC address (CNM source, CPID); default: the port's own MAC.
    pub cp_mac: Option<String>,
    /// 802.1p priority of CNMs (protocols.md: default believed 6, U).
    #[serde(default = "default_cnm_priority")]
    pub cnm_priority: u8,
    /// Seed of the marking and sampling RNG (replays exactly).
    #[serde(default)]
    pub seed: u64,
    /// Stamp an HPCC INT hop on each watched data frame that carries an INT header.
    #[serde(default)]
    pub int: bool,
    /// INT_MULTI: the units of a hop's octets sent and queued (128 and 80 x this).
    #[serde(default = "one")]
    pub int_multi: u32,
}

/// The keys of a `[[congestion]]` table ([`CongestionConfig`]), as the configuration reference
/// lists them; the validation checks the ranges given here.
pub const KEYS: &[Key] = &[
    Key {
        name: "port",
        ty: Type::String,
        unit: "",
        default: KeyDefault::Required,
        range: Range::Text("a `[[ports]]` name"),
        doc: "The egress port.",
    },
    Key {
        name: "priorities",
        ty: Type::Integers,
        unit: "",
        default: KeyDefault::Value("[0, 1, 2, 3, 4, 5, 6, 7]"),
        range: Range::Text("each 0..=7"),
        doc: "The data priorities (802.1p) the congestion point watches.",
    },
    Key {
        name: "qcn",
        ty: Type::Table,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc: "A QCN congestion point: the `[qcn_cp]` parameter table.",
    },
    Key {
        name: "red",
        ty: Type::Table,
        unit: "",
        default: KeyDefault::None,
        range: Range::Text("not with `tcd`"),
        doc: "RED/ECN marking (DCQCN): the `[red]` parameter table.",
    },
    Key {
        name: "tcd",
        ty: Type::Table,
        unit: "",
        default: KeyDefault::None,
        range: Range::Text("not with `red`"),
        doc: "Ternary congestion detection: the `[tcd]` parameter table.",
    },
    Key {
        name: "cp_mac",
        ty: Type::String,
        unit: "",
        default: KeyDefault::Text("the port's own MAC"),
        range: Range::Text("a MAC address"),
        doc: "The congestion point's MAC (CNM source and CPID).",
    },
    Key {
        name: "cnm_priority",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("6"),
        range: Range::Int(0, 7),
        doc: "The 802.1p priority of CNMs.",
    },
    Key {
        name: "seed",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("0"),
        range: Range::Any,
        doc: "Seed of the marking and sampling generator (runs replay exactly).",
    },
    Key {
        name: "int",
        ty: Type::Bool,
        unit: "",
        default: KeyDefault::Value("false"),
        range: Range::Text("needs the port's `rate`"),
        doc: "Stamp an HPCC INT hop (time, octets sent, queue, line rate) on each watched data \
              frame that carries an INT header.",
    },
    Key {
        name: "int_multi",
        ty: Type::Integer,
        unit: "",
        default: KeyDefault::Value("1"),
        range: Range::Int(1, 65535),
        doc: "INT_MULTI: a hop counts octets sent in units of 128 x this, queued in 80 x this.",
    },
];

const CNM_PRIORITY: &Key = key(KEYS, "cnm_priority");
const INT_MULTI: &Key = key(KEYS, "int_multi");

fn one() -> u32 {
    1
}

fn all_priorities() -> Vec<u8> {
    (0..PRIORITIES as u8).collect()
}

fn default_cnm_priority() -> u8 {
    cnm::DEFAULT_CNM_PRIORITY
}

/// A congestion config that failed validation; names the key.
#[derive(Debug, thiserror::Error)]
#[error("congestion[{index}] (port {port:?}).{key}: {why}")]
pub struct CpConfigError {
    pub index: usize,
    pub port: String,
    pub key: String,
    pub why: String,
}

impl CpHook {
    /// Validates entry `index` of the config for a port whose MAC is `port_mac`.
    pub fn from_config(
        index: usize,
        c: &CongestionConfig,
        port_mac: MacAddr,
    ) -> Result<Self, CpConfigError> {
        let err = |key: &str, why: String| CpConfigError {
            index,
            port: c.port.clone(),
            key: key.to_string(),
            why,
        };
        let mut prio_mask = 0u8;
        for &p in &c.priorities {
            if usize::from(p) >= PRIORITIES {
                return Err(err("priorities", format!("{p} is not in 0..=7")));
            }
            prio_mask |= 1 << p;
        }
        CNM_PRIORITY
            .within(c.cnm_priority.into())
            .map_err(|e| err("cnm_priority", e.why()))?;
        if c.red.is_some() && c.tcd.is_some() {
            // The switch core applies TCD alone where both are configured (see `PortCp`).
            return Err(err(
                "red",
                "RED and TCD on the same priorities: TCD owns the ECN field there (seed 004 \
                 Table 1) and RED would never mark; configure one of them"
                    .into(),
            ));
        }
        let qcn = match &c.qcn {
            Some(p) => {
                Some(QcnCpProfile::new(p).map_err(|e| err(&format!("qcn.{}", e.param), e.why()))?)
            }
            None => None,
        };
        let red = match &c.red {
            Some(p) => {
                Some(RedProfile::new(p).map_err(|e| err(&format!("red.{}", e.param), e.why()))?)
            }
            None => None,
        };
        let tcd = match &c.tcd {
            Some(p) => {
                Some(TcdProfile::new(p).map_err(|e| err(&format!("tcd.{}", e.param), e.why()))?)
            }
            None => None,
        };
        let cp_mac = match &c.cp_mac {
            Some(s) => quench_port::parse_mac(s)
                .ok_or_else(|| err("cp_mac", format!("{s:?} is not a MAC address")))?,
            None => port_mac,
        };
        let profiles = CpProfiles {
            prio_mask,
            qcn,
            red,
            tcd,
            cnm: CnmSource {
                cp_mac,
                priority: c.cnm_priority,
            },
        };
        INT_MULTI
            .within(c.int_multi.into())
            .map_err(|e| err("int_multi", e.why()))?;
        Ok(PortCp::new(
            &profiles,
            Xoshiro256PlusPlus::seed_from_u64(c.seed),
        ))
    }

    /// Adds the INT stamping `c` asks for (entry `index`) at a port of `rate` (its `rate`
    /// key): an error when `int` is on and the port has no rate, or one above 400 Gb/s.
    pub fn with_int_config(
        self,
        index: usize,
        c: &CongestionConfig,
        rate: Option<Rate>,
    ) -> Result<Self, CpConfigError> {
        if !c.int {
            return Ok(self);
        }
        let err = |why: &str| CpConfigError {
            index,
            port: c.port.clone(),
            key: "int".to_string(),
            why: why.to_string(),
        };
        let rate = rate.ok_or_else(|| {
            err("INT stamps the port's line rate: give the port a `rate` (`[[ports]] rate`)")
        })?;
        let stamp = IntStamp::new(rate, c.int_multi)
            .ok_or_else(|| err("a hop names line rates up to 400 Gb/s"))?;
        Ok(self.with_int(stamp))
    }
}
