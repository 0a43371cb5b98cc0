//! The receiver started as a library ([`RecvLoop::start`]), without the `quench` binary: on a
//! veth pair in a network namespace of the test's own, a flow's test frames (some CE-marked)
//! sent into the port are counted, the marks answered with CNPs, the handle's live stats show
//! both, and stop and join end the loop with its summary. Needs root (namespaces, veth pairs);
//! skipped with a printed reason otherwise.
mod common;

use common::{receive, wait_for, Netns};
use quench_runtime::recv::runtime::{RecvLoop, RecvOptions};
use quench_runtime::recv::sink::{np_profile, SinkOptions};
use quench_wire::frame::test_frame;
use units::{Duration, Ecn};

#[test]
fn a_receiver_started_as_a_library_counts_answers_reports_live_and_stops() {
    if let Some(why) = common::cannot_run() {
        eprintln!("skipping a_receiver_started_as_a_library: {why}");
        return;
    }
    let ns = Netns::with_veths("recv", &[("r0", "r1")]);
    let options = RecvOptions {
        iface: ns.port("r0"),
        driver: Default::default(),
        sink: SinkOptions::defaults(Some(np_profile(None).unwrap())),
        duration: Duration::from_secs(60),
        idle: "100us".parse().unwrap(),
        stop: None,
    };
    let recv = RecvLoop::start(options).unwrap();
    assert!(
        recv.notes()[0].starts_with("the loop "),
        "{:?}",
        recv.notes()
    );
    let mut back = ns.open("r1");
    let frames: Vec<Vec<u8>> = (1..=20)
        .map(|seq| {
            let ecn = if seq % 2 == 0 { Ecn::Ce } else { Ecn::Ect0 };
            test_frame(7, seq, 0, ecn, None)
        })
        .collect();
    ns.send("r1", &frames);
    let live = wait_for(|| recv.stats(), |s| s.frames >= 20);
    assert_eq!(live.frames, 20, "{live:?}");
    assert_eq!(live.flows, 1, "{live:?}");
    assert!(live.cnps_sent >= 1, "CE answered: {live:?}");
    // RoCEv2 CNPs (UDP port 4791) come back out of the port.
    let cnps = receive(&mut back, 1, |f| {
        f.len() > 42 && f.windows(2).any(|w| w == [0x12, 0xb7])
    });
    assert!(!cnps.is_empty(), "a CNP leaves the receiver's port");
    assert!(!recv.is_stopped() && !recv.is_finished());
    recv.stop();
    let end = recv.join().unwrap();
    assert_eq!(end.summary.flows.len(), 1);
    assert_eq!(
        end.summary.flows[0].frames, 20,
        "{:?}",
        end.summary.flows[0]
    );
}
