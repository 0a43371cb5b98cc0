//! The seam between the simulator and the algorithm crates.
//!
//! The simulator never implements an algorithm: a host's flows, reaction points, pacing and
//! notification point are the host core's ([`quench_node::host::core`], the one `quench send`
//! drives), and a switch port's congestion points (`cp::red`, `cp::qcn`, `cp::tcd`, `cp::pfc`)
//! are the crates' state machines. This module turns the scenario's parameter sections into
//! their validated profiles; the host-side ones ([`host_rp`], [`receiver`]) go to each host's
//! core, the switch-side ones to the switch core ([`quench_node::switch::core`]), the same
//! one `quench switch` runs, which sees a simulated packet through [`CoreFrame`]. Closed enums,
//! static dispatch: no `dyn` on the per-packet path.

use anyhow::{bail, Context};
use serde::Deserialize;
use units::{Ecn, Rate};

use cp::qcn::QcnFeedback;

use quench_node::host::rp::HostRp;
use quench_node::switch::core::{CnmSource, CoreFrame, CpProfiles};
use quench_node::switch::queue::QueuedFrame;

use super::packet::Pkt;

/// Which congestion control a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcKind {
    /// No congestion control: senders at line rate, switches that never mark.
    None,
    /// DCQCN: RED/ECN at switches, CNPs from the receiver's NP, rate control at the sender.
    Dcqcn,
    /// IEEE 802.1Qau QCN: CNMs from switch congestion points to the senders' rate limiters.
    Qcn,
    /// HPCC (ns-3 `CC_MODE 3`): INT at every switch egress, echoed by each ACK.
    Hpcc,
    /// TIMELY (`CC_MODE 7`): RTT from the send time each ACK echoes.
    Timely,
    /// DCTCP (`CC_MODE 8`): RED/ECN at switches, echoed by each ACK's CNP flag.
    Dctcp,
    /// HPCC-PINT (`CC_MODE 10`): one utilisation code per packet, echoed by each ACK.
    Pint,
}

/// Every kind, in the order `CcKind::parse` lists them.
const KINDS: [CcKind; 7] = [
    CcKind::None,
    CcKind::Dcqcn,
    CcKind::Qcn,
    CcKind::Hpcc,
    CcKind::Timely,
    CcKind::Dctcp,
    CcKind::Pint,
];

impl CcKind {
    pub fn name(self) -> &'static str {
        match self {
            CcKind::None => "none",
            CcKind::Dcqcn => "dcqcn",
            CcKind::Qcn => "qcn",
            CcKind::Hpcc => "hpcc",
            CcKind::Timely => "timely",
            CcKind::Dctcp => "dctcp",
            CcKind::Pint => "hpcc-pint",
        }
    }

    /// The ACK-driven controls of ns-3 HPCC, whose reaction point runs on every ACK.
    pub fn ack_driven(self) -> bool {
        matches!(
            self,
            CcKind::Hpcc | CcKind::Timely | CcKind::Dctcp | CcKind::Pint
        )
    }

    /// The kind a scenario's `cc` names (any case).
    pub fn parse(name: &str) -> anyhow::Result<CcKind> {
        KINDS
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let names: Vec<_> = KINDS.iter().map(|k| k.name()).collect();
                anyhow::anyhow!("`cc` = \"{name}\": expected one of: {}", names.join(", "))
            })
    }

    /// The parameter sections [`CcSetup::new`] reads for this control.
    pub fn sections(self) -> &'static [&'static str] {
        match self {
            CcKind::None => &["pfc", "tcd"],
            CcKind::Dcqcn => &["dcqcn_rp", "np", "red", "pfc", "tcd"],
            CcKind::Qcn => &["qcn_rp", "qcn_cp", "pfc", "tcd"],
            CcKind::Hpcc => &["hpcc_rp", "np", "red", "pfc", "tcd"],
            CcKind::Timely => &["timely_rp", "np", "red", "pfc", "tcd"],
            CcKind::Dctcp => &["dctcp_rp", "np", "red", "pfc", "tcd"],
            CcKind::Pint => &["pint_rp", "np", "red", "pfc", "tcd"],
        }
    }
}

