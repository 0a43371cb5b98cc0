#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::roce::{icrc, verify_icrc, BthRepr};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = BthRepr::parse(data) {
        let mut out = [0u8; 12];
        r.emit(&mut out).expect("emit");
        assert_eq!(&out[..], &data[..12], "BTH round-trips");
    }
    // Any header length the first octet could claim.
    let ihl = usize::from(data.first().copied().unwrap_or(0x45) & 0x0F) * 4;
    let _ = verify_icrc(data, ihl);
    let _ = icrc(data, ihl);
});
