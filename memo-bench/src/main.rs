//! memo-bench: the benchmark harness (being built).
fn main() {}
