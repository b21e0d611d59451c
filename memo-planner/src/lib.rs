//! `memo-planner`: offline memory planning for repeated computations.
//!
//! A [`Problem`] is a list of [`Buffer`]s, each alive on a half-open time interval
//! `[lower, upper)` with a size and an alignment. Two buffers *conflict* when their
//! lifetimes intersect. The planner answers it in two families, after Pisarchyk & Lee,
//! "Efficient Memory Management for Deep Neural Net Inference":
//!
//! - **offsets** ([`OffsetStrategy`]): every buffer gets an offset in one arena, conflicting
//!   buffers disjoint address ranges; the goal is the lowest height `max(offset + size)`.
//!   This is what memomalloc's slabs use.
//! - **shared objects** ([`SharedObjectStrategy`]): buffers are grouped into objects whose
//!   members never conflict; the goal is the lowest sum of object sizes.
//!
//! Every plan can be checked with [`validate_offsets`] / [`validate_shared`], which share no
//! code with the strategies, and compared against [`offsets_lower_bound`] and
//! [`shared_objects_lower_bound`].
//!
//! Problems and plans are read and written as CSV (the minimalloc convention) and JSON
//! ([`format`]). With the `heapmap` feature (off by default), `heapmap::render_svg` draws a
//! plan as an SVG heap map.
//!
//! ```
//! use memo_planner::*;
//! let problem = Problem::new(vec![
//!     Buffer::new("b1", 0, 3, 4),
//!     Buffer::new("b2", 3, 9, 4),
//!     Buffer::new("b3", 0, 9, 4),
//!     Buffer::new("b4", 9, 21, 4),
//!     Buffer::new("b5", 0, 21, 4),
//! ]).unwrap();
//! let plan = OffsetStrategy::GreedyBySize.plan(&problem);
//! let height = validate_offsets(&problem, &plan).unwrap();
//! assert_eq!(height, 12);
//! assert_eq!(offsets_lower_bound(&problem), 12);
//! ```

pub mod bounds;
/// Test support (known cases, generated problems, the data directory): for this crate's
/// tests, benchmarks and examples, behind the `fixtures` feature; not part of the API.
#[cfg(any(test, feature = "fixtures"))]
#[doc(hidden)]
pub mod fixtures;
pub mod format;
#[cfg(feature = "heapmap")]
pub mod heapmap;
mod max_add_tree;
pub mod offsets;
pub mod plan;
pub mod problem;
mod rng;
pub mod shared;
pub mod text;
pub mod time_index;
pub mod timeline;
pub mod validate;

pub use bounds::{offsets_lower_bound, positional_maximums, shared_objects_lower_bound};
pub use format::{read_problem_file, FormatError};
#[cfg(feature = "heapmap")]
pub use heapmap::{render_svg, HeapmapOptions};
pub use offsets::{OffsetStrategy, UnknownStrategy};
pub use plan::{OffsetPlan, SharedObjectsPlan};
pub use problem::{align_up, Buffer, Problem, ProblemError};
pub use shared::SharedObjectStrategy;
pub use validate::{validate_offsets, validate_shared, PlanError};
