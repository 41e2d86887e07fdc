//! Parsing C declarations (typedefs; struct, union and enum bodies) from
//! tokens into a small syntax tree; what it cannot read flaws the body.

use super::lex::Tok;

const TYPE_WORDS: &[&str] = &["unsigned", "signed", "short", "long", "int", "char"];

#[derive(Debug, Clone, PartialEq)]
pub(super) enum TypeSpec {
    Named(String),
    /// `struct TAG` / `union TAG` used by reference.
    Tagged(String),
    Inline(Aggregate),
    /// Its enumerators' names (empty: `enum TAG` by reference).
    Enum(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Field {
    pub(super) ty: TypeSpec,
    pub(super) name: String,
    pub(super) pointer: bool,
    pub(super) dims: Vec<Vec<Tok>>,
    pub(super) align: Option<Vec<Tok>>,
    pub(super) bitfield: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Aggregate {
    pub(super) union: bool,
    pub(super) fields: Vec<Field>,
    /// Why this body cannot be laid out (parse trouble, `#if` inside).
    pub(super) flaw: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum TypeDef {
    Agg(Aggregate),
    /// `typedef OTHER NAME[dims];` (pointer typedefs have `pointer`).
    Alias(Field),
}

pub(super) struct Parser<'a> {
    pub(super) t: &'a [Tok],
    pub(super) i: usize,
}

impl Parser<'_> {
    pub(super) fn at(&self, i: usize) -> Option<&Tok> {
        self.t.get(i)
    }

    pub(super) fn peek_ident(&self) -> Option<&str> {
        match self.t.get(self.i) {
            Some(Tok::Ident(s)) => Some(s),
            _ => None,
        }
    }

    pub(super) fn next(&mut self) -> Option<&Tok> {
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
    pub(super) fn type_spec_with(
        &mut self,
        enums: &mut Vec<(String, Vec<Tok>)>,
    ) -> Option<TypeSpec> {
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

    pub(super) fn declarator(&mut self, ty: TypeSpec) -> Option<Field> {
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
