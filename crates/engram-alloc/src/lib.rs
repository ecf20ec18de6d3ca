//! The per-item memory budget: a global allocator that counts, for the thread that reads and
//! chunks an item, the bytes it holds live while it works ([`meter`]), so that
//! `engram_parse::Interrupt::check` (called for every block, row and page, and while an external
//! tool runs) stops an item whose working memory passes `budgets.memory_bytes`: a file that
//! expands far past its size (a spreadsheet of long rows, a compressed container) fails with
//! E2003 before it takes the process' memory.
//!
//! Only what the metered thread allocates and frees is counted: memory handed over to it
//! (the uploaded bytes) or kept after it (the chunks, which the chunk budget bounds) is not,
//! and external tools (OCR, office conversion) run in processes of their own, bounded by
//! their time limit and output cap. The binary installs the allocator
//! (`#[global_allocator] static A: Metered = Metered;`); without it nothing is counted and
//! the budget is not enforced.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// Whether this thread is metered now.
    static METERED: Cell<bool> = const { Cell::new(false) };
    /// Bytes allocated less bytes freed by this thread since its metering began.
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

/// The system allocator, counting the live bytes of metered threads.
pub struct Metered;

#[inline]
fn count(delta: isize) {
    // Const-initialized and without a destructor: readable at any point of a thread's life,
    // and reading it allocates nothing.
    if METERED.with(Cell::get) {
        LIVE.with(|live| live.set(live.get().saturating_add(delta)));
    }
}

fn signed(size: usize) -> isize {
    isize::try_from(size).unwrap_or(isize::MAX)
}

// SAFETY: every call is passed to `System` unchanged; the counting touches only this thread's
// own cells and neither allocates nor panics.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Metered {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            count(signed(layout.size()));
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            count(signed(layout.size()));
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        count(-signed(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            count(signed(new_size) - signed(layout.size()));
        }
        moved
    }
}

/// Runs `work` with this thread metered from zero (the previous metering, if any, resumes
/// after it).
pub fn meter<T>(work: impl FnOnce() -> T) -> T {
    struct Restore(bool, isize);
    impl Drop for Restore {
        fn drop(&mut self) {
            METERED.with(|m| m.set(self.0));
            LIVE.with(|l| l.set(self.1));
        }
    }
    let _restore = Restore(METERED.with(Cell::get), LIVE.with(Cell::get));
    LIVE.with(|l| l.set(0));
    METERED.with(|m| m.set(true));
    work()
}

/// The bytes this thread holds live since its metering began; `None` when it is not metered.
pub fn live() -> Option<isize> {
    METERED.with(Cell::get).then(|| LIVE.with(Cell::get))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static ALLOCATOR: Metered = Metered;

    #[test]
    fn a_metered_thread_counts_what_it_holds() {
        assert_eq!(live(), None, "not metered");
        let peak = meter(|| {
            let held = vec![0u8; 1 << 20];
            let at_peak = live().expect("metered");
            drop(held);
            let after = live().expect("metered");
            assert!(after < at_peak - (1 << 19), "{after} after {at_peak}");
            at_peak
        });
        assert!(peak >= 1 << 20, "{peak}");
        assert_eq!(live(), None, "metering ends with the work");
    }

    #[test]
    fn another_threads_allocations_are_not_counted() {
        meter(|| {
            let before = live().expect("metered");
            std::thread::spawn(|| vec![0u8; 4 << 20])
                .join()
                .expect("thread");
            let after = live().expect("metered");
            assert!(after - before < 1 << 20, "{before} -> {after}");
        });
    }
}
