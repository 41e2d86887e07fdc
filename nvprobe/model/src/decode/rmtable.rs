//! The RM control and class tables that `cargo xtask gen-tables` writes
//! from NVIDIA's open headers (`nvprobe/model/data/rm-{controls,classes}.tsv`,
//! docs/RM-TABLES.md), parsed into sorted rows and looked up by release.
//!
//! A table names numbers per release branch (535, 550, …: the major of the
//! tag the headers came from). A number may have several rows when NVIDIA
//! renamed or reused it; a row lists the releases it is valid for. The
//! parser takes any text and never panics: a line it cannot read is left
//! out, so a damaged table names fewer numbers, never wrong ones.

use super::version::DriverVersion;

/// One (number, name) row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row<'a> {
    pub number: u32,
    pub name: &'a str,
    /// The releases (majors) the row is valid for, ascending.
    pub releases: Vec<u32>,
    /// Params size in bytes: one value for every release of the row, or one
    /// per release in the order of `releases`; None where the table leaves
    /// it empty. Always empty for classes.
    sizes: Vec<Option<u32>>,
    /// The params struct, with the same one-or-per-release rule.
    params: Vec<Option<&'a str>>,
}

impl<'a> Row<'a> {
    fn per_release<T: Copy>(&self, v: &[Option<T>], release: u32) -> Option<T> {
        match v {
            [one] => *one,
            many => {
                let i = self.releases.iter().position(|&r| r == release)?;
                if many.len() == self.releases.len() {
                    many[i]
                } else {
                    None
                }
            }
        }
    }
    /// The params size for `release`, only when the row is valid for it.
    pub fn size_for(&self, release: u32) -> Option<u32> {
        if !self.releases.contains(&release) {
            return None;
        }
        self.per_release(&self.sizes, release)
    }
    /// The params struct for `release`, only when the row is valid for it.
    pub fn params_for(&self, release: u32) -> Option<&'a str> {
        if !self.releases.contains(&release) {
            return None;
        }
        self.per_release(&self.params, release)
    }
}

/// A parsed table: rows sorted by number, then by their first release.
#[derive(Clone, Debug, Default)]
pub struct RmTable<'a> {
    /// Every release the table covers, ascending.
    releases: Vec<u32>,
    rows: Vec<Row<'a>>,
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit<'t, 'a> {
    pub row: &'t Row<'a>,
    /// The release the lookup was for.
    pub release: u32,
    /// True when the row is valid for that release; false when the name
    /// comes from the nearest release below (or above) that has one.
    pub exact: bool,
}

/// Column positions: both tables start with number, name, versions; the
/// control table goes on with size and params (aliases last in both).
const COL_NUMBER: usize = 0;
const COL_NAME: usize = 1;
const COL_VERSIONS: usize = 2;
const COL_SIZE: usize = 3;
const COL_PARAMS: usize = 4;

fn parse_number(s: &str) -> Option<u32> {
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    if h.is_empty() || h.len() > 8 {
        return None;
    }
    u32::from_str_radix(h, 16).ok()
}

/// A C identifier: names go to terminals and JSON as they are.
fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !s.as_bytes()[0].is_ascii_digit()
}

