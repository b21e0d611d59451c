//! The workloads as descriptions: DNN-shaped passes of real architectures at a batch size
//! and an input size, in four variants ([`spec`], [`nets`], [`builder`], [`graph`]), LLM
//! decoding in two forms ([`decode`]), an encoder whose length varies under one key
//! ([`lengths`]), traces recorded by memo-alloc, and the names of the
//! candle engine's models ([`candle`]).
//!
//! This folder describes what a workload is and imports nothing else of the crate: the
//! interpreter (`crate::engine`), the real engine (`crate::candle`) and the per-thread
//! runner (`crate::runner`) build on it.

pub mod builder;
pub mod candle;
pub mod decode;
pub mod graph;
pub mod lengths;
pub mod nets;
pub mod spec;

pub use spec::{default_size, valid_names, Net, Spec, Variant};
