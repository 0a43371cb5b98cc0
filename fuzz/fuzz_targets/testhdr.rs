#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::testhdr::TestHdrRepr;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = TestHdrRepr::parse(data) {
        let mut out = [0u8; 28];
        r.emit(&mut out).expect("emit");
        assert_eq!(&out[..], &data[..28], "test header round-trips");
    }
});
