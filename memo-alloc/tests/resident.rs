//! A slab's resident size tracks its plan's height: after a replayed pass that touches
//! every planned byte, the pages resident in the slab (measured with `mincore`) are the
//! height rounded up to a page, within 1% of it. Transparent huge pages, which would
//! commit 2 MiB per touch, are disabled on the slab region.

mod common;

use memo_alloc::MemoAlloc;

#[global_allocator]
static A: MemoAlloc = MemoAlloc::system();

const KEY: &str = "resident";

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
    let expected = pass(); // profiled
    assert_eq!(pass(), expected); // replayed: every slot written once
    let r = memo_alloc::report(KEY).expect("report");
    assert_eq!(r.slab_instances, 1, "{r:?}");
    assert!(r.slab_hits > 40, "the replay must use the slab: {r:?}");
    assert!(r.height > 400 << 10, "{r:?}");
    let rounded = r.height.div_ceil(4096) * 4096;
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
