//! File formats: CSV in the minimalloc convention and JSON (serde), for problems and plans.
