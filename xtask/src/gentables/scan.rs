//! Reading one checkout: RM control and class numbers and names from the SDK
//! headers, params structs from the NVOC export tables, sizes laid out.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
};

use anyhow::{Context, bail};

use super::{
    Class, Control, GENERATED, INC, TagTables,
    cheader::{self, Headers, defines, parse_int},
};

/// Read one checkout: the SDK headers, g_allclasses.h and the NVOC export
/// tables (the last two optional: they name class aliases and params structs).
pub fn scan_checkout(root: &Path) -> anyhow::Result<TagTables> {
    let inc = root.join(INC);
    if !inc.is_dir() {
        bail!(
            "{} has no {INC}: not a checkout of open-gpu-kernel-modules",
            root.display()
        );
    }
    let headers = read_tree(&inc, |p| p.ends_with(".h"))?;
    let generated = root.join(GENERATED);
    let nvoc = if generated.is_dir() {
        read_tree(&generated, |p| {
            p.starts_with("g_") && p.ends_with("_nvoc.c")
        })?
    } else {
        Vec::new()
    };
    let allclasses = read_optional(&generated.join("g_allclasses.h"))?;
    Ok(build_tables(&headers, allclasses.as_deref(), &nvoc))
}

/// Files under `dir` whose relative path passes `want`, sorted by that path.
fn read_tree(dir: &Path, want: impl Fn(&str) -> bool) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let p = e
                .with_context(|| format!("listing {}", d.display()))?
                .path();
            let rel = p
                .strip_prefix(dir)
                .unwrap_or(&p)
                .to_string_lossy()
                .into_owned();
            if p.is_dir() {
                todo.push(p);
            } else if want(&rel) {
                out.push((rel, read_lossy(&p)?));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn read_lossy(p: &Path) -> anyhow::Result<String> {
    let b = fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    Ok(String::from_utf8_lossy(&b).into_owned())
}

fn read_optional(p: &Path) -> anyhow::Result<Option<String>> {
    if p.is_file() {
        read_lossy(p).map(Some)
    } else {
        Ok(None)
    }
}

/// The tables of one tag from its files (paths relative to the SDK `inc`
/// directory, NVOC files by name).
pub fn build_tables(
    headers: &[(String, String)],
    allclasses: Option<&str>,
    nvoc: &[(String, String)],
) -> TagTables {
    let mut h = Headers::default();
    for (_, text) in headers {
        h.add_file(text);
    }
    let mut exported = BTreeMap::new();
    for (_, text) in nvoc {
        nvoc_params(text, &mut exported);
    }
    let under = |dir: &str| -> Vec<&(String, String)> {
        headers.iter().filter(|(p, _)| p.starts_with(dir)).collect()
    };
    let mut t = TagTables::default();
    t.controls = controls(&under("ctrl/"), &h, &exported, &mut t.size_gaps);
    t.classes = classes(allclasses, &under("class/"));
    t.headers = h;
    t
}

/// methodId -> the params struct each NVOC export entry declares
/// (`sizeof(X)` -> Some(X), `0` -> None).
pub(super) fn nvoc_params(text: &str, out: &mut BTreeMap<u32, BTreeSet<Option<String>>>) {
    let mut method = None;
    for line in text.lines() {
        if let Some(v) = after(line, "/*methodId=*/") {
            method = parse_int(v.trim_end_matches(',')).and_then(|n| u32::try_from(n).ok());
        } else if let (Some(v), Some(m)) = (after(line, "/*paramSize=*/"), method) {
            let v = cheader::strip_comments(v);
            let v = v.trim().trim_end_matches(',').trim();
            let p = match v.strip_prefix("sizeof(") {
                Some(s) => Some(Some(s.trim_end_matches(')').trim().to_string())),
                None => (v == "0").then_some(None),
            };
            if let Some(p) = p {
                out.entry(m).or_default().insert(p);
            }
            method = None;
        }
    }
}

fn after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    line.find(marker).map(|i| line[i + marker.len()..].trim())
}

/// A control command define: `#define NAME (0x...) /* finn: Evaluated
/// from "(FINN_..._INTERFACE_ID << 8) | X_PARAMS_MESSAGE_ID" */`.
struct Cmd {
    name: String,
    number: u32,
    /// X_PARAMS of the finn expression's X_PARAMS_MESSAGE_ID.
    msg: Option<String>,
}

fn controls(
    files: &[&(String, String)],
    h: &Headers,
    exported: &BTreeMap<u32, BTreeSet<Option<String>>>,
    gaps: &mut BTreeMap<String, usize>,
) -> BTreeMap<u32, Control> {
    let defs: Vec<_> = files.iter().flat_map(|(_, text)| defines(text)).collect();
    let cmds: Vec<Cmd> = defs.iter().filter_map(|d| command(d, h)).collect();
    let mut by_number: BTreeMap<u32, Vec<&Cmd>> = BTreeMap::new();
    for c in &cmds {
        by_number.entry(c.number).or_default().push(c);
    }
    let mut out = BTreeMap::new();
    for (number, cands) in by_number {
        let nvoc = exported
            .get(&number)
            .filter(|s| s.len() == 1)
            .and_then(|s| s.first());
        let primary = choose_primary(&cands, nvoc);
        let (params, mut size) = match nvoc {
            Some(Some(s)) => (Some(s.clone()), None),
            Some(None) => (None, Some(0)),
            None => (primary.msg.clone(), None),
        };
        if let (Some(p), None) = (&params, size) {
            match h.layout_of(p) {
                Ok(l) => size = Some(l.size),
                Err(e) => *gaps.entry(e).or_default() += 1,
            }
        }
        let aliases = cands
            .iter()
            .map(|c| c.name.clone())
            .filter(|n| *n != primary.name)
            .collect();
        out.insert(
            number,
            Control {
                name: primary.name.clone(),
                aliases,
                params,
                size,
            },
        );
    }
    add_aliases(&defs, &cmds, &mut out);
    out
}

