//! Writing the TSV tables: one row per (number, name) merged over the tags,
//! values shown once for all versions or once per version.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
};

use super::{GENERATED_BY, Tag, TagTables};

/// One output row: a (number, name) pair and the tags it holds for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row<T> {
    pub number: u32,
    pub name: String,
    pub tags: Vec<usize>,
    /// Per tag in `tags`.
    pub per: Vec<T>,
    pub aliases: BTreeSet<String>,
}

/// Rows over all tags: one per (number, name), sorted by number then by
/// the first tag; a reused number gets several rows with disjoint tags.
pub fn merge<E, T>(
    tables: &[&BTreeMap<u32, E>],
    name: impl Fn(&E) -> &str,
    aliases: impl Fn(&E) -> &BTreeSet<String>,
    per: impl Fn(&E) -> T,
) -> Vec<Row<T>> {
    let mut rows: BTreeMap<(u32, String), Row<T>> = BTreeMap::new();
    for (i, table) in tables.iter().enumerate() {
        for (&number, e) in table.iter() {
            let row = rows
                .entry((number, name(e).to_string()))
                .or_insert_with(|| Row {
                    number,
                    name: name(e).to_string(),
                    tags: Vec::new(),
                    per: Vec::new(),
                    aliases: BTreeSet::new(),
                });
            row.tags.push(i);
            row.per.push(per(e));
            row.aliases.extend(aliases(e).iter().cloned());
        }
    }
    let mut out: Vec<Row<T>> = rows.into_values().collect();
    out.sort_by_key(|r| (r.number, r.tags[0]));
    out
}

/// One value for all of a row's tags, or one per tag (empty = unknown).
fn compress<T: PartialEq>(per: &[Option<T>], show: impl Fn(&T) -> String) -> String {
    if per.iter().all(|v| *v == per[0]) {
        return per[0].as_ref().map(&show).unwrap_or_default();
    }
    let parts: Vec<String> = per
        .iter()
        .map(|v| v.as_ref().map(&show).unwrap_or_default())
        .collect();
    parts.join(",")
}

fn header(tags: &[&Tag], sources: &str) -> String {
    let full: Vec<&str> = tags.iter().map(|t| t.full.as_str()).collect();
    let labels: Vec<String> = tags
        .iter()
        .map(|t| format!("{}={}", t.label, t.full))
        .collect();
    format!(
        "{GENERATED_BY} {}: {sources}; do not edit\n# versions: {}\n",
        full.join(", "),
        labels.join(" ")
    )
}

fn labels(tags: &[&Tag], idx: &[usize]) -> String {
    idx.iter()
        .map(|&i| tags[i].label.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

pub fn render_controls(scanned: &[(Tag, TagTables)]) -> String {
    let tags: Vec<&Tag> = scanned.iter().map(|(t, _)| t).collect();
    let tables: Vec<_> = scanned.iter().map(|(_, t)| &t.controls).collect();
    let rows = merge(
        &tables,
        |c| &c.name,
        |c| &c.aliases,
        |c| (c.size, c.params.clone()),
    );
    let mut s = header(
        &tags,
        "src/common/sdk/nvidia/inc/ctrl/**/*.h (defines whose finn comment reads \
         \"(..._INTERFACE_ID << 8) | ...\", aliases defined as another command's name), \
         params structs from src/nvidia/generated/g_*_nvoc.c (paramSize) or the finn \
         ..._PARAMS_MESSAGE_ID",
    );
    s.push_str(
        "# One row per (control, name): NVIDIA reused some numbers, so a control can have \
         several rows, never two for one version.\n\
         # size: sizeof(params) in bytes on 64-bit Linux, laid out from the header struct; \
         one value for all the row's versions or one per version in order; empty where the \
         struct is unknown or not laid out for certain; 0: the control takes no params.\n\
         # params: the params struct, same one-or-per-version rule. aliases: other names \
         of the number in these versions.\n\
         # columns: control, name, versions, size, params, aliases\n",
    );
    for r in rows {
        let sizes: Vec<Option<u64>> = r.per.iter().map(|p| p.0).collect();
        let params: Vec<Option<String>> = r.per.iter().map(|p| p.1.clone()).collect();
        let _ = writeln!(
            s,
            "0x{:08x}\t{}\t{}\t{}\t{}\t{}",
            r.number,
            r.name,
            labels(&tags, &r.tags),
            compress(&sizes, u64::to_string),
            compress(&params, String::clone),
            r.aliases.iter().cloned().collect::<Vec<_>>().join(",")
        );
    }
    s
}

pub fn render_classes(scanned: &[(Tag, TagTables)]) -> String {
    let tags: Vec<&Tag> = scanned.iter().map(|(t, _)| t).collect();
    let tables: Vec<_> = scanned.iter().map(|(_, t)| &t.classes).collect();
    let rows = merge(&tables, |c| &c.name, |c| &c.aliases, |_| ());
    let mut s = header(
        &tags,
        "src/nvidia/generated/g_allclasses.h (its non-alias name first) and \
         src/common/sdk/nvidia/inc/class/clNNNN*.h (defines whose value is NNNN)",
    );
    s.push_str(
        "# One row per (class, name), never two for one version.\n\
         # columns: class, name, versions, aliases\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "0x{:04x}\t{}\t{}\t{}",
            r.number,
            r.name,
            labels(&tags, &r.tags),
            r.aliases.iter().cloned().collect::<Vec<_>>().join(",")
        );
    }
    s
}
