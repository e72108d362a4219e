//! A global allocator that counts live heap bytes, shared by the memory tests (each test binary that
//! declares `mod counting_alloc;` measures its heap with `live()`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: isize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// The heap bytes live now.
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// The most heap live at once since the last [`reset_peak`] (or the start).
#[allow(dead_code)] // not every test that counts reads the peak
pub fn peak() -> isize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts the peak again from the heap live now.
#[allow(dead_code)]
pub fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}
