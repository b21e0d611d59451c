//! The messages of pprof's `profile.proto` that a heap profile uses, as prost messages
//! (field numbers and types as in the `perftools.profiles` package; the fields this writer
//! leaves empty are left out, which decoders skip).

/// A profile: its value types, samples, the locations and functions the samples name,
/// and the string table every string field indexes (`string_table[0]` is `""`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    /// What each value of a sample measures, in order.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// One sample per distinct call stack.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// The binaries the locations belong to.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// The locations the samples' stacks name.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// The functions the locations name.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string of the profile, indexed by the other fields.
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// How long the profile covers, in nanoseconds (0 when unknown).
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// Free-form comments (string table indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type a viewer shows first (a string table index of a type name).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// A value's type and unit (string table indices), e.g. `alloc_space` in `bytes`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    /// The type's name.
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// Its unit.
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// The values measured at one call stack.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// The stack's locations, the innermost (leaf) first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type, in the profile's order.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
}

/// A place in the program: here one frame, with one line naming its function.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    /// Its id (not 0).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its mapping's id.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// The functions at the location, the innermost (inlined) first.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// A binary: here the one program the trace recorded.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    /// Its id (not 0).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Where it starts in memory.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// Where it ends in memory.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// Its offset in its file.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// Its file name (a string table index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Whether its locations' functions are already named (no symbolization needed).
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
}

/// A function at a location.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    /// The function's id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// The source line (0 when unknown).
    #[prost(int64, tag = "2")]
    pub line: i64,
}

/// A function (string table indices for its names).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    /// Its id (not 0).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its name as people read it.
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Its name as the linker knows it.
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Its source file (0 when unknown).
    #[prost(int64, tag = "4")]
    pub filename: i64,
}
