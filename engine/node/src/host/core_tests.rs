//! The host core's scheduler (ported from the generator it replaced: its tests are the spec),
//! reaction-point re-timing, and the queued source.
use super::*;

/// A flow of 1500-octet frames at priority 3, capped at `rate`, starting `start_ms` after 0.
pub(crate) fn flow(
    id: u32,
    start_ms: u64,
    bytes: Option<u64>,
    rate: Rate,
) -> (FlowSpec, Generated) {
    (
        FlowSpec {
            id: FlowId(id),
            priority: 3,
            cap: rate,
            start: Instant::ZERO + Duration::from_millis(start_ms),
        },
        Generated {
            frame_len: 1500,
            remaining: bytes,
        },
    )
}

pub(crate) fn core_with(
    cfg: PacingConfig,
    flows: Vec<(FlowSpec, Generated)>,
) -> HostCore<Generated> {
    let mut c = HostCore::new(cfg, HostRp::None, None).unwrap();
    for (spec, src) in flows {
        c.add_flow(spec, src).unwrap();
    }
    c
}

const H0: FlowHandle = FlowHandle(0);

/// Drives the core with a driver that polls every `step` ns (first setting every flow's cap to
/// `rate(t)` when it says one), returns the frames sent.
fn run(
    g: &mut HostCore<Generated>,
    until_ns: u64,
    step: u64,
    rate: impl Fn(u64) -> Option<Rate>,
) -> Vec<Transmit<()>> {
    let mut out = Vec::new();
    let mut t = 0;
    let handles: Vec<FlowHandle> = g.flows().map(|(h, _)| h).collect();
    while t <= until_ns {
        let now = Instant::from_nanos(t);
        if let Some(r) = rate(t) {
            for &h in &handles {
                g.set_cap(now, h, r);
            }
        }
        while let Some(d) = g.poll_transmit(now) {
            assert!(d.release <= now, "released early");
            out.push(d);
        }
        t += step;
    }
    out
}

/// One unbounded flow of at most 1 Gb/s from time 0, paced as `cfg` says.
pub(crate) fn one_gbps_flow(cfg: PacingConfig) -> HostCore<Generated> {
    core_with(cfg, vec![flow(1, 0, None, Rate::from_gbps(1))])
}

/// One 1500-octet frame at 10 Mb/s is 1.2 ms; at 1 Gb/s, 12 us.
fn one_frame_then(rate: Rate) -> (HostCore<Generated>, Instant) {
    let mut g = one_gbps_flow(PacingConfig::default());
    let t0 = Instant::ZERO;
    g.set_cap(t0, H0, rate);
    assert!(g.poll_transmit(t0).is_some());
    assert!(g.poll_transmit(t0).is_none());
    (g, t0)
}

#[test]
fn a_rate_increase_brings_the_pending_release_forward_keeping_the_credit() {
    let (mut g, t0) = one_frame_then(Rate::from_mbps(10));
    // 300 us in, a quarter of the frame's 1.2 ms is earned; the other 900 us at 10 Mb/s are
    // 9 us at 1 Gb/s.
    let t1 = t0 + Duration::from_micros(300);
    g.set_cap(t1, H0, Rate::from_gbps(1));
    assert!(g.poll_transmit(t1 + Duration::from_nanos(8_900)).is_none());
    let d = g.poll_transmit(t1 + Duration::from_micros(10)).unwrap();
    assert_eq!(d.release, t1 + Duration::from_micros(9));
    assert_eq!(d.seq, 1);
    // The entry the old rate made (at 1.2 ms) is stale: at 1 Gb/s from 309 us on, exactly
    // the frames the rate allows follow, no extra one.
    let mut sent = 0;
    let mut t = t1 + Duration::from_micros(10);
    while t <= t0 + Duration::from_micros(1_500) {
        while g.poll_transmit(t).is_some() {
            sent += 1;
        }
        t += Duration::from_micros(1);
    }
    // Frames 2.. at 309 + 12 k us up to 1500 us: k = 1..=99.
    assert_eq!(sent, 99);
}

#[test]
fn a_rate_decrease_pushes_the_pending_release_back() {
    let (mut g, t0) = one_frame_then(Rate::from_gbps(1));
    // 6 us of the 12 us left at 1 Gb/s are 12 us at 500 Mb/s.
    let t1 = t0 + Duration::from_micros(6);
    g.set_cap(t1, H0, Rate::from_mbps(500));
    assert!(g.poll_transmit(t0 + Duration::from_micros(13)).is_none());
    let d = g.poll_transmit(t0 + Duration::from_micros(19)).unwrap();
    assert_eq!(d.release, t1 + Duration::from_micros(12));
    // The same rate again, a release already due, a zero rate: nothing moves.
    let (mut g, t0) = one_frame_then(Rate::from_gbps(1));
    g.set_cap(t0 + Duration::from_micros(3), H0, Rate::from_gbps(1));
    g.set_cap(t0 + Duration::from_micros(20), H0, Rate::from_mbps(1));
    g.set_cap(t0 + Duration::from_micros(3), H0, Rate::ZERO);
    // (Due at the first 256 ns wheel tick at or after 12 us.)
    let d = g.poll_transmit(t0 + Duration::from_micros(13)).unwrap();
    assert_eq!(d.release, t0 + Duration::from_micros(12));
}

