//! Profiling a pass. The recorder (`recorder.rs`) appends an event per allocation, free,
//! realloc and op scope of the pass's thread; it pairs frees with their allocations
//! through its table of live addresses (`live_table.rs`) and counts small requests
//! instead of recording them (`lane_count.rs`). A finished recording is a profile
//! (`profile.rs`), which planning reads as it is and which becomes a trace document only
//! when trace files are written. `tag.rs`: tagged pointers (public as `memo_alloc::tag`).
//!
//! It may use `format`, `memory`, `stats`, `support` and `config`.

pub(crate) mod lane_count;
pub(crate) mod live_table;
pub(crate) mod profile;
pub(crate) mod recorder;
pub mod tag;
