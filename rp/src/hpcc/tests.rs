//! HPCC traces against ns-3's own code.
//!
//! The expected rows were printed by a harness that compiles HPCC's `rdma-hw.cc` functions
//! `HandleAckHp`, `UpdateRateHp` and `FastReactHp` unchanged, with `int-header.h`'s `IntHop`,
//! over minimal stand-ins for the ns-3 types they touch (`DataRate` as a `uint64_t` bit rate
//! with its `*`, `/` and `+`; `ChangeRate` setting `m_rate`), fed the ACKs of [`EVENTS`]: per
//! ACK the sending rate `m_rate`, the reference `hp.m_curRate`, `hp.m_incStage`, `hp.u` and the
//! first two hops' `hopState` (u, Rc, incStage), with `printf("%.17g")` for the doubles.
//!
//! The events: two hops (100G and 400G) with a topo_incast path (window 52000 octets, base RTT
//! 4160 ns); a first ACK, two fast reactions to a growing queue, a full update, a fast one, full
//! updates with the queue drained (additive and multiplicative steps), a fast reaction with an
//! empty queue (which `SAMPLE_FEEDBACK` skips), and a full update whose timestamps wrapped the
//! 24-bit clock. Where a skipped hop leaves the previous stamp equal to the new one, the time
//! delta is 0, ns-3's utilisation is infinite times 0, NaN, and stays NaN: reproduced.

use super::*;
use crate::int::{IntHop, IntHops};

/// (m_rate, hp.m_curRate, hp.m_incStage, hp.u, hopState[0..2] as (u, Rc, incStage)).
/// A hop's INT input: (time ns, bytes sent, queue octets, line rate bit/s).
type Hop = (u64, u64, u32, u64);

type Row = (u64, u64, u32, f64, [(f64, u64, u32); 2]);

