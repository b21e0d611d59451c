//! The public guards and reports.

pub(crate) mod buckets;
pub(crate) mod carry;
pub(crate) mod guards;
pub(crate) mod report;
