#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::ipv4::{self, Ecn, Ipv4Flow, Ipv4Repr};

fuzz_target!(|data: &[u8]| {
    if let Ok((r, hl)) = Ipv4Repr::parse(data) {
        assert!(hl >= 20 && hl + usize::from(r.payload_len) <= data.len());
        let mut out = [0u8; 20];
        r.emit(&mut out).expect("emit");
        if hl == 20 {
            assert_eq!(&out[..], &data[..20], "option-less header round-trips");
        }
        // The in-place ECN rewrite (RFC 1624) keeps a valid header valid, changing only ECN.
        for ecn in Ecn::ALL {
            let mut h = data.to_vec();
            ipv4::set_ecn(&mut h, ecn).expect("a parsed header is long enough");
            let (r2, hl2) = Ipv4Repr::parse(&h).expect("checksum kept valid");
            assert_eq!((r2.ecn, hl2), (ecn, hl));
            assert_eq!(Ipv4Repr { ecn: r.ecn, ..r2 }, r);
        }
    }
    // The appliance's flow read (no checksum check) accepts at least what parse accepts, with
    // the same header length and fields.
    match (Ipv4Repr::parse(data), Ipv4Flow::read(data)) {
        (Ok((r, hl)), read) => {
            let (f, hl2) = read.expect("flow read accepts a parsed header");
            assert_eq!(hl2, hl);
            assert_eq!((f.src, f.dst, f.protocol, f.ecn), (r.src, r.dst, r.protocol.0, r.ecn));
            assert_eq!(f.fragment, r.flags & 1 != 0 || r.frag_offset != 0);
        }
        (Err(ipv4::Ipv4Error::BadChecksum { .. }), read) => assert!(read.is_ok()),
        (Err(e), read) => assert_eq!(read, Err(e)),
    }
    // Never panics on any input.
    let mut h = data.to_vec();
    let _ = ipv4::set_ecn(&mut h, Ecn::Ce);
    let _ = ipv4::ecn(data);
});
