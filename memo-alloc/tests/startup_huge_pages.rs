//! memo's jemalloc backend advises the 2 MiB pages around a block of 256 KiB to 2 MiB for
//! transparent huge pages only before the process's first pass (a model's weights, loaded
//! at startup), and not once a pass has run (a program's working memory). Its own process:
//! no pass may run before the test's first block.

#![cfg(target_os = "linux")]

use std::alloc::{GlobalAlloc, Layout};

/// Bytes of a transparent huge page.
const HUGE: usize = 2 << 20;

/// The `VmFlags` of the mapping holding `p`, from `/proc/self/smaps`.
fn vm_flags(p: *mut u8) -> String {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    for line in smaps.lines() {
        let range = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = range.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&(p as usize));
                continue;
            }
        }
        if inside && line.starts_with("VmFlags:") {
            return line.to_string();
        }
    }
    panic!("no mapping holds {p:?}");
}

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
fn blocks_made_before_the_first_pass_are_advised_for_huge_pages_and_later_ones_are_not() {
    if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        return; // a kernel without THP refuses the advice
    }
    let a = memo_alloc::Jemalloc;
    let layout = Layout::from_size_align(512 << 10, 8).unwrap();
    // SAFETY: every block is freed once, with its layout.
    unsafe {
        let before = a.alloc(layout);
        assert!(!before.is_null());
        assert!(advised(before), "{}", vm_flags(before));
        assert!(advised(before.add(layout.size() - 1)));
        let small = Layout::from_size_align(200 << 10, 8).unwrap();
        let below = a.alloc(small);
        let first = huge_pages(before, layout.size());
        if disjoint(&huge_pages(below, small.size()), &first) {
            assert!(
                !advised(below),
                "a block below the bound: {}",
                vm_flags(below)
            );
        }
        drop(memo_alloc::pass("startup"));
        // Blocks made after the pass: those in 2 MiB pages the first block did not touch
        // are not advised (16 of them span 8 MiB: most lie elsewhere).
        let after: Vec<*mut u8> = (0..16).map(|_| a.alloc(layout)).collect();
        let elsewhere: Vec<*mut u8> = after
            .iter()
            .copied()
            .filter(|&p| disjoint(&huge_pages(p, layout.size()), &first))
            .collect();
        assert!(!elsewhere.is_empty());
        for &p in &elsewhere {
            assert!(!advised(p), "a block after the first pass: {}", vm_flags(p));
        }
        for p in after {
            a.dealloc(p, layout);
        }
        a.dealloc(below, small);
        a.dealloc(before, layout);
    }
}
