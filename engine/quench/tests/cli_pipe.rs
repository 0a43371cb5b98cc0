//! How commands end without being asked to fail: a reader that closes the pipe early
//! (`quench frames --decode f.pcap | head`) ends the command quietly with status 0, no panic and
//! no error message; SIGINT / SIGTERM end `quench stats --watch` and a long `quench sim` with
//! status 0, the simulator's outputs written for the virtual time it reached.
use std::process::{Command, Stdio};

#[test]
fn decode_into_a_closed_pipe_exits_quietly() {
    let dir = std::env::temp_dir().join(format!("quench-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("frames.pcap");
    let made = Command::new(env!("CARGO_BIN_EXE_quench"))
        .args(["frames", "--out"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_quench"))
        .args(["frames", "--decode"])
        .arg(&pcap)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The only read end closes before the first write, so every write fails with EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(err.is_empty(), "{err}");
}

#[test]
fn stats_watch_ends_on_sigint_and_sigterm_with_status_0() {
    use quench_runtime::switch::control::ControlSocket;
    use quench_runtime::switch::stats::Registry;
    use std::io::Read;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let path = std::env::temp_dir().join(format!("quench-watch-{}.sock", std::process::id()));
    let sock = ControlSocket::bind(&path).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let registry = Arc::new(Registry {
        info: vec![],
        counters: vec![],
        workers: vec![Arc::default()],
        clock: quench_wire::time::Clock::monotonic(),
    });
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || sock.serve(registry, stop))
    };
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_quench"))
            .args([
                "stats",
                "--watch",
                "--json",
                "--interval",
                "50ms",
                "--control-socket",
            ])
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The first snapshot is out: the handlers are installed.
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 1];
        out.read_exact(&mut first).unwrap();
        // Safety: signalling our own child by its pid.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(status.success(), "signal {sig}: {status:?} {err}");
    }
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap().unwrap();
}

#[test]
fn a_long_sim_ends_on_sigint_and_sigterm_with_its_outputs() {
    let dir = std::env::temp_dir().join(format!("quench-simsig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Three 100 GB flows into one 40 Gbit/s port: minutes of wall time.
    let scenario = dir.join("long.toml");
    let mut text = String::from(
        "cc = \"dcqcn\"\npreset = \"dcqcn-paper\"\nseed = 1\ntopology_text = \"\"\"\n5 1 4\n4\n\
         0 4 40Gbps 1us 0\n1 4 40Gbps 1us 0\n2 4 40Gbps 1us 0\n3 4 40Gbps 1us 0\n\"\"\"\n",
    );
    for src in 0..3 {
        text += &format!("[[flow]]\nsrc = {src}\ndst = 3\nbytes = 100000000000\n");
    }
    std::fs::write(&scenario, text).unwrap();
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let out = dir.join(format!("out-{sig}"));
        let child = Command::new(env!("CARGO_BIN_EXE_quench"))
            .args(["sim", "--quiet", "--scenario"])
            .arg(&scenario)
            .arg("--out")
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        // Safety: signalling our own child by its pid.
        unsafe { libc::kill(child.id() as i32, sig) };
        let r = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(r.status.success(), "signal {sig}: {:?} {err}", r.status);
        assert!(err.contains("interrupted at virtual time"), "{err}");
        let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&summary).unwrap();
        assert!(v.is_object(), "{summary}");
        assert!(out.join("flows.csv").exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
