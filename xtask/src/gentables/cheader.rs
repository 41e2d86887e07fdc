//! A small reader for NVIDIA's SDK C headers: `#define` lines (with their
//! finn comments), integer expressions, and typedef'd structs laid out as on
//! 64-bit Linux (x86_64, aarch64): enums are 4 bytes when every value fits
//! 32 bits (GCC's rule without -fshort-enums). Anything it cannot lay out for
//! certain (pointers, bitfields, `#if` inside a struct, conflicting
//! definitions, unknown types) is an error, never a guess.
//!
//! Here: `Headers`, which collects the macros and type definitions of the
//! headers; lex, parse, eval and layout do the reading and the arithmetic.

mod eval;
mod layout;
mod lex;
mod parse;

use std::{
    cell::RefCell,
    collections::{HashMap, HashSet},
};

pub use layout::FieldLayout;
use layout::Layout;
pub use lex::{Define, defines, parse_int, strip_comments};
use lex::{Tok, tokenize};
use parse::{Aggregate, Parser, TypeDef, TypeSpec};

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
}

fn push_unique<T: PartialEq>(v: &mut Vec<T>, x: T) {
    if !v.contains(&x) {
        v.push(x);
    }
}
#[cfg(test)]
mod tests {
    use super::*;
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