/// Parameter sections as written in presets (`configs/NAME.toml`) and scenario files. Each is
/// kept as a raw table so a scenario can override single keys of a preset; it is then read into
/// the owning crate's `*Params` type, which rejects unknown keys.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CcSections {
    /// rp::DcqcnParams
    pub dcqcn_rp: Option<toml::Table>,
    /// rp::QcnParams
    pub qcn_rp: Option<toml::Table>,
    /// np::NpParams
    pub np: Option<toml::Table>,
    /// cp::red::RedParams (DCQCN switches), plus `[[red.by_rate]]`: per link speed values
    /// (see [`RedByRate`]).
    pub red: Option<toml::Table>,
    /// cp::qcn::QcnCpParams (QCN switches)
    pub qcn_cp: Option<toml::Table>,
    /// cp::pfc::PfcParams plus `enabled` (default true when the section exists). The simulator
    /// fills `ports`, `link_rate` and `buffer_bytes` per switch, and `headroom_bytes` as ns-3
    /// does (3 x rate x one-way delay of the fastest port) unless given.
    pub pfc: Option<toml::Table>,
    /// cp::tcd::TcdParams plus `enabled`; `link_rate` is each port's.
    pub tcd: Option<toml::Table>,
    /// rp::HpccParams
    pub hpcc_rp: Option<toml::Table>,
    /// rp::TimelyParams
    pub timely_rp: Option<toml::Table>,
    /// rp::DctcpParams
    pub dctcp_rp: Option<toml::Table>,
    /// rp::PintParams
    pub pint_rp: Option<toml::Table>,
}

fn merge(base: &mut Option<toml::Table>, over: &Option<toml::Table>) {
    if let Some(o) = over {
        let b = base.get_or_insert_with(toml::Table::new);
        for (k, v) in o {
            b.insert(k.clone(), v.clone());
        }
    }
}

impl CcSections {
    /// The names of the sections present, in the order of the fields.
    pub fn names(&self) -> Vec<&'static str> {
        [
            ("dcqcn_rp", &self.dcqcn_rp),
            ("qcn_rp", &self.qcn_rp),
            ("np", &self.np),
            ("red", &self.red),
            ("qcn_cp", &self.qcn_cp),
            ("pfc", &self.pfc),
            ("tcd", &self.tcd),
            ("hpcc_rp", &self.hpcc_rp),
            ("timely_rp", &self.timely_rp),
            ("dctcp_rp", &self.dctcp_rp),
            ("pint_rp", &self.pint_rp),
        ]
        .into_iter()
        .filter(|(_, t)| t.is_some())
        .map(|(n, _)| n)
        .collect()
    }

    /// `self` with every key of `over` replacing the same key here.
    pub fn overlay(&mut self, over: &CcSections) {
        merge(&mut self.dcqcn_rp, &over.dcqcn_rp);
        merge(&mut self.qcn_rp, &over.qcn_rp);
        merge(&mut self.np, &over.np);
        merge(&mut self.red, &over.red);
        merge(&mut self.qcn_cp, &over.qcn_cp);
        merge(&mut self.pfc, &over.pfc);
        merge(&mut self.tcd, &over.tcd);
        merge(&mut self.hpcc_rp, &over.hpcc_rp);
        merge(&mut self.timely_rp, &over.timely_rp);
        merge(&mut self.dctcp_rp, &over.dctcp_rp);
        merge(&mut self.pint_rp, &over.pint_rp);
    }
}

