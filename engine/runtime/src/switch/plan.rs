//! What a switch decides before its workers start ([`super::runtime::Switch::start`]): which
//! worker polls which device queue and holds which egress, which ports the kernel fast path may
//! serve, and what a worker on a shared core does when idle. Pure functions of the configuration and the
//! machine's CPUs, so each is tested without ports.
use std::path::PathBuf;
use std::sync::Arc;

use super::config::{PortProfile, SwitchProfile};
use quench_node::switch::depth::SharedDepth;
use quench_node::switch::sampling::SharedSampling;
use quench_port::worker::IdleMode;
use quench_port::{device_queues, PortKind};
use quench_wire::MacAddr;

/// Which worker polls which (port, device queues): `plan[w]` lists worker `w`'s.
pub type Plan = Vec<Vec<(usize, Vec<u16>)>>;

/// Which worker polls which (port, device queue): the device queues of all ports, dealt round
/// the workers in turn (an AF_XDP port has its device's queues, a DPDK port `dpdk.rx_queues`,
/// an AF_PACKET port one). The first worker holding a port holds its egress alone when the
/// egress keeps state that must be seen whole ([`whole_egress`]); otherwise every worker
/// holding the port queues and transmits on its own queue. With PFC, worker 0 takes every
/// port's queue 0 (it holds every egress: PFC accounts a frame to its ingress port at
/// whichever egress queue it waits), and the other queues are dealt round all workers.
pub fn assign(profile: &SwitchProfile, workers: usize) -> Plan {
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
    let mut per: Plan = vec![Vec::new(); workers];
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

/// Each port's owner: the first worker of `plan` holding it (0 for a port nobody holds).
pub fn owners(plan: &Plan, ports: usize) -> Vec<usize> {
    let mut owner = vec![0usize; ports];
    for (w, units) in plan.iter().enumerate().rev() {
        for (p, _) in units {
            owner[*p] = w;
        }
    }
    owner
}

/// Whether port `p`'s egress must be held by one worker: a pacer's rate and PFC's ingress
/// accounts are the port's (switch's) whole traffic, kept by one worker (frames for it cross).
/// A congestion point does not need it: every worker holding the port runs one on its own
/// queue, deciding on the port's depth summed over the workers (`switch::depth`).
pub fn whole_egress(profile: &SwitchProfile, p: &PortProfile) -> bool {
    p.rate.is_some() || profile.pfc.is_some()
}

/// Per port: the depths of a congestion-point port whose egress several workers hold, shared
/// (a slot per worker).
pub fn shared_depths(profile: &SwitchProfile, plan: &Plan) -> Vec<Option<Arc<SharedDepth>>> {
    profile
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let holders = plan.iter().filter(|u| u.iter().any(|(q, _)| *q == i));
            let shared = p.congestion.is_some() && !whole_egress(profile, p);
            (shared && holders.count() > 1).then(|| SharedDepth::new(plan.len()))
        })
        .collect()
}

/// Per port with shared depths: its QCN sampling, port-wide (`switch::sampling`), the
/// one-worker congestion point's (its MAC does not enter the sampling; a configuration error
/// is reported by the workers).
pub fn shared_samplings(
    profile: &SwitchProfile,
    depths: &[Option<Arc<SharedDepth>>],
) -> Vec<Option<Arc<SharedSampling>>> {
    profile
        .ports
        .iter()
        .zip(depths)
        .enumerate()
        .map(|(i, (p, d))| {
            let c = p.congestion.as_ref().filter(|_| d.is_some())?;
            let cp = quench_node::switch::cp::CpHook::from_config(i, c, MacAddr::zero()).ok()?;
            cp.shared_sampling()
        })
        .collect()
}

