#![no_main]

use quench_runtime::switch::control::{parse_request, MAX_REQUEST};
use libfuzzer_sys::fuzz_target;

// The control socket's request parser: any bytes give a request or a refusal that serialises to
// JSON naming its kind, never a panic.
fuzz_target!(|data: &[u8]| {
    match parse_request(data) {
        Ok(_) => {
            let line = data.split(|&b| b == b'\n').next().unwrap_or(data);
            assert!(line.len() <= MAX_REQUEST, "an over-long request was accepted");
        }
        Err(e) => {
            let v: serde_json::Value = serde_json::from_str(&e.to_json()).expect("error is JSON");
            assert_eq!(v["error"]["kind"].as_str(), Some(e.kind()));
        }
    }
});
