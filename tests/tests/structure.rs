//! The code's structure, checked: no file-level import cycle in the
//! crates' sources (issue 41: a circle of 16 files had grown in
//! `correlate/`), and no function longer than 100 lines where the model,
//! the pipeline and the CLI live.
//!
//! A file imports another when its code names a path into it: a `use`
//! tree or a path in the code (`crate::a::b`, `super::x`, `self::y`),
//! resolved to the deepest module that is a file of its own. A name taken
//! through a parent's re-export is an import of the parent, so a child
//! that reaches a sibling through `super::Name` ties itself to its
//! parent: children name their siblings' files. A parent's `mod child;`
//! is no import, and test-only modules (`#[cfg(test)]`) are left out.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// The crate roots whose module trees are checked (issue 41: nvprobe/src,
/// nvprobe/model/src, nvprobe-ebpf/src).
/// Where no function may pass [`MAX_FN_LINES`].
const SHORT_FNS: &[&str] = &[
    "nvprobe/model/src",
    "nvprobe/src/pipeline",
    "nvprobe/src/cli",
];
const MAX_FN_LINES: usize = 100;

const ROOTS: &[&str] = &[
    "nvprobe/src/lib.rs",
    "nvprobe/src/main.rs",
    "nvprobe/model/src/lib.rs",
    "nvprobe-ebpf/src/main.rs",
    "nvprobe-ebpf/src/lib.rs",
    "nvprobe-ebpf/src/selftest_main.rs",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

/// Source text with comments, string and char literals blanked (their
/// bytes kept as spaces, newlines kept), so that paths in them are not
/// taken for imports and line numbers stay true.
fn code_of(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'"' | b'#')) && !ident_byte(prev(b, i))
        {
            // r"…", r#"…"#
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let end = find(b, j + 1, &close).map_or(b.len(), |e| e + close.len());
            for &x in &b[i..end] {
                blank(&mut out, x);
            }
            i = end;
        } else if c == b'"' {
            out.push(b' ');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    blank(&mut out, b[i]);
                    i += 1;
                }
                if i < b.len() {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
            out.push(b' ');
            i += 1;
        } else if c == b'\'' {
            // A char literal ('a', '\n', '\u{1f}'), not a lifetime ('a).
            let lit = match (b.get(i + 1), b.get(i + 2)) {
                (Some(b'\\'), _) => b[i + 2..]
                    .iter()
                    .position(|&x| x == b'\'')
                    .map(|p| i + 3 + p),
                (Some(_), Some(b'\'')) => Some(i + 3),
                _ => None,
            };
            match lit {
                Some(end) if end <= b.len() => {
                    out.extend(std::iter::repeat_n(b' ', end - i));
                    i = end;
                }
                _ => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8(out).expect("blanking keeps UTF-8 boundaries")
}

fn prev(b: &[u8], i: usize) -> u8 {
    if i == 0 { b' ' } else { b[i - 1] }
}

fn ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn find(b: &[u8], from: usize, pat: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(pat.len())
        .position(|w| w == pat)
        .map(|p| p + from)
}

/// The end of the `{…}` block that opens at or after `from` (the index
/// after its closing brace).
fn block_end(code: &[u8], from: usize) -> usize {
    let Some(open) = code[from..].iter().position(|&c| c == b'{' || c == b';') else {
        return code.len();
    };
    let open = from + open;
    if code[open] == b';' {
        return open + 1;
    }
    let mut depth = 0usize;
    for (k, &c) in code.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// `code` without the items under `#[cfg(test)]` (a test module, a test
/// helper): they are not part of the structure.
fn without_tests(code: &str) -> String {
    let mut b = code.as_bytes().to_vec();
    let mut from = 0;
    while let Some(at) = find(&b, from, b"#[cfg(test)]") {
        let end = block_end(&b, at + 12);
        for x in &mut b[at..end] {
            if *x != b'\n' {
                *x = b' ';
            }
        }
        from = end;
    }
    String::from_utf8(b).expect("UTF-8")
}

/// One source file of the module tree.
struct File {
    path: PathBuf,
    /// Its module path from the crate root.
    module: Vec<String>,
    /// Its code, comments, literals and test items blanked.
    code: String,
}

/// The module tree of one crate, from its root file along `mod x;`.
fn crate_files(root: &Path) -> Vec<File> {
    let mut out = Vec::new();
    let mut todo = vec![(root.to_path_buf(), Vec::<String>::new())];
    while let Some((path, module)) = todo.pop() {
        let src = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let code = without_tests(&code_of(&src));
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // Where this file's children live.
        let dir = if matches!(name, "mod.rs" | "lib.rs" | "main.rs") || module.is_empty() {
            path.parent().expect("dir").to_path_buf()
        } else {
            path.with_extension("")
        };
        for (attr_path, child) in mod_decls(&code, &src) {
            let file = match attr_path {
                Some(p) => path.parent().expect("dir").join(p),
                None => {
                    let flat = dir.join(format!("{child}.rs"));
                    if flat.exists() {
                        flat
                    } else {
                        dir.join(&child).join("mod.rs")
                    }
                }
            };
            assert!(
                file.exists(),
                "{}: mod {child}: no {}",
                path.display(),
                file.display()
            );
            let mut m = module.clone();
            m.push(child);
            todo.push((file, m));
        }
        out.push(File { path, module, code });
    }
    out
}

/// Where keyword `kw` (`b"mod "`, `b"fn "`) stands in `code`, and the
/// name after it.
fn keyword_items<'a>(
    code: &'a str,
    kw: &'static [u8],
) -> impl Iterator<Item = (usize, String)> + 'a {
    let b = code.as_bytes();
    let mut from = 0;
    std::iter::from_fn(move || {
        while let Some(at) = find(b, from, kw) {
            from = at + kw.len();
            if ident_byte(prev(b, at)) {
                continue;
            }
            let name: String = code[at + kw.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                return Some((at, name));
            }
        }
        None
    })
}

