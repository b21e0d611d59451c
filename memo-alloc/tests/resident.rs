//! A slab's resident size tracks its plan's height: after a replayed pass that touches
//! every planned byte, the pages resident in the slab (measured with `mincore`) are the
//! height rounded up to a page, within 1% of it. Transparent huge pages, which would
//! commit 2 MiB per touch, are disabled on the slab region.

mod common;

use memo_alloc::MemoAlloc;

#[global_allocator]
static A: MemoAlloc<common::Backend> = MemoAlloc::new(common::Backend);

const KEY: &str = "resident";

/// The tests run one at a time: carving takes the region lock with `try_lock`, and a
/// block that meets another test's carve goes to the backend.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Buffers of 96 KiB to 1 MiB with staggered lifetimes, every byte written.
fn pass() -> u64 {
    let _p = memo_alloc::pass(KEY);
    let mut live: Vec<Vec<u8>> = Vec::new();
    let mut sum = 0u64;
    for i in 0..48usize {
        let size = (96 << 10) + (i * 37 % 11) * (88 << 10);
        let v = vec![(i % 251) as u8; size];
        sum += v[size - 1] as u64;
        live.push(v);
        if live.len() > 5 {
            let gone = live.remove(i % 5);
            sum += gone[0] as u64;
        }
    }
    sum + live.iter().map(|v| v.len() as u64).sum::<u64>()
}

#[test]
fn resident_size_stays_within_one_percent_of_the_height() {
    common::inline_planner();
    let _one = one_at_a_time();
    let expected = pass(); // profiled
    assert_eq!(pass(), expected); // replayed: every slot written once
    let r = memo_alloc::report(KEY).expect("report");
    assert_eq!(r.slab_instances, 1, "{r:?}");
    assert!(r.slab_hits > 40, "the replay must use the slab: {r:?}");
    assert!(r.height > 400 << 10, "{r:?}");
    // The slab: the slots' height, then the lanes (from the height aligned to a cell).
    let rounded = (r.height + 4096 + r.lane_bytes).div_ceil(4096) * 4096;
    assert!(
        r.slab_resident_bytes <= rounded,
        "more resident than the plan: {r:?}"
    );
    assert!(
        r.slab_resident_bytes as f64 >= 0.99 * r.height as f64,
        "every planned byte was written, so (nearly) all of the height is resident: {r:?}"
    );
    assert!(memo_alloc::stats().slab_resident_bytes >= r.slab_resident_bytes);
}