fn parse_release(s: &str) -> Option<u32> {
    (!s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// "a,b,c" or "a": each item parsed by `f`, an empty item is None. A
/// non-empty item that does not parse makes the whole cell unreadable.
fn parse_list<'s, T>(cell: &'s str, f: impl Fn(&'s str) -> Option<T>) -> Option<Vec<Option<T>>> {
    if cell.is_empty() {
        return Some(vec![None]);
    }
    cell.split(',')
        .map(|s| {
            if s.is_empty() {
                Some(None)
            } else {
                f(s).map(Some)
            }
        })
        .collect()
}

impl<'a> RmTable<'a> {
    /// Parse a table's text. `with_sizes`: the control table (size and
    /// params columns). Lines starting with `#` are comments, except
    /// `# versions: 535=535.261.03 …`, which lists the releases.
    pub fn parse(text: &'a str, with_sizes: bool) -> Self {
        let mut releases: Vec<u32> = Vec::new();
        let mut rows = Vec::new();
        for line in text.lines() {
            if let Some(c) = line.strip_prefix('#') {
                if let Some(list) = c.trim_start().strip_prefix("versions:") {
                    releases.extend(
                        list.split_whitespace()
                            .filter_map(|item| parse_release(item.split('=').next()?)),
                    );
                }
                continue;
            }
            if let Some(row) = Self::parse_row(line, with_sizes) {
                rows.push(row);
            }
        }
        // Releases the rows name count too (a table without the header).
        for r in &rows {
            releases.extend(&r.releases);
        }
        releases.sort_unstable();
        releases.dedup();
        rows.sort_by_key(|r: &Row<'_>| (r.number, r.releases.first().copied()));
        Self { releases, rows }
    }

    fn parse_row(line: &'a str, with_sizes: bool) -> Option<Row<'a>> {
        let cells: Vec<&str> = line.split('\t').map(str::trim).collect();
        let number = parse_number(cells.get(COL_NUMBER)?)?;
        let name = *cells.get(COL_NAME)?;
        if !is_ident(name) {
            return None;
        }
        let mut releases: Vec<u32> = parse_list(cells.get(COL_VERSIONS)?, parse_release)?
            .into_iter()
            .collect::<Option<_>>()?;
        releases.sort_unstable();
        releases.dedup();
        let (mut sizes, mut params) = (vec![None], vec![None]);
        if with_sizes {
            // A damaged size or params cell costs the size, not the name.
            if let Some(s) = cells
                .get(COL_SIZE)
                .and_then(|&c| parse_list(c, |s| s.parse::<u32>().ok()))
            {
                sizes = s;
            }
            if let Some(p) = cells
                .get(COL_PARAMS)
                .and_then(|&c| parse_list(c, |s| is_ident(s).then_some(s)))
            {
                params = p;
            }
        }
        Some(Row {
            number,
            name,
            releases,
            sizes,
            params,
        })
    }

    /// Every release the table covers, ascending.
    pub fn releases(&self) -> &[u32] {
        &self.releases
    }

    pub fn rows(&self) -> &[Row<'a>] {
        &self.rows
    }

    /// The release whose names apply to driver `v`: the newest release at or
    /// below its major; below the oldest, the oldest. None for an empty
    /// table.
    pub fn release_for(&self, v: DriverVersion) -> Option<u32> {
        let below = self.releases.partition_point(|&r| r <= v.major);
        match below {
            0 => self.releases.first().copied(),
            n => Some(self.releases[n - 1]),
        }
    }

    /// The rows of `number`.
    pub fn rows_of(&self, number: u32) -> &[Row<'a>] {
        let lo = self.rows.partition_point(|r| r.number < number);
        let hi = self.rows.partition_point(|r| r.number <= number);
        &self.rows[lo..hi]
    }

    /// The row of `number` for `release`: the row valid for it, else the
    /// row of the nearest release below, else of the nearest above.
    pub fn lookup(&self, number: u32, release: u32) -> Option<Hit<'_, 'a>> {
        let rows = self.rows_of(number);
        if let Some(row) = rows.iter().find(|r| r.releases.contains(&release)) {
            return Some(Hit {
                row,
                release,
                exact: true,
            });
        }
        let below = rows
            .iter()
            .filter_map(|r| Some((r.releases.iter().rev().find(|&&x| x < release)?, r)))
            .max_by_key(|(x, _)| **x)
            .map(|(_, r)| r);
        let above = || {
            rows.iter()
                .filter_map(|r| Some((r.releases.iter().find(|&&x| x > release)?, r)))
                .min_by_key(|(x, _)| **x)
                .map(|(_, r)| r)
        };
        below.or_else(above).map(|row| Hit {
            row,
            release,
            exact: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "# generated\n\
# versions: 535=535.261.03 550=550.163.01 580=580.142 595=595.45.04\n\
# columns: control, name, versions, size, params, aliases\n\
0x00000107\tOLD_NAME\t535\t4\tOLD_PARAMS\t\n\
0x00000107\tNEW_NAME\t580,595\t1\tNEW_PARAMS\t\n\
0x00000102\tCPU_INFO\t535,550,580,595\t104,104,108,108\tCPU_PARAMS\tALIAS\n\
0x00000200\tONLY_595\t595\t8\t\t\n\
0x00000300\tGONE_AFTER_550\t535,550\t\t\t\n";

    fn dv(major: u32) -> DriverVersion {
        DriverVersion::new(major, 1, 2)
    }

    #[test]
    fn releases_and_the_nearest_release_rule() {
        let t = RmTable::parse(T, true);
        assert_eq!(t.releases(), &[535, 550, 580, 595]);
        assert_eq!(t.release_for(dv(580)), Some(580));
        assert_eq!(t.release_for(DriverVersion::new(580, 159, 4)), Some(580));
        assert_eq!(t.release_for(dv(560)), Some(550));
        assert_eq!(t.release_for(dv(535)), Some(535));
        assert_eq!(t.release_for(dv(470)), Some(535));
        assert_eq!(t.release_for(dv(610)), Some(595));
        assert_eq!(RmTable::parse("", true).release_for(dv(580)), None);
    }

    #[test]
    fn rows_by_release() {
        let t = RmTable::parse(T, true);
        let name = |n, r| t.lookup(n, r).map(|h| (h.row.name, h.exact));
        assert_eq!(name(0x107, 535), Some(("OLD_NAME", true)));
        assert_eq!(name(0x107, 580), Some(("NEW_NAME", true)));
        // 550 has no row: the nearest release below (535) wins over above.
        assert_eq!(name(0x107, 550), Some(("OLD_NAME", false)));
        // Only above.
        assert_eq!(name(0x200, 580), Some(("ONLY_595", false)));
        // Only below.
        assert_eq!(name(0x300, 595), Some(("GONE_AFTER_550", false)));
        assert_eq!(name(0x999, 580), None);
        let h = t.lookup(0x102, 550).expect("row");
        assert_eq!(h.row.size_for(550), Some(104));
        assert_eq!(h.row.size_for(580), Some(108));
        assert_eq!(h.row.size_for(570), None);
        assert_eq!(h.row.params_for(595), Some("CPU_PARAMS"));
        let h = t.lookup(0x107, 580).expect("row");
        assert_eq!((h.row.size_for(580), h.row.size_for(535)), (Some(1), None));
        assert_eq!(t.lookup(0x300, 550).expect("row").row.size_for(550), None);
        assert_eq!(t.lookup(0x200, 595).expect("row").row.params_for(595), None);
    }

    #[test]
    fn damaged_text_never_panics_and_names_nothing_wrong() {
        let bad = [
            "",
            "\t\t\t",
            "0x\tNAME\t580",
            "0x123456789\tNAME\t580",
            "123\tNAME\t580",
            "0x1\t\t580",
            "0x1\tBAD NAME\t580",
            "0x1\t9NAME\t580",
            "0x1\tNAME\t",
            "0x1\tNAME\t58x",
            "0x1\tNAME\t580,99999",
            "0x1\tNAME",
            "0x1",
            "# versions: x=1 =2 580 99999=1",
            "\u{0}\u{1b}[31m\t\u{ff}",
            "0xzz\tNAME\t580\t4",
        ];
        for b in bad {
            let t = RmTable::parse(b, true);
            assert!(t.rows().is_empty(), "{b:?} gave {:?}", t.rows());
            let _ = t.release_for(dv(580));
            assert!(t.lookup(1, 580).is_none());
        }
        // Damaged size/params cells cost the size, not the name.
        let t = RmTable::parse("0x1\tNAME\t535,580\t4,x\t\u{7}\n0x2\tTWO\t580\t1,2,3", true);
        let h = t.lookup(1, 580).expect("named");
        assert_eq!((h.row.name, h.row.size_for(580)), ("NAME", None));
        assert_eq!(h.row.params_for(580), None);
        // Size list of the wrong length: no size rather than a wrong one.
        assert_eq!(t.lookup(2, 580).expect("named").row.size_for(580), None);
        // Two rows for one release (never written by gen-tables): one wins,
        // no panic.
        let t = RmTable::parse("0x1\tA\t580\n0x1\tB\t580\n", true);
        assert!(t.lookup(1, 580).is_some());
        // Arbitrary bytes.
        let junk: String = (0u8..=255).map(char::from).cycle().take(5000).collect();
        let t = RmTable::parse(&junk, true);
        let _ = t.lookup(0, 580);
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_and_looks_up_without_panic(
            text in "(0x[0-9a-f]{0,9}|[A-Z_]{0,6}|[0-9]{0,4}|,|\t|\n|#|# versions: |=| ){0,60}",
            junk in ".{0,200}",
            number: u32,
            major in 0u32..2000,
        ) {
            for t in [text.as_str(), junk.as_str()] {
                for sizes in [true, false] {
                    let t = RmTable::parse(t, sizes);
                    if let Some(r) = t.release_for(DriverVersion::new(major, 0, 0))
                        && let Some(h) = t.lookup(number, r)
                    {
                        let _ = (h.row.size_for(r), h.row.params_for(r));
                        proptest::prop_assert!(is_ident(h.row.name));
                    }
                    for row in t.rows() {
                        let _ = t.lookup(row.number, major);
                    }
                }
            }
        }
    }
}
