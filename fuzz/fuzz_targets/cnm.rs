#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::cnm::CnmRepr;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = CnmRepr::parse(data) {
        let mut out = [0u8; 24 + 64];
        let n = r.emit(&mut out).expect("emit");
        assert_eq!(&out[..n], &data[..n], "CNM round-trips");
    }
});
