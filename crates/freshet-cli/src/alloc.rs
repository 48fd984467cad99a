//! The process's allocator: mimalloc, asked in the way that keeps it on its fast path.
//!
//! The server allocates and frees small objects on many threads for every statement; mimalloc
//! does that with thread-local free lists (measured with `freshet bench pgbench`).
//!
//! Every allocation names an alignment. Asking mimalloc for an aligned block
//! (`mi_malloc_aligned`) takes its fast path only while the size class's current page has a
//! free block at hand. When that page runs dry, the aligned path does not refill it as plain
//! `mi_malloc` does: for a size class that is not a power of two it over-allocates from a larger
//! class instead, so the page's freed blocks are never collected and every later allocation of
//! that size takes the slow path too. Under TPC-C most row buffers and strings are such sizes
//! (24, 48, 96 bytes …), and the slow path was 5% of the executor's instructions.
//!
//! So an alignment mimalloc gives anyway goes to `mi_malloc`: every block is aligned to 8
//! bytes, and a size that is a multiple of 16 falls in a size class of 16-byte multiples whose
//! blocks are 16-byte aligned. Larger alignments (rare) still use the aligned functions.

use std::alloc::{GlobalAlloc, Layout};

use libmimalloc_sys as mi;

/// The alignment of every mimalloc block.
const WORD: usize = 8;
/// The alignment of every block of a size class whose size is a multiple of it.
const MAX_NATURAL: usize = 16;

pub struct Allocator;

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// The size to ask plain `mi_malloc` for so that the block has `align`, if it can.
#[inline(always)]
fn natural_size(layout: Layout) -> Option<usize> {
    match layout.align() {
        a if a <= WORD => Some(layout.size()),
        MAX_NATURAL => Some(layout.size().next_multiple_of(MAX_NATURAL)),
        _ => None,
    }
}

#[inline(always)]
fn is_aligned(p: *mut u8, align: usize) -> bool {
    (p as usize) & (align - 1) == 0
}

/// A block for `layout` from `plain` (mimalloc's `mi_malloc` or `mi_zalloc`) when its size class
/// gives the alignment, else from `aligned` (their aligned forms).
///
/// # Safety
/// `plain` and `aligned` must be mimalloc's allocation functions.
#[inline(always)]
unsafe fn allocate(
    layout: Layout,
    plain: unsafe extern "C" fn(usize) -> *mut std::ffi::c_void,
    aligned: unsafe extern "C" fn(usize, usize) -> *mut std::ffi::c_void,
) -> *mut u8 {
    // SAFETY: mimalloc's functions accept any size and a power-of-two alignment.
    unsafe {
        if let Some(size) = natural_size(layout) {
            let p = plain(size).cast::<u8>();
            if is_aligned(p, layout.align()) {
                return p;
            }
            mi::mi_free(p.cast());
        }
        aligned(layout.size(), layout.align()).cast()
    }
}

// SAFETY: every block comes from mimalloc with at least the layout's size and alignment (checked
// where the size class alone should give it, with the aligned functions as the fallback), and
// every block is given back to mimalloc's `mi_free`, which takes blocks of all its functions.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation functions.
        unsafe { allocate(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation functions.
        unsafe { allocate(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from one of mimalloc's functions above.
        unsafe { mi::mi_free(ptr.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from mimalloc with `layout`; the caller guarantees `new_size` forms
        // a valid layout with its alignment.
        unsafe {
            let Ok(new) = Layout::from_size_align(new_size, layout.align()) else { return std::ptr::null_mut() };
            if let Some(size) = natural_size(new) {
                let p = mi::mi_realloc(ptr.cast(), size).cast::<u8>();
                if is_aligned(p, layout.align()) {
                    return p;
                }
                // Not expected (see the module's note): move it to an aligned block.
                let q = mi::mi_malloc_aligned(new_size, layout.align()).cast::<u8>();
                if !q.is_null() {
                    std::ptr::copy_nonoverlapping(p, q, new_size.min(layout.size()));
                    mi::mi_free(p.cast());
                }
                return q;
            }
            mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
        }
    }
}

/// mimalloc's `purge_delay` option (its position in `mi_option_t`, the same in mimalloc 2 and 3).
const MI_OPTION_PURGE_DELAY: mi::mi_option_t = 15;

/// Keeps freed memory in the process instead of handing it back to the kernel a second after
/// it was freed (mimalloc's default), unless `MIMALLOC_PURGE_DELAY` says otherwise. The executor
/// allocates and frees row buffers, index nodes and segments all the time; with purging, the
/// pages came back as fresh page faults, each zeroing up to a 2 MiB huge page: about 1,000 a
/// second on the executor under TPC-C, against 16 without. Memory freed stays reusable by every
/// thread; resident memory therefore shows the peak rather than the current use.
pub fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets a process-wide option of the linked allocator; any thread may call it.
        unsafe { mi::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_memory_is_kept_unless_the_environment_says_otherwise() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reads and sets a process-wide allocator option.
        let before = unsafe { mi::mi_option_get(MI_OPTION_PURGE_DELAY) };
        // The bundled mimalloc's default purge delay (1,000 ms) identifies the option's position.
        assert_eq!(before, 1000);
        keep_freed_memory();
        // SAFETY: as above.
        assert_eq!(unsafe { mi::mi_option_get(MI_OPTION_PURGE_DELAY) }, -1);
    }

    /// Every size and alignment gets a block with that alignment, which keeps what was written
    /// through growing and shrinking.
    #[test]
    fn blocks_have_their_alignment_and_keep_their_contents() {
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in (1..=600).step_by(7).chain([1024, 4000, 70_000, 1 << 20]) {
                let Ok(layout) = Layout::from_size_align(size, align) else { continue };
                // SAFETY: a non-zero size; the block is written within its size and freed once.
                unsafe {
                    let p = Allocator.alloc(layout);
                    assert!(!p.is_null() && is_aligned(p, align), "size {size}, align {align}");
                    std::ptr::write_bytes(p, 0xab, size);
                    let grown = Allocator.realloc(p, layout, size * 3);
                    assert!(!grown.is_null() && is_aligned(grown, align), "grown from {size}, align {align}");
                    assert!(std::slice::from_raw_parts(grown, size).iter().all(|&b| b == 0xab));
                    let layout3 = Layout::from_size_align_unchecked(size * 3, align);
                    let shrunk = Allocator.realloc(grown, layout3, size.div_ceil(2));
                    assert!(!shrunk.is_null() && is_aligned(shrunk, align));
                    assert!(std::slice::from_raw_parts(shrunk, size.div_ceil(2)).iter().all(|&b| b == 0xab));
                    Allocator.dealloc(shrunk, Layout::from_size_align_unchecked(size.div_ceil(2), align));
                    let z = Allocator.alloc_zeroed(layout);
                    assert!(!z.is_null() && is_aligned(z, align));
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                    Allocator.dealloc(z, layout);
                }
            }
        }
    }
}
