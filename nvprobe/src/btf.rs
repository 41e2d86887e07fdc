//! A small reader of the kernel's BTF (`/sys/kernel/btf/vmlinux` and module
//! BTF), enough to find struct member offsets and sizes.
//!
//! aya has no CO-RE for programs written in Rust, so the BPF side gets the
//! offsets it needs (task -> files -> fdtable -> file -> inode, pid
//! namespaces) as a global set at load time from what this module reads.
//! Format: include/uapi/linux/btf.h, Documentation/bpf/btf.rst.

use std::{collections::HashMap, path::Path};

use nvprobe_common::Config;

#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("not BTF data: {0}")]
    Format(String),
    #[error("BTF has no struct {0}")]
    NoStruct(String),
    #[error("BTF struct {0} has no member {1}")]
    NoMember(String, String),
}

const BTF_MAGIC: u16 = 0xEB9F;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FWD: u32 = 7;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

#[derive(Clone, Debug)]
struct Member {
    name: String,
    ty: u32,
    bit_offset: u32,
}

#[derive(Clone, Debug)]
struct Type {
    kind: u32,
    name: String,
    /// Size for struct/union/int/enum; referenced type for modifiers.
    size_or_type: u32,
    members: Vec<Member>,
}

/// Parsed BTF: types by id, and struct ids by name.
pub struct Btf {
    types: Vec<Type>,
    structs: HashMap<String, u32>,
    /// The string section (a split BTF's own strings follow its base's).
    strs: Vec<u8>,
    /// FUNC ids by name.
    funcs: HashMap<String, u32>,
}

