#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::ethernet::L2Repr;
use quench_wire::frame::{decode, stamp_int};
use quench_wire::int::{self, IntRepr, HOPS_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = IntRepr::parse(data) {
        let mut out = [0u8; HOPS_LEN];
        let n = r.emit(&mut out).expect("emit");
        assert_eq!(&out[..n], &data[..n], "INT header round-trips");
    }
    let mut b = data.to_vec();
    let _ = int::push_hop(&mut b, 0x0123_4567_89ab_cdef);
    let _ = int::fold_pint(&mut b, 300);
    // Stamping a whole frame keeps a frame that decoded (its UDP checksum verified) decoding.
    let Ok((_, l3)) = L2Repr::parse(data) else {
        return;
    };
    let ok = decode(data).is_ok();
    let mut f = data.to_vec();
    if let Ok(true) = stamp_int(&mut f, l3, |b| int::push_hop(b, 0x0123_4567_89ab_cdef)) {
        if ok {
            assert!(decode(&f).is_ok(), "a stamped frame still decodes");
        }
    }
});
