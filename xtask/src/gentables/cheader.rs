//! A small reader for NVIDIA's SDK C headers: `#define` lines (with their
//! finn comments), integer expressions, and typedef'd structs laid out as on
//! 64-bit Linux (x86_64, aarch64): enums are 4 bytes when every value fits
//! 32 bits (GCC's rule without -fshort-enums). Anything it cannot lay out for
//! certain (pointers, bitfields, `#if` inside a struct, conflicting
//! definitions, unknown types) is an error, never a guess.

use std::{
    cell::RefCell,
    collections::{HashMap, HashSet},
};

/// One `#define NAME BODY` (continuation lines joined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Define {
    pub name: String,
    /// `#define NAME(args) ...`: never evaluated.
    pub function_like: bool,
    /// The body without comments, trimmed.
    pub body: String,
    /// The body with its comments, trimmed.
    pub raw: String,
    /// EXPR of a `/* finn: Evaluated from "EXPR" */` comment.
    pub finn: Option<String>,
}

/// Every `#define` of a header text, in order.
pub fn defines(text: &str) -> Vec<Define> {
    logical_lines(text)
        .iter()
        .filter_map(|l| parse_define(l))
        .collect()
}

fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        match line.strip_suffix('\\') {
            Some(head) => {
                cur.push_str(head);
                cur.push(' ');
            }
            None => {
                cur.push_str(line);
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn parse_define(line: &str) -> Option<Define> {
    let rest = line.trim_start().strip_prefix('#')?.trim_start();
    let rest = rest.strip_prefix("define")?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let (name, mut body) = rest.split_at(end);
    if name.is_empty() {
        return None;
    }
    let function_like = body.starts_with('(');
    if function_like {
        body = body.split_once(')').map_or("", |(_, b)| b);
    }
    Some(Define {
        name: name.to_string(),
        function_like,
        body: strip_comments(body).trim().to_string(),
        raw: body.trim().to_string(),
        finn: finn_expr(body),
    })
}

fn finn_expr(body: &str) -> Option<String> {
    let start = body.find("finn: Evaluated from \"")? + "finn: Evaluated from \"".len();
    let len = body[start..].find('"')?;
    Some(body[start..start + len].to_string())
}

/// `s` without `/* */` and `//` comments (an unclosed `/*` ends it).
pub fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.is_none_or(|l| b < l) => {
                out.push_str(&rest[..b]);
                out.push(' ');
                match rest[b + 2..].find("*/") {
                    Some(e) => rest = &rest[b + 2 + e + 2..],
                    None => return out,
                }
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                match rest[l..].find('\n') {
                    Some(e) => rest = &rest[l + e..],
                    None => return out,
                }
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

/// A C token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    Ident(String),
    Num(String),
    Str,
    Punct(&'static str),
    /// A `#if`/`#ifdef`/`#else`/`#endif` line: what follows is conditional.
    Cond,
}

const PUNCTS: &[&str] = &[
    "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "->", "++", "--", "{", "}", "(", ")", "[", "]",
    ";", ",", ":", "*", "+", "-", "/", "%", "&", "|", "^", "~", "!", "<", ">", "?", "=", ".",
];

/// Tokens of C text; comments and non-conditional preprocessor lines are
/// dropped, unknown characters skipped.
pub fn tokenize(text: &str) -> Vec<Tok> {
    let mut toks = Vec::new();
    for line in logical_lines(&strip_comments(text)) {
        let t = line.trim_start();
        if let Some(d) = t.strip_prefix('#') {
            let d = d.trim_start();
            if ["if", "else", "elif", "endif"]
                .iter()
                .any(|k| d.starts_with(k))
            {
                toks.push(Tok::Cond);
            }
            continue;
        }
        tokenize_line(&line, &mut toks);
    }
    toks
}

fn tokenize_line(line: &str, toks: &mut Vec<Tok>) {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let j = scan(b, i, |c| c.is_ascii_alphanumeric() || c == b'_');
            toks.push(Tok::Ident(line[i..j].to_string()));
            i = j;
        } else if c.is_ascii_digit() {
            let j = scan(b, i, |c| {
                c.is_ascii_alphanumeric() || c == b'_' || c == b'.'
            });
            toks.push(Tok::Num(line[i..j].to_string()));
            i = j;
        } else if c == b'"' || c == b'\'' {
            i = skip_quoted(b, i);
            toks.push(Tok::Str);
        } else if let Some(p) = PUNCTS.iter().find(|p| b[i..].starts_with(p.as_bytes())) {
            toks.push(Tok::Punct(p));
            i += p.len();
        } else {
            i += 1;
        }
    }
}

fn scan(b: &[u8], from: usize, ok: impl Fn(u8) -> bool) -> usize {
    let mut j = from;
    while j < b.len() && ok(b[j]) {
        j += 1;
    }
    j
}

fn skip_quoted(b: &[u8], from: usize) -> usize {
    let q = b[from];
    let mut j = from + 1;
    while j < b.len() && b[j] != q {
        j += if b[j] == b'\\' { 2 } else { 1 };
    }
    j + 1
}

/// An integer literal with C suffixes (`0x2080182aU`, `16`, `1ULL`).
pub fn parse_int(s: &str) -> Option<i128> {
    let t = s.trim_end_matches(['u', 'U', 'l', 'L']);
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i128::from_str_radix(h, 16).ok()
    } else if t.len() > 1 && t.starts_with('0') {
        i128::from_str_radix(&t[1..], 8).ok()
    } else {
        t.parse().ok()
    }
}

