//! Where each file of nvprobe's distribution goes: the Debian package's
//! tree (absolute paths of the installed system) and the tarball's (a
//! prefix such as /usr/local), both from the same inputs; the package's
//! control file, copyright and changelog.

use std::io::Write as _;

use anyhow::{Context as _, bail};

use super::deps::Needs;

/// The systemd unit's ExecStart in the source tree and the tarball (a
/// copied binary lives in /usr/local/bin), and in the package.
pub const UNIT_EXEC_COPIED: &str = "ExecStart=/usr/local/bin/nvprobe ";
pub const UNIT_EXEC_PACKAGED: &str = "ExecStart=/usr/bin/nvprobe ";

/// The package's one conffile.
pub const CONFFILES: &[&str] = &["/etc/logrotate.d/nvprobe"];

/// The Debian revision of every package dist builds (the package is made
/// from this tree, by this tree).
pub const DEBIAN_REVISION: &str = "1";

const SYNOPSIS: &str = "eBPF tracer for NVIDIA GPU driver calls";

/// The Description's long part, one paragraph per entry.
const DESCRIPTION: &[&str] = &[
    "nvprobe watch (as root) shows every call that every process on the host \
     makes to /dev/nvidia*: the escape or UVM command by name, the RM class or \
     control, the real result (the errno, or the NV_STATUS the driver wrote \
     back) and how long it took, and gives each process's CUDA start-up a \
     verdict that names the call or signal that explains it. nvprobe doctor \
     checks a host for what breaks CUDA start-up and tracing.",
    "One binary with its eBPF programs built in: no kernel module, no ptrace, \
     nothing injected. The systemd unit nvprobe.service is installed but not \
     enabled.",
];

/// What lintian says that does not apply, each with why.
const LINTIAN_OVERRIDES: &str = "\
# The package is built from the source tree by `cargo xtask dist`, not
# uploaded to Debian: there is no ITP bug for its first changelog entry to
# close.
nvprobe: initial-upload-closes-no-bugs
";

/// One file: its path (relative to the tree's root, no leading slash), its
/// bytes and its permission bits.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub path: String,
    pub data: Vec<u8>,
    pub mode: u32,
}

impl Entry {
    fn file(path: impl Into<String>, data: impl Into<Vec<u8>>) -> Entry {
        Entry {
            path: path.into(),
            data: data.into(),
            mode: 0o644,
        }
    }
}

/// What the distribution is made of.
pub struct Inputs {
    /// The crate's version (0.1.0).
    pub version: String,
    /// `nvprobe --version`'s line.
    pub version_line: String,
    /// SOURCE_DATE_EPOCH: every timestamp of the distribution.
    pub epoch: i64,
    /// "Name <email>".
    pub maintainer: String,
    pub needs: Needs,
    /// The stripped binary.
    pub binary: Vec<u8>,
    /// deploy/systemd/nvprobe.service and deploy/logrotate/nvprobe.
    pub unit: String,
    pub logrotate: String,
    /// (name without section, roff): ("nvprobe", …), ("nvprobe-watch", …).
    pub pages: Vec<(String, String)>,
    pub bash: String,
    pub zsh: String,
    pub fish: String,
    /// The documentation, by its path in the source tree (README.md,
    /// docs/SCHEMA.md, deploy/README.md, …).
    pub docs: Vec<(String, Vec<u8>)>,
    /// The Rust crates linked into the binary, one per line with licenses.
    pub third_party: String,
}

impl Inputs {
    pub fn deb_version(&self) -> String {
        format!("{}-{DEBIAN_REVISION}", self.version)
    }
    pub fn deb_name(&self) -> String {
        format!("nvprobe_{}_{}.deb", self.deb_version(), self.needs.deb_arch)
    }
    /// The tarball's top folder (and its name without `.tar.gz`).
    pub fn tar_stem(&self) -> String {
        format!("nvprobe-{}-{}-linux-gnu", self.version, self.needs.cpu)
    }
}

/// gzip -9n: no name, no timestamp (the same bytes every build).
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    e.write_all(data).expect("gzip into memory");
    e.finish().expect("gzip into memory")
}

