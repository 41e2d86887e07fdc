//! dist's layout and checks on a package made of stand-in parts (no
//! build): the checks pass on what the layout makes and catch what a
//! broken layout would make; the archives are the same bytes twice.

use std::path::PathBuf;

use super::{
    check::{self, Kind, Listed},
    deps::Needs,
    layout::{self, Entry, Inputs},
};

const SUBS: [&str; 3] = ["watch", "top", "doctor"];

fn subs() -> Vec<String> {
    SUBS.map(str::to_owned).to_vec()
}

fn repo_file(rel: &str) -> String {
    std::fs::read_to_string(crate::root_dir().join(rel)).expect(rel)
}

/// Inputs as dist gathers them, with stand-ins for what the build makes.
fn inputs() -> Inputs {
    let mut pages = vec![("nvprobe".to_owned(), ".TH NVPROBE 1\n".to_owned())];
    for s in SUBS {
        pages.push((format!("nvprobe-{s}"), format!(".TH NVPROBE-{s} 1\n")));
    }
    Inputs {
        version: "0.1.0".into(),
        version_line: "nvprobe 0.1.0 (commit 0123456789ab, built 2025-12-02)".into(),
        epoch: 1_764_644_101,
        maintainer: "nvprobe maintainers <maint@example.org>".into(),
        needs: Needs {
            deb_arch: "amd64",
            cpu: "x86_64",
            libraries: vec!["libc.so.6".into(), "libgcc_s.so.1".into()],
            depends: "libc6 (>= 2.34), libgcc-s1 (>= 4.2)".into(),
        },
        binary: b"\x7fELF stand-in".to_vec(),
        unit: repo_file("deploy/systemd/nvprobe.service"),
        logrotate: repo_file("deploy/logrotate/nvprobe"),
        pages,
        bash: "complete -F _nvprobe nvprobe\n".into(),
        zsh: "#compdef nvprobe\n".into(),
        fish: "complete -c nvprobe\n".into(),
        docs: layout::docs(&crate::root_dir()).expect("the tree's docs"),
        third_party: "aya 0.14.0 MIT OR Apache-2.0\n".into(),
    }
}

/// How an archive lists these entries (root:root, folders 0755), the
/// tarball's top folder taken off.
fn listed(files: &[Entry], top: Option<&str>) -> Vec<Listed> {
    let strip = |p: &str| match top {
        Some(t) => p
            .strip_prefix(&format!("{t}/"))
            .expect("under top")
            .to_owned(),
        None => p.to_owned(),
    };
    let mut v: Vec<Listed> = layout::dirs_of(files)
        .iter()
        .filter(|d| Some(d.as_str()) != top)
        .map(|d| Listed {
            path: strip(d),
            dir: true,
            mode: 0o755,
            owner: "root/root".into(),
        })
        .collect();
    v.extend(files.iter().map(|f| Listed {
        path: strip(&f.path),
        dir: false,
        mode: f.mode,
        owner: "root/root".into(),
    }));
    v
}

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xtask-dist-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp");
    d
}

#[test]
fn the_checks_pass_on_what_the_layout_makes() {
    let i = inputs();
    let deb = layout::deb_files(&i).expect("deb files");
    assert_eq!(
        check::files(Kind::Deb, &listed(&deb, None), &subs()),
        Vec::<String>::new()
    );
    let tar = layout::tar_files(&i);
    let top = i.tar_stem();
    assert_eq!(top, "nvprobe-0.1.0-x86_64-linux-gnu");
    assert_eq!(
        check::files(Kind::Tarball, &listed(&tar, Some(&top)), &subs()),
        Vec::<String>::new()
    );
    // The Debian paths, and a page per subcommand, gzipped.
    let paths: Vec<&str> = deb.iter().map(|e| e.path.as_str()).collect();
    for p in [
        "usr/bin/nvprobe",
        "usr/lib/systemd/system/nvprobe.service",
        "etc/logrotate.d/nvprobe",
        "usr/share/man/man1/nvprobe-doctor.1.gz",
        "usr/share/bash-completion/completions/nvprobe",
        "usr/share/zsh/vendor-completions/_nvprobe",
        "usr/share/fish/vendor_completions.d/nvprobe.fish",
        "usr/share/doc/nvprobe/copyright",
        "usr/share/doc/nvprobe/changelog.Debian.gz",
        "usr/share/doc/nvprobe/docs/SCHEMA.md.gz",
        "usr/share/doc/nvprobe/docs/img/h200-startup.png",
        "usr/share/doc/nvprobe/deploy/kubernetes/nvprobe-daemonset.yaml",
    ] {
        assert!(paths.contains(&p), "{p} in {paths:#?}");
    }
    // The tarball holds the same files: the same names less the prefix
    // and the Debian-only parts, its docs uncompressed.
    let tar_paths: Vec<String> = tar
        .iter()
        .map(|e| {
            e.path
                .strip_prefix(&format!("{top}/"))
                .expect("top")
                .to_owned()
        })
        .collect();
    for p in &paths {
        let p = p.strip_prefix("usr/").unwrap_or(p);
        let p = p.replace("zsh/vendor-completions", "zsh/site-functions");
        if p.ends_with("changelog.Debian.gz") || p.starts_with("share/lintian/") {
            continue;
        }
        let plain = p.strip_suffix(".md.gz").map(|s| format!("{s}.md"));
        assert!(
            tar_paths.contains(&p) || plain.is_some_and(|m| tar_paths.contains(&m)),
            "{p} not in the tarball"
        );
    }
    assert_eq!(
        tar_paths.len(),
        paths.len() - 2,
        "all but the Debian changelog and lintian's overrides"
    );
}

