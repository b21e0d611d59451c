//! The `memo` command line.
fn main() {}