fn rd32(d: &[u8], off: usize) -> Result<u32, BtfError> {
    d.get(off..off + 4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .ok_or_else(|| BtfError::Format(format!("truncated at offset {off}")))
}

impl Btf {
    pub fn from_file(path: &Path) -> Result<Self, BtfError> {
        let data = std::fs::read(path).map_err(|source| BtfError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&data)
    }

    /// Parse a base (vmlinux) BTF blob.
    pub fn parse(d: &[u8]) -> Result<Self, BtfError> {
        Self::parse_on(d, None)
    }

    /// Parse a module's split BTF (`/sys/kernel/btf/<module>`) on top of
    /// its base: type ids and string offsets continue the base's.
    pub fn parse_split(d: &[u8], base: &Btf) -> Result<Self, BtfError> {
        Self::parse_on(d, Some(base))
    }

    fn parse_on(d: &[u8], base: Option<&Btf>) -> Result<Self, BtfError> {
        if d.len() < 24 {
            return Err(BtfError::Format("shorter than a header".into()));
        }
        let magic = u16::from_le_bytes([d[0], d[1]]);
        if magic != BTF_MAGIC {
            return Err(BtfError::Format(format!("bad magic {magic:#x}")));
        }
        let hdr_len = rd32(d, 4)? as usize;
        let type_off = rd32(d, 8)? as usize;
        let type_len = rd32(d, 12)? as usize;
        let str_off = rd32(d, 16)? as usize;
        let str_len = rd32(d, 20)? as usize;
        let types_start = hdr_len
            .checked_add(type_off)
            .ok_or_else(|| BtfError::Format("type offset overflows".into()))?;
        let types_end = types_start.saturating_add(type_len);
        let strs_start = hdr_len.saturating_add(str_off);
        let own = d
            .get(strs_start..strs_start.saturating_add(str_len))
            .ok_or_else(|| BtfError::Format("string section out of bounds".into()))?;
        if types_end > d.len() {
            return Err(BtfError::Format("type section out of bounds".into()));
        }
        let mut strs = base.map_or_else(Vec::new, |b| b.strs.clone());
        strs.extend_from_slice(own);
        let name = |off: u32| -> String {
            let off = off as usize;
            strs.get(off..)
                .and_then(|s| s.iter().position(|&c| c == 0).map(|e| &s[..e]))
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .unwrap_or_default()
        };

        // Type id 0 is void; a split BTF's ids continue its base's.
        let (mut types, mut structs, mut funcs) = match base {
            Some(b) => (b.types.clone(), b.structs.clone(), b.funcs.clone()),
            None => (
                vec![Type {
                    kind: 0,
                    name: String::new(),
                    size_or_type: 0,
                    members: Vec::new(),
                }],
                HashMap::new(),
                HashMap::new(),
            ),
        };
        let mut p = types_start;
        while p < types_end {
            let name_off = rd32(d, p)?;
            let info = rd32(d, p + 4)?;
            let size_or_type = rd32(d, p + 8)?;
            p += 12;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let kind_flag = info >> 31 == 1;
            let mut members = Vec::new();
            match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => p += 4,
                KIND_ARRAY => p += 12,
                KIND_STRUCT | KIND_UNION => {
                    for i in 0..vlen {
                        let m = p + i * 12;
                        let off = rd32(d, m + 8)?;
                        members.push(Member {
                            name: name(rd32(d, m)?),
                            ty: rd32(d, m + 4)?,
                            bit_offset: if kind_flag { off & 0x00ff_ffff } else { off },
                        });
                    }
                    p += 12 * vlen;
                }
                KIND_FUNC_PROTO => {
                    // Parameters as members: (name, type).
                    for i in 0..vlen {
                        let m = p + i * 8;
                        members.push(Member {
                            name: name(rd32(d, m)?),
                            ty: rd32(d, m + 4)?,
                            bit_offset: 0,
                        });
                    }
                    p += 8 * vlen;
                }
                KIND_ENUM => p += 8 * vlen,
                KIND_DATASEC | KIND_ENUM64 => p += 12 * vlen,
                _ => {}
            }
            let t = Type {
                kind,
                name: name(name_off),
                size_or_type,
                members,
            };
            if kind == KIND_STRUCT && !t.name.is_empty() {
                structs.entry(t.name.clone()).or_insert(types.len() as u32);
            }
            if kind == KIND_FUNC && !t.name.is_empty() {
                funcs.entry(t.name.clone()).or_insert(types.len() as u32);
            }
            types.push(t);
        }
        Ok(Self {
            types,
            structs,
            strs,
            funcs,
        })
    }

    /// A type as C spells it: "struct file *", "unsigned int", "NvU32".
    fn c_type(&self, id: u32, depth: u32) -> String {
        if depth > 16 {
            return "?".into();
        }
        let Some(t) = self.ty(id) else {
            return "?".into();
        };
        match t.kind {
            0 => "void".into(),
            KIND_PTR => {
                let inner = self.c_type(t.size_or_type, depth + 1);
                if inner.ends_with('*') {
                    format!("{inner}*")
                } else {
                    format!("{inner} *")
                }
            }
            KIND_CONST => format!("const {}", self.c_type(t.size_or_type, depth + 1)),
            KIND_VOLATILE => format!("volatile {}", self.c_type(t.size_or_type, depth + 1)),
            KIND_RESTRICT | KIND_TYPE_TAG => self.c_type(t.size_or_type, depth + 1),
            KIND_STRUCT => format!("struct {}", t.name),
            KIND_UNION => format!("union {}", t.name),
            KIND_ENUM | KIND_ENUM64 => format!("enum {}", t.name),
            KIND_FWD => format!("struct {}", t.name),
            KIND_FUNC_PROTO => "fn".into(),
            _ => t.name.clone(),
        }
    }

    /// A function's prototype from BTF: (return type, [(param type,
    /// param name)]), or None when the BTF has no such function.
    pub fn prototype(&self, func: &str) -> Option<(String, Vec<(String, String)>)> {
        let f = self.ty(*self.funcs.get(func)?)?;
        let proto = self.ty(f.size_or_type)?;
        if proto.kind != KIND_FUNC_PROTO {
            return None;
        }
        Some((
            self.c_type(proto.size_or_type, 0),
            proto
                .members
                .iter()
                .map(|m| (self.c_type(m.ty, 0), m.name.clone()))
                .collect(),
        ))
    }

    fn ty(&self, id: u32) -> Option<&Type> {
        self.types.get(id as usize)
    }

    /// Follow typedef/const/volatile/restrict/type-tag to the real type.
    fn resolve(&self, mut id: u32) -> Option<&Type> {
        for _ in 0..32 {
            let t = self.ty(id)?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_or_type
                }
                _ => return Some(t),
            }
        }
        None
    }

    fn find_member(&self, t: &Type, member: &str, depth: u32) -> Option<u32> {
        if depth > 8 {
            return None;
        }
        for m in &t.members {
            if m.name == member {
                return Some(m.bit_offset);
            }
        }
        // Members of anonymous structs and unions count as members of the
        // enclosing struct (C11).
        for m in t.members.iter().filter(|m| m.name.is_empty()) {
            if let Some(inner) = self.resolve(m.ty)
                && matches!(inner.kind, KIND_STRUCT | KIND_UNION)
                && let Some(off) = self.find_member(inner, member, depth + 1)
            {
                return Some(m.bit_offset + off);
            }
        }
        None
    }

    /// Byte offset of `member` in `struct name`.
    pub fn member_offset(&self, name: &str, member: &str) -> Result<u32, BtfError> {
        let id = *self
            .structs
            .get(name)
            .ok_or_else(|| BtfError::NoStruct(name.into()))?;
        let t = self.ty(id).ok_or_else(|| BtfError::NoStruct(name.into()))?;
        self.find_member(t, member, 0)
            .map(|bits| bits / 8)
            .ok_or_else(|| BtfError::NoMember(name.into(), member.into()))
    }

    /// `sizeof(struct name)`.
    pub fn struct_size(&self, name: &str) -> Result<u32, BtfError> {
        let id = *self
            .structs
            .get(name)
            .ok_or_else(|| BtfError::NoStruct(name.into()))?;
        Ok(self.ty(id).map_or(0, |t| t.size_or_type))
    }
}