#[test]
fn paced_rate_follows_the_rp_rate_within_1_percent_per_100ms() {
    let mut g = one_gbps_flow(PacingConfig::default());
    // The rate changes every 100 ms: 1 Gb/s, 300 Mb/s, 733 Mb/s; the driver polls every 3 us
    // (late by up to 3 us for each frame).
    let rp = |t: u64| {
        Some(match t / 100_000_000 {
            0 => Rate::from_gbps(1),
            1 => Rate::from_mbps(300),
            _ => Rate::from_mbps(733),
        })
    };
    let sent = run(&mut g, 300_000_000, 3_000, rp);
    for (w, want) in [(0u64, 1e9), (1, 300e6), (2, 733e6)] {
        let bytes: u64 = sent
            .iter()
            .filter(|d| d.release.as_nanos() / 100_000_000 == w)
            .map(|d| u64::from(d.len))
            .sum();
        let got = bytes as f64 * 8.0 / 0.1;
        assert!(
            (got / want - 1.0).abs() < 0.01,
            "window {w}: {got} vs {want}"
        );
    }
    // Sequence numbers are consecutive.
    assert!(sent.iter().enumerate().all(|(i, d)| d.seq == i as u64));
}

#[test]
fn sized_flows_start_on_time_and_finish() {
    let (mut f1, mut f2) = (
        flow(1, 0, Some(15_000), Rate::from_gbps(1)),
        flow(2, 1, Some(3_000), Rate::from_gbps(1)),
    );
    f1.0.start += Duration::from_nanos(1_000);
    f2.0.start += Duration::from_nanos(1_000);
    let mut g = core_with(PacingConfig::default(), vec![f1, f2]);
    let sent = run(&mut g, 5_000_000, 1_000, |_| None);
    let f2: Vec<_> = sent.iter().filter(|d| d.id == FlowId(2)).collect();
    assert_eq!(f2.len(), 2);
    assert!(f2[0].release >= Instant::from_nanos(1_001_000));
    assert_eq!(sent.iter().filter(|d| d.id == FlowId(1)).count(), 10);
    assert!(g.done());
    assert!(g.flows().all(|(_, f)| f.finished_at().is_some()));
    assert_eq!(g.next_deadline(), None);
}

#[test]
fn a_stalled_driver_does_not_burst_more_than_the_catch_up() {
    let mut g = one_gbps_flow(PacingConfig::default());
    assert!(g.poll_transmit(Instant::ZERO).is_some());
    // The driver stalls 10 ms, then drains: at most catch-up / 12 us + 2 frames.
    let n = std::iter::from_fn(|| g.poll_transmit(Instant::from_nanos(10_000_000))).count();
    assert!(n <= 50_000 / 12_000 + 2, "{n}");
    // What the flow could not catch up is counted: 10 ms behind, 50 us allowed, less the
    // frames the bound let through.
    let dropped = g.lag_dropped().as_nanos();
    let expected = 10_000_000 - 50_000 - 12_000;
    assert!(
        dropped.abs_diff(expected) <= 12_000 * n as u64,
        "{dropped} vs {expected}"
    );
}

#[test]
fn a_paused_priority_sends_nothing_and_resumes_without_a_burst() {
    let mut a = flow(1, 0, None, Rate::from_mbps(100));
    a.0.priority = 3;
    let mut b = flow(2, 0, None, Rate::from_mbps(100));
    b.0.priority = 5;
    let mut g = core_with(PacingConfig::default(), vec![a, b]);
    // Priority 3 paused from 0 to 10 ms; the driver polls every 10 us for 20 ms.
    let mut sent = Vec::new();
    let mut t = 0u64;
    while t <= 20_000_000 {
        let now = Instant::from_nanos(t);
        let until = (t < 10_000_000).then(|| Instant::from_nanos(10_000_000));
        g.handle_pause(now, 3, until);
        while let Some(d) = g.poll_transmit(now) {
            sent.push((t, d));
        }
        t += 10_000;
    }
    let of = |id: u32, from: u64, to: u64| {
        sent.iter()
            .filter(|(t, d)| d.id == FlowId(id) && (from..to).contains(t))
            .count()
    };
    // 100 Mb/s of 1500-octet frames: 8333 frames/s, ~83 per 10 ms.
    assert_eq!(of(1, 0, 10_000_000), 0);
    assert!(
        (82..=85).contains(&of(2, 0, 10_000_000)),
        "{}",
        of(2, 0, 10_000_000)
    );
    // After the pause: back at its rate, no catch-up of the 10 ms it missed.
    let after = of(1, 10_000_000, 20_000_001);
    assert!((82..=86).contains(&after), "{after}");
    let firsts: Vec<u64> = sent
        .iter()
        .filter(|(_, d)| d.id == FlowId(1))
        .map(|(t, _)| *t)
        .take(3)
        .collect();
    assert!(
        firsts[2] - firsts[0] >= 200_000,
        "burst after resume: {firsts:?}"
    );
}

