//! apt with a configuration of its own, for what the tiers fetch: the
//! kernel tier's Debian kernels and their headers, the kernel source,
//! NVIDIA's open module and libcuda (sources list, package lists and
//! downloads under `/var/cache/nvprobe-vm/apt/`), and the test tier's
//! Prometheus (under `target/tools/apt/`). The machine's apt sources,
//! lists and installed packages are neither read nor changed: packages
//! are only downloaded (`apt-get download`) and unpacked (`dpkg-deb -x`),
//! never installed.
//!
//! What must be installed on the machine (the tools: qemu, make, gcc, …)
//! goes through the machine's own apt, in `host_install`.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::Context;

use crate::{output, sh};

/// The kernel tier's cache (one per machine, shared by worktrees).
pub const CACHE: &str = "/var/cache/nvprobe-vm";

/// The archive key the sources are signed with, where the machine has it
/// (Debian); elsewhere apt's trusted keys decide.
const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// A private apt: its folder and its sources.
pub struct Apt {
    dir: PathBuf,
    /// With trixie and contrib/non-free (NVIDIA's packages), or bookworm's
    /// main alone.
    nvidia: bool,
}

impl Apt {
    /// The kernel tier's (root: the machine's cache).
    pub fn kernel_tier() -> Apt {
        Apt {
            dir: Path::new(CACHE).join("apt"),
            nvidia: true,
        }
    }

    /// The test tier's tools (no root needed: under target/).
    pub fn tools() -> Apt {
        Apt {
            dir: crate::target_dir().join("tools/apt"),
            nvidia: false,
        }
    }

    /// bookworm (its kernels, point releases and security updates: 6.12
    /// comes through bookworm-security) and, for NVIDIA's packages, trixie
    /// and contrib and non-free; bookworm preferred.
    fn sources(&self) -> String {
        let signed = if Path::new(DEBIAN_KEYRING).is_file() {
            format!(" [signed-by={DEBIAN_KEYRING}]")
        } else {
            String::new()
        };
        let extra = if self.nvidia { " contrib non-free" } else { "" };
        let mut s = format!(
            "deb{signed} http://deb.debian.org/debian bookworm main{extra}\n\
             deb{signed} http://deb.debian.org/debian bookworm-updates main\n\
             deb{signed} http://deb.debian.org/debian-security bookworm-security main\n"
        );
        if self.nvidia {
            s.push_str(&format!(
                "deb{signed} http://deb.debian.org/debian trixie main contrib non-free\n"
            ));
        }
        s
    }

    /// `prog` (apt-get, apt-cache) with this configuration.
    pub fn cmd(&self, prog: &str) -> anyhow::Result<Command> {
        let dir = &self.dir;
        fs::create_dir_all(dir.join("lists/partial"))?;
        fs::create_dir_all(dir.join("cache/archives/partial"))?;
        let list = dir.join("sources.list");
        let want = self.sources();
        if fs::read_to_string(&list).ok().as_deref() != Some(want.as_str()) {
            // Lists of other sources would answer for these: none until the
            // next update.
            let _ = fs::remove_dir_all(dir.join("lists"));
            fs::create_dir_all(dir.join("lists/partial"))?;
            fs::write(&list, want).with_context(|| list.display().to_string())?;
        }
        // Empty: no list or pin of the machine's is read.
        let parts = dir.join("empty.d");
        fs::create_dir_all(&parts)?;
        let mut c = Command::new(prog);
        // Nothing of the machine's apt: no sources, pins or installed packages.
        // (Downloads into folders of our own run as root: apt's _apt user
        // cannot write there.)
        c.env("DEBIAN_FRONTEND", "noninteractive").args([
            format!("-oDir::Etc::SourceList={}", list.display()),
            format!("-oDir::Etc::SourceParts={}", parts.display()),
            "-oDir::Etc::Preferences=/dev/null".into(),
            format!("-oDir::Etc::PreferencesParts={}", parts.display()),
            "-oAPT::Sandbox::User=root".into(),
            "-oDir::State::status=/dev/null".into(),
            format!("-oDir::State::Lists={}", dir.join("lists").display()),
            format!("-oDir::Cache={}", dir.join("cache").display()),
            "-oAPT::Default-Release=bookworm".into(),
        ]);
        Ok(c)
    }

    /// Refresh the private package lists.
    pub fn update(&self) -> anyhow::Result<()> {
        sh(self
            .cmd("apt-get")?
            .args(["update", "-qq"])
            .stdout(Stdio::null()))
        .with_context(|| {
            format!(
                "apt-get update (sources of its own, {})",
                self.dir.display()
            )
        })
    }

