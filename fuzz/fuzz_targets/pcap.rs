#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::pcap::PcapReader;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = PcapReader::new(data) {
        for rec in r.flatten() {
            assert!(rec.data.len() <= data.len());
        }
    }
});