/// Polls `g` every microsecond over the first 30 ms except during `stall`, with priority 3
/// paused during `paused`; returns the times frames left.
fn drive_with_stall(
    g: &mut HostCore<Generated>,
    stall: std::ops::Range<u64>,
    paused: std::ops::Range<u64>,
) -> Vec<u64> {
    let end = 30_000_000;
    let mut sent = Vec::new();
    let mut t = 0u64;
    while t < end {
        if !stall.contains(&t) {
            let now = Instant::from_nanos(t);
            let until = paused.contains(&t).then(|| Instant::from_nanos(paused.end));
            g.handle_pause(now, 3, until);
            while g.poll_transmit(now).is_some() {
                sent.push(t);
            }
        }
        t += 1_000;
    }
    sent
}

/// [`one_gbps_flow`] with a catch-up bound of `max_catch_up_ms` and `catch_up_speed`.
pub(crate) fn catching_up(
    max_catch_up_ms: u64,
    catch_up_speed: Option<f64>,
) -> HostCore<Generated> {
    one_gbps_flow(PacingConfig {
        max_catch_up: Duration::from_millis(max_catch_up_ms),
        catch_up_speed,
        ..PacingConfig::default()
    })
}

#[test]
fn a_bounded_catch_up_speed_makes_up_a_stall_without_a_burst() {
    let mut g = catching_up(10, Some(2.0));
    // 1 Gb/s, 1500-octet frames: one per 12 us. The driver is off the CPU from 5 to 8 ms.
    let sent = drive_with_stall(&mut g, 5_000_000..8_000_000, 0..0);
    // Everything owed was sent: 30 ms at 1 Gb/s is 2500 frames.
    assert!((2499..=2501).contains(&sent.len()), "{}", sent.len());
    // ... but not at once: at most PEAK_BURST's worth at the first poll after the stall
    // (200 us at 2x: 33 frames), and never more than twice the rate over any 1 ms after.
    let at = |t: u64| sent.iter().filter(|&&s| s == t).count();
    assert!(at(8_000_000) <= 34, "{} frames at once", at(8_000_000));
    let in_ms = |t: u64| {
        sent.iter()
            .filter(|&&s| (t..t + 1_000_000).contains(&s))
            .count()
    };
    let busiest = (8_000..29_000).map(|k| in_ms(k * 1_000)).max().unwrap();
    assert!(busiest <= 2 * 84 + 34, "{busiest} frames in 1 ms");
    // The 3 ms owed took about 3 ms more at 2x: caught up by ~11.2 ms, on schedule after.
    let by = |t: u64| sent.iter().filter(|&&s| s < t).count();
    assert!(
        (1000..=1005).contains(&by(12_000_000)),
        "{}",
        by(12_000_000)
    );
    assert_eq!(g.lag_dropped(), Duration::ZERO);

    // Without a bound on the speed the same stall comes out as one burst.
    let mut g = catching_up(10, None);
    let sent = drive_with_stall(&mut g, 5_000_000..8_000_000, 0..0);
    let burst = sent.iter().filter(|&&t| t == 8_000_000).count();
    assert!(burst >= 249, "{burst} frames at once");
}

#[test]
fn what_a_stall_owed_stays_owed_through_a_pause() {
    let mut g = catching_up(10, None);
    // Off the CPU from 5 to 8 ms, then paused from 8 to 13 ms: by 30 ms the flow has sent
    // the 25 ms it was not paused for (2083 frames of 12 us), the stall's 3 ms included.
    let sent = drive_with_stall(&mut g, 5_000_000..8_000_000, 8_000_000..13_000_000);
    assert!((2082..=2085).contains(&sent.len()), "{}", sent.len());
    assert!(sent.iter().all(|t| !(5_000_000..13_000_000).contains(t)));
    assert_eq!(g.lag_dropped(), Duration::ZERO);
}

#[test]
fn a_pause_is_not_owed_even_with_a_long_catch_up_bound() {
    let mut g = catching_up(20, Some(2.0));
    // Paused from 5 to 15 ms: by 30 ms the flow has sent 20 ms worth, not 30.
    let sent = drive_with_stall(&mut g, 0..0, 5_000_000..15_000_000);
    assert!((1665..=1670).contains(&sent.len()), "{}", sent.len());
    let after = sent
        .iter()
        .filter(|&&t| (15_000_000..16_000_000).contains(&t))
        .count();
    assert!(
        after <= 85,
        "{after} frames in the first ms after the pause"
    );
}

/// A QCN host (limiters at 1 Gb/s, timer period 1.5 ms) with one unbounded flow of 1 MB
/// frames: 8 ms each at 1 Gb/s, longer than the timer period.
fn qcn_host() -> HostCore<Generated> {
    qcn_host_with(PacingConfig::default())
}

