use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn us(u: u64) -> Instant {
    Instant::from_nanos(u * 1_000)
}

fn np(params: NpParams) -> Np {
    Np::new(params.profile().unwrap())
}

const A: FlowId = FlowId(1);
const B: FlowId = FlowId(2);

#[test]
fn interval_mode_sends_at_most_one_cnp_per_interval() {
    // The paper's 50 us.
    let mut n = np(NpParams {
        min_time_between_cnps: 50,
        ..NpParams::default()
    });
    assert_eq!(n.on_arrival(us(0), A, Mark::Unmarked), Decision::Nothing);
    assert_eq!(n.on_arrival(us(1), A, Mark::Ce), Decision::SendCnp);
    assert_eq!(n.on_arrival(us(2), A, Mark::Ce), Decision::CnpSuppressed);
    assert_eq!(
        n.on_arrival(us(2), B, Mark::Ce),
        Decision::SendCnp,
        "per flow"
    );
    // 1 us + 50 us = 51 us: 50.999 us is still inside, 51 us is not.
    assert_eq!(
        n.on_arrival(Instant::from_nanos(50_999), A, Mark::Ce),
        Decision::CnpSuppressed
    );
    assert_eq!(n.on_arrival(us(51), A, Mark::Ce), Decision::SendCnp);
    let c = n.counters();
    assert_eq!((c.arrivals, c.ce, c.cnps, c.suppressed), (6, 5, 3, 2));
}

#[test]
fn per_packet_mode_answers_every_marked_packet() {
    let mut n = np(NpParams {
        cnp_mode: CnpMode::PerPacket,
        min_time_between_cnps: 0, // unused in this mode
        ..NpParams::default()
    });
    for _ in 0..5 {
        assert_eq!(n.on_arrival(us(0), A, Mark::Ce), Decision::SendCnp);
    }
    assert_eq!(n.tracked(), 0);
}

#[test]
fn tcd_ue_is_its_own_decision() {
    let mut n = np(NpParams {
        tcd: true,
        ..NpParams::default()
    });
    let ue = Mark::from_ecn(0b10, n.profile().tcd);
    assert_eq!(ue, Mark::Ue);
    assert_eq!(
        Mark::from_ecn(0b10, false),
        Mark::Unmarked,
        "ECT(0) without TCD"
    );
    assert_eq!(Mark::from_ecn(0b11, true), Mark::Ce);
    assert_eq!(Mark::from_ecn(0b01, true), Mark::Unmarked);
    assert_eq!(n.on_arrival(us(0), A, ue), Decision::SendUe);
    assert_eq!(n.on_arrival(us(1), A, ue), Decision::UeSuppressed);
    // A CE right after a UE still gets its CNP: separate spacing.
    assert_eq!(n.on_arrival(us(1), A, Mark::Ce), Decision::SendCnp);
    assert_eq!(n.on_arrival(us(4), A, ue), Decision::SendUe);
    assert_eq!(n.counters().ue_sent, 2);
}

#[test]
fn full_table_suppresses_new_flows_until_an_entry_ages_out() {
    let mut n = np(NpParams {
        max_flows: 2,
        min_time_between_cnps: 10,
        ..NpParams::default()
    });
    assert_eq!(n.on_arrival(us(0), A, Mark::Ce), Decision::SendCnp);
    assert_eq!(n.on_arrival(us(5), B, Mark::Ce), Decision::SendCnp);
    assert_eq!(
        n.on_arrival(us(6), FlowId(3), Mark::Ce),
        Decision::TableFull
    );
    assert_eq!(n.counters().table_full, 1);
    assert_eq!(n.tracked(), 2);
    // At 10 us A's entry is one interval old: dropped, room for flow 3.
    assert_eq!(n.on_arrival(us(10), FlowId(3), Mark::Ce), Decision::SendCnp);
    assert_eq!(n.tracked(), 2);
    // A is untracked now and may get a CNP again, but the table is full (B, 3) until 15 us.
    assert_eq!(n.on_arrival(us(11), A, Mark::Ce), Decision::TableFull);
    assert_eq!(n.on_arrival(us(15), A, Mark::Ce), Decision::SendCnp);
}

#[test]
fn validation_names_the_parameter() {
    let e = NpParams {
        min_time_between_cnps: 0,
        ..NpParams::default()
    }
    .profile()
    .unwrap_err();
    assert_eq!(e.param, "min_time_between_cnps");
    let e = NpParams {
        max_flows: 0,
        ..NpParams::default()
    }
    .profile()
    .unwrap_err();
    assert!(e.to_string().contains("max_flows"), "{e}");
}

proptest! {
    /// Random arrivals: against a model of the spacing rule and the bounded table, and the
    /// invariants: per flow and kind, sends are never closer than the interval; the table
    /// never holds more than max_flows flows.
    #[test]
    fn cnp_spacing_never_below_the_interval(
        interval_us in 1u64..100,
        max_flows in 1u32..5,
        arrivals in proptest::collection::vec((0u64..30_000, 0u32..8, 0u8..4), 1..500),
    ) {
        let params = NpParams {
            min_time_between_cnps: interval_us,
            max_flows,
            tcd: true,
            ..NpParams::default()
        };
        let interval = Duration::from_micros(interval_us);
        let mut n = Np::new(params.profile().unwrap());
        let mut now = Instant::ZERO;
        let mut last: BTreeMap<(u32, bool), Instant> = BTreeMap::new();
        for (dt, flow, bits) in arrivals {
            now += Duration::from_nanos(dt);
            let mark = Mark::from_ecn(bits, true);
            // Model: flows tracked = those with any send less than one interval ago.
            let live: std::collections::BTreeSet<u32> = last
                .iter()
                .filter(|(_, &t)| now - t < interval)
                .map(|(&(f, _), _)| f)
                .collect();
            let d = n.on_arrival(now, FlowId(flow), mark);
            let want = match mark {
                Mark::Unmarked => Decision::Nothing,
                _ if !live.contains(&flow) && live.len() >= max_flows as usize => {
                    Decision::TableFull
                }
                Mark::Ce | Mark::Ue => {
                    let is_ce = mark == Mark::Ce;
                    let recent = last.get(&(flow, is_ce)).is_some_and(|&t| now - t < interval);
                    match (is_ce, recent) {
                        (true, true) => Decision::CnpSuppressed,
                        (true, false) => Decision::SendCnp,
                        (false, true) => Decision::UeSuppressed,
                        (false, false) => Decision::SendUe,
                    }
                }
            };
            prop_assert_eq!(d, want);
            if matches!(d, Decision::SendCnp | Decision::SendUe) {
                let key = (flow, d == Decision::SendCnp);
                if let Some(&prev) = last.get(&key) {
                    prop_assert!(now - prev >= interval);
                }
                last.insert(key, now);
            }
            prop_assert!(n.tracked() <= max_flows as usize);
        }
    }
}
