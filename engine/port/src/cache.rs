//! Cache hints for the per-frame path.
//!
//! A burst of frames whose flows are scattered over a large table costs one dependent memory
//! access after another per frame (the index entry, then the flow it names); issued for the
//! whole burst first, those accesses overlap instead (DPDK's `rte_hash_lookup_bulk` pipelines
//! its lookups the same way). On a 2-vCPU KVM guest a random load over 760 MiB takes 720 ns
//! alone and 21 ns each with 16 in flight (a pointer chase in C; docs/design.md, "Sender
//! appliance").

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

/// The transparent huge page size on x86_64 (a PMD's span): the alignment and granularity of
/// [`advise_huge_pages`].
pub const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back `v`'s allocated capacity with transparent huge pages
/// (`madvise(MADV_HUGEPAGE)` on the whole 2 MiB pages within it): for a large array read at
/// random per frame, each access then misses the TLB far less, and each miss costs a walk of
/// three levels instead of four, which under nested paging (a VM) is most of a dependent
/// load's cost (docs/design.md, "Sender appliance"). Call it right after
/// allocating the capacity and before touching the memory (a page faulted in before keeps 4 KiB
/// pages until khugepaged gets to it), and never let the vector reallocate. A hint only:
/// whether it took (`true` if the kernel accepted a non-empty range) changes nothing of the
/// program's meaning; without THP (`/sys/kernel/mm/transparent_hugepage/enabled` = `never`),
/// with less than 2 MiB of capacity, or off Linux the memory stays on normal pages.
pub fn advise_huge_pages<T>(v: &Vec<T>) -> bool {
    let start = v.as_ptr() as usize;
    let end = start + v.capacity() * std::mem::size_of::<T>();
    let first = start.next_multiple_of(HUGE_PAGE);
    let last = end / HUGE_PAGE * HUGE_PAGE;
    if last <= first {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        // Safety: [first, last) is page-aligned and lies within `v`'s allocation, which this
        // process owns; MADV_HUGEPAGE only changes how the kernel backs those pages, never
        // their contents, so no reference to them is affected.
        let r = unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                last - first,
                libc::MADV_HUGEPAGE,
            )
        };
        r == 0
    }
    #[cfg(not(target_os = "linux"))]
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel takes the advice for the whole huge pages within a large vector (madvise
    /// refuses a range that is not page-aligned); a vector smaller than one huge page holds
    /// none to advise.
    #[test]
    fn huge_page_advice_covers_whole_huge_pages_only() {
        let small: Vec<u64> = Vec::with_capacity(1000);
        assert!(!advise_huge_pages(&small));
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        let big: Vec<[u8; 24]> = Vec::with_capacity(3 * HUGE_PAGE / 24 + 5);
        if cfg!(target_os = "linux") && !thp.is_empty() && !thp.contains("[never]") {
            assert!(advise_huge_pages(&big));
        }
    }
}
