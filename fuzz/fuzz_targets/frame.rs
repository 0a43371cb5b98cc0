#![no_main]

use libfuzzer_sys::fuzz_target;
use quench_wire::frame::describe;
use quench_wire::frame::decode;
use units::Rate;

fuzz_target!(|data: &[u8]| {
    let _ = decode(data);
    let _ = describe(data, Rate::from_gbps(10));
});
