#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::udp::UdpRepr;
use std::net::Ipv4Addr;

fuzz_target!(|data: &[u8]| {
    let _ = UdpRepr::parse(data, Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
});
