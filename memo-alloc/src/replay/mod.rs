//! Replaying a pass from a slab: each request of a replayed pass is served from the slab
//! instance its context holds, once a check proved no live allocation overlaps it; slab
//! pointers are freed from any thread. No lock, no system call, no allocation on these
//! paths.
//!
//! # Where things are
//! - `hit.rs`: a request, from its context to its slot or cell: the hit path first (the
//!   node's next slot matches; its checks; `claim`, the hand-out), the lane path, then the
//!   general matching with the same checks, and `undo`.
//! - `matching.rs`: the rules that align a request with its node's planned sequence when
//!   the next slot does not match it (`anchor.rs`: rule 7); `state.rs`: their state (per
//!   node, [`state::Cursor`]; per context, [`state::Shrink`] and [`state::Lost`]) and
//!   bounds; `skips.rs`: what a pass found out about its plan for the passes after it.
//! - `free.rs`: frees of slab pointers, their capacities, and lane chains that grow.
//! - `replayer.rs`: what a context holds to replay ([`replayer::Replayer`]) and what
//!   replay reads of a context ([`replayer::ReplayContext`]).
//! - `slab/`: a compiled plan and its pool of slab instances.
//!
//! # Lanes
//! Most allocations of a real engine's pass are tiny, and few of those live at once.
//! Planned one by one, each would cost a compiled slot (32 bytes, and 4 of pass-end
//! stamp) and a planner buffer while planning: tables many times the size of the data
//! they place. With lanes (`Config::lanes`, 256 bytes by default) a request of at most
//! that many bytes (size and alignment) takes no slot: it takes a free *cell* of its size
//! class (16, 32, ... bytes: `memory::lane_classes`) from the instance's *lane block*, a
//! block of its own beside the slots' (a live cell holds only that block). A profile
//! counts, per class, the most such requests it had live at once (and those still live
//! at its end, which a later pass of the same instance may meet); the plan holds that
//! many cells of each class (`slab/cells.rs`).
//!
//! A request whose class is full takes a cell of the smallest class above it that has
//! one (a bucket's smaller shape moves requests down a class: the classes above have
//! cells to spare); when those are full too (the pass has more live than any profile
//! had), it goes to the backend as an overlap miss. A lane request the profile saw
//! escape its pass goes to the backend instead (`profiling::lane_count`). Lanes never
//! move a node's place in its slots: the planned sequence holds only the larger requests,
//! so an inserted or missing small allocation does not disturb matching either.
//!
//! # What it may use
//! `format` (the plan documents it compiles), `memory`, `stats` and `support`. It knows
//! no pass: it reads a context through [`replayer::ReplayContext`].

mod anchor;
pub(crate) mod free;
pub(crate) mod hit;
mod matching;
pub(crate) mod replayer;
pub(crate) mod skips;
pub(crate) mod slab;
pub(crate) mod state;
#[cfg(all(test, not(loom)))]
mod tests;