fn read<T: serde::de::DeserializeOwned + Default>(
    t: &Option<toml::Table>,
    section: &str,
    origin: &str,
) -> anyhow::Result<T> {
    match t {
        None => Ok(T::default()),
        // toml's message ends with a line "in `KEY`": kept, on the same line.
        Some(t) => T::deserialize(toml::Value::Table(t.clone())).map_err(|e| {
            let msg = e.to_string().trim().replace('\n', " ");
            anyhow::anyhow!("{origin}: section [{section}]: {msg}")
        }),
    }
}

/// `enabled` is ours, not the crate's: take it out before the crate reads the section.
fn take_enabled(
    t: &Option<toml::Table>,
    section: &str,
    origin: &str,
) -> anyhow::Result<(bool, Option<toml::Table>)> {
    let Some(t) = t else {
        return Ok((false, None));
    };
    let mut t = t.clone();
    let on = match t.remove("enabled") {
        None => true,
        Some(toml::Value::Boolean(b)) => b,
        Some(v) => bail!("{origin}: [{section}] `enabled` = {v}: expected true or false"),
    };
    Ok((on, Some(t)))
}

/// Keys of `section` that the simulator sets from the network (a switch's port count, a
/// port's rate, the `[switch]` buffer): given in a scenario they would be overwritten unseen,
/// so they are an error that says where the value comes from.
fn set_by_the_simulator(
    t: &Option<toml::Table>,
    section: &str,
    keys: &[&str],
    origin: &str,
) -> anyhow::Result<()> {
    let Some(t) = t else { return Ok(()) };
    if let Some(k) = keys.iter().find(|k| t.contains_key(**k)) {
        let from = match *k {
            "ports" => "each switch's port count",
            "link_rate" => "each port's link",
            _ => "`[switch] buffer_bytes`",
        };
        bail!("{origin}: [{section}] `{k}`: the simulator takes it from {from}; leave it out");
    }
    Ok(())
}

/// RED as configured, one profile per link speed.
///
/// The HPCC ns-3 simulator configures each switch port's Kmin, Kmax and Pmax by the port's link
/// speed (`KMIN_MAP` / `KMAX_MAP` / `PMAX_MAP` in its config.txt; run.py gives one entry for the
/// NIC speed and one for 4x it) and refuses a port whose speed has no entry ("must set kmin for
/// each link speed"). The scenario format says the same with
///
/// ```toml
/// [red]                  # values every entry starts from (and the only ones without entries)
/// pmax = 0.2
/// [[red.by_rate]]
/// rate = "100gbit"
/// kmin_bytes = 400000
/// kmax_bytes = 1600000
/// ```
///
/// Without `by_rate` one profile serves every port; with it, a switch port whose speed has no
/// entry is an error that names the speed.
#[derive(Clone, Debug, PartialEq)]
pub struct RedByRate {
    base: cp::red::RedProfile,
    by_rate: Vec<(Rate, cp::red::RedProfile)>,
}