    /// Download `what` (`name` or `name=version`) into `dir`.
    pub fn download(&self, dir: &Path, what: &[String]) -> anyhow::Result<()> {
        sh(self
            .cmd("apt-get")?
            .current_dir(dir)
            .arg("download")
            .args(what)
            .stdout(Stdio::null()))
        .with_context(|| format!("apt-get download {}", what.join(" ")))
    }

    /// A package's field (`Depends`) as the private lists give it for the
    /// candidate version.
    pub fn field(&self, pkg: &str, name: &str) -> anyhow::Result<String> {
        let out = output(
            self.cmd("apt-cache")?
                .args(["show", "--no-all-versions", pkg]),
        )
        .with_context(|| {
            format!(
                "apt-cache show {pkg} (sources of its own, {})",
                self.dir.display()
            )
        })?;
        let key = format!("{name}: ");
        Ok(out
            .lines()
            .find_map(|l| l.strip_prefix(&key))
            .unwrap_or_default()
            .to_owned())
    }
}

/// The newest version the kernel tier's sources offer of `pkg` (apt's
/// candidate prefers bookworm's own suite to its security updates).
pub fn newest(pkg: &str) -> anyhow::Result<String> {
    // madison lists the versions newest first: "pkg | 6.1.192-3 | URL …".
    let out = output(cmd("apt-cache")?.args(["madison", pkg])).unwrap_or_default();
    out.lines()
        .find_map(|l| l.split('|').nth(1).map(|v| v.trim().to_owned()))
        .filter(|v| !v.is_empty())
        .with_context(|| format!("apt (the kernel tier's own sources) has no {pkg}"))
}

/// The kernel tier's apt, for the functions below.
pub fn cmd(prog: &str) -> anyhow::Result<Command> {
    Apt::kernel_tier().cmd(prog)
}

pub fn update() -> anyhow::Result<()> {
    Apt::kernel_tier().update()
}

pub fn download(dir: &Path, what: &[String]) -> anyhow::Result<()> {
    Apt::kernel_tier().download(dir, what)
}

pub fn field(pkg: &str, name: &str) -> anyhow::Result<String> {
    Apt::kernel_tier().field(pkg, name)
}

/// The package names of a Depends field, first of each alternative, no
/// versions.
pub fn dep_names(depends: &str) -> Vec<String> {
    depends
        .split(',')
        .filter_map(|d| d.split('|').next())
        .filter_map(|d| d.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The `.deb` in `dir` whose name starts with `prefix`.
pub fn deb(dir: &Path, prefix: &str) -> anyhow::Result<PathBuf> {
    fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name().is_some_and(|n| {
                n.to_string_lossy().starts_with(prefix) && n.to_string_lossy().ends_with(".deb")
            })
        })
        .with_context(|| format!("the downloaded {prefix} package in {}", dir.display()))
}

pub fn unpack(deb: &Path, into: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(into)?;
    sh(Command::new("dpkg-deb").arg("-x").arg(deb).arg(into))
}

/// Install tools on the machine with its own apt (root), refreshing its
/// lists once if the first try fails (lists that predate a package, or
/// were never fetched).
pub fn host_install(pkgs: &[&str]) -> anyhow::Result<()> {
    let run = |args: &[&str]| {
        sh(Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(args)
            .stdout(Stdio::null()))
    };
    let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
    args.extend_from_slice(pkgs);
    run(&args).or_else(|first| {
        run(&["update", "-qq"]).with_context(|| format!("{first:#}; then apt-get update"))?;
        run(&args)
            .with_context(|| format!("apt-get install {} (after apt-get update)", pkgs.join(" ")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depends_fields_give_package_names() {
        let d = "linux-base (>= 4.12~), linux-headers-6.12.117+deb12-common (= 6.12.117-1~deb12u1), \
                 linux-image-6.12.117+deb12-amd64 (= 6.12.117-1~deb12u1) | linux-image-6.12.117+deb12-amd64-unsigned (= 6.12.117-1~deb12u1), \
                 linux-kbuild-6.12.117+deb12, gcc-12";
        assert_eq!(
            dep_names(d),
            [
                "linux-base",
                "linux-headers-6.12.117+deb12-common",
                "linux-image-6.12.117+deb12-amd64",
                "linux-kbuild-6.12.117+deb12",
                "gcc-12"
            ]
        );
        assert!(dep_names("").is_empty());
    }
}
