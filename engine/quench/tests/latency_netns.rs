//! Latency across machines on the veth testbed (root): `quench send` measures the round trip of
//! the frames `quench recv --reflect` sends back through `quench switch`, and the receiver
//! reports one-way latency only when the sender's clock id is its own (a sender stamping
//! another clock id stands for another machine).
mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{lock, netns_or_skip, Testbed};

/// `quench switch --json` between the testbed's ports, stopped (SIGTERM) on drop.
struct Switch(Option<Child>);

impl Switch {
    /// Stops the switch; returns its standard output.
    fn stop(&mut self) -> String {
        let Some(c) = self.0.take() else {
            return String::new();
        };
        // Safety: signalling our own child by its pid.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let out = c.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every line of `stdout` is a JSON object (`--json`: nothing else goes there); returns the
/// `progress` objects, checked to be `command`'s and a second apart, and the other lines.
fn json_lines(stdout: &str, command: &str) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    let (mut progress, mut rest) = (Vec::new(), Vec::new());
    for l in stdout.lines() {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}"));
        assert!(v["type"].is_string(), "every JSON line says its type: {l}");
        match v.get("progress") {
            Some(p) => {
                assert_eq!(v["type"], "progress");
                progress.push(p.clone());
            }
            None => rest.push(v),
        }
    }
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["command"], command, "{p}");
        let t = p["t_ns"].as_u64().unwrap() as f64 / 1e9;
        assert!(t >= (i + 1) as f64 - 1e-3, "progress {i} at {t} s");
    }
    (progress, rest)
}