impl RedByRate {
    /// Reads `[red]` (RedParams keys and `by_rate`); `origin` names the files in errors.
    pub fn new(t: &Option<toml::Table>, origin: &str) -> anyhow::Result<RedByRate> {
        let mut base_t = t.clone().unwrap_or_default();
        let entries = match base_t.remove("by_rate") {
            None => Vec::new(),
            Some(toml::Value::Array(a)) => a,
            Some(v) => bail!("{origin}: [red] `by_rate` = {v}: expected [[red.by_rate]] tables"),
        };
        let base_p: cp::red::RedParams = read(&Some(base_t.clone()), "red", origin)?;
        let base = cp::red::RedProfile::new(&base_p).with_context(|| format!("{origin}: [red]"))?;
        let mut by_rate: Vec<(Rate, cp::red::RedProfile)> = Vec::with_capacity(entries.len());
        for (i, e) in entries.into_iter().enumerate() {
            let what = format!("[[red.by_rate]] entry {}", i + 1);
            let toml::Value::Table(mut e) = e else {
                bail!("{origin}: {what}: expected a table");
            };
            let rate = match e.remove("rate") {
                Some(toml::Value::String(s)) => Rate::parse(&s).map_err(|_| {
                    anyhow::anyhow!(
                        "{origin}: {what}: `rate` = \"{s}\" is not a rate such as \"100gbit\""
                    )
                })?,
                Some(toml::Value::Integer(bps)) if bps > 0 => Rate::from_bps(bps as u64),
                Some(v) => {
                    bail!("{origin}: {what}: `rate` = {v}: expected a rate such as \"100gbit\"")
                }
                None => bail!("{origin}: {what}: `rate` is missing"),
            };
            if by_rate.iter().any(|(r, _)| *r == rate) {
                bail!("{origin}: {what}: a second entry for {rate}");
            }
            let mut t = base_t.clone();
            t.extend(e);
            let p: cp::red::RedParams = read(&Some(t), "red.by_rate", origin)
                .with_context(|| format!("{origin}: {what}"))?;
            let prof = cp::red::RedProfile::new(&p)
                .with_context(|| format!("{origin}: {what} ({rate})"))?;
            by_rate.push((rate, prof));
        }
        Ok(RedByRate { base, by_rate })
    }

    /// One profile for every link speed.
    pub fn single(p: cp::red::RedProfile) -> RedByRate {
        RedByRate {
            base: p,
            by_rate: Vec::new(),
        }
    }

    /// The profile for a port of speed `rate`.
    pub fn at(&self, rate: Rate) -> anyhow::Result<&cp::red::RedProfile> {
        if self.by_rate.is_empty() {
            return Ok(&self.base);
        }
        match self.by_rate.iter().find(|(r, _)| *r == rate) {
            Some((_, p)) => Ok(p),
            None => {
                bail!("[red] has no `by_rate` entry for {rate} (a switch port runs at that speed)")
            }
        }
    }
}

/// PFC as configured: the crate's parameters and whether headroom was given.
#[derive(Clone, Debug)]
pub struct PfcSetup {
    pub params: cp::pfc::PfcParams,
    pub headroom_given: bool,
}

/// Validated congestion-control configuration of a run.
#[derive(Clone, Debug)]
pub struct CcSetup {
    pub kind: CcKind,
    pub dcqcn: rp::DcqcnParams,
    pub qcn_rp: rp::QcnParams,
    pub np: Option<np::NpProfile>,
    pub red: Option<RedByRate>,
    pub qcn_cp: Option<cp::qcn::QcnCpProfile>,
    pub pfc: Option<PfcSetup>,
    pub tcd: Option<cp::tcd::TcdParams>,
    pub hpcc: rp::HpccParams,
    pub timely: rp::TimelyParams,
    pub dctcp: rp::DctcpParams,
    pub pint: rp::PintParams,
    /// The window and base RTT HPCC's rule reads (the world fills it from the network).
    pub path: Option<rp::FlowPath>,
}

impl CcSetup {
    /// No congestion control, no PFC, no TCD.
    pub fn none() -> CcSetup {
        CcSetup {
            kind: CcKind::None,
            dcqcn: rp::DcqcnParams::default(),
            qcn_rp: rp::QcnParams::default(),
            np: None,
            red: None,
            qcn_cp: None,
            pfc: None,
            tcd: None,
            hpcc: rp::HpccParams::default(),
            timely: rp::TimelyParams::default(),
            dctcp: rp::DctcpParams::default(),
            pint: rp::PintParams::default(),
            path: None,
        }
    }