/// The `mod NAME;` declarations of a file (with a `#[path]`, its value
/// read from the source, where literals are kept).
fn mod_decls(code: &str, src: &str) -> Vec<(Option<String>, String)> {
    let mut v = Vec::new();
    for (at, name) in keyword_items(code, b"mod ") {
        let rest = code[at + 4 + name.len()..].trim_start();
        if !rest.starts_with(';') {
            continue;
        }
        // A #[path = "…"] on the line before.
        let line_start = code[..at].rfind('\n').unwrap_or(0);
        let before = &src[code[..line_start].rfind('\n').unwrap_or(0)..line_start];
        let attr = before
            .trim()
            .strip_prefix("#[path = \"")
            .and_then(|s| s.strip_suffix("\"]"))
            .map(str::to_owned);
        v.push((attr, name));
    }
    v
}

/// The paths a file names: each `use` tree expanded, and every
/// `crate::`/`super::`/`self::` path in its code.
fn paths_named(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let mut from = 0;
    while let Some(at) = find(b, from, b"use ") {
        from = at + 4;
        if ident_byte(prev(b, at)) {
            continue;
        }
        let Some(end) = code[at..].find(';') else {
            break;
        };
        let tree = code[at + 4..at + end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        expand(&tree, &mut Vec::new(), &mut out);
        from = at + end;
    }
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = find(b, from, start.as_bytes()) {
            from = at + start.len();
            if ident_byte(prev(b, at)) || prev(b, at) == b':' {
                continue;
            }
            let p: Vec<String> = code[at..]
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("")
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            // `super::{…}` is a `use` tree, read above.
            if p.len() > 1 {
                out.push(p);
            }
        }
    }
    out
}

/// `a::{b, c::{d, e}}` → [a b], [a c d], [a c e].
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim().trim_start_matches("::");
    if tree.is_empty() {
        // After a trailing comma.
        return;
    }
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let n = prefix.len();
        prefix.extend(
            head.split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        let mut depth = 0;
        let mut part = String::new();
        for c in inner.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&part, prefix, out);
                    part.clear();
                    continue;
                }
                _ => {}
            }
            part.push(c);
        }
        if !part.is_empty() {
            expand(&part, prefix, out);
        }
        prefix.truncate(n);
    } else {
        let mut p = prefix.clone();
        let body = tree.split(" as ").next().unwrap_or(tree);
        p.extend(
            body.split("::")
                .filter(|s| !s.is_empty() && *s != "*")
                .map(str::to_owned),
        );
        out.push(p);
    }
}

/// The file a path names, from the file at `module`: its deepest module
/// that is a file.
fn resolve<'a>(
    module: &[String],
    path: &[String],
    files: &'a BTreeMap<Vec<String>, PathBuf>,
) -> Option<&'a PathBuf> {
    let mut abs: Vec<String> = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") => module.to_vec(),
        Some("self") => module.to_vec(),
        _ => return None,
    };
    let mut rest = &path[1..];
    if path[0] == "super" {
        abs.pop();
        while rest.first().map(String::as_str) == Some("super") {
            abs.pop();
            rest = &rest[1..];
        }
    }
    let mut best = None;
    for seg in rest {
        abs.push(seg.clone());
        match files.get(&abs) {
            Some(f) => best = Some(f),
            None => break,
        }
    }
    // A path that names no module below the start names the start's file.
    best.or_else(|| {
        abs.truncate(abs.len() - rest.len().min(abs.len()));
        files.get(&abs)
    })
}

