#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::ack::{AckRepr, LEN};
use quench_wire::int::HOPS_LEN;

fuzz_target!(|data: &[u8]| {
    if let Ok(a) = AckRepr::parse(data) {
        let mut out = [0u8; LEN + HOPS_LEN];
        let n = a.emit(&mut out).expect("emit");
        assert_eq!(&out[..n], &data[..n], "ACK round-trips");
    }
});