/// Pages of `[addr, addr + len)` resident now (`mincore`; the range is in the slab
/// region, which stays mapped).
fn resident_pages(addr: usize, len: usize) -> usize {
    let page = 4096;
    let start = addr / page * page;
    let pages = (addr + len).div_ceil(page) - start / page;
    let mut vec = vec![0u8; pages];
    // SAFETY: `vec` has one byte per page of the range; mincore only writes it.
    let rc = unsafe { libc::mincore(start as *mut libc::c_void, pages * page, vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 == 1).count()
}

/// Pages of a freed own block at `addr` still resident, but for its first (which links
/// the block into the region's list of runs to reclaim, until the next carve).
fn released(addr: usize, len: usize) -> usize {
    resident_pages(addr + 4096, len - 4096)
}

/// Every block of `blocks` (`(address, size)`, freed by a `what` pass) came from the
/// region and has gone back to the OS.
fn assert_from_the_region_and_given_back(blocks: &[(usize, usize)], what: &str) {
    for &(a, size) in blocks {
        assert!(
            memo_alloc::testing::is_own_block(a as *const u8),
            "a large block of the {what} pass, {a:#x}, is not the region's"
        );
        assert_eq!(released(a, size), 0, "block {a:#x} stayed resident");
    }
}

/// Large buffers of 128 KiB to 528 KiB, four alive at a time, every byte written; returns
/// each buffer's address and size, and checks that buffers made by `alloc_zeroed` in
/// blocks that earlier buffers dirtied read as zero.
fn large_buffers() -> Vec<(usize, usize)> {
    let mut seen = Vec::new();
    let mut live: Vec<Vec<u8>> = Vec::new();
    for i in 0..24usize {
        let size = (128 << 10) + (i % 5) * (100 << 10);
        let v = if i % 2 == 0 {
            vec![(i % 251) as u8 + 1; size]
        } else {
            let v = vec![0u8; size];
            assert!(v.iter().all(|&b| b == 0), "a zeroed buffer read non-zero");
            v
        };
        seen.push((v.as_ptr() as usize, size));
        live.push(v);
        if live.len() > 4 {
            live.remove(0);
        }
    }
    seen
}

/// A pass profiled before its plan exists keeps its large blocks off the backend's
/// arenas: they come from the slab region, are reused within the pass, and go back to
/// the OS when the pass ends (from glibc they stayed resident in the request thread's
/// arena, beside the slab that replays the pass). A block that escapes the pass stays.
#[test]
fn a_profiled_pass_gives_its_large_blocks_back_to_the_os() {
    common::inline_planner();
    let _one = one_at_a_time();
    let escaping;
    let seen = {
        let _p = memo_alloc::pass("resident-profiled");
        let seen = large_buffers();
        escaping = vec![7u8; 256 << 10];
        seen
    };
    let mut bases: Vec<usize> = seen.iter().map(|&(a, _)| a).collect();
    bases.sort_unstable();
    bases.dedup();
    assert!(
        bases.len() <= 8,
        "freed blocks are reused: {} bases",
        bases.len()
    );
    let e = escaping.as_ptr() as usize;
    let freed: Vec<(usize, usize)> = seen.iter().copied().filter(|&(a, _)| a != e).collect();
    assert_from_the_region_and_given_back(&freed, "profiled");
    assert!(memo_alloc::testing::is_own_block(escaping.as_ptr()));
    assert!(
        escaping.iter().all(|&b| b == 7),
        "the escaping block kept its bytes"
    );
}

/// A pass that runs on the backend while its key is first profiled (an interim pass)
/// keeps its large blocks off the backend's arenas too.
#[test]
fn an_interim_pass_takes_its_large_blocks_from_the_region() {
    common::inline_planner();
    let _one = one_at_a_time();
    const KEY: &str = "resident-interim";
    let profiling = std::sync::Barrier::new(2);
    let done = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            let _p = memo_alloc::pass(KEY); // profiled: open until the other pass ends
            profiling.wait();
            done.wait();
        });
        profiling.wait();
        let seen = {
            let _p = memo_alloc::pass(KEY);
            large_buffers()
        };
        done.wait();
        assert_from_the_region_and_given_back(&seen, "interim");
    });
    let r = memo_alloc::report(KEY).expect("report");
    assert_eq!(r.passes_profiled, 1, "{r:?}");
}

/// A block a large buffer dirtied, kept and handed to a much smaller request, keeps only
/// the smaller request's pages resident.
#[test]
fn a_kept_block_serving_a_smaller_request_keeps_only_its_pages() {
    common::inline_planner();
    let _one = one_at_a_time();
    let _p = memo_alloc::pass("resident-smaller");
    let big = vec![3u8; 1536 << 10];
    let base = std::hint::black_box(&big).as_ptr() as usize; // every page written
    drop(big);
    let small = vec![0u8; 128 << 10];
    assert_eq!(
        small.as_ptr() as usize,
        base,
        "the kept block serves the smaller request"
    );
    assert!(
        small.iter().all(|&b| b == 0),
        "zeroed, though the big buffer dirtied it"
    );
    let resident = resident_pages(base, 1536 << 10);
    assert!(
        resident <= 32 + 16,
        "{resident} pages resident for a 32-page buffer"
    );
}

