//! A compiled plan and its slab instances: the replay tables compiled from a plan document
//! (`compile.rs`, with the offset-to-group directory of `group_index.rs` and the lane
//! layout and bitmap of `cells.rs`), one slab instance (`instance.rs`), and a plan's pool
//! of them (`pool.rs`).

pub(crate) mod cells;
pub(crate) mod compile;
pub(crate) mod group_index;
pub(crate) mod instance;
pub(crate) mod pool;