/// (ack_seq, snd_nxt, per hop (time ns, bytes sent, queue octets, line rate)).
const EVENTS: &[(u64, u64, [Hop; 2])] = &[
    (
        1000,
        50000,
        [
            (10000, 1000000, 0, 100000000000),
            (20000, 5000000, 0, 400000000000),
        ],
    ),
    (
        2000,
        51000,
        [
            (10080, 1001000, 40000, 100000000000),
            (20080, 5001000, 0, 400000000000),
        ],
    ),
    (
        3000,
        52000,
        [
            (10160, 1002000, 80000, 100000000000),
            (20160, 5002000, 0, 400000000000),
        ],
    ),
    (
        50001,
        100000,
        [
            (14000, 1050000, 120000, 100000000000),
            (24000, 5050000, 3000, 400000000000),
        ],
    ),
    (
        60000,
        101000,
        [
            (14800, 1060000, 20000, 100000000000),
            (24800, 5060000, 0, 400000000000),
        ],
    ),
    (
        100001,
        150000,
        [
            (18000, 1100000, 0, 100000000000),
            (28000, 5100000, 0, 400000000000),
        ],
    ),
    (
        150001,
        200000,
        [
            (22160, 1150000, 0, 100000000000),
            (32160, 5150000, 0, 400000000000),
        ],
    ),
    (
        200001,
        250000,
        [
            (26320, 1200000, 0, 100000000000),
            (36320, 5200000, 0, 400000000000),
        ],
    ),
    (
        250001,
        300000,
        [
            (30480, 1250000, 0, 100000000000),
            (40480, 5250000, 0, 400000000000),
        ],
    ),
    (
        250500,
        300500,
        [
            (30500, 1250500, 0, 100000000000),
            (40500, 5250500, 0, 400000000000),
        ],
    ),
    (
        300001,
        350000,
        [
            (16807696, 1350000, 640000, 100000000000),
            (16817696, 5350000, 0, 400000000000),
        ],
    ),
];
#[rustfmt::skip]
#[allow(clippy::excessive_precision)]
const RUN_PY_100G: &[Row] = &[
    (100000000000, 100000000000, 0, 1.0, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (95356174073, 100000000000, 0, 1.0004615384615385, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (93930900733, 100000000000, 0, 1.0157071005917162, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (39754715782, 39754715782, 0, 2.4139419663177057, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (17412013564, 39754715782, 0, 2.2200182153986203, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (29898265317, 29898265317, 0, 1.2803118958612201, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (29835871864, 29835871864, 0, 0.96492307692307688, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (30077272674, 30077272674, 0, 0.95507692307692305, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (30012110771, 30012110771, 0, 0.96492307692307688, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (29789360204, 30012110771, 0, 0.97013017751479291, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (100000000000, 100000000000, 0, 0.00047363337711498388, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
];
#[rustfmt::skip]
#[allow(clippy::excessive_precision)]
const MULTI_RATE_SAMPLED: &[Row] = &[
    (100000000000, 100000000000, 0, 1.0, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (95006174073, 100000000000, 0, 1.0, [(1.0004615384615385, 100000000000, 0), (1.0, 100000000000, 0)]),
    (93580900733, 100000000000, 0, 1.0, [(1.0157071005917162, 100000000000, 0), (1.0, 100000000000, 0)]),
    (39284690899, 39284690899, 0, 1.0, [(2.4213265817023211, 39284690899, 0), (0.27907692307692306, 100000000000, 1)]),
    (16848520762, 39284690899, 0, 1.0, [(2.2216513514932945, 39284690899, 0), (0.27907692307692306, 100000000000, 1)]),
    (29190925671, 29190925671, 0, 1.0, [(1.2806887734215295, 29190925671, 0), (0.25073372781065084, 100000000000, 2)]),
    (28862974107, 28862974107, 0, 1.0, [(0.96246153846153837, 28862974107, 0), (0.24061538461538459, 100000000000, 3)]),
    (28539268719, 28539268719, 0, 1.0, [(0.96246153846153837, 28539268719, 0), (0.24061538461538459, 100000000000, 4)]),
    (28291984669, 28291984669, 0, 1.0, [(0.95999999999999996, 28291984669, 0), (0.23999999999999999, 100000000000, 5)]),
    (28291984669, 28291984669, 0, 1.0, [(0.95999999999999996, 28291984669, 0), (0.23999999999999999, 100000000000, 5)]),
    (28341984669, 28341984669, 0, 1.0, [(f64::NAN, 28341984669, 1), (f64::NAN, 100000000000, 0)]),
];
#[rustfmt::skip]
#[allow(clippy::excessive_precision)]
const NO_FAST_REACT: &[Row] = &[
    (100000000000, 100000000000, 0, 1.0, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (100000000000, 100000000000, 0, 1.0, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (100000000000, 100000000000, 0, 1.0, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (89966999692, 89966999692, 0, 1.0009230769230768, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (89966999692, 89966999692, 0, 1.0009230769230768, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (81142177907, 81142177907, 0, 0.9984970414201183, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (75926237333, 75926237333, 0, 0.96246153846153837, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (71048799296, 71048799296, 0, 0.96246153846153837, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (66658249340, 66658249340, 0, 0.95999999999999996, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (66658249340, 66658249340, 0, 0.95999999999999996, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
    (66708249340, 66708249340, 1, f64::NAN, [(1.0, 100000000000, 0), (1.0, 100000000000, 0)]),
];

fn profile(hpcc: HpccParams) -> HpccProfile {
    let path = FlowPath {
        window: 52_000,
        base_rtt: Duration::from_nanos(4160),
    };
    hpcc.profile(Rate::from_gbps(100), path).unwrap()
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

fn replay(p: &HpccProfile, want: &[Row], check_stage: bool) {
    let mut s = HpccState::new(p);
    for (k, ((seq, nxt, hops), w)) in EVENTS.iter().zip(want).enumerate() {
        let mut int = IntHops::default();
        for &(t, b, q, r) in hops {
            int.push(IntHop::new(t, b, q, Rate::from_bps(r), p.int_multi).unwrap());
        }
        s.on_ack(p, *seq, *nxt, &int);
        let got_hops = [0, 1].map(|i| {
            let h = s.hop_state()[i];
            (h.u, h.rc, h.inc_stage)
        });
        let ok = s.rate().as_bps() == w.0
            && s.reference_rate().as_bps() == w.1
            && (!check_stage || s.inc_stage() == w.2)
            && same(s.utilisation(), w.3)
            && got_hops
                .iter()
                .zip(&w.4)
                .all(|(g, w)| same(g.0, w.0) && g.1 == w.1 && g.2 == w.2);
        assert!(
            ok,
            "ACK {k} (seq {seq}): got ({}, {}, {}, {:?}, {got_hops:?}), ns-3 {w:?}",
            s.rate().as_bps(),
            s.reference_rate().as_bps(),
            s.inc_stage(),
            s.utilisation()
        );
    }
}

/// run.py `--cc hp --bw 100`: MULTI_RATE 0, FAST_REACT 1, SAMPLE_FEEDBACK 0, MI_THRESH 0,
/// U_TARGET 0.95, RATE_AI 400Mb/s, MIN_RATE 1000Mb/s, INT_MULTI 4.
#[test]
fn run_py_settings_match_ns3() {
    let p = profile(HpccParams {
        u_target: 0.95,
        mi_thresh: 0,
        rate_ai: 400,
        min_rate: 1000,
        fast_react: true,
        multi_rate: false,
        sample_feedback: false,
        int_multi: 4,
        ..HpccParams::default()
    });
    replay(&p, RUN_PY_100G, true);
}

/// MULTI_RATE 1 and SAMPLE_FEEDBACK 1 (ns-3's attribute defaults for MULTI_RATE and
/// MI_THRESH 5; RATE_AI 50Mb/s). ns-3 stores an uninitialised single-rate stage under
/// MULTI_RATE, which is not compared.
#[test]
fn multi_rate_with_sampled_feedback_matches_ns3() {
    let p = profile(HpccParams {
        u_target: 0.95,
        mi_thresh: 5,
        rate_ai: 50,
        min_rate: 100,
        fast_react: true,
        multi_rate: true,
        sample_feedback: true,
        int_multi: 1,
        ..HpccParams::default()
    });
    replay(&p, MULTI_RATE_SAMPLED, false);
}

/// FAST_REACT 0, single rate, MI_THRESH 3, U_TARGET 0.9: ACKs between full updates do nothing.
#[test]
fn without_fast_react_matches_ns3() {
    let p = profile(HpccParams {
        u_target: 0.9,
        mi_thresh: 3,
        rate_ai: 50,
        min_rate: 100,
        fast_react: false,
        multi_rate: false,
        sample_feedback: false,
        int_multi: 1,
        ..HpccParams::default()
    });
    replay(&p, NO_FAST_REACT, true);
}

#[test]
fn profile_needs_a_window_and_names_bad_keys() {
    let path = FlowPath {
        window: 0,
        base_rtt: Duration::from_nanos(4160),
    };
    let e = HpccParams::default()
        .profile(Rate::from_gbps(100), path)
        .unwrap_err();
    assert!(e.to_string().contains("window"), "{e}");
    let path = FlowPath {
        window: 52_000,
        ..path
    };
    let e = HpccParams {
        u_target: 1.5,
        ..HpccParams::default()
    }
    .profile(Rate::from_gbps(100), path)
    .unwrap_err();
    assert!(e.to_string().contains("u_target"), "{e}");
}

#[test]
fn more_hops_than_int_carries_changes_nothing_but_the_update_point() {
    let p = profile(HpccParams::default());
    let mut s = HpccState::new(&p);
    let mut int = IntHops::default();
    for t in 0..6 {
        int.push(IntHop::new(t, 0, 0, Rate::from_gbps(100), 1).unwrap());
    }
    assert_eq!(s.on_ack(&p, 1, 1000, &int), HpccUpdate::First);
    assert_eq!(s.on_ack(&p, 1001, 2000, &int), HpccUpdate::None);
    assert_eq!(s.rate(), Rate::from_gbps(100));
}