/// The paths of a file's code that start with the name of one of its own
/// child modules (`process::decode_cuda(…)` in the parent of
/// `process.rs`), made absolute (`self::process::decode_cuda`).
fn child_paths(code: &str, children: &[String]) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    for c in children {
        let pat = format!("{c}::");
        let mut from = 0;
        while let Some(at) = find(b, from, pat.as_bytes()) {
            from = at + pat.len();
            if ident_byte(prev(b, at)) || prev(b, at) == b':' {
                continue;
            }
            out.push(vec!["self".to_owned(), c.clone()]);
        }
    }
    out
}

/// Every file's imports, by file (repository-relative paths), each with
/// the first path that made it.
fn import_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let repo = repo();
    let rel = |p: &Path| p.strip_prefix(&repo).unwrap_or(p).display().to_string();
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for root in ROOTS {
        let files = crate_files(&repo.join(root));
        let by_module: BTreeMap<Vec<String>, PathBuf> = files
            .iter()
            .map(|f| (f.module.clone(), f.path.clone()))
            .collect();
        for f in &files {
            let edges = graph.entry(rel(&f.path)).or_default();
            let children: Vec<String> = files
                .iter()
                .filter(|c| c.module.len() == f.module.len() + 1 && c.module.starts_with(&f.module))
                .filter_map(|c| c.module.last().cloned())
                .collect();
            for p in paths_named(&f.code)
                .into_iter()
                .chain(child_paths(&f.code, &children))
            {
                if let Some(to) = resolve(&f.module, &p, &by_module)
                    && *to != f.path
                {
                    edges.entry(rel(to)).or_insert_with(|| p.join("::"));
                }
            }
        }
    }
    graph
}

/// The strongly connected components of more than one file (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("low");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("low");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                c.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                t.out.push(c);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_file_imports_itself_through_others() {
    let named = import_graph();
    assert!(
        named.len() > 100,
        "{} files read: the module walk is broken",
        named.len()
    );
    let g: BTreeMap<String, BTreeSet<String>> = named
        .iter()
        .map(|(a, e)| (a.clone(), e.keys().cloned().collect()))
        .collect();
    let found = circles(&g);
    let text: Vec<String> = found
        .iter()
        .map(|c| {
            let inner: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    named[a]
                        .iter()
                        .filter(|(b, _)| c.contains(b))
                        .map(move |(b, p)| format!("    {a} -> {b} ({p})"))
                })
                .collect();
            format!("  {} files:\n{}", c.len(), inner.join("\n"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "file-level import cycles:\n{}",
        text.join("\n")
    );
}

/// The checker itself finds a circle, and a parent's `mod` is no import.
#[test]
fn the_cycle_check_sees_a_circle() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    g.entry("d".into()).or_default().insert("a".into());
    assert_eq!(
        circles(&g),
        vec![vec!["a".to_owned(), "b".into(), "c".into()]]
    );
    let mut p = Vec::new();
    expand("super::{a::{B, C}, d}", &mut Vec::new(), &mut p);
    assert_eq!(
        p,
        [
            vec!["super", "a", "B"],
            vec!["super", "a", "C"],
            vec!["super", "d"]
        ]
    );
    let code = code_of("let s = \"crate::x\"; // crate::y\nuse crate::z;");
    assert_eq!(
        paths_named(&code),
        [
            vec!["crate".to_owned(), "z".into()],
            vec!["crate".into(), "z".into()]
        ]
    );
}

/// The functions (and methods) of a file longer than `max` lines: (name,
/// first line, lines).
fn long_fns(code: &str, max: usize) -> Vec<(String, usize, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    for (at, name) in keyword_items(code, b"fn ") {
        let end = block_end(b, at);
        let first = code[..at].matches('\n').count() + 1;
        let lines = code[at..end].matches('\n').count() + 1;
        if lines > max && code[at..end].contains('{') {
            out.push((name, first, lines));
        }
    }
    out
}

#[test]
fn no_function_is_longer_than_a_screenful_or_two() {
    let repo = repo();
    let mut long = Vec::new();
    for dir in SHORT_FNS {
        let mut todo = vec![repo.join(dir)];
        while let Some(d) = todo.pop() {
            for e in fs::read_dir(&d).expect("dir") {
                let p = e.expect("entry").path();
                if p.is_dir() {
                    todo.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    if name.starts_with("tests") || name.ends_with("_tests.rs") || name == "fuzz.rs"
                    {
                        continue;
                    }
                    let src = fs::read_to_string(&p).expect("read");
                    for (f, line, n) in long_fns(&without_tests(&code_of(&src)), MAX_FN_LINES) {
                        long.push(format!(
                            "  {}:{line} {f}: {n} lines",
                            p.strip_prefix(&repo).unwrap_or(&p).display()
                        ));
                    }
                }
            }
        }
    }
    long.sort();
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n{}",
        long.join("\n")
    );
}