/// Size and alignment of a C type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub size: u64,
    pub align: u64,
}

const fn lay(size: u64) -> Layout {
    Layout { size, align: size }
}

/// Base types of nvtypes.h and C, as on 64-bit Linux. Pointer-sized and
/// platform-dependent ones (NvUPtr, NvLength, long, wchar_t) are absent.
fn base_type(name: &str) -> Option<Layout> {
    Some(match name {
        "NvU8" | "NvS8" | "NvV8" | "NvBool" | "NvTristate" | "char" | "signed char"
        | "unsigned char" => lay(1),
        "NvU16" | "NvS16" | "NvV16" | "short" | "unsigned short" | "signed short" => lay(2),
        "NvU32" | "NvS32" | "NvV32" | "NvHandle" | "NvF32" | "float" | "int" | "unsigned"
        | "unsigned int" | "signed int" | "signed" => lay(4),
        "NvU64" | "NvS64" | "NvF64" | "NvP64" | "double" | "long long" | "unsigned long long"
        | "signed long long" => lay(8),
        _ => return None,
    })
}

const TYPE_WORDS: &[&str] = &["unsigned", "signed", "short", "long", "int", "char"];

#[derive(Debug, Clone, PartialEq)]
enum TypeSpec {
    Named(String),
    /// `struct TAG` / `union TAG` used by reference.
    Tagged(String),
    Inline(Aggregate),
    /// Its enumerators' names (empty: `enum TAG` by reference).
    Enum(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
struct Field {
    ty: TypeSpec,
    name: String,
    pointer: bool,
    dims: Vec<Vec<Tok>>,
    align: Option<Vec<Tok>>,
    bitfield: bool,
}

#[derive(Debug, Clone, PartialEq)]
struct Aggregate {
    union: bool,
    fields: Vec<Field>,
    /// Why this body cannot be laid out (parse trouble, `#if` inside).
    flaw: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum TypeDef {
    Agg(Aggregate),
    /// `typedef OTHER NAME[dims];` (pointer typedefs have `pointer`).
    Alias(Field),
}

/// One member of a laid-out struct, nested members dotted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldLayout {
    pub offset: u64,
    pub size: u64,
    pub ty: String,
    pub name: String,
}

/// Macros and types of a set of headers.
#[derive(Default)]
pub struct Headers {
    /// Macro and enumerator values, as tokens. None: defined differently
    /// in several places, or function-like.
    macros: HashMap<String, Option<Vec<Tok>>>,
    types: HashMap<String, Vec<TypeDef>>,
    tags: HashMap<String, Vec<Aggregate>>,
    memo: RefCell<HashMap<String, Result<Layout, String>>>,
    busy: RefCell<HashSet<String>>,
}

impl Headers {
    /// Add one header's defines and type definitions.
    pub fn add_file(&mut self, text: &str) {
        for d in defines(text) {
            self.add_define(&d);
        }
        let toks = tokenize(text);
        let mut p = Parser { t: &toks, i: 0 };
        while p.i < toks.len() {
            self.top_level(&mut p);
        }
        self.memo.borrow_mut().clear();
    }

    fn add_define(&mut self, d: &Define) {
        let v = (!d.function_like).then(|| tokenize(&d.body));
        self.add_macro(&d.name, v);
    }

    fn add_macro(&mut self, name: &str, v: Option<Vec<Tok>>) {
        match self.macros.get(name) {
            Some(old) if *old != v => {
                self.macros.insert(name.to_string(), None);
            }
            Some(_) => {}
            None => {
                self.macros.insert(name.to_string(), v);
            }
        }
    }

    fn top_level(&mut self, p: &mut Parser) {
        let start = p.i;
        match p.peek_ident() {
            Some("typedef") => {
                p.i += 1;
                if self.typedef(p).is_none() {
                    p.i = start + 1;
                }
            }
            Some("struct" | "union" | "enum") if matches!(p.at(p.i + 2), Some(Tok::Punct("{"))) => {
                if self.type_spec_record(p).is_none() {
                    p.i = start + 1;
                }
            }
            _ => p.i += 1,
        }
    }

    fn typedef(&mut self, p: &mut Parser) -> Option<()> {
        let ty = self.type_spec_record(p)?;
        loop {
            let f = p.declarator(ty.clone())?;
            let def = match (&f.ty, f.pointer || !f.dims.is_empty()) {
                (TypeSpec::Inline(a), false) => TypeDef::Agg(a.clone()),
                _ => TypeDef::Alias(f.clone()),
            };
            push_unique(self.types.entry(f.name.clone()).or_default(), def);
            match p.next()? {
                Tok::Punct(",") => {}
                Tok::Punct(";") => return Some(()),
                _ => return None,
            }
        }
    }

    /// A type specifier; an inline `struct TAG {..}` also defines TAG, an
    /// inline enum its enumerators.
    fn type_spec_record(&mut self, p: &mut Parser) -> Option<TypeSpec> {
        let tag = match (p.at(p.i), p.at(p.i + 1)) {
            (Some(Tok::Ident(k)), Some(Tok::Ident(t))) if k == "struct" || k == "union" => {
                Some(t.clone())
            }
            _ => None,
        };
        let mut enumerators = Vec::new();
        let ty = p.type_spec_with(&mut enumerators)?;
        if let (Some(tag), TypeSpec::Inline(a)) = (tag, &ty) {
            push_unique(self.tags.entry(tag).or_default(), a.clone());
        }
        for (name, value) in enumerators {
            self.add_macro(&name, Some(value));
        }
        Some(ty)
    }

    /// Evaluate an integer expression (macros expanded).
    pub fn eval(&self, expr: &str) -> Result<i128, String> {
        self.eval_tokens(&tokenize(expr), 0)
    }

    fn eval_tokens(&self, toks: &[Tok], depth: u32) -> Result<i128, String> {
        if depth > 40 {
            return Err("macro expansion too deep".into());
        }
        let mut e = Eval {
            h: self,
            t: toks,
            i: 0,
            depth,
        };
        let v = e.ternary()?;
        match e.t.get(e.i) {
            None => Ok(v),
            Some(t) => Err(format!("unexpected {t:?} in expression")),
        }
    }

    fn macro_value(&self, name: &str, depth: u32) -> Result<i128, String> {
        match self.macros.get(name) {
            Some(Some(body)) => self.eval_tokens(body, depth + 1),
            Some(None) => Err(format!("{name} is defined several ways or takes arguments")),
            None => Err(format!("{name} is not defined")),
        }
    }

    /// Size and alignment of a typedef name.
    pub fn layout_of(&self, name: &str) -> Result<Layout, String> {
        match base_type(name) {
            Some(l) => Ok(l),
            None => self.guarded(name, || self.layout_uncached(name)),
        }
    }

    /// `compute` once per key; a type that contains itself is an error.
    fn guarded(
        &self,
        key: &str,
        compute: impl FnOnce() -> Result<Layout, String>,
    ) -> Result<Layout, String> {
        if let Some(r) = self.memo.borrow().get(key) {
            return r.clone();
        }
        if !self.busy.borrow_mut().insert(key.to_string()) {
            return Err(format!("{key} contains itself"));
        }
        let r = compute();
        self.busy.borrow_mut().remove(key);
        self.memo.borrow_mut().insert(key.to_string(), r.clone());
        r
    }

    fn layout_uncached(&self, name: &str) -> Result<Layout, String> {
        match self.typedef_of(name)? {
            TypeDef::Agg(a) => self.agg_layout(a),
            TypeDef::Alias(f) => self.field_layout(f),
        }
    }

    fn typedef_of(&self, name: &str) -> Result<&TypeDef, String> {
        match self.types.get(name).map(Vec::as_slice) {
            Some([one]) => Ok(one),
            Some([]) | None => Err(format!("type {name} is not defined")),
            Some(_) => Err(format!("type {name} is defined several ways")),
        }
    }

    fn tag_of(&self, tag: &str) -> Result<&Aggregate, String> {
        match self.tags.get(tag).map(Vec::as_slice) {
            Some([one]) => Ok(one),
            Some([]) | None => Err(format!("struct {tag} is not defined")),
            Some(_) => Err(format!("struct {tag} is defined several ways")),
        }
    }

    fn spec_layout(&self, ty: &TypeSpec) -> Result<Layout, String> {
        match ty {
            TypeSpec::Named(n) => self.layout_of(n),
            TypeSpec::Tagged(t) => {
                self.guarded(&format!("struct {t}"), || self.agg_layout(self.tag_of(t)?))
            }
            TypeSpec::Inline(a) => self.agg_layout(a),
            TypeSpec::Enum(names) => self.enum_layout(names),
        }
    }

    /// 4 bytes when every enumerator fits 32 bits (signed or unsigned).
    fn enum_layout(&self, names: &[String]) -> Result<Layout, String> {
        if names.is_empty() {
            return Err("enum without its enumerators".into());
        }
        let (mut lo, mut hi) = (0i128, 0i128);
        for n in names {
            let v = self.macro_value(n, 0)?;
            (lo, hi) = (lo.min(v), hi.max(v));
        }
        let fits = lo >= i32::MIN as i128
            && (hi <= u32::MAX as i128 && (lo >= 0 || hi <= i32::MAX as i128));
        if fits {
            Ok(lay(4))
        } else {
            Err(format!("enum with values {lo}..{hi}"))
        }
    }

    fn field_layout(&self, f: &Field) -> Result<Layout, String> {
        if f.pointer {
            return Err(format!("{}: pointer (size depends on the ABI)", f.name));
        }
        if f.bitfield {
            return Err(format!("{}: bitfield", f.name));
        }
        let mut l = self.spec_layout(&f.ty)?;
        for d in &f.dims {
            let n = self.eval_tokens(d, 0)?;
            if n <= 0 {
                return Err(format!("{}: array of {n}", f.name));
            }
            l.size = u64::try_from(n)
                .ok()
                .and_then(|n| l.size.checked_mul(n))
                .ok_or("array too large")?;
        }
        if let Some(a) = &f.align {
            let a = self.eval_tokens(a, 0)?;
            if a <= 0 || (a as u64).count_ones() != 1 {
                return Err(format!("{}: alignment {a}", f.name));
            }
            l.align = l.align.max(a as u64);
        }
        Ok(l)
    }

    fn agg_layout(&self, a: &Aggregate) -> Result<Layout, String> {
        Ok(self.members(a)?.1)
    }

    /// Offsets and layouts of the members, and the aggregate's layout.
    fn members(&self, a: &Aggregate) -> Result<(Vec<(u64, Layout)>, Layout), String> {
        if let Some(f) = &a.flaw {
            return Err(f.clone());
        }
        if a.fields.is_empty() {
            return Err("empty struct".into());
        }
        let mut offs = Vec::with_capacity(a.fields.len());
        let (mut end, mut align) = (0u64, 1u64);
        for f in &a.fields {
            let l = self.field_layout(f)?;
            let off = if a.union {
                0
            } else {
                end.next_multiple_of(l.align)
            };
            end = if a.union {
                end.max(l.size)
            } else {
                off.checked_add(l.size).ok_or("struct too large")?
            };
            align = align.max(l.align);
            offs.push((off, l));
        }
        Ok((
            offs,
            Layout {
                size: end.next_multiple_of(align),
                align,
            },
        ))
    }

    /// The members of struct `name` with offsets, nested structs expanded.
    pub fn fields_of(&self, name: &str) -> Result<Vec<FieldLayout>, String> {
        self.layout_of(name)?;
        let a = match self.typedef_of(name)? {
            TypeDef::Agg(a) => a,
            TypeDef::Alias(f) if f.dims.is_empty() && !f.pointer => match &f.ty {
                TypeSpec::Named(n) => return self.fields_of(n),
                TypeSpec::Tagged(t) => self.tag_of(t)?,
                _ => return Err(format!("{name} is not a struct")),
            },
            _ => return Err(format!("{name} is not a struct")),
        };
        let mut out = Vec::new();
        self.expand(a, 0, "", &mut out)?;
        Ok(out)
    }

    fn expand(
        &self,
        a: &Aggregate,
        base: u64,
        prefix: &str,
        out: &mut Vec<FieldLayout>,
    ) -> Result<(), String> {
        let (offs, _) = self.members(a)?;
        for (f, (off, l)) in a.fields.iter().zip(offs) {
            let dims: String = f
                .dims
                .iter()
                .map(|d| Ok(format!("[{}]", self.eval_tokens(d, 0)?)))
                .collect::<Result<_, String>>()?;
            let name = format!("{prefix}{}{dims}", f.name);
            out.push(FieldLayout {
                offset: base + off,
                size: l.size,
                ty: spec_name(&f.ty),
                name: name.clone(),
            });
            if let (Some(inner), true) = (self.aggregate(&f.ty), f.dims.is_empty()) {
                self.expand(inner, base + off, &format!("{name}."), out)?;
            }
        }
        Ok(())
    }

    fn aggregate<'a>(&'a self, ty: &'a TypeSpec) -> Option<&'a Aggregate> {
        match ty {
            TypeSpec::Inline(a) => Some(a),
            TypeSpec::Tagged(t) => self.tag_of(t).ok(),
            TypeSpec::Named(n) => match self.typedef_of(n).ok()? {
                TypeDef::Agg(a) => Some(a),
                TypeDef::Alias(f) if f.dims.is_empty() && !f.pointer => self.aggregate(&f.ty),
                _ => None,
            },
            TypeSpec::Enum(_) => None,
        }
    }
}

fn spec_name(ty: &TypeSpec) -> String {
    match ty {
        TypeSpec::Named(n) => n.clone(),
        TypeSpec::Tagged(t) => format!("struct {t}"),
        TypeSpec::Inline(a) if a.union => "union {..}".into(),
        TypeSpec::Inline(_) => "struct {..}".into(),
        TypeSpec::Enum(_) => "enum".into(),
    }
}

fn push_unique<T: PartialEq>(v: &mut Vec<T>, x: T) {
    if !v.contains(&x) {
        v.push(x);
    }
}

struct Parser<'a> {
    t: &'a [Tok],
    i: usize,
}

impl Parser<'_> {
    fn at(&self, i: usize) -> Option<&Tok> {
        self.t.get(i)
    }