    /// Reads and validates the sections for `kind`; `origin` names the files in errors.
    pub fn new(kind: CcKind, s: &CcSections, origin: &str) -> anyhow::Result<CcSetup> {
        let mut c = CcSetup::none();
        c.kind = kind;
        let (pfc_on, pfc) = take_enabled(&s.pfc, "pfc", origin)?;
        set_by_the_simulator(&pfc, "pfc", &["ports", "link_rate", "buffer_bytes"], origin)?;
        if pfc_on {
            let headroom_given = pfc
                .as_ref()
                .is_some_and(|t| t.contains_key("headroom_bytes"));
            c.pfc = Some(PfcSetup {
                params: read(&pfc, "pfc", origin)?,
                headroom_given,
            });
        }
        let (tcd_on, tcd) = take_enabled(&s.tcd, "tcd", origin)?;
        set_by_the_simulator(&tcd, "tcd", &["link_rate"], origin)?;
        if tcd_on {
            let p: cp::tcd::TcdParams = read(&tcd, "tcd", origin)?;
            cp::tcd::TcdProfile::new(&p).with_context(|| format!("{origin}: [tcd]"))?;
            c.tcd = Some(p);
        }
        // Validated here once against a nominal line rate; each host validates again against
        // its own NIC rate when the world is built.
        let nominal = Rate::from_gbps(100);
        match kind {
            CcKind::Hpcc => {
                c.hpcc = read(&s.hpcc_rp, "hpcc_rp", origin)?;
                let path = rp::FlowPath {
                    window: 1,
                    base_rtt: units::Duration::from_nanos(1),
                };
                c.hpcc
                    .profile(nominal, path)
                    .with_context(|| format!("{origin}: [hpcc_rp]"))?;
            }
            CcKind::Timely => {
                c.timely = read(&s.timely_rp, "timely_rp", origin)?;
                c.timely
                    .profile(nominal)
                    .with_context(|| format!("{origin}: [timely_rp]"))?;
            }
            CcKind::Dctcp => {
                c.dctcp = read(&s.dctcp_rp, "dctcp_rp", origin)?;
                c.dctcp
                    .profile(nominal)
                    .with_context(|| format!("{origin}: [dctcp_rp]"))?;
            }
            CcKind::Pint => {
                c.pint = read(&s.pint_rp, "pint_rp", origin)?;
                c.pint
                    .profile(nominal)
                    .with_context(|| format!("{origin}: [pint_rp]"))?;
            }
            _ => {}
        }
        match kind {
            CcKind::None => {}
            CcKind::Dcqcn | CcKind::Hpcc | CcKind::Timely | CcKind::Dctcp | CcKind::Pint => {
                if kind == CcKind::Dcqcn {
                    c.dcqcn = read(&s.dcqcn_rp, "dcqcn_rp", origin)?;
                    c.dcqcn
                        .profile(nominal)
                        .with_context(|| format!("{origin}: [dcqcn_rp]"))?;
                }
                // The receiver's ECN echo (a CNP, or the ACK's CNP flag) and the switches'
                // marking: DCQCN's, and what the ACK-driven controls of ns-3 run beside theirs
                // (ns-3's switches mark whatever CC_MODE; only DCTCP reads the mark).
                let mut npp: np::NpParams = read(&s.np, "np", origin)?;
                if c.tcd.is_some() {
                    npp.tcd = true;
                }
                c.np = Some(npp.profile().with_context(|| format!("{origin}: [np]"))?);
                c.red = Some(RedByRate::new(&s.red, origin)?);
            }
            CcKind::Qcn => {
                c.qcn_rp = read(&s.qcn_rp, "qcn_rp", origin)?;
                c.qcn_rp
                    .profile(Rate::from_gbps(10))
                    .with_context(|| format!("{origin}: [qcn_rp]"))?;
                let q: cp::qcn::QcnCpParams = read(&s.qcn_cp, "qcn_cp", origin)?;
                c.qcn_cp = Some(
                    cp::qcn::QcnCpProfile::new(&q)
                        .with_context(|| format!("{origin}: [qcn_cp]"))?,
                );
            }
        }
        Ok(c)
    }
}

