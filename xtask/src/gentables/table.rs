//! A generated table read back (for rm-coverage and the tests): versions,
//! columns, rows, and a cell's value for one version.

use anyhow::{Context, bail};

/// A generated table read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// (label, full tag), in column order.
    pub tags: Vec<(String, String)>,
    pub columns: Vec<String>,
    pub rows: Vec<TableRow>,
    pub first_line: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRow {
    pub number: u32,
    pub cells: Vec<String>,
}

impl Table {
    pub fn parse(text: &str) -> anyhow::Result<Table> {
        let mut t = Table {
            tags: Vec::new(),
            columns: Vec::new(),
            rows: Vec::new(),
            first_line: text.lines().next().unwrap_or_default().to_string(),
        };
        for (i, line) in text.lines().enumerate() {
            let at = || format!("line {}", i + 1);
            if let Some(v) = line.strip_prefix("# versions: ") {
                t.tags = v
                    .split(' ')
                    .map(|p| p.split_once('=').map(|(l, f)| (l.into(), f.into())))
                    .collect::<Option<_>>()
                    .with_context(|| format!("{}: bad versions line", at()))?;
            } else if let Some(v) = line.strip_prefix("# columns: ") {
                t.columns = v.split(", ").map(str::to_string).collect();
            } else if !line.starts_with('#') {
                t.rows
                    .push(TableRow::parse(line, t.columns.len()).with_context(at)?);
            }
        }
        if t.tags.is_empty() || t.columns.is_empty() {
            bail!("no '# versions:' or '# columns:' line");
        }
        Ok(t)
    }

    pub fn col(&self, name: &str) -> anyhow::Result<usize> {
        self.columns
            .iter()
            .position(|c| c == name)
            .with_context(|| format!("no column {name}"))
    }

    /// The row of `number` that holds for tag `label`.
    pub fn row_for(&self, number: u32, label: &str) -> anyhow::Result<Option<&TableRow>> {
        let v = self.col("versions")?;
        Ok(self
            .rows
            .iter()
            .find(|r| r.number == number && r.cells[v].split(',').any(|l| l == label)))
    }

    /// A one-or-per-version cell's value for `label`.
    pub fn cell_for(&self, row: &TableRow, column: &str, label: &str) -> anyhow::Result<String> {
        let labels: Vec<&str> = row.cells[self.col("versions")?].split(',').collect();
        let cell = &row.cells[self.col(column)?];
        let parts: Vec<&str> = cell.split(',').collect();
        if parts.len() == 1 {
            return Ok(cell.clone());
        }
        let i = labels
            .iter()
            .position(|l| *l == label)
            .context("label not in row")?;
        if parts.len() != labels.len() {
            bail!(
                "{column} of 0x{:x} has {} values for {} versions",
                row.number,
                parts.len(),
                labels.len()
            );
        }
        Ok(parts[i].to_string())
    }
}

impl TableRow {
    fn parse(line: &str, ncols: usize) -> anyhow::Result<TableRow> {
        let cells: Vec<String> = line.split('\t').map(str::to_string).collect();
        if cells.len() != ncols {
            bail!("{} cells, expected {ncols}", cells.len());
        }
        let hex = cells[0].strip_prefix("0x").context("number without 0x")?;
        let number = u32::from_str_radix(hex, 16).context("bad number")?;
        Ok(TableRow { number, cells })
    }
}
