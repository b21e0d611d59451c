//! The planning problem: buffers with a size, an alignment and a half-open lifetime.

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Serialize};

/// One buffer to place: alive on the half-open time interval `[lower, upper)`.
///
/// Two buffers *conflict* when their intervals intersect; conflicting buffers must get
/// disjoint address ranges. `align` is the required alignment of the buffer's offset
/// (a power of two, 1 when absent).
///
/// ```
/// use memo_planner::Buffer;
/// let b = Buffer::new("conv1.out", 0, 3, 4096).with_align(64);
/// assert!(b.conflicts_with(&Buffer::new("relu1.out", 2, 5, 4096)));
/// assert!(!b.conflicts_with(&Buffer::new("fc.out", 3, 5, 4096)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Buffer {
    /// A name unique within its problem.
    pub id: String,
    /// First time step at which the buffer is alive.
    pub lower: u64,
    /// First time step at which the buffer is no longer alive (exclusive).
    pub upper: u64,
    /// Size in bytes; never zero.
    pub size: u64,
    /// Required alignment of the offset in bytes; a power of two.
    #[serde(default = "default_align", skip_serializing_if = "is_one")]
    pub align: u64,
}

fn default_align() -> u64 {
    1
}

fn is_one(v: &u64) -> bool {
    *v == 1
}

impl Buffer {
    /// A buffer with alignment 1.
    pub fn new(id: impl Into<String>, lower: u64, upper: u64, size: u64) -> Buffer {
        Buffer {
            id: id.into(),
            lower,
            upper,
            size,
            align: 1,
        }
    }

    /// The same buffer with another alignment.
    pub fn with_align(mut self, align: u64) -> Buffer {
        self.align = align;
        self
    }

    /// Whether the two buffers are alive at a common time step.
    pub fn conflicts_with(&self, other: &Buffer) -> bool {
        self.lower < other.upper && other.lower < self.upper
    }

    /// Length of the lifetime in time steps.
    pub fn lifetime(&self) -> u64 {
        self.upper - self.lower
    }
}

/// Why a list of buffers is not a valid problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProblemError {
    /// `upper <= lower`: the buffer is never alive.
    EmptyLifetime { index: usize, id: String },
    /// A buffer of size zero.
    ZeroSize { index: usize, id: String },
    /// An alignment that is zero or not a power of two.
    BadAlignment {
        index: usize,
        id: String,
        align: u64,
    },
    /// Two buffers with the same id.
    DuplicateId {
        index: usize,
        first: usize,
        id: String,
    },
    /// The sizes (with alignment padding) add up to more than `u64::MAX` bytes.
    TooLarge,
}

impl fmt::Display for ProblemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProblemError::EmptyLifetime { index, id } => {
                write!(
                    f,
                    "buffer #{index} ({id:?}): upper must be greater than lower"
                )
            }
            ProblemError::ZeroSize { index, id } => {
                write!(f, "buffer #{index} ({id:?}): size must be positive")
            }
            ProblemError::BadAlignment { index, id, align } => write!(
                f,
                "buffer #{index} ({id:?}): alignment {align} is not a power of two"
            ),
            ProblemError::DuplicateId { index, first, id } => write!(
                f,
                "buffer #{index}: id {id:?} is already used by buffer #{first}"
            ),
            ProblemError::TooLarge => {
                write!(f, "the buffers' sizes add up to more than 2^64 bytes")
            }
        }
    }
}

impl std::error::Error for ProblemError {}

/// A validated list of buffers: every lifetime non-empty, every size positive, every
/// alignment a power of two, every id unique, and the total size representable.
///
/// Strategies refer to buffers by their index in [`Problem::buffers`]; plans list one
/// offset per buffer in the same order.
///
/// ```
/// use memo_planner::{Buffer, Problem};
/// let p = Problem::new(vec![Buffer::new("a", 0, 2, 8), Buffer::new("b", 1, 3, 8)]).unwrap();
/// assert_eq!(p.len(), 2);
/// assert!(Problem::new(vec![Buffer::new("a", 2, 2, 8)]).is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Problem {
    buffers: Vec<Buffer>,
}

impl Problem {
    /// Checks the buffers and wraps them.
    pub fn new(buffers: Vec<Buffer>) -> Result<Problem, ProblemError> {
        Problem::checked(buffers, true)
    }

