//! The large blocks of profiled passes, under random programs: every pass is profiled
//! (`Mode::Profile`), so every large request goes through the context's spares: kept
//! blocks taken whole or split (their chunks past the request given back), kept blocks
//! given back to make room, fresh blocks carved, reallocs moving between them. Whatever
//! the order, no two live buffers share a byte, every buffer keeps what was written to it,
//! and zeroed requests read zero.

mod common;

use std::alloc::{alloc, alloc_zeroed, dealloc, realloc, Layout};

use memo_alloc::{Config, MemoAlloc, Mode};
use proptest::prelude::*;

#[global_allocator]
static A: MemoAlloc<common::Backend> = MemoAlloc::new(common::Backend);

const MIB: usize = 1 << 20;

/// Profiles every pass; the first call fixes the configuration.
fn profile_every_pass() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let c = Config::from_env().with_mode(Mode::Profile);
        memo_alloc::configure(c);
    });
    assert_eq!(memo_alloc::config::config().mode, Mode::Profile);
}

/// One step of a program: allocate (size, zeroed), free the `i`-th live buffer (modulo),
/// or resize it.
#[derive(Clone, Debug)]
enum Op {
    Alloc(usize, bool),
    Free(usize),
    Realloc(usize, usize),
}

/// Sizes around the chunk boundaries (2 MiB) and past several chunks.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        (128usize << 10)..(2 * MIB),
        (2 * MIB - 4096)..(2 * MIB + 4096),
        (2 * MIB)..(9 * MIB),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (size(), prop::bool::weighted(0.3)).prop_map(|(s, z)| Op::Alloc(s, z)),
        3 => any::<usize>().prop_map(Op::Free),
        1 => (any::<usize>(), size()).prop_map(|(i, s)| Op::Realloc(i, s)),
    ]
}

/// A live buffer: its address, size and the byte it was stamped with.
struct Live {
    ptr: *mut u8,
    size: usize,
    stamp: u8,
}

/// Offsets stamped in a buffer of `size` bytes: its first and last bytes, the bytes on
/// either side of each 2 MiB chunk boundary (blocks are chunk-aligned: a chunk handed
/// out twice, or given back while in use, shows there), and a page between (writing
/// every byte of megabytes per step would make the test slow).
fn probes(size: usize) -> Vec<usize> {
    let mut at = vec![0, size / 3, size - 1];
    for k in 1..=size / (2 * MIB) {
        at.extend(
            [k * 2 * MIB - 1, k * 2 * MIB]
                .into_iter()
                .filter(|&o| o < size),
        );
    }
    at
}

fn stamp(b: &Live) {
    for o in probes(b.size) {
        // SAFETY: `o < b.size`, inside the live buffer.
        unsafe { b.ptr.add(o).write(b.stamp) };
    }
}

fn check(b: &Live, upto: usize) -> Result<(), TestCaseError> {
    for o in probes(b.size).into_iter().filter(|&o| o < upto) {
        // SAFETY: `o < b.size`, inside the live buffer.
        let v = unsafe { b.ptr.add(o).read() };
        prop_assert_eq!(
            v,
            b.stamp,
            "buffer {:?} of {} bytes, offset {}",
            b.ptr,
            b.size,
            o
        );
    }
    Ok(())
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 16).unwrap()
}

/// Runs `ops` in one profiled pass; checks after every step.
fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let _pass = memo_alloc::pass("spares-program");
    let mut live: Vec<Live> = Vec::new();
    let mut next_stamp = 1u8;
    for op in ops {
        match *op {
            Op::Alloc(size, zeroed) => {
                // SAFETY: non-zero size.
                let ptr = unsafe {
                    if zeroed {
                        alloc_zeroed(layout(size))
                    } else {
                        alloc(layout(size))
                    }
                };
                prop_assert!(!ptr.is_null());
                prop_assert!(
                    memo_alloc::testing::is_own_block(ptr),
                    "a large block of a profiled pass is the region's"
                );
                if zeroed {
                    // SAFETY: `size` bytes just handed out.
                    let bytes = unsafe { std::slice::from_raw_parts(ptr, size) };
                    prop_assert!(
                        bytes.iter().all(|&b| b == 0),
                        "a zeroed block read non-zero"
                    );
                }
                let b = Live {
                    ptr,
                    size,
                    stamp: next_stamp,
                };
                next_stamp = next_stamp.wrapping_add(1).max(1);
                stamp(&b);
                live.push(b);
            }
            Op::Free(i) if !live.is_empty() => {
                let b = live.swap_remove(i % live.len());
                check(&b, b.size)?;
                // SAFETY: live, allocated with this layout.
                unsafe { dealloc(b.ptr, layout(b.size)) };
            }
            Op::Realloc(i, size) if !live.is_empty() => {
                let k = i % live.len();
                let b = &mut live[k];
                // SAFETY: live, allocated with this layout; non-zero new size.
                let p = unsafe { realloc(b.ptr, layout(b.size), size) };
                prop_assert!(!p.is_null());
                let kept = b.size.min(size);
                b.ptr = p;
                // What was stamped within the smaller size moved with it.
                check(b, kept)?;
                b.size = size;
                stamp(b);
            }
            _ => {}
        }
        let mut spans: Vec<(usize, usize)> = live
            .iter()
            .map(|b| (b.ptr as usize, b.ptr as usize + b.size))
            .collect();
        spans.sort_unstable();
        for w in spans.windows(2) {
            prop_assert!(
                w[0].1 <= w[1].0,
                "live buffers {:x?} and {:x?} overlap",
                w[0],
                w[1]
            );
        }
        for b in &live {
            check(b, b.size)?;
        }
    }
    for b in live {
        check(&b, b.size)?;
        // SAFETY: live, allocated with this layout.
        unsafe { dealloc(b.ptr, layout(b.size)) };
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn large_blocks_of_profiled_passes_stay_disjoint_and_keep_their_bytes(
        ops in prop::collection::vec(op(), 1..48)
    ) {
        profile_every_pass();
        run(&ops)?;
    }
}
