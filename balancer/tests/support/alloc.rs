//! Test support shared by the no-allocation tests of `balancer` and `balancer-server`
//! (included with `#[path]`): a global allocator that counts allocations per thread, and a
//! 150,000-term voting table.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;

use data::rng::Rng;
use data::table::{TableRow, VotingTable};

thread_local! {
    // Const-initialized, no destructor: touching it never allocates.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

/// Counts allocations (and reallocations) per thread, then defers to the system allocator.
struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the only
// extra work is bumping a thread-local counter, which does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract of `GlobalAlloc::alloc`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract of `GlobalAlloc::dealloc`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract of `GlobalAlloc::alloc_zeroed`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract of `GlobalAlloc::realloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

pub fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

pub const REPLICAS: usize = 8;
pub const TERMS: usize = 150_000;

pub fn big_table() -> VotingTable {
    let mut rng = Rng::new(5);
    let mut rows = Vec::with_capacity(TERMS * 2);
    for t in 0..TERMS {
        let term = format!("term{t}");
        let a = rng.below(REPLICAS as u64) as u16;
        rows.push(TableRow {
            term: term.clone(),
            replica: a,
            weight: 1.0 + rng.unit() as f32,
        });
        if t % 10 == 0 {
            rows.push(TableRow {
                term,
                replica: (a + 3) % REPLICAS as u16,
                weight: rng.unit() as f32,
            });
        }
    }
    VotingTable {
        replicas: REPLICAS as u16,
        rows,
        metadata: BTreeMap::new(),
    }
}
