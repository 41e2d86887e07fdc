//! Lexing C header text: `#define` lines (with their finn comments), comments,
//! tokens and integer literals.

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
}