fn qcn_host_with(pacing: PacingConfig) -> HostCore<Generated> {
    let p: ::rp::QcnParams =
        toml::from_str("rpg_byte_reset = 15000\nrpg_time_reset = 1500").unwrap();
    let rp = HostRp::qcn(p.profile(Rate::from_gbps(1)).unwrap());
    let mut c = HostCore::new(pacing, rp, None).unwrap();
    let (spec, mut src) = flow(1, 0, None, Rate::from_gbps(1));
    src.frame_len = 1_000_000;
    c.add_flow(spec, src).unwrap();
    c
}

/// Sends one frame at 0, cuts with a CNM (QntzFb 63), then polls every 5 us, running the
/// reaction point's timers if `timers`; returns when the second frame left and the rate it
/// left at.
fn second_frame_after_a_cut(timers: bool) -> (Instant, Rate) {
    second_frame_after_a_cut_with(PacingConfig::default(), timers)
}

fn second_frame_after_a_cut_with(pacing: PacingConfig, timers: bool) -> (Instant, Rate) {
    let mut g = qcn_host_with(pacing);
    let t0 = Instant::ZERO;
    assert!(g.poll_transmit(t0).is_some());
    g.handle_feedback(t0, H0, Feedback::Cnm(63)).unwrap();
    assert!(g.rate(H0) < Rate::from_mbps(600));
    let mut t = t0;
    loop {
        if timers {
            g.handle_timeout(t);
        }
        let rate = g.rate(H0);
        if let Some(d) = g.poll_transmit(t) {
            return (d.release, rate);
        }
        t += Duration::from_micros(5);
    }
}

#[test]
fn a_cnm_pushes_the_pending_release_back_and_the_recovery_timer_brings_it_forward() {
    // Cut to about half at 0: the 8 ms the frame had left stretch to about 15.8 ms.
    let (cut_only, cut) = second_frame_after_a_cut(false);
    assert!(
        (15_500_000..16_100_000).contains(&cut_only.as_nanos()),
        "{cut_only:?}"
    );
    // The pool's timer raises the rate every 1.5 ms (fast recovery halves the distance to the
    // target): each rise brings the pending release forward; a scheduler that kept the release
    // the cut set would still send at 15.8 ms.
    let (recovered, rate) = second_frame_after_a_cut(true);
    assert!(rate > cut, "{rate} vs {cut}");
    assert!(
        recovered.as_nanos() < 12_000_000,
        "{recovered:?} vs {cut_only:?}"
    );
    // A refused CNM (QntzFb beyond 6 bits) and one for no flow act on nothing.
    let mut g = qcn_host();
    assert_eq!(
        g.handle_feedback(Instant::ZERO, H0, Feedback::Cnm(64)),
        Err(Refused::Rejected)
    );
    assert_eq!(
        g.handle_feedback(Instant::ZERO, FlowHandle(9), Feedback::Cnm(1)),
        Err(Refused::NotOurs)
    );
}

/// ns-3 HPCC's `ChangeRate`: the pending release moves by the change of one frame's
/// serialisation time, later on a cut, earlier on a rise, each truncated to the nanosecond.
#[test]
fn move_release_shifts_by_the_frames_serialisation_time_change() {
    // The simulator's hosts: no re-timing, a wheel of 1 ns ticks.
    let pacing = PacingConfig {
        retime: false,
        tick: Duration::from_nanos(1),
        wheel_slots: 2,
        ..PacingConfig::default()
    };
    // One 1500-octet frame at 1 Gb/s at 0: the next at 12 us.
    let mut g = one_gbps_flow(pacing);
    assert!(g.poll_transmit(Instant::ZERO).is_some());
    // 1 Gb/s -> 300 Mb/s: 40,000 - 12,000 ns later, at 40 us.
    let (g1, g300) = (Rate::from_gbps(1), Rate::from_mbps(300));
    g.move_release(Instant::from_nanos(1_000), H0, g1, g300, 1500);
    assert!(g.poll_transmit(Instant::from_nanos(39_999)).is_none());
    assert_eq!(
        g.poll_transmit(Instant::from_nanos(40_000))
            .unwrap()
            .release,
        Instant::from_nanos(40_000)
    );
    // The next at 52 us (the flow's own rate is still 1 Gb/s); 1 -> 7 Gb/s, whose 1714.28 ns
    // truncate to 1714: 10,286 ns earlier.
    g.move_release(
        Instant::from_nanos(41_000),
        H0,
        g1,
        Rate::from_gbps(7),
        1500,
    );
    assert!(g.poll_transmit(Instant::from_nanos(41_713)).is_none());
    assert!(g.poll_transmit(Instant::from_nanos(41_714)).is_some());
}

