//! Why a library the dynamic loader opened cannot be loaded, read from its
//! ELF header and program headers as the loader reads them (glibc's
//! `open_verify` and `_dl_map_object_from_fd`): an empty or short file,
//! not ELF at all, another class, byte order or machine, not a shared
//! object, or segments that run past the end of the file (a copy cut
//! short). Reads at most the header and the program header table (64 KiB).

use std::{fs::File, io::Read as _, os::unix::fs::FileExt as _};

/// The ELF header's size for 64-bit objects.
const EHDR64: usize = 64;
/// Program header tables longer than this are refused as hostile.
const PHDRS_CAP: u64 = 64 << 10;

/// `e_machine` of the architecture nvprobe was built for.
const HOST_MACHINE: (u16, &str) = if cfg!(target_arch = "aarch64") {
    (183, "aarch64")
} else if cfg!(target_arch = "powerpc64") {
    (21, "ppc64")
} else {
    (62, "x86-64")
};

/// Why `file` cannot be loaded as a shared library on this host; None
/// when the loader would map it.
pub fn unloadable(file: &File) -> Option<String> {
    let size = file.metadata().ok()?.len();
    let mut head = Vec::with_capacity(EHDR64);
    file.take(EHDR64 as u64).read_to_end(&mut head).ok()?;
    problem(&head, size, |off, len| {
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, off).ok().map(|()| buf)
    })
}

/// The check on the first bytes of a file of `size` bytes; `read_at`
/// reads the program header table.
pub fn problem(
    head: &[u8],
    size: u64,
    read_at: impl Fn(u64, usize) -> Option<Vec<u8>>,
) -> Option<String> {
    if size == 0 {
        return Some("the file is empty (0 bytes): the loader says \"file too short\"".into());
    }
    if head.len() < 4 || head[..4] != *b"\x7fELF" {
        return Some(format!(
            "not an ELF file ({size} bytes, beginning {})",
            shown(&head[..head.len().min(16)])
        ));
    }
    if head.len() < 20 {
        return Some(format!(
            "truncated: {size} bytes, shorter than an ELF header: the loader says \"file too short\""
        ));
    }
    match head[4] {
        2 => {}
        1 => {
            return Some("a 32-bit ELF file (ELFCLASS32): this host loads 64-bit libraries".into());
        }
        c => return Some(format!("an ELF file of unknown class {c}")),
    }
    if head[5] != 1 {
        return Some("a big-endian ELF file: this host loads little-endian libraries".into());
    }
    let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]);
    let machine = u16_at(18);
    if machine != HOST_MACHINE.0 {
        return Some(format!(
            "built for another architecture (e_machine {machine}{}), not {}",
            match machine {
                62 => " x86-64",
                183 => " aarch64",
                21 => " ppc64",
                3 => " i386",
                40 => " arm",
                _ => "",
            },
            HOST_MACHINE.1
        ));
    }
    let kind = u16_at(16);
    if kind != 3 {
        return Some(format!(
            "an ELF {} (e_type {kind}), not a shared object",
            match kind {
                1 => "relocatable object",
                2 => "executable",
                4 => "core dump",
                _ => "file",
            }
        ));
    }
    if head.len() < EHDR64 || (size as usize) < EHDR64 {
        return Some(format!(
            "truncated: {size} bytes, shorter than an ELF header: the loader says \"file too short\""
        ));
    }
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[o..o + 8]);
        u64::from_le_bytes(b)
    };
    let (phoff, phentsize, phnum) = (u64_at(32), u64::from(u16_at(54)), u64::from(u16_at(56)));
    let table = phentsize.saturating_mul(phnum);
    if phentsize < 56 || table == 0 || table > PHDRS_CAP {
        return Some(format!(
            "an ELF shared object with a bad program header table ({phnum} entries of {phentsize} bytes)"
        ));
    }
    let end = phoff.saturating_add(table);
    if end > size {
        return Some(format!(
            "truncated: the file is {size} bytes and its program headers end at {end} (a copy cut short)"
        ));
    }
    let phdrs = read_at(phoff, table as usize)?;
    let mut need = 0u64;
    for e in phdrs.chunks_exact(phentsize as usize) {
        let word = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&e[o..o + 8]);
            u64::from_le_bytes(b)
        };
        // PT_LOAD: p_offset at 8, p_filesz at 32.
        if u32::from_le_bytes([e[0], e[1], e[2], e[3]]) == 1 {
            need = need.max(word(8).saturating_add(word(32)));
        }
    }
    (need > size).then(|| {
        format!(
            "truncated: the file is {size} bytes and its loadable segments need {need} (a copy cut short)"
        )
    })
}

/// The first bytes of a file, as a person reads them.
fn shown(b: &[u8]) -> String {
    if b.iter()
        .all(|c| c.is_ascii_graphic() || c.is_ascii_whitespace())
    {
        format!("{:?}", String::from_utf8_lossy(b))
    } else {
        let hex: Vec<String> = b.iter().map(|c| format!("{c:02x}")).collect();
        hex.join(" ")
    }
}

