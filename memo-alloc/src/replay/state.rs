//! The state of matching (see `matching.rs`): where each node's requests stand in its
//! planned slots ([`Cursor`], one per node in a slab instance), what a context's pass
//! found out so far ([`Shrink`], [`Lost`]), and the bounds the rules work within.

/// No slot.
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// Where a node's allocations stand in its planned sequence, per slab instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// The slot the next allocation is expected at.
    pub(crate) next: u32,
    /// One past the node's last slot.
    pub(crate) end: u32,
    /// The node's first slot (an anchored search may look behind the cursor, down to it).
    pub(crate) start: u32,
    /// What the last request of the node left for the next one ([`NO_SLOT`]: nothing):
    /// a candidate slot ahead that an unmatched request matched (if the next request
    /// matches the slot after it, the cursor jumps there), or, tagged [`BACK`], the slot
    /// the cursor stood at before it jumped past slots (if the next request does not
    /// confirm the jump, the cursor may go back there).
    pub(crate) pending: u32,
    /// The node's lane requests so far in the pass (the next one's lane ordinal).
    pub(crate) lanes: u32,
    /// The lane ordinal of the node's next escaping lane request ([`NO_SLOT`]: none; see
    /// `CompiledPlan::lane_escape`).
    pub(crate) escape: u32,
    /// What entering this node prefetches for the ops the profile entered after it (see
    /// `pass::scopes::enter_node`).
    pub(crate) ahead: Ahead,
}

/// The lookups of the ops a profile entered after a node, which entering that node
/// prefetches: the next op's first slot, and the cursor, scope-group entry and occurrence
/// count of the op after it (two ahead: a lead of one op is often too short to hide a
/// miss). [`NO_SLOT`]: nothing to prefetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ahead {
    pub(crate) slot: u32,
    pub(crate) node: u32,
    pub(crate) group: u32,
    pub(crate) base: u32,
}

impl Ahead {
    /// Nothing to prefetch.
    pub(crate) const NONE: Ahead = Ahead {
        slot: NO_SLOT,
        node: NO_SLOT,
        group: NO_SLOT,
        base: NO_SLOT,
    };
}

/// The tag of a [`Cursor::pending`] that names the slot before a jump: slot indices are
/// below 2^24 (`MAX_SLOTS`), so the tag leaves them intact and [`NO_SLOT`] apart.
pub(crate) const BACK: u32 = 1 << 31;

/// Whether a pass replays a smaller shape than its plan's (see `matching.rs`, rule 5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Shrink {
    /// Not seen.
    #[default]
    Off,
    /// A request fitted only slot `slot` of `node` by shrinking, when the pass had made
    /// `hits` hits; not taken.
    Probe { node: u32, slot: u32, hits: u64 },
    /// Confirmed: requests may take slots they fit by shrinking.
    On,
}

/// Requests an anchored search matches in a row (see `matching.rs`, rule 7).
pub(crate) const ANCHOR: usize = 4;

/// The requests of a node a pass has missed lately (a *run*: at most [`RUN_GAP`] hits
/// between two of them): when it has lost its place in the node's sequence, they anchor
/// a search further ahead (see `matching.rs`, rule 7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Lost {
    /// The node, and the pass's hits at the run's last miss.
    pub(crate) node: u32,
    pub(crate) hits: u64,
    /// The size and the pass's request index of the run's last `ANCHOR - 1` misses,
    /// oldest first (valid once `run` is that long).
    pub(crate) missed: [(u64, u64); ANCHOR - 1],
    /// Misses in the run.
    pub(crate) run: u32,
    /// The run length at which the next anchored search is made ([`ANCHOR`] later after
    /// a search that found a place not taken, a few times in a run; else doubled).
    pub(crate) search_at: u32,
    /// Searches of the run that found a place not taken (see `search_at`).
    pub(crate) rechecks: u32,
    /// Where the run's last search found a place: its slot less the request's index. A
    /// place is taken when two searches in a row agree on it (within [`AGREE`]).
    pub(crate) found: Option<i64>,
    /// Where the run began: a place the pass finds past it is learned as a skip (see
    /// `skips.rs`).
    pub(crate) start: RunStart,
}

/// The first miss of a run (see [`Lost`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunStart {
    /// The slot the cursor stood at.
    pub(crate) slot: u32,
    /// The pass's request index and size.
    pub(crate) request: u64,
    pub(crate) size: u64,
    /// The candidate it named (`matching.rs`, rule 6), or [`NO_SLOT`].
    pub(crate) candidate: u32,
}

impl Default for RunStart {
    fn default() -> RunStart {
        RunStart {
            slot: NO_SLOT,
            request: 0,
            size: 0,
            candidate: NO_SLOT,
        }
    }
}

/// Two searches' places agree when they differ by at most this many slots: requests
/// inserted or missing between the two anchors move the place by one each.
pub(crate) const AGREE: i64 = ANCHOR as i64;

/// Hits between two misses of one run at most (a pass that lost its place still hits
/// now and then: a size common in its sequence matches wherever the cursor stands).
pub(crate) const RUN_GAP: u64 = 16;

/// How far ahead an unmatched request looks for its slot.
pub(crate) const WINDOW: u32 = 16;

/// How far ahead an anchored search (rule 7) looks.
pub(crate) const LONG_WINDOW: u32 = 4096;

/// Places found in a run that the next anchor checks [`ANCHOR`] misses later, at most
/// (rule 7); after them, a search that does not take a place doubles the wait.
pub(crate) const RECHECKS: u32 = 4;

/// How far behind the cursor an anchored search (rule 7) looks: a wrong jump (rule 4
/// confirms a candidate at most [`WINDOW`] ahead, by chance) leaves the cursor ahead of
/// the program, whose place is then behind it.
pub(crate) const BEHIND: u32 = 4 * WINDOW;

/// A request at most this many times smaller than a slot's smallest seen size is a
/// probe of a smaller shape (rule 5).
pub(crate) const SHRINK: u64 = 2;

/// In a pass confirmed to be of a smaller shape, a request at most this many times
/// smaller than a slot's smallest seen size takes it (quadratic buffers of a power-of-two
/// bucket's shapes are down to a quarter). Shapes smaller still match once a profile of
/// them was merged into the plan (which widens the slots' seen ranges).
pub(crate) const SHRINK_CONFIRMED: u64 = 8;

/// Where a request stands in its pass: its node, the pass's hits so far and its index
/// among the pass's requests.
#[derive(Clone, Copy, Debug)]
pub(crate) struct At {
    pub(crate) node: u32,
    pub(crate) hits: u64,
    pub(crate) request: u64,
    /// The plan's lane bound: requests of at most this many bytes take lane cells.
    pub(crate) lane_max: u64,
}