#[test]
fn without_retime_a_rate_change_spaces_the_next_frame_only() {
    let pacing = PacingConfig {
        retime: false,
        ..PacingConfig::default()
    };
    // The 1,000,000-octet frame sent at 0 at 1 Gb/s set the next release at 8 ms; neither the
    // cut nor the timers' rises move it.
    let eight_ms = Instant::ZERO + Duration::from_millis(8);
    let (cut_only, _) = second_frame_after_a_cut_with(pacing, false);
    assert_eq!(cut_only, eight_ms);
    let (recovered, _) = second_frame_after_a_cut_with(pacing, true);
    assert_eq!(recovered, eight_ms);
    // The frame after it is spaced at the cut rate (the 8 ms of 1 Gb/s are not enough), at
    // most the cut rate's gap after it.
    let mut g = qcn_host_with(pacing);
    assert!(g.poll_transmit(Instant::ZERO).is_some());
    g.handle_feedback(Instant::ZERO, H0, Feedback::Cnm(63))
        .unwrap();
    let cut = g.rate(H0);
    let second = g.poll_transmit(eight_ms).expect("due at 8 ms");
    assert_eq!(second.release, eight_ms);
    let at_line = eight_ms + Duration::from_millis(8) + Duration::from_micros(1);
    assert!(g.poll_transmit(at_line).is_none());
    let gap = Duration::from_nanos(8_000_000_000_000_000 / cut.as_bps());
    assert!(g
        .poll_transmit(eight_ms + gap + Duration::from_micros(1))
        .is_some());
}

#[test]
fn a_dcqcn_cut_moves_the_release_and_its_timer_is_a_deadline() {
    let line = Rate::from_gbps(1);
    let rp = HostRp::Dcqcn(::rp::DcqcnParams::default().profile(line).unwrap());
    let mut g = HostCore::new(PacingConfig::default(), rp, None).unwrap();
    let (spec, src) = flow(1, 0, None, line);
    let h = g.add_flow(spec, src).unwrap();
    let t0 = Instant::ZERO;
    assert!(g.poll_transmit(t0).is_some());
    g.handle_feedback(t0, h, Feedback::Cnp).unwrap();
    // NVIDIA's defaults: the CNP only marks; the decrease check 4 us later cuts, and re-times
    // the release the 1 Gb/s frame set (12 us).
    let at = g.next_deadline().unwrap();
    assert!(at <= t0 + Duration::from_micros(5), "{at:?}");
    g.handle_timeout(at);
    let r = g.rate(h);
    assert!(r < line);
    assert!(g.poll_transmit(t0 + Duration::from_micros(12)).is_none());
    // A spurious timeout changes nothing.
    g.handle_timeout(at);
    assert_eq!(g.rate(h), r);
}

#[test]
fn a_queued_flow_sends_its_frames_in_order_then_waits_to_be_woken() {
    let mut g: HostCore<Queued<u32>> =
        HostCore::new(PacingConfig::default(), HostRp::None, None).unwrap();
    let spec = FlowSpec {
        id: FlowId(7),
        priority: 0,
        cap: Rate::from_gbps(1),
        start: Instant::ZERO,
    };
    let h = g.add_flow(spec, Queued::new()).unwrap();
    assert_eq!(
        g.add_flow(spec, Queued::new()).unwrap_err(),
        AddFlowError::Duplicate(FlowId(7))
    );
    let t0 = Instant::ZERO;
    // Nothing queued: nothing sent, the flow is not on the wheel.
    assert!(g.poll_transmit(t0).is_none());
    let q = g.source_mut(h).unwrap();
    q.push(1500, t0, 1, 3_000).unwrap();
    q.push(1500, t0, 2, 3_000).unwrap();
    assert_eq!(q.push(1, t0, 3, 3_000), Err(3), "bounded in octets");
    g.wake(t0, h);
    let a = g.poll_transmit(t0).unwrap();
    assert_eq!((a.item, a.len), ((t0, 1), 1500));
    assert!(g.poll_transmit(t0 + Duration::from_micros(11)).is_none());
    let b = g.poll_transmit(t0 + Duration::from_micros(13)).unwrap();
    assert_eq!(b.item.1, 2);
    assert!(g.poll_transmit(t0 + Duration::from_millis(1)).is_none());
    // Woken 1 ms later: its frame is due at once (an idle flow owes nothing), out at the
    // wheel's next tick.
    let t1 = t0 + Duration::from_millis(1);
    g.source_mut(h).unwrap().push(100, t1, 4, 3_000).unwrap();
    g.wake(t1, h);
    let c = g.poll_transmit(t1 + Duration::from_micros(1)).unwrap();
    assert_eq!((c.release, c.seq), (t1, 2));
    // Removed: its entries are stale, its slot is reused.
    g.source_mut(h).unwrap().push(100, t1, 5, 3_000).unwrap();
    g.wake(t1, h);
    let gone = g.remove_flow(h).unwrap();
    assert_eq!(gone.source.bytes(), 100);
    assert!(g.poll_transmit(t1 + Duration::from_millis(1)).is_none());
    let h2 = g
        .add_flow(
            FlowSpec {
                id: FlowId(8),
                ..spec
            },
            Queued::new(),
        )
        .unwrap();
    assert_eq!(h2, h);
    assert_eq!(g.find(FlowId(8)), Some(h2));
    assert_eq!(g.find(FlowId(7)), None);
}

#[test]
fn the_receive_side_answers_ce_with_a_cnp() {
    let np = ::np::Np::new(::np::NpParams::default().profile().unwrap());
    let mut g: HostCore<Generated> =
        HostCore::new(PacingConfig::default(), HostRp::None, Some(np)).unwrap();
    assert_eq!(
        g.handle_data(Instant::ZERO, FlowId(1), Ecn::Ce),
        Some(Feedback::Cnp)
    );
    assert_eq!(g.handle_data(Instant::ZERO, FlowId(2), Ecn::Ect0), None);
}