    fn peek_ident(&self) -> Option<&str> {
        match self.t.get(self.i) {
            Some(Tok::Ident(s)) => Some(s),
            _ => None,
        }
    }

    fn next(&mut self) -> Option<&Tok> {
        let t = self.t.get(self.i);
        self.i += 1;
        t
    }

    fn eat(&mut self, p: &str) -> Option<()> {
        match self.t.get(self.i) {
            Some(Tok::Punct(q)) if *q == p => {
                self.i += 1;
                Some(())
            }
            _ => None,
        }
    }

    fn ident(&mut self) -> Option<String> {
        let s = self.peek_ident()?.to_string();
        self.i += 1;
        Some(s)
    }

    fn type_spec(&mut self) -> Option<TypeSpec> {
        self.type_spec_with(&mut Vec::new())
    }

    /// A type specifier; an inline enum's (name, value tokens) go to `enums`.
    fn type_spec_with(&mut self, enums: &mut Vec<(String, Vec<Tok>)>) -> Option<TypeSpec> {
        while matches!(self.peek_ident(), Some("const" | "volatile")) {
            self.i += 1;
        }
        match self.peek_ident()? {
            "struct" | "union" => self.aggregate_spec(),
            "enum" => {
                self.i += 1;
                if self.peek_ident().is_some() {
                    self.i += 1;
                }
                let mut names = Vec::new();
                if self.eat("{").is_some() {
                    self.enumerators(enums)?;
                    names = enums.iter().map(|(n, _)| n.clone()).collect();
                }
                Some(TypeSpec::Enum(names))
            }
            w if TYPE_WORDS.contains(&w) => {
                let mut words = Vec::new();
                while let Some(w) = self.peek_ident().filter(|w| TYPE_WORDS.contains(w)) {
                    words.push(w.to_string());
                    self.i += 1;
                }
                Some(TypeSpec::Named(words.join(" ")))
            }
            _ => Some(TypeSpec::Named(self.ident()?)),
        }
    }

