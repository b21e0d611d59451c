//! Aligned text tables for people (numbers in them: [`memo_planner::text`]).

/// A table whose columns are padded to their widest cell; numeric columns right-aligned.
pub struct Table {
    header: Vec<String>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Columns named `header`; `right[i]` right-aligns column `i`.
    pub fn new(header: &[&str], right: &[bool]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            right: right.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, with a rule under the header.
    pub fn render(&self) -> String {
        let n = self.header.len();
        let mut width = vec![0; n];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (w, c) in width.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    s.push_str("  ");
                }
                let pad = width[i].saturating_sub(c.chars().count());
                if self.right.get(i).copied().unwrap_or(false) {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    if i + 1 < n {
                        s.push_str(&" ".repeat(pad));
                    }
                }
            }
            s.push('\n');
            s
        };
        let mut out = line(&self.header);
        let total: usize = width.iter().sum::<usize>() + 2 * n.saturating_sub(1);
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns() {
        let mut t = Table::new(&["name", "n"], &[false, true]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["long".into(), "1000".into()]);
        assert_eq!(
            t.render(),
            "name     n\n----------\na        1\nlong  1000\n"
        );
    }
}