/// The libraries an `/etc/ld.so.preload` lists, as glibc's loader reads it
/// (elf/rtld.c): a `#` blanks the rest of its line, and names are
/// separated by spaces, tabs, newlines and colons.
pub fn preload_names(file: &[u8]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in String::from_utf8_lossy(file)
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| l.split([' ', '\t', ':']))
        .filter(|n| !n.is_empty())
    {
        if out.len() >= PRELOADS_KEPT {
            break;
        }
        if !out.iter().any(|o| o == n) {
            out.push(n.to_owned());
        }
    }
    out
}

/// /etc/ld.so.preload: glibc reads any size; 1 MiB holds any real one and
/// one padded with comments to hide from a smaller read.
pub const PRELOAD_CAP: u64 = 1 << 20;

/// Distinct preloaded names kept of one list (a hostile list of thousands
/// of names costs no more; the loader would load at most that many
/// distinct libraries that anyone uses).
pub const PRELOADS_KEPT: usize = 64;

#[cfg(test)]
mod tests {
    #[test]
    fn a_preload_file_is_read_as_the_loader_reads_it() {
        assert_eq!(
            super::preload_names(
                b"# off: /usr/lib/x.so\n/usr/lib/a.so:/usr/lib/b.so\t/c.so # d.so\n\n  e.so"
            ),
            ["/usr/lib/a.so", "/usr/lib/b.so", "/c.so", "e.so"]
        );
        assert!(super::preload_names(b"#only a comment").is_empty());
        // Repeats once; a list of thousands of names, the first 64.
        let many: String = (0..5000).map(|i| format!("a{i}.so:a0.so:")).collect();
        let names = super::preload_names(many.as_bytes());
        assert_eq!(
            (
                names.len(),
                names[0].as_str(),
                names[1].as_str(),
                names[63].as_str()
            ),
            (64, "a0.so", "a1.so", "a63.so")
        );
    }

    use super::*;

    /// A 64-bit little-endian shared object of `size` bytes for this host
    /// with one PT_LOAD of `filesz` bytes at 0.
    fn elf(size: u64, filesz: u64) -> Vec<u8> {
        let mut h = vec![0u8; 64 + 56];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[16..18].copy_from_slice(&3u16.to_le_bytes());
        h[18..20].copy_from_slice(&HOST_MACHINE.0.to_le_bytes());
        h[32..40].copy_from_slice(&64u64.to_le_bytes());
        h[54..56].copy_from_slice(&56u16.to_le_bytes());
        h[56..58].copy_from_slice(&1u16.to_le_bytes());
        h[64..68].copy_from_slice(&1u32.to_le_bytes());
        h[64 + 32..64 + 40].copy_from_slice(&filesz.to_le_bytes());
        h.resize(size.max(120) as usize, 0);
        h
    }

    fn check(bytes: &[u8], size: u64) -> Option<String> {
        let head = &bytes[..bytes.len().min(64)];
        problem(head, size, |off, len| {
            bytes
                .get(off as usize..off as usize + len)
                .map(<[u8]>::to_vec)
        })
    }

    #[test]
    fn a_loadable_library_has_no_problem() {
        let b = elf(4096, 4096);
        assert_eq!(check(&b, 4096), None);
    }

    #[test]
    fn each_reason_the_loader_refuses_is_named() {
        assert!(
            check(b"", 0)
                .unwrap()
                .starts_with("the file is empty (0 bytes)")
        );
        assert_eq!(
            check(b"INPUT(-lcuda)\n", 14).unwrap(),
            "not an ELF file (14 bytes, beginning \"INPUT(-lcuda)\\n\")"
        );
        let mut b = elf(4096, 4096);
        b[4] = 1;
        assert!(check(&b, 4096).unwrap().contains("32-bit"));
        let mut b = elf(4096, 4096);
        b[18..20].copy_from_slice(&(if HOST_MACHINE.0 == 62 { 183u16 } else { 62 }).to_le_bytes());
        assert!(
            check(&b, 4096)
                .unwrap()
                .starts_with("built for another architecture"),
        );
        let mut b = elf(4096, 4096);
        b[16] = 2;
        assert!(check(&b, 4096).unwrap().contains("executable"));
        // The first 4 KiB of a 29 MB libcuda: headers whole, segments not.
        let b = elf(4096, 29_000_000);
        assert_eq!(
            check(&b, 4096).unwrap(),
            "truncated: the file is 4096 bytes and its loadable segments need 29000000 (a copy cut short)"
        );
        // Cut inside the header.
        let b = elf(120, 120);
        assert!(
            check(&b[..40], 40)
                .unwrap()
                .starts_with("truncated: 40 bytes")
        );
    }

    #[test]
    fn hostile_headers_are_bounded() {
        let mut b = elf(4096, 4096);
        b[56..58].copy_from_slice(&u16::MAX.to_le_bytes());
        b[54..56].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(
            check(&b, 4096)
                .unwrap()
                .contains("bad program header table")
        );
        let mut b = elf(4096, 4096);
        b[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(check(&b, 4096).unwrap().starts_with("truncated"));
    }
}