/// The reaction points of a host whose NIC runs at `line`, as `setup` configures them.
pub fn host_rp(setup: &CcSetup, line: Rate) -> anyhow::Result<HostRp> {
    Ok(match setup.kind {
        CcKind::None => HostRp::None,
        CcKind::Dcqcn => HostRp::Dcqcn(
            setup
                .dcqcn
                .profile(line)
                .with_context(|| format!("[dcqcn_rp] for a {line} NIC"))?,
        ),
        CcKind::Qcn => HostRp::qcn(
            setup
                .qcn_rp
                .profile(line)
                .with_context(|| format!("[qcn_rp] for a {line} NIC"))?,
        ),
        CcKind::Hpcc => {
            let path = setup
                .path
                .context("HPCC needs a window (ns-3 HAS_WIN 1) and the network's base RTT")?;
            HostRp::Hpcc(
                setup
                    .hpcc
                    .profile(line, path)
                    .with_context(|| format!("[hpcc_rp] for a {line} NIC"))?,
            )
        }
        CcKind::Timely => HostRp::Timely(
            setup
                .timely
                .profile(line)
                .with_context(|| format!("[timely_rp] for a {line} NIC"))?,
        ),
        CcKind::Dctcp => HostRp::Dctcp(
            setup
                .dctcp
                .profile(line)
                .with_context(|| format!("[dctcp_rp] for a {line} NIC"))?,
        ),
        CcKind::Pint => HostRp::Pint(
            setup
                .pint
                .profile(line)
                .with_context(|| format!("[pint_rp] for a {line} NIC"))?,
        ),
    })
}

/// The receiver side: the NP of one host (DCQCN, and the ECN echo of the ACK-driven
/// controls) or nothing.
pub fn receiver(setup: &CcSetup) -> Option<np::Np> {
    setup.np.map(np::Np::new)
}

impl QueuedFrame for Pkt {
    fn wire_len(&self) -> u32 {
        self.size
    }
}

impl CoreFrame for Pkt {
    type Cnm = SimCnm;

    fn ecn(&self) -> Option<Ecn> {
        Some(self.ecn)
    }

    fn set_ecn(&mut self, ecn: Ecn) {
        self.ecn = ecn;
    }

    fn ingress(&self) -> u16 {
        self.in_port
    }

    fn set_ingress(&mut self, port: u16) {
        self.in_port = port;
    }

    fn cnm(&self, _src: &CnmSource, _prio: u8, fb: &QcnFeedback) -> Option<SimCnm> {
        Some(SimCnm {
            flow: self.flow,
            qntz_fb: fb.qntz_fb,
            prio: self.prio,
        })
    }
}

/// A CNM a switch port's congestion point made: for the sender of `flow`, at the sampled
/// packet's priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimCnm {
    pub flow: u32,
    pub qntz_fb: u8,
    pub prio: u8,
}