/// The sender appliance holds up to 1M flows and touches one flow's state per frame, at a
/// random place in memory (docs/design.md, "Sender appliance"): every 64
/// octets more is one more cache line a frame may miss on. DCQCN's state is boxed
/// (`FlowRp::Some`), a queue's octet count is 32-bit and its bound the driver's, the pacers
/// are stored in 12 octets (`rp::Pacer`), "no timer", "not started", "not finished" and "no
/// pending release" are sentinels or a flag, so a slot with a queued flow is three lines (it
/// was 400-odd octets), its oldest frame inline (`Queued`) for frames of up to 16 octets (a
/// pointer and a length: a pooled frame's handle). Its hot part (`Flow`'s order) is at most
/// as many lines as the slot, and the flow starts the slot: `Option` keeps its flag in a niche.
#[test]
fn a_queued_flow_fits_in_three_cache_lines() {
    fn lines<F>() {
        let flow = std::mem::size_of::<Flow<Queued<F>>>();
        let slot = std::mem::size_of::<Slot<Queued<F>>>();
        assert!(slot <= 3 * 64, "Flow {flow} octets, Slot {slot}");
        assert_eq!(std::mem::align_of::<Slot<Queued<F>>>(), 64);
        assert_eq!(std::mem::size_of::<Option<Flow<Queued<F>>>>(), flow);
        assert!(HostCore::<Queued<F>>::hot_lines() <= slot / 64);
    }
    lines::<u64>();
    lines::<(Box<[u8; 2048]>, usize)>();
}

/// A queue against a `VecDeque` model through random pushes, takes and drains: the same
/// frames in the same order and the same octet count, whether a frame sits inline or behind it.
#[test]
fn a_queue_keeps_its_frames_in_order_inline_or_behind() {
    let mut q: Queued<u32> = Queued::new();
    let mut model: VecDeque<(u32, Instant, u32)> = VecDeque::new();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for n in 0..20_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        match x % 8 {
            0..=3 => {
                let len = 100 + (x >> 8) as u32 % 1400;
                let at = Instant::from_nanos(u64::from(n));
                let fits = model.iter().map(|m| m.0).sum::<u32>() + len <= 10_000;
                assert_eq!(q.push(len, at, n, 10_000).is_ok(), fits);
                if fits {
                    model.push_back((len, at, n));
                }
            }
            4..=6 => {
                assert_eq!(q.peek(), model.front().map(|m| m.0));
                if let Some((_, at, f)) = model.pop_front() {
                    assert_eq!(q.take(), (at, f));
                }
            }
            _ => {
                if x % 64 == 7 {
                    assert!(q.drain().eq(model.drain(..)));
                }
            }
        }
        assert_eq!(q.bytes(), model.iter().map(|m| u64::from(m.0)).sum::<u64>());
        assert_eq!(q.is_empty(), model.is_empty());
        assert_eq!(q.backlogged(), !model.is_empty());
    }
}

/// ns-3's NIC (`RdmaEgressQueue::GetNextQindex`) serves the due queue pairs round-robin in the
/// order they were created, not earliest release first: a flow that starts while two others
/// keep the link busy gets every third frame from the next turn that is its own.
#[test]
fn with_ns3_spacing_due_flows_are_served_round_robin_in_creation_order() {
    let cfg = PacingConfig {
        tick: Duration::from_nanos(1),
        max_catch_up: Duration::ZERO,
        pause_shifts_schedule: false,
        spacing: Spacing::Ns3,
        retime: false,
        ..PacingConfig::default()
    };
    // 1500 octets at 100 Gb/s: 120 ns. Flows 1 and 2 at line rate from 0; flow 3, three
    // frames, from 1,010 ns. A NIC of the same rate takes one frame every 120 ns.
    let line = Rate::from_gbps(100);
    let mut small = flow(3, 0, Some(4_500), line);
    small.0.start = Instant::from_nanos(1_010);
    let mut g = core_with(
        cfg,
        vec![flow(1, 0, None, line), flow(2, 0, None, line), small],
    );
    let mut ids = Vec::new();
    for slot in 0..20 {
        if let Some(d) = g.poll_transmit(Instant::from_nanos(slot * 120)) {
            ids.push(d.id.0);
        }
    }
    // Flow 3 is due from slot 9 (1,080 ns); at slot 10, after 2 was served, it is 3's turn.
    // Earliest release first serves 1 there (its release is older) and 3 one slot later.
    assert_eq!(
        ids,
        [1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 1]
    );
}

