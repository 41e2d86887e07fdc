//! What the packaged binary needs at run time, read from the binary itself
//! (its ELF dynamic section and symbol version needs), as a Debian
//! `Depends` field: each library it links (`DT_NEEDED`) is mapped to the
//! package that ships it, at the oldest version that defines every symbol
//! version the binary asks of it. This is what `dpkg-shlibdeps` answers
//! from the packages' symbols files (the package tier compares the two).

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use object::{
    Endianness,
    elf::{DT_NEEDED, EM_AARCH64, EM_X86_64},
    read::elf::{Dyn as _, ElfFile64, FileHeader as _},
};

/// The libraries a Rust binary for glibc can link, and the Debian package
/// of each with the prefix of its symbol versions (`GLIBC_2.34`). A
/// library not here is refused, not guessed.
#[rustfmt::skip]
const LIBRARIES: &[(&str, &str, &str)] = &[
    // (soname, package, version prefix)
    ("libc.so.6",              "libc6",     "GLIBC_"),
    ("libm.so.6",              "libc6",     "GLIBC_"),
    ("libpthread.so.0",        "libc6",     "GLIBC_"),
    ("libdl.so.2",             "libc6",     "GLIBC_"),
    ("librt.so.1",             "libc6",     "GLIBC_"),
    ("libutil.so.1",           "libc6",     "GLIBC_"),
    ("ld-linux-x86-64.so.2",   "libc6",     "GLIBC_"),
    ("ld-linux-aarch64.so.1",  "libc6",     "GLIBC_"),
    // Rust's unwinder (panics unwind: the probes are detached on the way).
    ("libgcc_s.so.1",          "libgcc-s1", "GCC_"),
];

/// What the binary is and needs.
#[derive(Debug, PartialEq)]
pub struct Needs {
    /// Debian's name of the architecture (amd64, arm64).
    pub deb_arch: &'static str,
    /// The CPU part of the target triple (x86_64, aarch64).
    pub cpu: &'static str,
    /// Its DT_NEEDED entries, in the binary's order.
    pub libraries: Vec<String>,
    /// The Depends field: `libc6 (>= 2.34), libgcc-s1 (>= 4.2)`.
    pub depends: String,
}

/// Read an ELF executable's needs.
pub fn needs(data: &[u8]) -> anyhow::Result<Needs> {
    let elf =
        ElfFile64::<Endianness>::parse(data).context("the binary is not a 64-bit ELF file")?;
    let endian = elf.endian();
    let (deb_arch, cpu) = match elf.elf_header().e_machine(endian) {
        EM_X86_64 => ("amd64", "x86_64"),
        EM_AARCH64 => ("arm64", "aarch64"),
        m => bail!("the binary is for ELF machine {m}: dist packages x86_64 and aarch64 only"),
    };
    let sections = elf.elf_section_table();
    let mut libraries = Vec::new();
    if let Some((dynamic, link)) = sections.dynamic(endian, data)? {
        let strings = sections.strings(endian, data, link)?;
        for d in dynamic {
            if d.tag32(endian) == Some(DT_NEEDED as i32) {
                let name = d.string(endian, strings)?;
                libraries.push(String::from_utf8_lossy(name).into_owned());
            }
        }
    }
    if libraries.is_empty() {
        bail!(
            "the binary links no shared library (a static build?): nothing to depend on was found, which dist does not expect of nvprobe"
        );
    }
    // Each library's symbol versions.
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some((mut needs, link)) = sections.gnu_verneed(endian, data)? {
        let strings = sections.strings(endian, data, link)?;
        while let Some((need, mut aux)) = needs.next()? {
            let file = String::from_utf8_lossy(need.file(endian, strings)?).into_owned();
            while let Some(a) = aux.next()? {
                let v = String::from_utf8_lossy(a.name(endian, strings)?).into_owned();
                versions.entry(file.clone()).or_default().push(v);
            }
        }
    }
    let depends = depends(&libraries, &versions)?;
    Ok(Needs {
        deb_arch,
        cpu,
        libraries,
        depends,
    })
}