    /// `A = expr, B, C, ... }`: C's value is `(A) + 2` (no long chains).
    fn enumerators(&mut self, out: &mut Vec<(String, Vec<Tok>)>) -> Option<()> {
        let (mut base, mut k) = (None::<String>, 0u64);
        loop {
            if self.eat("}").is_some() {
                return Some(());
            }
            let name = self.ident()?;
            let value = if self.eat("=").is_some() {
                let start = self.i;
                while !matches!(self.at(self.i)?, Tok::Punct(",") | Tok::Punct("}")) {
                    self.i += 1;
                }
                (base, k) = (Some(name.clone()), 0);
                self.t[start..self.i].to_vec()
            } else {
                k += 1;
                match &base {
                    Some(b) => vec![
                        Tok::Ident(b.clone()),
                        Tok::Punct("+"),
                        Tok::Num(k.to_string()),
                    ],
                    None => vec![Tok::Num((k - 1).to_string())],
                }
            };
            out.push((name, value));
            if self.eat(",").is_none() {
                self.eat("}")?;
                return Some(());
            }
        }
    }

    fn aggregate_spec(&mut self) -> Option<TypeSpec> {
        let union = self.ident()? == "union";
        let tag = self.peek_ident().map(str::to_string);
        if tag.is_some() {
            self.i += 1;
        }
        if self.eat("{").is_none() {
            return Some(TypeSpec::Tagged(tag?));
        }
        Some(TypeSpec::Inline(self.body(union)?))
    }