/// Why port `p` is not plain (its frames must pass the switch core), `None` if it is. The
/// list is what the core does to a frame beyond forwarding it: a congestion point on any
/// priority (QCN, RED/ECN, TCD marks, CNMs, drops), an egress rate (shaping, and the strict
/// priority it lets matter), PFC (ingress accounting, PAUSE frames), a capture (the pcap); and
/// a port the fast path's XDP program cannot sit on (AF_PACKET, DPDK).
pub fn not_plain(profile: &SwitchProfile, p: &PortProfile, captured: bool) -> Option<&'static str> {
    if p.kind != PortKind::Xdp {
        Some("not AF_XDP")
    } else if p.congestion.is_some() {
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

/// The kernel fast path's plan: each port plain or not ([`not_plain`]); `None` when fewer than
/// two are (no frame could go from one plain port to another), with why.
pub fn fast_path_plan(
    profile: &SwitchProfile,
    captures: &[Option<PathBuf>],
) -> Result<Vec<bool>, String> {
    let why: Vec<Option<&str>> = (profile.ports.iter().enumerate())
        .map(|(i, p)| not_plain(profile, p, captures.get(i).is_some_and(|c| c.is_some())))
        .collect();
    if why.iter().filter(|w| w.is_none()).count() >= 2 {
        return Ok(why.iter().map(Option::is_none).collect());
    }
    let ports: Vec<String> = (profile.ports.iter().zip(&why))
        .map(|(p, w)| format!("{} {}", p.name, w.unwrap_or("plain")))
        .collect();
    Err(format!("fewer than two plain ports ({})", ports.join(", ")))
}

/// What `--idle auto` has a worker do on a core it shares (`worker::Idle::for_workers`):
/// yield, or with the kernel fast path wait in the kernel. The plain ports' frames no longer
/// reach a fast-path worker, and one that yields keeps its core busy for nothing (the scheduler
/// then moves other processes to the remaining cores: on the testbed, onto the sender's core,
/// where the fast path's frames are forwarded: docs/design.md, "The kernel fast path", has the
/// measurement).
pub fn shared_idle(fast_path: bool) -> IdleMode {
    if fast_path {
        IdleMode::Wait
    } else {
        IdleMode::Yield
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::config::SwitchConfig;

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
        use quench_port::worker::Idle;
        assert_eq!(shared_idle(false), IdleMode::Yield);
        assert_eq!(shared_idle(true), IdleMode::Wait);
        let fixed = Idle::Fixed(IdleMode::Yield).for_workers(1, shared_idle(true));
        assert_eq!(fixed[0].0, IdleMode::Yield);
    }

    /// A port is plain unless it is not AF_XDP or has a congestion point, a rate, PFC or a
    /// capture, whatever the number of workers; fewer than two plain ports give no fast path,
    /// and the error names each port's reason.
    #[test]
    fn the_fast_path_names_which_ports_are_plain_and_why_not() {
        let mut p = profile("");
        let e = fast_path_plan(&p, &[]).unwrap_err();
        assert!(e.contains("p0 not AF_XDP, p1 not AF_XDP"), "{e}");
        for q in &mut p.ports {
            q.kind = PortKind::Xdp;
        }
        assert_eq!(p.workers, 2);
        assert_eq!(fast_path_plan(&p, &[]).unwrap(), vec![true, false, true]);
        let captured = [None, None, Some(PathBuf::from("x.pcap"))];
        let e = fast_path_plan(&p, &captured).unwrap_err();
        assert!(e.contains("p0 plain, p1 egress rate, p2 --capture"), "{e}");
        let mut cp = profile("[[congestion]]\nport = \"p0\"\nqcn = {}\n");
        for q in &mut cp.ports {
            q.kind = PortKind::Xdp;
        }
        assert_eq!(
            not_plain(&cp, &cp.ports[0], false),
            Some("congestion point")
        );
        cp.ports[1].rate = None;
        assert_eq!(fast_path_plan(&cp, &[]).unwrap(), vec![false, true, true]);
    }

    #[test]
    fn queues_are_dealt_round_the_workers_and_pfc_keeps_every_egress_on_worker_0() {
        let p = profile("");
        let plan = assign(&p, 2);
        assert_eq!(plan[0], vec![(0, vec![0]), (2, vec![0])]);
        assert_eq!(plan[1], vec![(1, vec![0])]);
        assert_eq!(owners(&plan, 3), vec![0, 1, 0]);
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

    /// A congestion-point port held by two workers shares its depths (and QCN sampling); one
    /// held by one worker, or a port without a congestion point, does not.
    #[test]
    fn depths_are_shared_only_where_several_workers_hold_a_congestion_point() {
        let p = profile("[[congestion]]\nport = \"p2\"\nqcn = {}\n");
        let one = vec![vec![(0, vec![0]), (2, vec![0])], vec![(1, vec![0])]];
        assert!(shared_depths(&p, &one).iter().all(Option::is_none));
        let both = vec![vec![(2, vec![0])], vec![(2, vec![1])]];
        let d = shared_depths(&p, &both);
        assert_eq!(
            d.iter().map(Option::is_some).collect::<Vec<_>>(),
            vec![false, false, true]
        );
        let s = shared_samplings(&p, &d);
        assert_eq!(
            s.iter().map(Option::is_some).collect::<Vec<_>>(),
            vec![false, false, true]
        );
    }
}
