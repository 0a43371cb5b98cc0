#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::classify::{encapsulated_ipv4, encapsulated_key, encapsulated_udp_payload};
use quench_wire::cnm::CnmRepr;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = CnmRepr::parse(data) {
        let mut out = [0u8; 24 + 64];
        let n = r.emit(&mut out).expect("emit");
        assert_eq!(&out[..n], &data[..n], "CNM round-trips");
        // What a reaction point reads of the encapsulated MSDU (host::validate).
        let _ = encapsulated_key(r.encap_msdu);
        let _ = encapsulated_udp_payload(r.encap_msdu);
        if let Some(ip) = encapsulated_ipv4(r.encap_msdu) {
            assert!(ip.offset + 20 <= r.encap_msdu.len() && ip.header_len >= 20);
        }
    }
});