    /// Members up to the closing `}`; a member it cannot read flaws the body.
    fn body(&mut self, union: bool) -> Option<Aggregate> {
        let mut a = Aggregate {
            union,
            fields: Vec::new(),
            flaw: None,
        };
        loop {
            match self.at(self.i)? {
                Tok::Punct("}") => {
                    self.i += 1;
                    return Some(a);
                }
                Tok::Cond => {
                    a.flaw = Some("#if inside the struct".into());
                    self.i += 1;
                }
                _ => {
                    let start = self.i;
                    if self.members(&mut a.fields).is_none() {
                        a.flaw
                            .get_or_insert(format!("unreadable member at token {start}"));
                        self.i = start;
                        self.skip_member()?;
                    }
                }
            }
        }
    }

    fn members(&mut self, out: &mut Vec<Field>) -> Option<()> {
        if self.peek_ident() == Some("NV_DECLARE_ALIGNED") {
            self.i += 1;
            self.eat("(")?;
            let ty = self.type_spec()?;
            let mut f = self.declarator(ty)?;
            self.eat(",")?;
            f.align = Some(self.until_close(")")?);
            self.eat(";")?;
            out.push(f);
            return Some(());
        }
        let ty = self.type_spec()?;
        loop {
            out.push(self.declarator(ty.clone())?);
            match self.next()? {
                Tok::Punct(",") => {}
                Tok::Punct(";") => return Some(()),
                _ => return None,
            }
        }
    }

