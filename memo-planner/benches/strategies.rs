//! Criterion benchmarks of the planning strategies (filled in with the trace generators).
fn main() {}
