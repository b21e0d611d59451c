//! The `memo-bench` binary: the dispatching global allocator (chosen per process by
//! environment, see `memo_bench::alloc`) around the library's command line.

#[global_allocator]
static GLOBAL: memo_bench::alloc::Dispatch = memo_bench::alloc::Dispatch;

fn main() {
    std::process::exit(memo_bench::cli::main());
}
