#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::cntag::CnTagRepr;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = CnTagRepr::parse(data) {
        let mut out = [0u8; 4];
        r.emit(&mut out).expect("emit");
        assert_eq!(&out[..], &data[..4]);
    }
});