    /// As [`Problem::new`], except that ids are not checked for uniqueness: for callers
    /// that refer to buffers by index only and leave every id empty. An empty `String`
    /// allocates nothing, where a name per buffer costs a heap block each (the allocator
    /// plans passes of 350,000 allocations: 11 MB of names) and a set to check them.
    ///
    /// ```
    /// use memo_planner::{Buffer, Problem};
    /// let p = Problem::unnamed(vec![Buffer::new("", 0, 2, 8), Buffer::new("", 1, 3, 8)]);
    /// assert_eq!(p.unwrap().len(), 2);
    /// assert!(Problem::new(vec![Buffer::new("", 0, 2, 8), Buffer::new("", 1, 3, 8)]).is_err());
    /// ```
    pub fn unnamed(buffers: Vec<Buffer>) -> Result<Problem, ProblemError> {
        Problem::checked(buffers, false)
    }

    /// Checks the buffers (their ids too when `named`) and wraps them.
    fn checked(buffers: Vec<Buffer>, named: bool) -> Result<Problem, ProblemError> {
        let mut seen: HashSet<&str> = HashSet::with_capacity(if named { buffers.len() } else { 0 });
        let mut total: u64 = 0;
        for (index, b) in buffers.iter().enumerate() {
            if b.upper <= b.lower {
                return Err(ProblemError::EmptyLifetime {
                    index,
                    id: b.id.clone(),
                });
            }
            if b.size == 0 {
                return Err(ProblemError::ZeroSize {
                    index,
                    id: b.id.clone(),
                });
            }
            if !b.align.is_power_of_two() {
                return Err(ProblemError::BadAlignment {
                    index,
                    id: b.id.clone(),
                    align: b.align,
                });
            }
            if named && !seen.insert(b.id.as_str()) {
                let first = buffers.iter().position(|o| o.id == b.id).unwrap_or(0);
                return Err(ProblemError::DuplicateId {
                    index,
                    first,
                    id: b.id.clone(),
                });
            }
            total = total
                .checked_add(b.size)
                .and_then(|t| t.checked_add(b.align))
                .ok_or(ProblemError::TooLarge)?;
        }
        Ok(Problem { buffers })
    }

    /// The buffers, in input order.
    pub fn buffers(&self) -> &[Buffer] {
        &self.buffers
    }

    /// Number of buffers.
    pub fn len(&self) -> usize {
        self.buffers.len()
    }

    /// Whether there are no buffers.
    pub fn is_empty(&self) -> bool {
        self.buffers.is_empty()
    }

    /// The buffers, consuming the problem.
    pub fn into_buffers(self) -> Vec<Buffer> {
        self.buffers
    }
}

impl<'de> Deserialize<'de> for Problem {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Problem, D::Error> {
        let buffers = Vec::<Buffer>::deserialize(d)?;
        Problem::new(buffers).map_err(serde::de::Error::custom)
    }
}

/// Rounds `value` up to a multiple of `align` (a power of two).
#[inline]
pub fn align_up(value: u64, align: u64) -> u64 {
    debug_assert!(align.is_power_of_two());
    (value + (align - 1)) & !(align - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_each_kind_of_bad_buffer() {
        let bad = [
            (Buffer::new("a", 3, 3, 1), "upper must be greater"),
            (Buffer::new("a", 4, 3, 1), "upper must be greater"),
            (Buffer::new("a", 0, 3, 0), "size must be positive"),
            (
                Buffer::new("a", 0, 3, 1).with_align(3),
                "not a power of two",
            ),
            (
                Buffer::new("a", 0, 3, 1).with_align(0),
                "not a power of two",
            ),
        ];
        for (b, msg) in bad {
            let err = Problem::new(vec![b]).unwrap_err().to_string();
            assert!(err.contains(msg), "{err}");
        }
        let dup = Problem::new(vec![Buffer::new("x", 0, 1, 1), Buffer::new("x", 1, 2, 1)]);
        assert_eq!(
            dup.unwrap_err(),
            ProblemError::DuplicateId {
                index: 1,
                first: 0,
                id: "x".into()
            }
        );
        let huge = Problem::new(vec![
            Buffer::new("a", 0, 1, u64::MAX / 2),
            Buffer::new("b", 0, 1, u64::MAX / 2),
        ]);
        assert_eq!(huge.unwrap_err(), ProblemError::TooLarge);
    }

    #[test]
    fn align_up_rounds_to_multiples() {
        assert_eq!(align_up(0, 8), 0);
        assert_eq!(align_up(1, 8), 8);
        assert_eq!(align_up(8, 8), 8);
        assert_eq!(align_up(13, 1), 13);
    }

    #[test]
    fn json_round_trip_validates() {
        let p = Problem::new(vec![Buffer::new("a", 0, 2, 8).with_align(4)]).unwrap();
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(
            text,
            r#"[{"id":"a","lower":0,"upper":2,"size":8,"align":4}]"#
        );
        let back: Problem = serde_json::from_str(&text).unwrap();
        assert_eq!(back, p);
        let bad = serde_json::from_str::<Problem>(r#"[{"id":"a","lower":2,"upper":2,"size":8}]"#);
        assert!(bad.is_err());
    }
}