impl CcSetup {
    /// The congestion points of a switch port at `rate` (every data priority watched).
    pub fn cp_profiles(&self, rate: Rate) -> anyhow::Result<CpProfiles> {
        let tcd = match &self.tcd {
            Some(p) => {
                let mut p = p.clone();
                p.link_rate = rate;
                Some(cp::tcd::TcdProfile::new(&p).context("[tcd]")?)
            }
            None => None,
        };
        Ok(CpProfiles {
            prio_mask: u8::MAX,
            qcn: self.qcn_cp.clone(),
            red: match &self.red {
                Some(r) => Some(r.at(rate)?.clone()),
                None => None,
            },
            tcd,
            ..CpProfiles::none()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_the_simulator_sets_are_errors_in_a_scenario() {
        for (text, want) in [
            (
                "[pfc]\nports = 8\n",
                "[pfc] `ports`: the simulator takes it from each switch's",
            ),
            ("[pfc]\nbuffer_bytes = 1\n", "[pfc] `buffer_bytes`"),
            (
                "[tcd]\nlink_rate = \"10gbit\"\n",
                "[tcd] `link_rate`: the simulator takes",
            ),
        ] {
            let s: CcSections = toml::from_str(text).unwrap();
            let e = CcSetup::new(CcKind::None, &s, "s.toml").unwrap_err();
            assert!(format!("{e:#}").contains(want), "{e:#}");
        }
        let s: CcSections = toml::from_str("[pfc]\nxoff_bytes = 1000\n").unwrap();
        assert!(CcSetup::new(CcKind::None, &s, "s.toml").is_ok());
    }

    fn sections(red: &str) -> CcSections {
        toml::from_str(red).unwrap()
    }

    #[test]
    fn red_by_rate_gives_each_link_speed_its_thresholds() {
        let s = sections(
            "[red]\npmax = 0.2\n[[red.by_rate]]\nrate = \"100gbit\"\nkmin_bytes = 400000\n\
             kmax_bytes = 1600000\n[[red.by_rate]]\nrate = 400000000000\nkmin_bytes = 1600000\n\
             kmax_bytes = 6400000\npmax = 0.5\n",
        );
        let c = CcSetup::new(CcKind::Dcqcn, &s, "t").unwrap();
        let red = c.red.as_ref().unwrap();
        let p100 = red.at(Rate::from_gbps(100)).unwrap();
        let p400 = red.at(Rate::from_gbps(400)).unwrap();
        // Halfway between Kmin and Kmax: Pmax / 2; the 100G entry inherits [red]'s pmax.
        assert!((p100.probability(1_000_000) - 0.1).abs() < 1e-12);
        assert!((p400.probability(4_000_000) - 0.25).abs() < 1e-12);
        assert_eq!(p100.probability(400_000), 0.0);
        assert_eq!(p400.probability(1_600_001 + 4_800_000), 1.0);
        // The switch port's congestion points take the profile of the port's speed.
        let cp = c.cp_profiles(Rate::from_gbps(400)).unwrap();
        assert_eq!(cp.red.as_ref(), Some(p400));
        // A speed without an entry is refused, as ns-3 asserts "must set kmin for each link
        // speed"; the message names the speed.
        let e = c.cp_profiles(Rate::from_gbps(25)).err().unwrap();
        assert!(format!("{e:#}").contains("25gbit"), "{e:#}");
    }

    #[test]
    fn red_without_by_rate_serves_every_speed() {
        let s = sections("[red]\nkmin_bytes = 1000\nkmax_bytes = 3000\npmax = 1.0\n");
        let c = CcSetup::new(CcKind::Dcqcn, &s, "t").unwrap();
        let red = c.red.as_ref().unwrap();
        assert_eq!(
            red.at(Rate::from_gbps(10)).unwrap(),
            red.at(Rate::from_gbps(400)).unwrap()
        );
        assert!((red.at(Rate::from_gbps(10)).unwrap().probability(2000) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn red_by_rate_errors_name_the_entry_and_key() {
        for (text, want) in [
            (
                "[red]\n[[red.by_rate]]\nkmin_bytes = 1\n",
                "`rate` is missing",
            ),
            ("[red]\n[[red.by_rate]]\nrate = \"fast\"\n", "\"fast\""),
            (
                "[red]\n[[red.by_rate]]\nrate = \"10gbit\"\nkmn_bytes = 1\n",
                "kmn_bytes",
            ),
            (
                "[red]\n[[red.by_rate]]\nrate = \"10gbit\"\n[[red.by_rate]]\nrate = \"10gbit\"\n",
                "second entry for 10gbit",
            ),
            (
                "[red]\n[[red.by_rate]]\nrate = \"10gbit\"\nkmin_bytes = 9\nkmax_bytes = 3\n",
                "kmin_bytes",
            ),
        ] {
            let e = CcSetup::new(CcKind::Dcqcn, &sections(text), "f.toml")
                .err()
                .unwrap_or_else(|| panic!("accepted {text}"));
            let m = format!("{e:#}");
            assert!(m.contains("f.toml") && m.contains(want), "{text}: {m}");
        }
    }
}