/// A profiled pass whose large buffers grow, each freed before the next (distinct chunk
/// counts, so none fits a kept block), then shrink, keeps no more resident than its
/// largest buffer: kept blocks give their pages back when a fresh block would take the
/// pass past the most it ever had live, and a larger kept block serves a smaller request
/// (its chunks past the request given back). From glibc the pass would reuse the freed
/// memory; keeping every block (up to 32) held their sum.
#[test]
fn a_profiled_pass_keeps_no_more_resident_than_its_largest_live_buffer() {
    common::inline_planner();
    let _one = one_at_a_time();
    let _p = memo_alloc::pass("resident-growing");
    let mib = 1usize << 20;
    let sizes: Vec<usize> = (1..=8)
        .chain((1..8).rev())
        .map(|k| (2 * k + 1) * mib)
        .collect();
    let mut seen = Vec::new();
    let mut peak = 0;
    for &size in &sizes {
        let v = vec![1u8; size];
        let v = std::hint::black_box(v); // every page written
        seen.push((v.as_ptr() as usize, size));
        assert!(memo_alloc::testing::is_own_block(v.as_ptr()));
        drop(v);
        let mut distinct: Vec<(usize, usize)> = Vec::new();
        for &(a, s) in &seen {
            match distinct.iter_mut().find(|(b, _)| *b == a) {
                Some(d) => d.1 = d.1.max(s),
                None => distinct.push((a, s)),
            }
        }
        let resident: usize = distinct.iter().map(|&(a, s)| resident_pages(a, s)).sum();
        peak = peak.max(resident);
    }
    let largest = 17 * mib / 4096;
    assert!(
        peak <= largest + largest / 8,
        "{peak} pages resident at most for buffers of at most {largest} pages"
    );
    let top = seen[7].0;
    assert!(
        seen[8..].iter().all(|&(a, _)| a == top),
        "the shrinking buffers reuse the largest one's block"
    );
}

/// When a key is re-profiled, the idle slab of the plan being replaced gives its memory
/// back before the re-profile builds its working set beside it: during the re-profiling
/// pass, the old plan has no page resident (it had its whole height before).
#[test]
fn a_re_profile_sheds_the_old_plans_idle_slab() {
    common::inline_planner();
    let _one = one_at_a_time();
    const KEY: &str = "resident-reprofile";
    let run = |one_time: bool, inside: &mut dyn FnMut()| {
        let _p = memo_alloc::pass(KEY);
        // One-time allocations of the first pass only (above the lanes, so with slots):
        // the later passes skip their slots, which re-profiles the key after its first
        // replay.
        let first: Vec<Vec<u8>> = if one_time {
            (0..30).map(|i| vec![2; 300 + i]).collect()
        } else {
            Vec::new()
        };
        std::hint::black_box(&first);
        // 60 buffers of 256-272 KiB, four alive at a time: a slab of about 1 MiB.
        let mut kept: Vec<Vec<u8>> = Vec::with_capacity(4);
        for i in 0..60usize {
            kept.push(std::hint::black_box(vec![
                i as u8;
                (256 << 10) + 4096 * (i % 5)
            ]));
            if kept.len() == 4 {
                kept.clear();
            }
        }
        inside();
    };
    run(true, &mut || {}); // profiled
    let mut resident = Vec::new();
    for _ in 0..2 {
        // A replay, then the re-profile; the old plan's slab, measured inside each.
        run(false, &mut || {
            let r = memo_alloc::report(KEY).expect("report");
            resident.push((r.passes_profiled, r.slab_resident_bytes));
        });
    }
    let r = memo_alloc::report(KEY).expect("report");
    assert_eq!(r.passes_profiled, 2, "the second pass re-profiled: {r:?}");
    assert!(
        resident[0].0 == 1 && resident[0].1 >= 1 << 20,
        "the replay had the slab resident: {resident:?}"
    );
    // (A profile is counted when it ends.)
    assert_eq!(
        resident[1],
        (1, 0),
        "the re-profile shed the idle slab: {resident:?}"
    );
}