/// The Depends field for these libraries and the symbol versions needed
/// of each (by soname), packages in name order as dpkg-shlibdeps gives them.
pub fn depends(
    libraries: &[String],
    versions: &BTreeMap<String, Vec<String>>,
) -> anyhow::Result<String> {
    let mut min: BTreeMap<&str, Option<Vec<u32>>> = BTreeMap::new();
    for lib in libraries {
        let Some(&(_, package, prefix)) = LIBRARIES.iter().find(|(s, _, _)| s == lib) else {
            bail!(
                "the binary links {lib}, and dist does not know which Debian package ships it: add it to LIBRARIES in xtask/src/dist/deps.rs (the package and its symbol version prefix; `dpkg -S {lib}` names the package)"
            );
        };
        let entry = min.entry(package).or_insert(None);
        for v in versions.get(lib).into_iter().flatten() {
            // GLIBC_PRIVATE and the like are not versions.
            let Some(parts) = v.strip_prefix(prefix).and_then(parse_version) else {
                continue;
            };
            if entry.as_ref().is_none_or(|e| parts > *e) {
                *entry = Some(parts);
            }
        }
    }
    Ok(min
        .iter()
        .map(|(package, v)| match v {
            Some(v) => format!("{package} (>= {})", debian_version(package, v)),
            None => (*package).to_owned(),
        })
        .collect::<Vec<_>>()
        .join(", "))
}

fn parse_version(s: &str) -> Option<Vec<u32>> {
    s.split('.').map(|p| p.parse().ok()).collect()
}

/// The package version that brought a symbol version, as Debian's symbols
/// files say it: glibc's as written (2.2.5, 2.34); libgcc's GCC_x.y.0 as
/// x.y, and from GCC 5 on (one number per major release) as x alone
/// (libgcc-s1.symbols: `GCC_4.2.0 4.2`, `GCC_3.3.1 3.3.1`, `GCC_7.0.0 7`).
fn debian_version(package: &str, v: &[u32]) -> String {
    let mut v = v.to_vec();
    if package == "libgcc-s1" {
        let keep = if v.first().is_some_and(|m| *m >= 5) {
            1
        } else {
            2
        };
        while v.len() > keep && v.last() == Some(&0) {
            v.pop();
        }
    }
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vers(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        pairs
            .iter()
            .map(|(l, vs)| {
                (
                    (*l).to_owned(),
                    vs.iter().map(|v| (*v).to_owned()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn the_highest_symbol_version_of_each_package_is_its_minimum() {
        let libs: Vec<String> = [
            "libgcc_s.so.1",
            "libm.so.6",
            "libc.so.6",
            "ld-linux-x86-64.so.2",
        ]
        .map(str::to_owned)
        .to_vec();
        let v = vers(&[
            (
                "libc.so.6",
                &["GLIBC_2.2.5", "GLIBC_2.34", "GLIBC_2.9", "GLIBC_PRIVATE"],
            ),
            ("libm.so.6", &["GLIBC_2.29"]),
            ("ld-linux-x86-64.so.2", &["GLIBC_2.3"]),
            ("libgcc_s.so.1", &["GCC_3.0", "GCC_4.2.0", "GCC_3.3"]),
        ]);
        assert_eq!(
            depends(&libs, &v).expect("known libraries"),
            "libc6 (>= 2.34), libgcc-s1 (>= 4.2)"
        );
        // Numbers compare as numbers (2.9 < 2.34), libgcc as its symbols file writes it.
        let v = vers(&[
            ("libc.so.6", &["GLIBC_2.9"]),
            ("libgcc_s.so.1", &["GCC_7.0.0"]),
        ]);
        let libs = ["libc.so.6", "libgcc_s.so.1"].map(str::to_owned).to_vec();
        assert_eq!(
            depends(&libs, &v).expect("known"),
            "libc6 (>= 2.9), libgcc-s1 (>= 7)"
        );
        let v = vers(&[("libgcc_s.so.1", &["GCC_3.3.1"])]);
        let libs = ["libgcc_s.so.1".to_owned()];
        assert_eq!(depends(&libs, &v).expect("known"), "libgcc-s1 (>= 3.3.1)");
    }

    #[test]
    fn an_unknown_library_is_refused_with_what_to_do() {
        let libs = ["libc.so.6".to_owned(), "libssl.so.3".to_owned()];
        let e = depends(&libs, &BTreeMap::new()).expect_err("unknown");
        let t = e.to_string();
        assert!(t.starts_with("the binary links libssl.so.3"), "{t}");
        assert!(t.contains("dpkg -S libssl.so.3"), "{t}");
    }

    /// The running xtask binary is itself a Rust program for glibc: its
    /// needs read as such.
    #[test]
    fn this_programs_own_needs_read_as_a_glibc_programs() {
        let me = std::fs::read(std::env::current_exe().expect("exe")).expect("read myself");
        let n = needs(&me).expect("an ELF for glibc");
        assert!(n.libraries.iter().any(|l| l == "libc.so.6"), "{n:?}");
        assert!(n.depends.starts_with("libc6 (>= 2."), "{n:?}");
        assert!(needs(b"not an ELF").is_err());
    }
}
