//! Sizes, alignments and member offsets of the parsed types, as on 64-bit
//! Linux; what cannot be laid out for certain is an error.

use super::{
    Headers,
    parse::{Aggregate, Field, TypeDef, TypeSpec},
};

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
pub(super) fn base_type(name: &str) -> Option<Layout> {
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

/// One member of a laid-out struct, nested members dotted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldLayout {
    pub offset: u64,
    pub size: u64,
    pub ty: String,
    pub name: String,
}

impl Headers {
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
