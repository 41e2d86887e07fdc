//! `cargo xtask rm-coverage`: the RM controls that recordings (ndjson) use,
//! which of them a generated table names for one version, and params sizes.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::PathBuf,
};

use anyhow::Context;

use super::Table;

pub struct Args {
    pub table: PathBuf,
    /// The table's version label the recordings come from (`580`).
    pub version: String,
    pub files: Vec<PathBuf>,
    /// Print the unnamed controls as a markdown table.
    pub markdown: bool,
}

/// Where one control number was seen.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Seen {
    /// File name -> calls.
    pub files: BTreeMap<String, usize>,
    /// paramsSize values seen.
    pub sizes: BTreeSet<u64>,
}

/// Add the `args.control` of every `ioctl` record of an ndjson text;
/// returns how many lines were not JSON.
pub fn controls_in(text: &str, file: &str, out: &mut BTreeMap<u32, Seen>) -> usize {
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            bad += 1;
            continue;
        };
        if v["type"] != "ioctl" {
            continue;
        }
        let args = &v["args"];
        let Some(n) = args["control"]
            .as_str()
            .and_then(|s| s.strip_prefix("0x"))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
        else {
            continue;
        };
        let seen = out.entry(n).or_default();
        *seen.files.entry(file.to_string()).or_default() += 1;
        if let Some(s) = args["paramsSize"].as_u64() {
            seen.sizes.insert(s);
        }
    }
    bad
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let text = fs::read_to_string(&args.table)
        .with_context(|| format!("reading {}", args.table.display()))?;
    let table = Table::parse(&text).with_context(|| format!("parsing {}", args.table.display()))?;
    let mut seen = BTreeMap::new();
    for f in &args.files {
        let text = fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let name = f.file_name().map_or_else(
            || f.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let bad = controls_in(&text, &name, &mut seen);
        if bad > 0 {
            eprintln!("rm-coverage: {name}: {bad} lines are not JSON");
        }
    }
    let name_col = table.col("name")?;
    let mut unnamed = Vec::new();
    let mut mismatched = 0;
    for (&n, s) in &seen {
        let row = table.row_for(n, &args.version)?;
        let size = match row {
            Some(r) => table.cell_for(r, "size", &args.version)?,
            None => String::new(),
        };
        let sizes: Vec<String> = s.sizes.iter().map(u64::to_string).collect();
        let ok = size.is_empty() || sizes == [size.clone()];
        mismatched += usize::from(!ok);
        let name = row.map_or("-", |r| r.cells[name_col].as_str());
        println!(
            "0x{n:08x}  {name}  paramsSize {}  table size {}{}",
            sizes.join("/"),
            if size.is_empty() { "?" } else { &size },
            if ok { "" } else { "  MISMATCH" }
        );
        if row.is_none() {
            unnamed.push((n, s, other_versions(&table, n, name_col)));
        }
    }
    println!(
        "rm-coverage: {} distinct controls, {} named by the {} table, {} unnamed, {} size mismatches",
        seen.len(),
        seen.len() - unnamed.len(),
        args.version,
        unnamed.len(),
        mismatched
    );
    if args.markdown {
        print_markdown(&unnamed);
    }
    Ok(())
}

/// Names the table gives `n` in other versions.
fn other_versions(table: &Table, n: u32, name_col: usize) -> String {
    let Ok(v) = table.col("versions") else {
        return String::new();
    };
    let rows: Vec<String> = table
        .rows
        .iter()
        .filter(|r| r.number == n)
        .map(|r| format!("{} ({})", r.cells[name_col], r.cells[v]))
        .collect();
    rows.join("; ")
}

fn print_markdown(unnamed: &[(u32, &Seen, String)]) {
    println!("| control | paramsSize | seen in (calls) | named in other versions |");
    println!("|---|---|---|---|");
    for (n, s, other) in unnamed {
        let sizes: Vec<String> = s.sizes.iter().map(u64::to_string).collect();
        let files: Vec<String> = s.files.iter().map(|(f, c)| format!("{f} ({c})")).collect();
        let other = if other.is_empty() { "-" } else { other };
        println!(
            "| `0x{n:08x}` | {} | {} | {other} |",
            sizes.join(", "),
            files.join(", ")
        );
    }
}
