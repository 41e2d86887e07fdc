//! Integer expressions of C headers (`#define` bodies, array sizes,
//! enumerators), evaluated with macros expanded.

use super::{
    Headers,
    layout::base_type,
    lex::{Tok, parse_int, tokenize},
};

impl Headers {
    /// Evaluate an integer expression (macros expanded).
    pub fn eval(&self, expr: &str) -> Result<i128, String> {
        self.eval_tokens(&tokenize(expr), 0)
    }

    pub(super) fn eval_tokens(&self, toks: &[Tok], depth: u32) -> Result<i128, String> {
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

    pub(super) fn macro_value(&self, name: &str, depth: u32) -> Result<i128, String> {
        match self.macros.get(name) {
            Some(Some(body)) => self.eval_tokens(body, depth + 1),
            Some(None) => Err(format!("{name} is defined several ways or takes arguments")),
            None => Err(format!("{name} is not defined")),
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
