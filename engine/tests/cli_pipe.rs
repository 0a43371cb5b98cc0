//! A reader that closes the pipe early (`quench frames --decode f.pcap | head`) ends the command
//! quietly with status 0: no panic, no error message.
use std::process::{Command, Stdio};

#[test]
fn decode_into_a_closed_pipe_exits_quietly() {
    let dir = std::env::temp_dir().join(format!("quench-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("frames.pcap");
    let made = Command::new(env!("CARGO_BIN_EXE_quench"))
        .args(["frames", "--pcap"])
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
