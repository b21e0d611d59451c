//! The study's "ops by bytes" table: the allocations of each op path, over all its
//! instances.

use std::collections::HashMap;

use memo_alloc::trace::{Chain, Trace};

use serde::Serialize;

use super::pass::{op_path, peak, record_end, Fate};

/// The allocations of one op (scope path), over all its instances.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OpRow {
    /// The op path (`layer/matmul`), or `(key)` for the pass itself.
    pub op: String,
    /// Instances (scopes) of the op in the pass.
    pub instances: u64,
    /// Allocations made by it.
    pub allocations: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The most bytes of its allocations live at once.
    pub peak_live: u64,
    /// How many of them are short-lived.
    pub short_lived: u64,
    /// How many of them escape the pass.
    pub escaping: u64,
}

/// One row per op path that made an allocation, by bytes (largest first, then by path).
/// `fates` and `chain_of` are per chain and per record, as [`super::Study`] computes them.
pub(super) fn rows(
    trace: &Trace,
    chains: &[Chain],
    fates: &[Fate],
    chain_of: &[Option<usize>],
) -> Vec<OpRow> {
    let mut table = OpTable::new(trace);
    let chain_row: Vec<usize> = chains
        .iter()
        .zip(fates)
        .map(|(c, &fate)| table.add_chain(c, fate))
        .collect();
    table.count_instances();
    table.set_peaks(chain_of, &chain_row);
    let mut rows = table.rows;
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.op.cmp(&b.op)));
    rows
}

/// The rows being tallied, found by op path.
struct OpTable<'t> {
    trace: &'t Trace,
    /// The op path of each scope looked up so far.
    paths: HashMap<u32, String>,
    rows: Vec<OpRow>,
    /// The row of each op path.
    index: HashMap<String, usize>,
}

impl<'t> OpTable<'t> {
    fn new(trace: &'t Trace) -> OpTable<'t> {
        OpTable {
            trace,
            paths: HashMap::new(),
            rows: Vec::new(),
            index: HashMap::new(),
        }
    }

    fn path(&mut self, scope: u32) -> &str {
        let trace = self.trace;
        self.paths
            .entry(scope)
            .or_insert_with(|| op_path(trace, scope))
    }

    /// Counts a chain in the row of the op that made it (a new row if needed); returns the
    /// row.
    fn add_chain(&mut self, chain: &Chain, fate: Fate) -> usize {
        let scope = self.trace.allocations[chain.root as usize].scope;
        let path = self.path(scope).to_string();
        let row = match self.index.get(&path) {
            Some(&row) => row,
            None => {
                self.rows.push(OpRow {
                    op: path.clone(),
                    instances: 0,
                    allocations: 0,
                    bytes: 0,
                    peak_live: 0,
                    short_lived: 0,
                    escaping: 0,
                });
                self.index.insert(path, self.rows.len() - 1);
                self.rows.len() - 1
            }
        };
        let r = &mut self.rows[row];
        r.allocations += 1;
        r.bytes += chain.size;
        match fate {
            Fate::Freed {
                short_lived: true, ..
            } => r.short_lived += 1,
            Fate::Freed { .. } => {}
            Fate::Escaping => r.escaping += 1,
        }
        row
    }

    /// Counts the op scopes of each row's path; the pass's own row has one instance.
    fn count_instances(&mut self) {
        for s in 1..self.trace.scopes.len() {
            let path = self.path(s as u32).to_string();
            if let Some(&row) = self.index.get(&path) {
                self.rows[row].instances += 1;
            }
        }
        if let Some(&row) = self.index.get(&format!("({})", self.trace.key)) {
            self.rows[row].instances = 1;
        }
    }

    /// Each row's peak of live bytes over the records of its chains.
    fn set_peaks(&mut self, chain_of: &[Option<usize>], chain_row: &[usize]) {
        let mut per_row: Vec<Vec<(u64, u64, u64)>> = vec![Vec::new(); self.rows.len()];
        for (i, ci) in chain_of.iter().enumerate() {
            if let Some(&ci) = ci.as_ref() {
                let a = &self.trace.allocations[i];
                per_row[chain_row[ci]].push((a.alloc, record_end(self.trace, i), a.size));
            }
        }
        for (row, intervals) in self.rows.iter_mut().zip(per_row) {
            row.peak_live = peak(intervals).0;
        }
    }
}
