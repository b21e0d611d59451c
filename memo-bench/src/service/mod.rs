//! An inference service and its benchmark.
//!
//! [`server`] is a small real service: HTTP on tokio + axum, one async memo pass per
//! request (`memo_alloc::Pass::wrap`), sequence lengths mapped to buckets with a plan each
//! (prewarmed at start-up), and memo's counters at `/metrics` in the Prometheus text
//! format ([`metrics`]). `examples/inference_service.rs` runs it on its own;
//! `memo-bench service` ([`bench`]) starts it under each allocator and loads it with a
//! bounded number of concurrent clients for a bounded time ([`load`]).

pub mod bench;
pub mod command;
pub mod load;
pub mod metrics;
pub mod model;
pub mod report;
pub mod server;