/// This machine's page size (4 KiB where it cannot be read).
fn page_size() -> u32 {
    // SAFETY: sysconf has no preconditions.
    u32::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|n| n.is_power_of_two())
        .unwrap_or(4096)
}

/// The struct offsets the BPF programs need, from this kernel's BTF.
pub fn kernel_offsets(btf: &Btf) -> Result<Config, BtfError> {
    Ok(Config {
        task_files: btf.member_offset("task_struct", "files")?,
        task_thread_pid: btf.member_offset("task_struct", "thread_pid")?,
        task_group_leader: btf.member_offset("task_struct", "group_leader")?,
        files_fdt: btf.member_offset("files_struct", "fdt")?,
        fdt_max_fds: btf.member_offset("fdtable", "max_fds")?,
        fdt_fd: btf.member_offset("fdtable", "fd")?,
        file_inode: btf.member_offset("file", "f_inode")?,
        inode_mode: btf.member_offset("inode", "i_mode")?,
        inode_rdev: btf.member_offset("inode", "i_rdev")?,
        inode_ino: btf.member_offset("inode", "i_ino")?,
        inode_sb: btf.member_offset("inode", "i_sb")?,
        sb_dev: btf.member_offset("super_block", "s_dev")?,
        pid_level: btf.member_offset("pid", "level")?,
        pid_numbers: btf.member_offset("pid", "numbers")?,
        upid_size: btf.struct_size("upid")?,
        upid_nr: btf.member_offset("upid", "nr")?,
        task_tgid: btf.member_offset("task_struct", "tgid")?,
        task_pid: btf.member_offset("task_struct", "pid")?,
        task_exit_code: btf.member_offset("task_struct", "exit_code")?,
        // A failed call's address space: optional (0 leaves the record's
        // sizes 0), so that a kernel without them still traces.
        task_mm: btf.member_offset("task_struct", "mm").unwrap_or(0),
        mm_map_count: btf.member_offset("mm_struct", "map_count").unwrap_or(0),
        mm_total_vm: btf.member_offset("mm_struct", "total_vm").unwrap_or(0),
        mm_data_vm: btf.member_offset("mm_struct", "data_vm").unwrap_or(0),
        page_shift: page_size().trailing_zeros(),
        // Whether a whole process is ending: optional (0 sends a thread's
        // end in cuInit whatever the process does; user space then tells
        // by the times).
        task_signal: btf.member_offset("task_struct", "signal").unwrap_or(0),
        signal_flags: btf.member_offset("signal_struct", "flags").unwrap_or(0),
        signal_group_exec_task: btf
            .member_offset("signal_struct", "group_exec_task")
            .unwrap_or(0),
        ..Config::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Build a BTF blob: struct outer { int a; union { int b; long c; }; int d; }.
    fn blob() -> Vec<u8> {
        let strs = b"\0int\0outer\0a\0b\0c\0d\0long\0".to_vec();
        let s = |name: &str| {
            let needle = format!("\0{name}\0");
            strs.windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .map(|p| p as u32 + 1)
                .expect("string present")
        };
        let mut t = Vec::new();
        let mut push = |v: &[u32]| v.iter().for_each(|x| t.extend_from_slice(&x.to_le_bytes()));
        // 1: int (4 bytes)
        push(&[s("int"), KIND_INT << 24, 4, 32]);
        // 2: long (8 bytes)
        push(&[s("long"), KIND_INT << 24, 8, 64]);
        // 3: anonymous union { int b; long c; }, size 8
        push(&[0, (KIND_UNION << 24) | 2, 8]);
        push(&[s("b"), 1, 0]);
        push(&[s("c"), 2, 0]);
        // 4: struct outer { int a @0; union @64 bits; int d @128 bits }, size 24
        push(&[s("outer"), (KIND_STRUCT << 24) | 3, 24]);
        push(&[s("a"), 1, 0]);
        push(&[0, 3, 64]);
        push(&[s("d"), 1, 128]);
        let mut d = Vec::new();
        for v in [
            0x0001_eb9fu32,
            24,
            0,
            t.len() as u32,
            t.len() as u32,
            strs.len() as u32,
        ] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        // Header: magic(2) version(1) flags(1) hdr_len(4) ...; fix the
        // first word: magic 0xeb9f, version 1, flags 0.
        d[0..4].copy_from_slice(&[0x9f, 0xeb, 1, 0]);
        d.extend_from_slice(&t);
        d.extend_from_slice(&strs);
        d
    }

    #[test]
    fn offsets_through_anonymous_unions() {
        let btf = Btf::parse(&blob()).expect("parses");
        assert_eq!(btf.member_offset("outer", "a").expect("a"), 0);
        assert_eq!(btf.member_offset("outer", "b").expect("b"), 8);
        assert_eq!(btf.member_offset("outer", "c").expect("c"), 8);
        assert_eq!(btf.member_offset("outer", "d").expect("d"), 16);
        assert_eq!(btf.struct_size("outer").expect("size"), 24);
        assert!(matches!(
            btf.member_offset("outer", "zz"),
            Err(BtfError::NoMember(..))
        ));
        assert!(matches!(
            btf.member_offset("nope", "a"),
            Err(BtfError::NoStruct(_))
        ));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(Btf::parse(&[]).is_err());
        assert!(Btf::parse(&[0u8; 24]).is_err());
        let mut b = blob();
        b.truncate(40);
        assert!(Btf::parse(&b).is_err());
        let mut b = blob();
        b[12] = 0xff; // type_len far beyond the data
        assert!(Btf::parse(&b).is_err());
    }

    #[test]
    fn this_kernel_has_the_fields_we_need() {
        let path = Path::new("/sys/kernel/btf/vmlinux");
        if !path.exists() {
            eprintln!("skipping: {} is absent on this kernel", path.display());
            return;
        }
        let btf = Btf::from_file(path).expect("vmlinux BTF parses");
        let c = kernel_offsets(&btf).expect("all offsets found");
        assert!(c.task_files > 0 && c.task_thread_pid > 0 && c.task_group_leader > 0);
        assert_eq!(
            c.upid_size, 16,
            "struct upid {{ int nr; struct pid_namespace *ns; }}"
        );
        assert_eq!(c.upid_nr, 0);
        assert!(c.inode_rdev > 0 && c.inode_sb > 0);
        // mm_struct's fields sit behind its anonymous struct (5.x and later).
        assert!(c.task_mm > 0 && c.mm_map_count > 0 && c.mm_total_vm > 0 && c.mm_data_vm > 0);
        assert_ne!(c.mm_total_vm, c.mm_data_vm);
        assert!((12..=16).contains(&c.page_shift), "{}", c.page_shift);
    }
}
