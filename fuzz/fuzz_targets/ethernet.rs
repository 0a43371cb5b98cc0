#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::ethernet::{walk, EthernetRepr, L2Repr, VlanRepr};

fuzz_target!(|data: &[u8]| {
    let _ = EthernetRepr::parse(data);
    let _ = VlanRepr::parse(data);
    // The datapath walk and the full parse must agree on every input.
    match (walk(data), L2Repr::parse(data)) {
        (Ok(w), Ok((r, off))) => {
            assert_eq!(w.payload_offset, off);
            assert_eq!(w.ethertype, r.ethertype);
            assert_eq!(w.rpid, r.rpid);
            let mut out = [0u8; 64];
            let n = r.emit(&mut out).expect("a parsed header emits");
            assert_eq!(&out[..n], &data[..n], "L2 headers round-trip");
        }
        (Err(_), Err(_)) => {}
        (w, p) => panic!("walk {w:?} vs parse {p:?}"),
    }
});
