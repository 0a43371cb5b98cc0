//! The sender started as a library ([`SendLoop::start`]), without the `quench` binary: on a
//! veth pair in a network namespace of the test's own, its flow leaves one end and a sink in
//! the same loop receives it at the other; the handle's live stats show both, and stop and join
//! end the loop with its report (the flow's frames, the sink's summary). Needs root
//! (namespaces, veth pairs); skipped with a printed reason otherwise.
mod common;

use common::{wait_for, Netns};
use quench_config::bundled::Source;
use quench_runtime::recv::sink::SinkOptions;
use quench_runtime::send::config::PortConfig;
use quench_runtime::send::runtime::{SendLoop, SendOptions, SendPortSpec};
use units::Duration;

const CONFIG: &str = r#"
line_rate = "1gbit"
src_ip = "10.71.0.1"
dst_ip = "10.71.0.101"
[[flows]]
destination = "02:71:6e:02:00:00"
priority = 3
rate = "10mbit"
"#;

#[test]
fn a_sender_started_as_a_library_sends_reports_live_and_stops() {
    if let Some(why) = common::cannot_run() {
        eprintln!("skipping a_sender_started_as_a_library: {why}");
        return;
    }
    let ns = Netns::with_veths("send", &[("s0", "s1")]);
    let src = Source {
        text: CONFIG.to_string().into(),
        origin: "lib.toml".into(),
        dir: ".".into(),
    };
    let options = SendOptions {
        ports: vec![SendPortSpec {
            label: ns.port("s0"),
            config: PortConfig::resolve(src, None, None, None).unwrap(),
            src_ip: None,
        }],
        driver: Default::default(),
        flow_base: 1,
        flow_stride: 100,
        sinks: vec![(ns.port("s1"), SinkOptions::defaults(None))],
        clock_id: None,
        duration: Duration::from_secs(60),
        linger: Duration::from_millis(100),
        idle: "100us".parse().unwrap(),
        stop: None,
    };
    let send = SendLoop::start(options).unwrap();
    assert!(
        send.notes()[0].starts_with("the loop "),
        "{:?}",
        send.notes()
    );
    // 10 Mbit/s of 1500-octet frames: ~830 a second.
    let live = wait_for(|| send.stats(), |s| s.sink_frames >= 100);
    assert!(live.sent.frames >= 100, "{live:?}");
    assert!(live.sink_frames >= 100, "{live:?}");
    assert!(!send.is_stopped() && !send.is_finished());
    send.stop();
    let report = send.join().unwrap();
    let port = &report.ports[0];
    assert_eq!(port.label, ns.port("s0"));
    let sent = port.w.counters().frames;
    assert!(sent >= live.sent.frames, "{sent} < {live:?}");
    assert!(port
        .table(report.secs, &report.stalls)
        .contains(&format!("sent {sent} frames")));
    assert_eq!(port.to_json(report.secs, &report.stalls)["frames"], sent);
    let sink = &report.sinks[0].summary;
    assert_eq!(sink.flows.len(), 1, "one flow received");
    assert!(sink.flows[0].frames >= 100, "{:?}", sink.flows[0]);
}
