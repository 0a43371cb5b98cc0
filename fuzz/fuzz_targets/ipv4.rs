#![no_main]

use libfuzzer_sys::fuzz_target;
use engine::wire::ipv4::Ipv4Repr;

fuzz_target!(|data: &[u8]| {
    if let Ok((r, hl)) = Ipv4Repr::parse(data) {
        assert!(hl >= 20 && hl + usize::from(r.payload_len) <= data.len());
        let mut out = [0u8; 20];
        r.emit(&mut out).expect("emit");
        if hl == 20 {
            assert_eq!(&out[..], &data[..20], "option-less header round-trips");
        }
    }
});