#[test]
fn a_flow_owes_what_came_due_before_a_poll_but_not_its_pause_time() {
    // 1 Gb/s, 1500-octet frames: the second is due at 12 us.
    let mut g = catching_up(10, None);
    let t0 = Instant::ZERO;
    while g.poll_transmit(t0).is_some() {}
    let us = |n: u64| Instant::from_nanos(n * 1_000);
    assert!(!g.owes_from_before(H0, us(12)));
    assert!(g.owes_from_before(H0, us(13)));
    // Paused from 5 us to 1 ms (995 us, counted by the poll at 1 ms): due at 1007 us.
    g.handle_pause(us(5), 3, Some(us(1_000)));
    g.handle_pause(us(1_000), 3, None);
    assert!(!g.owes_from_before(H0, us(1_007)));
    assert!(g.owes_from_before(H0, us(1_008)));
    // A flow with nothing to send owes nothing.
    let mut g = core_with(
        PacingConfig::default(),
        vec![flow(1, 0, Some(1500), Rate::from_gbps(1))],
    );
    while g.poll_transmit(t0).is_some() {}
    assert!(!g.owes_from_before(H0, us(1_000)));
}

proptest::proptest! {
    /// A frame handed to an idle flow and released at once ([`HostCore::wake_and_transmit`]) is
    /// the frame a poll right then would release after [`HostCore::wake`], charged the same,
    /// and the cores go on alike: one wakes and polls, the other releases on arrival, through
    /// random frames for six flows (1500 and 64 octets at 1 Gb/s) and polls, on the wheel's
    /// ticks.
    #[test]
    fn releasing_on_arrival_is_what_the_wheel_would_release_next(
        ops in proptest::collection::vec((0u32..6, 0u64..40, 0u8..3), 1..300),
    ) {
        let cfg = PacingConfig::default();
        let tick = cfg.tick;
        let mk = || -> HostCore<Queued<u32>> {
            let mut c = HostCore::new(cfg, HostRp::None, None).unwrap();
            for id in 0..6 {
                let spec = FlowSpec {
                    id: FlowId(id),
                    priority: 0,
                    cap: Rate::from_gbps(1),
                    start: Instant::ZERO,
                };
                c.add_flow(spec, Queued::new()).unwrap();
            }
            c
        };
        let (mut polled, mut direct) = (mk(), mk());
        let mut now = Instant::ZERO;
        // Both start their flows at the first poll.
        proptest::prop_assert!(polled.poll_transmit(now).is_none());
        proptest::prop_assert!(direct.poll_transmit(now).is_none());
        for (n, (k, ticks, what)) in ops.into_iter().enumerate() {
            now += Duration::from_nanos(ticks * tick.as_nanos());
            let h = FlowHandle(k);
            if what < 2 {
                let len = if what == 0 { 1500 } else { 64 };
                for c in [&mut polled, &mut direct] {
                    c.source_mut(h).unwrap().push(len, now, n as u32, 1_000_000).unwrap();
                }
                polled.wake(now, h);
                if let Some(tx) = direct.wake_and_transmit(now, h) {
                    proptest::prop_assert_eq!(polled.poll_transmit(now), Some(tx));
                }
            } else {
                loop {
                    let (a, b) = (polled.poll_transmit(now), direct.poll_transmit(now));
                    proptest::prop_assert_eq!(&a, &b);
                    if a.is_none() {
                        break;
                    }
                }
            }
        }
    }
}

#[test]
fn an_idle_flows_frame_leaves_on_arrival_unless_the_wheel_holds_an_earlier_one() {
    let mut g: HostCore<Queued<u32>> =
        HostCore::new(PacingConfig::default(), HostRp::None, None).unwrap();
    let spec = |id| FlowSpec {
        id: FlowId(id),
        priority: 0,
        cap: Rate::from_gbps(1),
        start: Instant::ZERO,
    };
    let (a, b) = (
        g.add_flow(spec(1), Queued::new()).unwrap(),
        g.add_flow(spec(2), Queued::new()).unwrap(),
    );
    assert!(g.poll_transmit(Instant::ZERO).is_none(), "started, idle");
    let t = Instant::from_nanos(1_000);
    // Idle: out at once, at its arrival.
    g.source_mut(a).unwrap().push(1500, t, 1, 10_000).unwrap();
    let tx = g.wake_and_transmit(t, a).unwrap();
    assert_eq!((tx.item, tx.release, tx.seq), ((t, 1), t, 0));
    // Its next frame owes 12 us at 1 Gb/s: it waits on the wheel.
    g.source_mut(a).unwrap().push(1500, t, 2, 10_000).unwrap();
    assert!(g.wake_and_transmit(t, a).is_none());
    // Another idle flow's frame, while the wheel holds `a`'s for a later slot: out at once.
    g.source_mut(b).unwrap().push(64, t, 3, 10_000).unwrap();
    assert_eq!(g.wake_and_transmit(t, b).unwrap().item, (t, 3));
    // At `a`'s release, `b`'s second frame arrives before the poll: `a`'s entry is due in the
    // same slot or an earlier one, so `b`'s waits behind it.
    let t2 = t + Duration::from_micros(100);
    g.source_mut(b).unwrap().push(64, t2, 4, 10_000).unwrap();
    assert!(g.wake_and_transmit(t2, b).is_none());
    assert_eq!(g.poll_transmit(t2).unwrap().item, (t, 2));
    assert_eq!(
        g.poll_transmit(t2 + Duration::from_nanos(256))
            .unwrap()
            .item,
        (t2, 4)
    );
}