fn command(d: &cheader::Define, h: &Headers) -> Option<Cmd> {
    let finn = d.finn.as_deref()?;
    if !finn.contains("INTERFACE_ID << 8") || d.function_like {
        return None;
    }
    let number = u32::try_from(h.eval(&d.body).ok()?).ok()?;
    let msg = finn
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter_map(|w| w.strip_suffix("_MESSAGE_ID"))
        .next_back()
        .map(str::to_string);
    Some(Cmd {
        name: d.name.clone(),
        number,
        msg,
    })
}

/// Several names for one number in one tag: the one whose params struct the
/// NVOC export table uses, else the first with a params struct, else the
/// first defined.
fn choose_primary<'a>(cands: &[&'a Cmd], nvoc: Option<&Option<String>>) -> &'a Cmd {
    let want = nvoc.and_then(|p| p.as_ref());
    cands
        .iter()
        .find(|c| want.is_some() && c.msg.as_ref() == want)
        .or_else(|| cands.iter().find(|c| c.msg.is_some()))
        .unwrap_or(&cands[0])
}

/// `#define NEW OLD` (or `(OLD)`) where OLD is a command: NEW is an alias.
fn add_aliases(defs: &[cheader::Define], cmds: &[Cmd], out: &mut BTreeMap<u32, Control>) {
    let number: BTreeMap<&str, u32> = cmds.iter().map(|c| (c.name.as_str(), c.number)).collect();
    let target: BTreeMap<&str, &str> = defs
        .iter()
        .filter(|d| !d.function_like)
        .filter_map(|d| Some((d.name.as_str(), single_ident(&d.body)?)))
        .collect();
    for &alias in target.keys() {
        let mut cur = alias;
        for _ in 0..16 {
            match target.get(cur) {
                Some(next) => cur = next,
                None => break,
            }
            if let Some(n) = number.get(cur) {
                if let Some(c) = out.get_mut(n).filter(|c| c.name != alias) {
                    c.aliases.insert(alias.to_string());
                }
                break;
            }
        }
    }
}

fn single_ident(body: &str) -> Option<&str> {
    let s = body
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .trim();
    let ok = s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then_some(s)
}

/// Classes: g_allclasses.h's names (its non-alias name preferred), then
/// `#define NAME (0xNNNN)` in class/clNNNN*.h whose value is the file's number.
fn classes(allclasses: Option<&str>, files: &[&(String, String)]) -> BTreeMap<u32, Class> {
    let mut cands: Vec<(u32, String, bool)> = Vec::new();
    for d in allclasses.map(defines).unwrap_or_default() {
        if let Some(n) = literal(&d) {
            cands.push((n, d.name, !d.raw.contains("alias")));
        }
    }
    for (path, text) in files {
        let Some(number) = class_file_number(path) else {
            continue;
        };
        for d in defines(text) {
            if literal(&d) == Some(number) && is_class_name(&d.name, number) {
                cands.push((number, d.name, false));
            }
        }
    }
    let mut out: BTreeMap<u32, Class> = BTreeMap::new();
    let primary = |n: u32| {
        cands
            .iter()
            .find(|c| c.0 == n && c.2)
            .or_else(|| cands.iter().find(|c| c.0 == n))
    };
    for (n, name, _) in &cands {
        let p = &primary(*n).map_or(name, |c| &c.1);
        let e = out.entry(*n).or_insert_with(|| Class {
            name: p.to_string(),
            aliases: BTreeSet::new(),
        });
        if name != &e.name {
            e.aliases.insert(name.clone());
        }
    }
    out
}

/// A define whose body is only an integer (maybe parenthesised).
fn literal(d: &cheader::Define) -> Option<u32> {
    if d.function_like {
        return None;
    }
    let s = d
        .body
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .trim();
    u32::try_from(parse_int(s)?).ok()
}

/// `class/cl2080.h`, `class/clc372sw.h` -> 0x2080, 0xc372.
pub(super) fn class_file_number(path: &str) -> Option<u32> {
    let file = path.rsplit('/').next()?;
    let hex = file.strip_prefix("cl")?.get(..4)?;
    u32::from_str_radix(hex, 16)
        .ok()
        .filter(|_| hex.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Not a define of the class's own methods/values (`NVC36F_...`, `NV03E_...`).
pub(super) fn is_class_name(name: &str, number: u32) -> bool {
    let up = name.to_ascii_uppercase();
    !name.starts_with('_')
        && !name.ends_with("_MESSAGE_ID")
        && !up.starts_with(&format!("NV{number:04X}_"))
        && !up.starts_with(&format!("NV{number:03X}_"))
}