    fn declarator(&mut self, ty: TypeSpec) -> Option<Field> {
        let mut pointer = false;
        while self.eat("*").is_some() {
            pointer = true;
            while matches!(self.peek_ident(), Some("const" | "volatile")) {
                self.i += 1;
            }
        }
        let anonymous =
            matches!(ty, TypeSpec::Inline(_)) && self.at(self.i) == Some(&Tok::Punct(";"));
        let name = if anonymous {
            String::new()
        } else {
            self.ident()?
        };
        let mut f = Field {
            ty,
            name,
            pointer,
            dims: Vec::new(),
            align: None,
            bitfield: false,
        };
        while self.eat("[").is_some() {
            f.dims.push(self.until_close("]")?);
        }
        if self.eat(":").is_some() {
            f.bitfield = true;
            while !matches!(self.at(self.i)?, Tok::Punct(",") | Tok::Punct(";")) {
                self.i += 1;
            }
        }
        if self.peek_ident() == Some("NV_ALIGN_BYTES") {
            self.i += 1;
            self.eat("(")?;
            f.align = Some(self.until_close(")")?);
        }
        Some(f)
    }

    /// Tokens up to the matching `close` (consumed, not returned).
    fn until_close(&mut self, close: &str) -> Option<Vec<Tok>> {
        let start = self.i;
        let mut depth = 0i32;
        loop {
            match self.next()? {
                Tok::Punct("(" | "[" | "{") => depth += 1,
                Tok::Punct(p) if *p == close && depth == 0 => {
                    return Some(self.t[start..self.i - 1].to_vec());
                }
                Tok::Punct(")" | "]" | "}") => depth -= 1,
                _ => {}
            }
        }
    }