/// The package's unit: the source tree's, ExecStart pointed at
/// /usr/bin/nvprobe (its one line that names the binary).
pub fn packaged_unit(unit: &str) -> anyhow::Result<String> {
    let n = unit
        .lines()
        .filter(|l| l.starts_with(UNIT_EXEC_COPIED))
        .count();
    if n != 1 {
        bail!(
            "deploy/systemd/nvprobe.service has {n} lines starting with `{UNIT_EXEC_COPIED}`, dist needs exactly one: it points that line at /usr/bin/nvprobe, where the package installs the binary"
        );
    }
    let mut out = String::new();
    for l in unit.split_inclusive('\n') {
        match l.strip_prefix(UNIT_EXEC_COPIED) {
            Some(rest) => {
                out.push_str(UNIT_EXEC_PACKAGED);
                out.push_str(rest);
            }
            None => out.push_str(l),
        }
    }
    Ok(out)
}

/// A documentation file as the package has it: Markdown over 4 KiB
/// compressed (as dh_compress does), everything else as it is.
fn deb_doc(path: &str, data: &[u8]) -> Entry {
    let base = format!("usr/share/doc/nvprobe/{path}");
    if path.ends_with(".md") && data.len() > 4096 {
        Entry::file(format!("{base}.gz"), gzip(data))
    } else {
        Entry::file(base, data)
    }
}

/// The Debian package's files (not its control part), sorted by path.
pub fn deb_files(i: &Inputs) -> anyhow::Result<Vec<Entry>> {
    let mut v = vec![
        Entry {
            path: "usr/bin/nvprobe".into(),
            data: i.binary.clone(),
            mode: 0o755,
        },
        Entry::file(
            "usr/lib/systemd/system/nvprobe.service",
            packaged_unit(&i.unit)?,
        ),
        Entry::file("etc/logrotate.d/nvprobe", i.logrotate.clone()),
        Entry::file(
            "usr/share/bash-completion/completions/nvprobe",
            i.bash.clone(),
        ),
        Entry::file("usr/share/zsh/vendor-completions/_nvprobe", i.zsh.clone()),
        Entry::file(
            "usr/share/fish/vendor_completions.d/nvprobe.fish",
            i.fish.clone(),
        ),
        Entry::file("usr/share/doc/nvprobe/copyright", copyright()),
        Entry::file(
            "usr/share/doc/nvprobe/changelog.Debian.gz",
            gzip(changelog(i).as_bytes()),
        ),
        Entry::file("usr/share/doc/nvprobe/THIRD-PARTY", i.third_party.clone()),
        Entry::file("usr/share/lintian/overrides/nvprobe", LINTIAN_OVERRIDES),
    ];
    for (name, roff) in &i.pages {
        v.push(Entry::file(
            format!("usr/share/man/man1/{name}.1.gz"),
            gzip(roff.as_bytes()),
        ));
    }
    for (path, data) in &i.docs {
        v.push(deb_doc(path, data));
    }
    v.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(v)
}

/// The tarball's files, under its top folder: a prefix tree (bin/,
/// share/, lib/systemd/system/, etc/) to unpack into /usr/local with
/// `--strip-components=1`, the unit as the source tree has it
/// (/usr/local/bin/nvprobe), the docs uncompressed.
pub fn tar_files(i: &Inputs) -> Vec<Entry> {
    let top = i.tar_stem();
    let mut v = vec![
        Entry {
            path: "bin/nvprobe".into(),
            data: i.binary.clone(),
            mode: 0o755,
        },
        Entry::file("lib/systemd/system/nvprobe.service", i.unit.clone()),
        Entry::file("etc/logrotate.d/nvprobe", i.logrotate.clone()),
        Entry::file("share/bash-completion/completions/nvprobe", i.bash.clone()),
        Entry::file("share/zsh/site-functions/_nvprobe", i.zsh.clone()),
        Entry::file(
            "share/fish/vendor_completions.d/nvprobe.fish",
            i.fish.clone(),
        ),
        Entry::file("share/doc/nvprobe/copyright", copyright()),
        Entry::file("share/doc/nvprobe/THIRD-PARTY", i.third_party.clone()),
    ];
    for (name, roff) in &i.pages {
        v.push(Entry::file(
            format!("share/man/man1/{name}.1.gz"),
            gzip(roff.as_bytes()),
        ));
    }
    for (path, data) in &i.docs {
        v.push(Entry::file(
            format!("share/doc/nvprobe/{path}"),
            data.clone(),
        ));
    }
    for e in &mut v {
        e.path = format!("{top}/{}", e.path);
    }
    v.sort_by(|a, b| a.path.cmp(&b.path));
    v
}

