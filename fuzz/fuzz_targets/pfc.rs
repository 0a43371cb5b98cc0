#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::pfc::PfcRepr;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = PfcRepr::parse(data) {
        let mut out = [0u8; 20];
        r.emit(&mut out).expect("emit");
        assert_eq!(&out[..], &data[..20], "PFC round-trips");
    }
});