    fn skip_balanced(&mut self, open: &str, close: &str) -> Option<()> {
        let mut depth = 1;
        while depth > 0 {
            match self.next()? {
                Tok::Punct(p) if *p == open => depth += 1,
                Tok::Punct(p) if *p == close => depth -= 1,
                _ => {}
            }
        }
        Some(())
    }

    /// Skip to after the next `;` of this body (or before its `}`).
    fn skip_member(&mut self) -> Option<()> {
        loop {
            match self.at(self.i)? {
                Tok::Punct(";") => {
                    self.i += 1;
                    return Some(());
                }
                Tok::Punct("}") => return Some(()),
                Tok::Punct("{") => {
                    self.i += 1;
                    self.skip_balanced("{", "}")?;
                }
                _ => self.i += 1,
            }
        }
    }
}

struct Eval<'a> {
    h: &'a Headers,
    t: &'a [Tok],
    i: usize,
    depth: u32,
}

const BINARY: &[(&str, u8)] = &[
    ("||", 1),
    ("&&", 2),
    ("|", 3),
    ("^", 4),
    ("&", 5),
    ("==", 6),
    ("!=", 6),
    ("<", 7),
    (">", 7),
    ("<=", 7),
    (">=", 7),
    ("<<", 8),
    (">>", 8),
    ("+", 9),
    ("-", 9),
    ("*", 10),
    ("/", 10),
    ("%", 10),
];