#[test]
fn a_subcommand_without_a_page_and_bad_modes_are_caught() {
    let mut i = inputs();
    i.pages.retain(|(n, _)| n != "nvprobe-top");
    i.pages.push(("nvprobe-gone".into(), String::new()));
    let deb = layout::deb_files(&i).expect("deb files");
    let mut l = listed(&deb, None);
    for e in &mut l {
        if e.path == "etc/logrotate.d/nvprobe" {
            e.mode = 0o600;
        }
        if e.path == "usr/share/doc" {
            e.owner = "builder/builder".into();
        }
    }
    l.push(Listed {
        path: "usr/local/bin/stray".into(),
        dir: false,
        mode: 0o644,
        owner: "root/root".into(),
    });
    let p = check::files(Kind::Deb, &l, &subs());
    assert_eq!(
        p,
        [
            "usr/share/man/man1/nvprobe-top.1.gz is missing: every subcommand `nvprobe --help` lists has a page",
            "usr/share/man/man1/nvprobe-gone.1.gz: a page for no subcommand that `nvprobe --help` lists",
            "etc/logrotate.d/nvprobe has mode 0600, not 0644",
            "usr/local/bin/stray: a file no install of nvprobe has",
            "usr/share/doc is owned by builder/builder, not root/root",
        ]
    );
}

#[test]
fn the_control_part_says_what_the_package_needs_and_runs_nothing() {
    let i = inputs();
    let deb = layout::deb_files(&i).expect("deb files");
    let text = layout::control(&i, &deb);
    let fields = check::parse_fields(&text);
    assert_eq!(fields["Depends"], "libc6 (>= 2.34), libgcc-s1 (>= 4.2)");
    assert_eq!(fields["Version"], "0.1.0-1");
    assert!(
        text.lines().all(|l| l.len() <= 80),
        "control lines of at most 80 characters:\n{text}"
    );
    let members = [
        "control".to_owned(),
        "md5sums".to_owned(),
        "conffiles".to_owned(),
    ];
    let conf = "/etc/logrotate.d/nvprobe\n";
    assert_eq!(
        check::control(&fields, &members, conf, "0.1.0-1", "amd64"),
        Vec::<String>::new()
    );
    let mut more = members.to_vec();
    more.push("postinst".into());
    let mut f2 = fields.clone();
    f2.insert("Recommends".into(), "nvidia-driver".into());
    f2.insert("Depends".into(), "libc6 (>= 2.34), libssl3".into());
    let p = check::control(&f2, &more, "", "0.1.0-1", "arm64");
    assert_eq!(p.len(), 5, "{p:#?}");
    assert!(p[0].starts_with("control field Architecture"), "{p:#?}");
    assert!(p[1].starts_with("control field Depends"), "{p:#?}");
    assert!(p[2].starts_with("control field Recommends"), "{p:#?}");
    assert!(p[3].starts_with("conffiles"), "{p:#?}");
    assert!(p[4].starts_with("control member postinst"), "{p:#?}");
}

