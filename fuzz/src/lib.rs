//! What the fuzz targets share: the shadow rules every block handed out must keep
//! ([`shadow`]), request programs replayed against a plan ([`program`]), and what a
//! parsed problem file must allow ([`problems`]).

pub mod problems;
pub mod program;
pub mod shadow;
