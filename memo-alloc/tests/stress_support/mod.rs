//! The randomized stress test's parts (see `tests/stress.rs`): its settings, a seeded
//! random source, patterned blocks, a backend that fails when told to, the blocks threads
//! hand each other, the watchdog, and the passes the worker threads run.

#![allow(dead_code)]

pub mod block;
pub mod flaky;
pub mod passes;
pub mod rng;
pub mod settings;
pub mod transfer;
pub mod watchdog;