#[test]
fn the_unit_runs_each_installs_binary() {
    let unit = repo_file("deploy/systemd/nvprobe.service");
    assert_eq!(check::unit(Kind::Tarball, &unit), Vec::<String>::new());
    let packaged = layout::packaged_unit(&unit).expect("one ExecStart");
    assert_eq!(check::unit(Kind::Deb, &packaged), Vec::<String>::new());
    assert_eq!(check::unit(Kind::Tarball, &packaged).len(), 1);
    // Only that line changes.
    let diff: Vec<(&str, &str)> = unit
        .lines()
        .zip(packaged.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(diff.len(), 1, "{diff:?}");
    let e = layout::packaged_unit("[Service]\nExecStart=/opt/nvprobe watch\n")
        .expect_err("no /usr/local/bin line");
    assert!(
        e.to_string()
            .contains("has 0 lines starting with `ExecStart=/usr/local/bin/nvprobe `")
    );
}

#[test]
fn the_tarball_is_the_same_bytes_twice_and_reads_back_right() {
    let d = tmp("tar");
    let i = inputs();
    let files = layout::tar_files(&i);
    let (a, b) = (d.join("a.tar.gz"), d.join("b.tar.gz"));
    super::archive::tarball(&files, &a, i.epoch).expect("tarball");
    super::archive::tarball(&files, &b, i.epoch).expect("tarball");
    let bytes = std::fs::read(&a).expect("read");
    assert_eq!(bytes, std::fs::read(&b).expect("read"));
    check::tarball(&a, &i.tar_stem(), &subs()).expect("the check passes");
    // Every entry under the top folder, root's, dated SOURCE_DATE_EPOCH.
    let gz = flate2::read::GzDecoder::new(&bytes[..]);
    let mut n = 0;
    for e in tar::Archive::new(gz).entries().expect("entries") {
        let e = e.expect("entry");
        let h = e.header();
        assert_eq!(h.mtime().expect("mtime"), i.epoch as u64);
        assert_eq!((h.uid().expect("uid"), h.gid().expect("gid")), (0, 0));
        n += 1;
    }
    assert!(n > files.len(), "folders are entries too");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_deb_is_the_same_bytes_twice_and_passes_its_check() {
    if !std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|p| p.join("dpkg-deb").is_file())
    {
        eprintln!("skipping: no dpkg-deb here (apt-get install dpkg)");
        return;
    }
    let d = tmp("deb");
    let i = inputs();
    let files = layout::deb_files(&i).expect("files");
    let control = layout::control(&i, &files);
    let (a, b) = (d.join("a.deb"), d.join("b.deb"));
    super::archive::deb(&files, &control, &d.join("work-a"), &a, i.epoch).expect("deb");
    super::archive::deb(&files, &control, &d.join("work-b"), &b, i.epoch).expect("deb");
    assert_eq!(
        std::fs::read(&a).expect("read"),
        std::fs::read(&b).expect("read"),
        "the same package from the same files"
    );
    check::deb(&a, &subs(), "0.1.0-1", "amd64").expect("the check passes");
    // The check reads the package: one for two subcommands fails it.
    let e = check::deb(&a, &["watch".to_owned()], "0.1.0-1", "amd64").expect_err("extra pages");
    assert!(
        e.to_string()
            .contains("nvprobe-top.1.gz: a page for no subcommand"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn dates_and_the_help_read_as_they_should() {
    assert_eq!(
        layout::rfc2822(1_764_644_101),
        "Tue, 02 Dec 2025 02:55:01 +0000"
    );
    assert_eq!(
        layout::rfc2822(951_782_400),
        "Tue, 29 Feb 2000 00:00:00 +0000"
    );
    assert_eq!(layout::rfc2822(0), "Thu, 01 Jan 1970 00:00:00 +0000");
    let help = "Trace\n\nUsage: nvprobe <COMMAND>\n\nCommands:\n  watch   Trace every\n          process\n  top     A live view\n  help    Print this\n\nOptions:\n  -h, --help\n";
    assert_eq!(
        check::subcommands_in_help(help).expect("commands"),
        ["watch", "top"]
    );
    assert!(check::subcommands_in_help("Usage: nvprobe\n").is_err());
    let changelog = layout::changelog(&inputs());
    assert!(changelog.starts_with("nvprobe (0.1.0-1) unstable; urgency=medium\n"));
    assert!(changelog.ends_with(
        " -- nvprobe maintainers <maint@example.org>  Tue, 02 Dec 2025 02:55:01 +0000\n"
    ));
    assert!(changelog.lines().all(|l| l.len() <= 80), "{changelog}");
}
