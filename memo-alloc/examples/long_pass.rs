//! A long pass of short-lived buffers, as a model's operators make them one after another:
//! `N` buffers of 257 B to 4 KiB (default 684,000), each freed once 64 later ones were
//! allocated, and a 1 MiB buffer every 1,000 that lives for 4,000. Prints, after each pass,
//! the process's resident size and its peak, and the key's state; at the end, how long
//! its plan took:
//! `cargo run --release -p memo-alloc --example long_pass [N] [PASSES]`.
use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant};

#[global_allocator]
static A: memo_alloc::MemoAlloc<memo_alloc::Jemalloc> = memo_alloc::MemoAlloc::jemalloc();

/// `VmRSS` and `VmHWM` of this process, in MiB.
fn resident_mib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb / 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// One pass of `n` buffers; returns a byte of each freed one.
fn one_pass(n: usize) -> u64 {
    let mut window: VecDeque<Vec<u8>> = VecDeque::new();
    let mut large: VecDeque<Vec<u8>> = VecDeque::new();
    let mut sum = 0u64;
    for i in 0..n {
        window.push_back(vec![1u8; 257 + (i * 7919) % 3840]);
        if window.len() > 64 {
            sum += u64::from(window.pop_front().map_or(0, |v| v[0]));
        }
        if i % 1000 == 0 {
            large.push_back(vec![2u8; 1 << 20]);
            if large.len() > 4 {
                large.pop_front();
            }
        }
    }
    sum
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().ok());
    let n = args.next().flatten().unwrap_or(684_000);
    let passes = args.next().flatten().unwrap_or(12);
    let start = Instant::now();
    for p in 0..passes {
        {
            let _pass = memo_alloc::pass("long-pass");
            black_box(one_pass(n));
        }
        let (rss, hwm) = resident_mib();
        let state = memo_alloc::report("long-pass").map(|r| r.state);
        println!(
            "pass {p:>3} at {:>6.2} s: resident {rss} MiB, peak {hwm} MiB, {state:?}",
            start.elapsed().as_secs_f64()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    if let Some(r) = memo_alloc::report("long-pass") {
        println!(
            "plan: {:.0} ms, height {} (lower bound {})",
            r.plan_millis, r.height, r.lower_bound
        );
    }
}
