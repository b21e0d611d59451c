//! Writing problems (and plans) as CSV.

use std::io::{self, Write};

use crate::plan::OffsetPlan;
use crate::problem::Problem;

/// Whether an id must be quoted to read back as written: the reader trims unquoted fields
/// and splits them at commas and line ends.
fn needs_quotes(id: &str) -> bool {
    id.is_empty()
        || id.starts_with([' ', '\t'])
        || id.ends_with([' ', '\t', '\r'])
        || id.contains([',', '"', '\n', '\r'])
}

/// Writes a problem (and optionally an offset plan) as CSV:
/// `id,lower,upper,size[,alignment][,offset]`, the `alignment` column only when some buffer
/// has an alignment above 1. Ids are quoted when needed.
///
/// Fails with [`io::ErrorKind::InvalidInput`] when the plan's length differs from the
/// problem's, and with the writer's errors.
///
/// ```
/// use memo_planner::{Buffer, OffsetPlan, Problem};
/// use memo_planner::format::write_problem_csv;
/// let p = Problem::new(vec![Buffer::new("a", 0, 2, 8), Buffer::new("b,c", 1, 3, 4)]).unwrap();
/// let mut out = Vec::new();
/// write_problem_csv(&mut out, &p, Some(&OffsetPlan { offsets: vec![0, 8] })).unwrap();
/// assert_eq!(
///     String::from_utf8(out).unwrap(),
///     "id,lower,upper,size,offset\na,0,2,8,0\n\"b,c\",1,3,4,8\n"
/// );
/// ```
pub fn write_problem_csv<W: Write>(
    writer: W,
    problem: &Problem,
    plan: Option<&OffsetPlan>,
) -> io::Result<()> {
    if let Some(plan) = plan {
        if plan.offsets.len() != problem.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the plan has {} offsets for {} buffers",
                    plan.offsets.len(),
                    problem.len()
                ),
            ));
        }
    }
    let mut w = io::BufWriter::new(writer);
    let aligned = problem.buffers().iter().any(|b| b.align != 1);
    w.write_all(b"id,lower,upper,size")?;
    if aligned {
        w.write_all(b",alignment")?;
    }
    if plan.is_some() {
        w.write_all(b",offset")?;
    }
    w.write_all(b"\n")?;
    for (i, b) in problem.buffers().iter().enumerate() {
        if needs_quotes(&b.id) {
            write!(w, "\"{}\"", b.id.replace('"', "\"\""))?;
        } else {
            w.write_all(b.id.as_bytes())?;
        }
        write!(w, ",{},{},{}", b.lower, b.upper, b.size)?;
        if aligned {
            write!(w, ",{}", b.align)?;
        }
        if let Some(plan) = plan {
            write!(w, ",{}", plan.offsets[i])?;
        }
        w.write_all(b"\n")?;
    }
    w.flush()
}

/// [`write_problem_csv`] into a `String`.
///
/// # Panics
///
/// When the plan's length differs from the problem's.
///
/// ```
/// use memo_planner::{Buffer, Problem};
/// use memo_planner::format::problem_to_csv;
/// let p = Problem::new(vec![Buffer::new("a", 0, 2, 8).with_align(4)]).unwrap();
/// assert_eq!(problem_to_csv(&p, None), "id,lower,upper,size,alignment\na,0,2,8,4\n");
/// ```
pub fn problem_to_csv(problem: &Problem, plan: Option<&OffsetPlan>) -> String {
    let mut out = Vec::new();
    if let Err(e) = write_problem_csv(&mut out, problem, plan) {
        panic!("problem_to_csv: {e}");
    }
    String::from_utf8(out).unwrap_or_default()
}