impl Eval<'_> {
    fn peek_punct(&self) -> Option<&'static str> {
        match self.t.get(self.i) {
            Some(Tok::Punct(p)) => Some(p),
            _ => None,
        }
    }

    fn expect(&mut self, p: &str) -> Result<(), String> {
        if self.peek_punct() == Some(p) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected {p}"))
        }
    }

    fn ternary(&mut self) -> Result<i128, String> {
        let c = self.binary(1)?;
        if self.peek_punct() != Some("?") {
            return Ok(c);
        }
        self.i += 1;
        let a = self.ternary()?;
        self.expect(":")?;
        let b = self.ternary()?;
        Ok(if c != 0 { a } else { b })
    }

    fn binary(&mut self, min: u8) -> Result<i128, String> {
        let mut lhs = self.unary()?;
        while let Some((op, prec)) = self
            .peek_punct()
            .and_then(|p| BINARY.iter().find(|(o, _)| *o == p))
            .filter(|(_, prec)| *prec >= min)
        {
            self.i += 1;
            let rhs = self.binary(prec + 1)?;
            lhs = apply(op, lhs, rhs)?;
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<i128, String> {
        match self.peek_punct() {
            Some("-") => {
                self.i += 1;
                self.unary()?.checked_neg().ok_or_else(|| "overflow".into())
            }
            Some("+") => {
                self.i += 1;
                self.unary()
            }
            Some("~") => {
                self.i += 1;
                Ok(!self.unary()? & 0xffff_ffff_ffff_ffff)
            }
            Some("!") => {
                self.i += 1;
                Ok((self.unary()? == 0) as i128)
            }
            Some("(") => self.paren(),
            _ => self.primary(),
        }
    }

    /// `( expr )`, or a cast to a base type `(NvU32) x`.
    fn paren(&mut self) -> Result<i128, String> {
        self.i += 1;
        if let (Some(Tok::Ident(n)), Some(Tok::Punct(")"))) =
            (self.t.get(self.i), self.t.get(self.i + 1))
            && base_type(n).is_some()
        {
            self.i += 2;
            return self.unary();
        }
        let v = self.ternary()?;
        self.expect(")")?;
        Ok(v)
    }

    fn primary(&mut self) -> Result<i128, String> {
        let t = self.t.get(self.i).ok_or("expression ends early")?;
        self.i += 1;
        match t {
            Tok::Num(n) => parse_int(n).ok_or_else(|| format!("bad number {n}")),
            Tok::Ident(n) => self.h.macro_value(n, self.depth),
            t => Err(format!("unexpected {t:?} in expression")),
        }
    }
}

fn apply(op: &str, a: i128, b: i128) -> Result<i128, String> {
    let shift = |b: i128| u32::try_from(b).ok().filter(|b| *b < 64).ok_or("bad shift");
    Ok(match op {
        "||" => (a != 0 || b != 0) as i128,
        "&&" => (a != 0 && b != 0) as i128,
        "|" => a | b,
        "^" => a ^ b,
        "&" => a & b,
        "==" => (a == b) as i128,
        "!=" => (a != b) as i128,
        "<" => (a < b) as i128,
        ">" => (a > b) as i128,
        "<=" => (a <= b) as i128,
        ">=" => (a >= b) as i128,
        "<<" => a.checked_shl(shift(b)?).ok_or("overflow")?,
        ">>" => a >> shift(b)?,
        "+" => a.checked_add(b).ok_or("overflow")?,
        "-" => a.checked_sub(b).ok_or("overflow")?,
        "*" => a.checked_mul(b).ok_or("overflow")?,
        "/" => a.checked_div(b).ok_or("division by zero")?,
        "%" => a.checked_rem(b).ok_or("division by zero")?,
        _ => return Err(format!("operator {op}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defines_keep_finn_and_strip_comments() {
        let d = defines(
            "#define A_CMD (0x2080182aU) /* finn: Evaluated from \"(X << 8) | Y_MESSAGE_ID\" */\n\
             #  define  B   A_CMD // note\n#define F(x) ((x)+1)\n#define LONG 1 + \\\n 2\n",
        );
        assert_eq!(d.len(), 4);
        assert_eq!(d[0].body, "(0x2080182aU)");
        assert_eq!(d[0].finn.as_deref(), Some("(X << 8) | Y_MESSAGE_ID"));
        assert_eq!((d[1].name.as_str(), d[1].body.as_str()), ("B", "A_CMD"));
        assert!(d[2].function_like);
        assert_eq!(d[3].body, "1 +   2");
    }

    #[test]
    fn evaluates_and_lays_out() {
        let mut h = Headers::default();
        h.add_file(
            "#define N (4U)\n#define M (N * 2 + (NvU32)1)\n\
             typedef struct IN { NvU8 a; NvU32 b[N]; } IN;\n\
             typedef struct OUT {\n NvBool x;\n NV_DECLARE_ALIGNED(NvU64 y, 8);\n IN in[2];\n\
               union { NvU16 s; NvU8 c[3]; } u;\n NvP64 p NV_ALIGN_BYTES(8);\n} OUT;\n\
             typedef OUT OUT_V2;\n typedef struct BAD { NvU32 *p; } BAD;\n\
             typedef struct BITS { NvU32 a : 3; } BITS;\n\
             typedef struct C {\n#if X\n NvU32 a;\n#endif\n} C;\n\
             typedef enum E { E_A = 2, E_B, E_COUNT } E;\n\
             typedef enum BIG { BIG_A = -1, BIG_B = 0xffffffff } BIG;\n\
             typedef struct WITH_E { NvU8 c; E e; NvU8 arr[E_COUNT]; } WITH_E;\n",
        );
        assert_eq!(h.eval("M"), Ok(9));
        assert_eq!(h.layout_of("IN"), Ok(Layout { size: 20, align: 4 }));
        assert_eq!(h.layout_of("OUT_V2"), Ok(Layout { size: 72, align: 8 }));
        let f = h.fields_of("OUT").unwrap();
        let at: Vec<_> = f.iter().map(|f| (f.offset, f.name.as_str())).collect();
        assert_eq!(
            at,
            [
                (0, "x"),
                (8, "y"),
                (16, "in[2]"),
                (56, "u"),
                (56, "u.s"),
                (56, "u.c[3]"),
                (64, "p")
            ]
        );
        assert!(h.layout_of("BAD").is_err());
        assert!(h.layout_of("BITS").is_err());
        assert!(h.layout_of("C").is_err());
        assert!(h.layout_of("NOPE").is_err());
        assert_eq!(h.eval("E_COUNT"), Ok(4));
        assert_eq!(h.layout_of("WITH_E"), Ok(Layout { size: 12, align: 4 }));
        assert!(h.layout_of("BIG").is_err());
        h.add_file(
            "typedef struct LOOP { struct LOOP x; } LOOP;\ntypedef A B;\ntypedef B A;\n\
             #define M1 M2\n#define M2 M1\n typedef struct U8 { char c[2]; } \u{b5}U8;",
        );
        assert!(h.layout_of("LOOP").is_err());
        assert!(h.fields_of("A").is_err());
        assert!(h.eval("M1").is_err());
    }
}
