//! Cache hints for the per-frame path.
//!
//! A burst of frames whose flows are scattered over a large table costs one dependent memory
//! access after another per frame (the index entry, then the flow it names); issued for the
//! whole burst first, those accesses overlap instead (DPDK's `rte_hash_lookup_bulk` pipelines
//! its lookups the same way). On the 2-vCPU KVM test machine a random load over 760 MiB takes
//! 720 ns alone and 21 ns each with 16 in flight (a pointer chase, /tmp C program, 2026-11-25).

/// Asks the CPU to bring the cache lines of `value` (at most `lines` of them) toward L1; no
/// effect on the program's meaning, and nothing on targets without a prefetch instruction.
#[inline(always)]
pub fn prefetch<T>(value: &T, lines: usize) {
    let p = (value as *const T).cast::<u8>();
    let n = std::mem::size_of::<T>().div_ceil(64).clamp(1, lines.max(1));
    for k in 0..n {
        #[cfg(target_arch = "x86_64")]
        // Safety: PREFETCHT0 only hints the cache; it never faults and has no architectural
        // effect, whatever the address (here within the object `value` refers to).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                p.wrapping_add(k * 64).cast::<i8>(),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (p, k);
    }
}