fn start_switch(tb: &Testbed, dir: &Path) -> Switch {
    let mut cfg = format!(
        "control_socket = {:?}\n",
        dir.join("ctl.sock").display().to_string()
    );
    for name in ["s0", "r0"] {
        cfg += &format!(
            "[[ports]]\nname = \"{name}\"\niface = \"{}-sw-{name}\"\n",
            tb.prefix
        );
    }
    let path = dir.join("switch.toml");
    std::fs::write(&path, cfg).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", &tb.ns("sw")])
        .arg(env!("CARGO_BIN_EXE_quench"))
        .args(["switch", "--json", "--config"])
        .arg(&path)
        .args(["--duration", "30s", "--capture"])
        .arg(format!("r0={}", dir.join("r0.pcap").display()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    Switch(Some(child))
}

/// One run: `quench recv --reflect` in r0, `quench send` in s0 (`extra` arguments); returns
/// the receiver's summary and the sender's round-trip summary.
fn run(tb: &Testbed, dir: &Path, extra: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let rtt_dir = dir.join("rtt");
    let recv = Command::new("ip")
        .args(["netns", "exec", &tb.ns("r0")])
        .arg(env!("CARGO_BIN_EXE_quench"))
        .args(["recv", "--iface", "eth0", "--no-cnp", "--reflect", "--json"])
        .args(["--duration", "3500ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let send = Command::new(env!("CARGO_BIN_EXE_quench"))
        .args(["send", "--iface", &format!("{}/eth0", tb.ns("s0"))])
        .args([
            "--cc",
            "none",
            "--rate",
            "20mbit",
            "--duration",
            "2s",
            "--json",
        ])
        .arg("--out")
        .arg(&rtt_dir)
        .args(extra)
        .output()
        .unwrap();
    let sout = String::from_utf8_lossy(&send.stdout).to_string();
    assert!(
        send.status.success(),
        "{sout}\n{}",
        String::from_utf8_lossy(&send.stderr)
    );
    let r = recv.wait_with_output().unwrap();
    let rout = String::from_utf8_lossy(&r.stdout).to_string();
    let rerr = String::from_utf8_lossy(&r.stderr).to_string();
    assert!(r.status.success(), "{rout}\n{rerr}");
    // --json: the human table on stderr, JSON lines only on stdout.
    assert!(
        rerr.contains("test frames reflected to their senders"),
        "{rerr}"
    );
    let (progress, rest) = json_lines(&rout, "recv");
    assert!(progress.len() >= 3, "{rout}");
    let last = progress.last().unwrap();
    assert!(
        last["frames"].as_u64().unwrap() > 0 && last["reflected"] == last["frames"],
        "{last}"
    );
    assert!(
        progress.iter().any(|p| p["rx_bps"].as_f64().unwrap() > 1e6),
        "{rout}"
    );
    let (sprogress, srest) = json_lines(&sout, "send");
    assert!(!sprogress.is_empty(), "{sout}");
    assert!(sprogress[0]["tx_bps"].as_f64().unwrap() > 1e6, "{sout}");
    // The sender's report directory says what it holds.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rtt_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["latency_kind"], "rtt");
    let hgrm = std::fs::read_to_string(rtt_dir.join("rtt.hgrm")).unwrap();
    assert!(hgrm.contains("Total count"), "{hgrm}");
    let hlog = std::fs::read_to_string(rtt_dir.join("intervals.hlog")).unwrap();
    assert!(hlog.contains("lat.<flow> = rtt (ns)"), "{hlog}");
    assert!(String::from_utf8_lossy(&send.stderr).contains("== rtt "));
    let _ = std::fs::remove_dir_all(&rtt_dir);
    let recv_summary = rest.last().unwrap().clone();
    let rtt = srest
        .iter()
        .find(|v| v.get("rtt").is_some())
        .expect("rtt line");
    (recv_summary, rtt["rtt"].clone())
}

#[test]
fn rtt_through_the_switch_and_one_way_only_on_a_shared_clock() {
    if !netns_or_skip("rtt_through_the_switch_and_one_way_only_on_a_shared_clock") {
        return;
    }
    let _l = lock();
    let tb = Testbed::up(format!("q{}l", std::process::id() % 1000), 1, 1);
    let dir = std::env::temp_dir().join(format!("{}-lat", tb.prefix));
    std::fs::create_dir_all(&dir).unwrap();
    let mut sw = start_switch(&tb, &dir);

    // One host, one clock: the receiver reports one-way latency, the sender the round trip.
    let (recv, rtt) = run(&tb, &dir, &[]);
    let sent = recv["flows"][0]["frames"].as_u64().unwrap();
    assert!(sent > 100, "{recv}");
    assert_eq!(recv["latency_kind"], "one_way");
    assert!(recv.get("one_way_refused").is_none(), "{recv}");
    assert_eq!(recv["latency"]["count"].as_u64(), Some(sent), "{recv}");
    // AF_PACKET ports stamp every frame in the kernel (veth has no hardware stamps).
    let ts = &recv["rx_timestamps"];
    assert_eq!(ts["poll_loop"], 0, "{recv}");
    assert!(ts["software"].as_u64().unwrap() + ts["ring"].as_u64().unwrap() >= sent);
    assert_eq!(rtt["latency_kind"], "rtt");
    let back = rtt["flows"][0]["frames"].as_u64().unwrap();
    assert!(back > 100 && back <= sent, "{rtt}");
    assert_eq!(rtt["latency"]["count"].as_u64(), Some(back), "{rtt}");
    assert!(rtt["latency"]["p50_ns"].as_u64().unwrap() > 0);

    // Another clock (a sender standing for another machine): one-way refused with the reason,
    // the round trip still measured on the sender's own clock.
    let (recv, rtt) = run(&tb, &dir, &["--clock-id", "1193046"]);
    let why = recv["one_way_refused"]
        .as_str()
        .expect("one-way not refused");
    assert!(why.contains("clock 0x123456"), "{why}");
    assert!(why.contains("quench recv --reflect"), "{why}");
    assert_eq!(recv["latency"]["count"], 0, "{recv}");
    let f = &recv["flows"][0];
    assert_eq!(f["foreign_clock"], f["frames"], "{recv}");
    assert!(rtt["latency"]["count"].as_u64().unwrap() > 100, "{rtt}");
    let (progress, rest) = json_lines(&sw.stop(), "switch");
    assert!(progress.len() >= 5, "{progress:?}");
    assert!(progress.iter().any(|p| p["tx_bps"].as_f64().unwrap() > 1e6));
    assert_eq!(progress[0]["ports"].as_array().unwrap().len(), 2);
    // The final snapshot: what `quench stats --json` prints.
    assert!(
        rest.last().unwrap()["ports"][1]["tx_pkts"]
            .as_u64()
            .unwrap()
            > 200
    );
    check_capture(&dir.join("r0.pcap"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `switch --capture` wrote a nanosecond pcap that tshark reads, one timestamp per frame: the
/// frames of one burst do not share one.
fn check_capture(path: &Path) {
    let out = match Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-e", "frame.time_epoch"])
        .output()
    {
        Ok(o) => o,
        Err(_) => {
            eprintln!("skipping the capture check: tshark not installed");
            return;
        }
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        &bytes[..4],
        &0xA1B2_3C4Du32.to_le_bytes(),
        "nanosecond magic"
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let stamps: Vec<&str> = text.lines().collect();
    assert!(stamps.len() > 200, "{} frames captured", stamps.len());
    // tshark prints nine decimals for a nanosecond file.
    assert!(
        stamps
            .iter()
            .all(|s| s.split('.').nth(1).map(str::len) == Some(9)),
        "{}",
        stamps[0]
    );
    let distinct: std::collections::BTreeSet<&&str> = stamps.iter().collect();
    assert_eq!(
        distinct.len(),
        stamps.len(),
        "every frame has its own timestamp"
    );
}
