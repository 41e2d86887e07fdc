//! Reading a library's exported `cu*` functions from its dynamic symbol
//! table, with what is read bounded by the section headers first (any user
//! can make a file and open it as `libcuda.so.1`).

use std::{collections::HashMap, path::Path};

use nvprobe_common::cuda_func_number;
use object::{Object, ObjectSection, ObjectSymbol};

use super::sets::STARTUP;

/// What the symbol and string tables of a library may hold in all: the
/// parser reads each whole (libcuda 580's are well under 1 MiB), so a
/// file whose headers claim more (any user can make one and open it as
/// `libcuda.so.1`) is refused before it is read.
const SYMBOL_TABLES_CAP: u64 = 32 << 20;

/// The section headers only (a few KiB): refuses a 64-bit ELF file whose
/// symbol and string tables claim more than [`SYMBOL_TABLES_CAP`].
fn symbol_tables_bounded(data: &object::ReadCache<std::fs::File>) -> Result<(), String> {
    use object::read::elf::{FileHeader as _, SectionHeader as _};
    let hdr = object::elf::FileHeader64::<object::Endianness>::parse(data)
        .map_err(|e| format!("not a 64-bit ELF library ({e})"))?;
    let endian = hdr
        .endian()
        .map_err(|e| format!("not an ELF library ({e})"))?;
    let sections = hdr
        .section_headers(endian, data)
        .map_err(|e| format!("not an ELF library ({e})"))?;
    let claimed: u64 = sections
        .iter()
        .filter(|s| {
            matches!(
                s.sh_type(endian),
                object::elf::SHT_SYMTAB | object::elf::SHT_DYNSYM | object::elf::SHT_STRTAB
            )
        })
        .map(|s| s.sh_size(endian))
        .fold(0u64, u64::saturating_add);
    if claimed > SYMBOL_TABLES_CAP {
        return Err(format!(
            "not a library nvprobe reads: its symbol tables claim {claimed} bytes (at most {SYMBOL_TABLES_CAP})"
        ));
    }
    Ok(())
}

/// A libcuda's exported `cu*` functions, or a libnccl's `nccl*` ones:
/// (name, file offset of the code), read through the dynamic symbol table
/// only (a 96 MB libcuda is not read whole). Aliases at one address are
/// kept once (the name nvprobe hooks: libnccl's `pnccl*` profiling names
/// stand at the same addresses).
pub fn exports(path: &Path, f: std::fs::File) -> Result<Vec<(String, u64)>, String> {
    let cache = object::ReadCache::new(f);
    symbol_tables_bounded(&cache).map_err(|e| format!("{}: {e}", path.display()))?;
    let obj = object::File::parse(&cache)
        .map_err(|e| format!("{}: not an ELF library ({e})", path.display()))?;
    let mut out: Vec<(String, u64)> = Vec::new();
    let mut at: HashMap<u64, usize> = HashMap::new();
    for s in obj.dynamic_symbols() {
        if s.kind() != object::SymbolKind::Text || !s.is_definition() || !s.is_global() {
            continue;
        }
        let Ok(name) = s.name() else { continue };
        if !(name.starts_with("cu") || name.starts_with("nccl") || name.starts_with("pnccl")) {
            continue;
        }
        let Some(off) = s
            .section_index()
            .and_then(|i| obj.section_by_index(i).ok())
            .and_then(|sec| {
                let (file_off, _) = sec.file_range()?;
                s.address()
                    .checked_sub(sec.address())?
                    .checked_add(file_off)
            })
        else {
            continue;
        };
        // Aliases at one address: keep the name nvprobe would hook
        // (a start-up call first, then any numbered one).
        let rank = |n: &str| {
            (
                STARTUP.contains(&n),
                cuda_func_number(n).is_some() || nvprobe_common::nccl_fn_named(n).is_some(),
            )
        };
        match at.get(&off) {
            Some(&i) if rank(name) > rank(&out[i].0) => out[i].0 = name.to_owned(),
            Some(_) => {}
            None => {
                at.insert(off, out.len());
                out.push((name.to_owned(), off));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF file whose headers claim a 900 MiB symbol table (192 bytes on
    /// disk; any user can name one libcuda.so.1): refused from its headers,
    /// before the parser reads the table (it grew nvprobe by 267 MB).
    #[test]
    fn a_library_claiming_huge_symbol_tables_is_refused_unread() {
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2; // 64-bit
        elf[5] = 1; // little-endian
        elf[6] = 1;
        let put = |b: &mut Vec<u8>, at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(&mut elf, 16, &3u16.to_le_bytes()); // ET_DYN
        put(&mut elf, 18, &62u16.to_le_bytes()); // x86-64
        put(&mut elf, 20, &1u32.to_le_bytes());
        put(&mut elf, 40, &64u64.to_le_bytes()); // e_shoff
        put(&mut elf, 52, &64u16.to_le_bytes()); // e_ehsize
        put(&mut elf, 54, &56u16.to_le_bytes());
        put(&mut elf, 58, &64u16.to_le_bytes()); // e_shentsize
        put(&mut elf, 60, &2u16.to_le_bytes()); // e_shnum
        elf.extend_from_slice(&[0u8; 64]); // the null section
        let mut dynsym = vec![0u8; 64];
        put(&mut dynsym, 4, &object::elf::SHT_DYNSYM.to_le_bytes());
        put(&mut dynsym, 32, &(900u64 << 20).to_le_bytes()); // sh_size
        put(&mut dynsym, 56, &24u64.to_le_bytes()); // sh_entsize
        elf.extend_from_slice(&dynsym);
        let d = std::env::temp_dir().join("nvprobe-elfcap-XXXXXX");
        let d = nix::unistd::mkdtemp(&d).expect("mkdtemp");
        let p = d.join("libcuda.so.1");
        std::fs::write(&p, &elf).expect("write");
        let e = exports(&p, std::fs::File::open(&p).expect("open")).expect_err("refused");
        assert!(e.contains("its symbol tables claim 943718400 bytes"), "{e}");
        // A real library of this size is read: this test's own binary.
        let me = std::fs::read_link("/proc/self/exe").expect("exe");
        assert!(exports(&me, std::fs::File::open(&me).expect("open")).is_ok());
        let _ = std::fs::remove_dir_all(&d);
    }
}
