//! A hint to the cache ahead of a read or a write: the workspace's second `unsafe` exception,
//! audited here. The simulator at tens of thousands of instances knows which records the next
//! events touch; asking for them early overlaps their misses with other work.

/// Bytes in one cache line of the CPUs Morph builds for.
const CACHE_LINE: usize = 64;

/// Asks the cache for every line `value` spans. It reads nothing and changes nothing.
#[allow(unsafe_code)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = std::ptr::from_ref(value).cast::<i8>();
        let last = size_of::<T>().saturating_sub(1);
        for offset in (0..last).step_by(CACHE_LINE).chain([last]) {
            // SAFETY: the only requirement of the intrinsic is the SSE feature, which every
            // x86-64 CPU has; a prefetch never faults, even on an address outside `value`
            // (it is never one here: every offset is within it).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_leaves_the_value_as_it_was() {
        let records = vec![[7u8; 200]; 3];
        prefetch(&records[1]);
        prefetch(&());
        assert!(records.iter().all(|r| r.iter().all(|&b| b == 7)));
    }
}