/// The folders that hold `files` (each once, parents first).
pub fn dirs_of(files: &[Entry]) -> Vec<String> {
    let mut dirs = std::collections::BTreeSet::new();
    for f in files {
        let mut p = f.path.as_str();
        while let Some((parent, _)) = p.rsplit_once('/') {
            dirs.insert(parent.to_owned());
            p = parent;
        }
    }
    dirs.into_iter().collect()
}

/// DEBIAN/control. Installed-Size counts each file in KiB, rounded up,
/// and each folder as 1 KiB (as dpkg-gencontrol does).
pub fn control(i: &Inputs, files: &[Entry]) -> String {
    let kib: u64 = files
        .iter()
        .map(|f| (f.data.len() as u64).div_ceil(1024))
        .sum::<u64>()
        + dirs_of(files).len() as u64;
    let mut c = format!(
        "Package: nvprobe\n\
         Version: {}\n\
         Architecture: {}\n\
         Maintainer: {}\n\
         Installed-Size: {kib}\n\
         Depends: {}\n\
         Suggests: logrotate, procps\n\
         Section: admin\n\
         Priority: optional\n\
         Description: {SYNOPSIS}\n",
        i.deb_version(),
        i.needs.deb_arch,
        i.maintainer,
        i.needs.depends,
    );
    for (n, para) in DESCRIPTION.iter().enumerate() {
        if n > 0 {
            c.push_str(" .\n");
        }
        for line in wrap(para, 72) {
            c.push(' ');
            c.push_str(&line);
            c.push('\n');
        }
    }
    c
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for w in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + w.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(w);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// /usr/share/doc/nvprobe/copyright (machine-readable, DEP-5).
pub fn copyright() -> String {
    include_str!("copyright").to_owned()
}

/// changelog.Debian: one entry, for this build.
pub fn changelog(i: &Inputs) -> String {
    format!(
        "nvprobe ({}) unstable; urgency=medium\n\n  * Package built by `cargo xtask dist` from the source tree:\n    {}.\n\n -- {}  {}\n",
        i.deb_version(),
        i.version_line,
        i.maintainer,
        rfc2822(i.epoch)
    )
}

/// A time as Debian changelogs write it: `Wed, 02 Dec 2026 02:55:01 +0000`.
pub fn rfc2822(epoch: i64) -> String {
    let days = epoch.div_euclid(86_400);
    let secs = epoch.rem_euclid(86_400);
    let (y, m, d) = civil_date(days);
    // 1970-01-01 was a Thursday.
    let wday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days.rem_euclid(7) as usize];
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(m - 1) as usize];
    format!(
        "{wday}, {d:02} {month} {y} {:02}:{:02}:{:02} +0000",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's days-to-civil; nvprobe/build.rs dates `--version` the same
/// way).
fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The documentation dist ships, from the source tree ROOT: the README,
/// docs/ (with its pictures) and deploy/'s guides and examples (the unit
/// and the logrotate file are installed where they work instead; the
/// Containerfile builds from a source tree, not from the package).
pub fn docs(root: &std::path::Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut add = |rel: &str| -> anyhow::Result<()> {
        let data = std::fs::read(root.join(rel)).with_context(|| format!("reading {rel}"))?;
        out.push((rel.to_owned(), data));
        Ok(())
    };
    add("README.md")?;
    for (dir, exts) in [
        ("docs", &["md"][..]),
        ("docs/img", &["png"][..]),
        ("deploy", &["md"][..]),
        ("deploy/kubernetes", &["yaml"][..]),
        ("deploy/kubernetes/metrics-auth", &["yaml"][..]),
        ("deploy/prometheus", &["yml"][..]),
        ("deploy/grafana", &["json"][..]),
    ] {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
            .with_context(|| format!("reading {dir}/"))?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| exts.iter().any(|x| n.ends_with(&format!(".{x}"))))
            .collect();
        names.sort();
        for n in names {
            add(&format!("{dir}/{n}"))?;
        }
    }
    Ok(out)
}
