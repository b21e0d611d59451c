//! The 2 MiB pages that a model's weights (blocks of 256 KiB to 2 MiB made before the
//! first pass) cover seven eighths of are backed by huge pages once the first plan is
//! published: the jemalloc backend's purge at that point returns the free ranges inside them (a
//! loader's scratch), which splits a huge page, and the weights would otherwise be read
//! through 4 KiB pages in every replayed pass. Its own process, with memo over jemalloc
//! as the global allocator: no pass may run before the weights are made.

#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use memo_alloc::testing::smaps_entry;
use memo_alloc::{Jemalloc, MemoAlloc};

#[global_allocator]
static A: MemoAlloc<Jemalloc> = MemoAlloc::jemalloc();

/// Bytes of a transparent huge page.
const HUGE: usize = 2 << 20;
/// A weight matrix (llama2.c's are 0.3-0.9 MiB). jemalloc starts a block of this range at
/// a random cache line of its first page, in an extent one size class up when the request
/// and that offset do not fit its own class (768 KiB takes 896): 4 KiB below a class, the
/// matrices lie side by side and fill the pages they share.
const MATRIX: usize = (1 << 20) - (4 << 10);

/// Whether this kernel collapses an advised range into a huge page on request
/// (`MADV_COLLAPSE`, Linux 6.1 and later, THP not off): tried on a mapping of its own.
fn kernel_collapses() -> bool {
    // SAFETY: a fresh private anonymous mapping, written and advised only within its own
    // range, then unmapped.
    unsafe {
        let len = 2 * HUGE;
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return false;
        }
        let page = (p as usize).next_multiple_of(HUGE) as *mut u8;
        page.write_bytes(1, 4096);
        let ok = libc::madvise(page.cast(), HUGE, libc::MADV_HUGEPAGE) == 0
            && libc::madvise(page.cast(), HUGE, libc::MADV_COLLAPSE) == 0;
        libc::munmap(p, len);
        ok
    }
}

/// A field of an smaps entry, in kB.
fn kb(entry: &str, field: &str) -> usize {
    let line = entry.lines().find(|l| l.starts_with(field));
    let value = line.and_then(|l| l.split_whitespace().nth(1));
    value.and_then(|v| v.parse().ok()).expect(field)
}

#[test]
fn pages_full_of_weights_are_huge_after_the_first_plans_purge() {
    if !kernel_collapses() {
        eprintln!("skipped: this kernel does not collapse ranges into huge pages");
        return;
    }
    // A loader: each matrix made and filled in turn, a scratch buffer among them, freed.
    let mut weights: Vec<Vec<u8>> = (0..8).map(|i| vec![i as u8 + 1; MATRIX]).collect();
    let scratch = vec![7u8; MATRIX];
    weights.extend((8..16).map(|i| vec![i as u8 + 1; MATRIX]));
    let blocks: Vec<usize> = weights
        .iter()
        .map(|w| w.as_ptr() as usize)
        .chain([scratch.as_ptr() as usize])
        .collect();
    drop(scratch);
    // The bytes of startup blocks in each 2 MiB page.
    let mut covered = BTreeMap::<usize, usize>::new();
    for &start in &blocks {
        let end = start + MATRIX;
        let mut page = start & !(HUGE - 1);
        while page < end {
            *covered.entry(page).or_default() += end.min(page + HUGE) - start.max(page);
            page += HUGE;
        }
    }
    // The first passes: the first is profiled, its plan published, the backend purged.
    for _ in 0..2 {
        let _p = memo_alloc::pass("startup-kept");
        black_box(vec![3u8; 64 << 10]);
    }
    assert!(memo_alloc::wait_for_plans(Duration::from_secs(30)));
    // Each mapping holds as many huge pages as it wholly holds pages mostly (seven eighths)
    // full of weights (jemalloc maps its memory in pieces: a page across a gap between
    // them cannot be huge).
    let mut full = BTreeMap::<String, (usize, String)>::new();
    for (&page, &bytes) in &covered {
        // An address of a block in the page: mapped, so its mapping is the page's.
        let at = blocks
            .iter()
            .find(|&&b| b < page + HUGE && page < b + MATRIX)
            .map(|&b| b.max(page))
            .expect("a counted page holds a block");
        let entry = smaps_entry(at as *const u8);
        let header = entry.lines().next().unwrap_or_default().to_string();
        let (lo, hi) = header
            .split_whitespace()
            .next()
            .and_then(|r| r.split_once('-'))
            .map(|(lo, hi)| {
                let hex = |h: &str| usize::from_str_radix(h, 16).unwrap();
                (hex(lo), hex(hi))
            })
            .expect("an smaps header starts with its range");
        if bytes >= HUGE / 8 * 7 && lo <= page && page + HUGE <= hi {
            full.entry(header).or_insert((0, entry)).0 += 1;
        }
    }
    assert!(
        !full.is_empty(),
        "16 MiB of weights fill some 2 MiB page within one mapping"
    );
    for (pages, entry) in full.values() {
        assert!(
            kb(entry, "AnonHugePages:") >= pages * (HUGE >> 10),
            "{pages} pages mostly full of weights in this mapping, not all huge:\n{entry}"
        );
    }
    black_box(&weights);
}
