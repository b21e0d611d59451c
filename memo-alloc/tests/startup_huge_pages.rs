//! memo's jemalloc backend advises a 2 MiB page for transparent huge pages once blocks of
//! 256 KiB to 2 MiB made before the process's first pass (a model's weights, loaded at
//! startup) cover half of it, and counts no block made once a pass has run (a program's
//! working memory). Its own process: no pass may run before the test's first block.

#![cfg(target_os = "linux")]

use std::alloc::{GlobalAlloc, Layout};

use memo_alloc::testing::vm_flags;

/// Bytes of a transparent huge page.
const HUGE: usize = 2 << 20;

fn advised(p: *mut u8) -> bool {
    vm_flags(p).split_whitespace().any(|f| f == "hg")
}

/// The 2 MiB pages a block of `size` bytes at `p` touches.
fn huge_pages(p: *mut u8, size: usize) -> std::ops::Range<usize> {
    (p as usize & !(HUGE - 1))..(p as usize + size).next_multiple_of(HUGE)
}

fn disjoint(a: &std::ops::Range<usize>, b: &std::ops::Range<usize>) -> bool {
    a.end <= b.start || b.end <= a.start
}

#[test]
fn pages_half_covered_by_blocks_made_before_the_first_pass_are_advised_and_no_others() {
    if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        return; // a kernel without THP refuses the advice
    }
    let a = memo_alloc::Jemalloc;
    let layout = Layout::from_size_align(768 << 10, 8).unwrap();
    // SAFETY: every block is freed once, with its layout.
    unsafe {
        // A model's weights: 6 MiB in blocks of 768 KiB, side by side in jemalloc's memory.
        let weights: Vec<*mut u8> = (0..8).map(|_| a.alloc(layout)).collect();
        let mut covered = std::collections::BTreeMap::<usize, (usize, *mut u8)>::new();
        for &p in &weights {
            assert!(!p.is_null());
            let (start, end) = (p as usize, p as usize + layout.size());
            for page in huge_pages(p, layout.size()).step_by(HUGE) {
                let bytes = end.min(page + HUGE) - start.max(page);
                let at = start.max(page) as *mut u8;
                covered.entry(page).or_insert((0, at)).0 += bytes;
            }
        }
        let mut half = 0;
        for (&page, &(bytes, at)) in &covered {
            if bytes >= HUGE / 2 {
                half += 1;
                assert!(
                    advised(at),
                    "page {page:#x}, {bytes} B of weights: {}",
                    vm_flags(at)
                );
            } else {
                assert!(
                    !advised(at),
                    "page {page:#x}, {bytes} B of weights: {}",
                    vm_flags(at)
                );
            }
        }
        assert!(half > 0, "6 MiB of weights fill half of some 2 MiB page");
        let first: Vec<std::ops::Range<usize>> = weights
            .iter()
            .map(|&p| huge_pages(p, layout.size()))
            .collect();
        drop(memo_alloc::pass("startup"));
        // Blocks made after the pass: those in 2 MiB pages no weight touched are not
        // advised, however many there are.
        let after: Vec<*mut u8> = (0..16).map(|_| a.alloc(layout)).collect();
        let elsewhere: Vec<*mut u8> = after
            .iter()
            .copied()
            .filter(|&p| {
                first
                    .iter()
                    .all(|r| disjoint(&huge_pages(p, layout.size()), r))
            })
            .collect();
        assert!(!elsewhere.is_empty());
        for &p in &elsewhere {
            assert!(!advised(p), "a block after the first pass: {}", vm_flags(p));
        }
        for p in after.into_iter().chain(weights) {
            a.dealloc(p, layout);
        }
    }
}