/// Polls a 1 Gb/s flow of 1500-octet frames with a 1 ms catch-up bound (the appliance's) every
/// microsecond for 30 ms, priority 3 paused during `paused`, its cap set to each `(time, rate)`
/// of `caps` at that time (a reaction point's rate change: [`HostCore::set_cap`] re-times as
/// feedback and timers do); returns the core and the times frames left.
fn paused_with_rate_changes(
    paused: std::ops::Range<u64>,
    caps: &[(u64, Rate)],
) -> (HostCore<Generated>, Vec<u64>) {
    let mut g = catching_up(1, None);
    let mut sent = Vec::new();
    for t in (0..30_000_000u64).step_by(1_000) {
        let now = Instant::from_nanos(t);
        for &(_, r) in caps.iter().filter(|&&(at, _)| at == t) {
            g.set_cap(now, H0, r);
        }
        let until = paused.contains(&t).then(|| Instant::from_nanos(paused.end));
        g.handle_pause(now, 3, until);
        while g.poll_transmit(now).is_some() {
            sent.push(t);
        }
    }
    (g, sent)
}

#[test]
fn a_rate_change_during_a_pause_neither_owes_nor_loses_the_pause() {
    // Paused from 5 to 8 ms, cut from 1 Gb/s to 500 Mb/s at 7.5 ms: 5 ms at 1 Gb/s (417
    // frames of 12 us) and 22 ms at 500 Mb/s (917 of 24 us), nothing given up. Counting the
    // 2.5 ms paused so far as owed, the cut doubled it and the catch-up bound gave 4 ms up
    // (`lag_dropped`, which a pacing audit reads as a stall of the loop).
    let (g, sent) =
        paused_with_rate_changes(5_000_000..8_000_000, &[(7_500_000, Rate::from_mbps(500))]);
    assert!((1332..=1335).contains(&sent.len()), "{}", sent.len());
    assert_eq!(g.lag_dropped(), Duration::ZERO);
    // The frame due when the pause began leaves when the gap it had left, re-timed at the
    // new rate, is over: within one 24 us gap of the pause's end.
    let first_after = sent.iter().find(|&&t| t >= 5_000_000).copied().unwrap();
    assert!(
        (8_000_000..=8_024_000).contains(&first_after),
        "{first_after}"
    );

    // A rise in the pause (500 Mb/s to 1 Gb/s at 7.5 ms): 5 ms at 500 Mb/s, 22 ms at 1 Gb/s.
    let caps = [(0, Rate::from_mbps(500)), (7_500_000, Rate::from_gbps(1))];
    let (g, sent) = paused_with_rate_changes(5_000_000..8_000_000, &caps);
    assert!((2041..=2044).contains(&sent.len()), "{}", sent.len());
    assert_eq!(g.lag_dropped(), Duration::ZERO);

    // A short pause (5 to 5.5 ms) with a cut to 250 Mb/s in it: 417 frames before, 24.5 ms at
    // 250 Mb/s (510 of 48 us) after. Counted as owed, the cut made the 0.4 ms paused 1.6 ms,
    // and what the pause's end left of it (0.6 ms at 250 Mb/s) came out as 12 frames more.
    let (g, sent) =
        paused_with_rate_changes(5_000_000..5_500_000, &[(5_400_000, Rate::from_mbps(250))]);
    assert!((926..=929).contains(&sent.len()), "{}", sent.len());
    assert_eq!(g.lag_dropped(), Duration::ZERO);
}

#[test]
fn a_rise_while_frames_are_owed_sends_the_octets_owed_not_more() {
    // 1500-octet frames; the driver polls every 50 us and, before each poll, the flow's rate
    // alternates between 500 Mb/s and 1 Gb/s (a reaction point's cuts and rises, each while
    // the frames that came due since the last poll wait for it). The flow sends its rate's
    // integral over the polls: each interval at the rate set at its start. A pacer that
    // restarts the schedule from the wheel's entry after a rise keeps the owed time of the old
    // rate and so sends the difference again at the new one (+8 % here).
    let mut g = catching_up(1, None);
    let step = 50_000u64;
    let (mut bits_allowed, mut bits_sent) = (0u64, 0u64);
    let mut t = 0u64;
    let mut r = Rate::ZERO;
    while t <= 100_000_000 {
        // A poll sends what came due up to it: the integral up to it, at the rate set at the
        // last poll.
        bits_allowed += r.as_bps() * t.min(step) / 1_000_000_000;
        let now = Instant::from_nanos(t);
        r = if (t / step) % 2 == 0 {
            Rate::from_mbps(500)
        } else {
            Rate::from_gbps(1)
        };
        g.set_cap(now, H0, r);
        while let Some(d) = g.poll_transmit(now) {
            bits_sent += u64::from(d.len) * 8;
        }
        t += step;
    }
    let dev = bits_sent as f64 / bits_allowed as f64 - 1.0;
    // Within a frame (12 kbit) of 75 Mbit.
    assert!(
        dev.abs() < 0.0002,
        "sent {bits_sent} bits of {bits_allowed}: {dev:+.5}"
    );
}
