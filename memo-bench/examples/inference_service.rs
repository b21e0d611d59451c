//! A small inference service on memomalloc: HTTP on tokio + axum, one async memo pass per
//! request (`memo_alloc::Pass::wrap`), sequence lengths mapped to buckets (each prewarmed
//! at start-up, so no request pays for profiling), memo's counters at `/metrics`.
//!
//! ```text
//! cargo run --release -p memo-bench --example inference_service -- 127.0.0.1:3000
//! curl -s -d '101 2023 2003 1037 102' http://127.0.0.1:3000/infer
//! curl -s http://127.0.0.1:3000/metrics
//! ```
//!
//! `memo-bench service` benchmarks this same server under memo, jemalloc and mimalloc.

use memo_bench::service::server::{serve, ServeOptions};

#[global_allocator]
static ALLOC: memo_alloc::MemoAlloc<memo_alloc::Jemalloc> = memo_alloc::MemoAlloc::jemalloc();

fn main() {
    let mut opts = ServeOptions::default();
    if let Some(addr) = std::env::args().nth(1) {
        match addr.parse() {
            Ok(a) => opts.addr = a,
            Err(e) => {
                eprintln!(
                    "inference_service: {addr:?} is not an address such as 127.0.0.1:3000: {e}"
                );
                std::process::exit(2);
            }
        }
    }
    if let Err(e) = serve(&opts) {
        eprintln!("inference_service: {e}");
        std::process::exit(1);
    }
}
