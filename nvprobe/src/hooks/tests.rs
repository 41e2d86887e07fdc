//! `nvprobe hooks`' table, notes and BTF reading, over made-up folders.

use super::*;

#[test]
fn numbered_as_the_kernel_side() {
    let names: Vec<&str> = HOOKS.iter().map(|h| h.name).collect();
    assert_eq!(names.len(), nvprobe_common::HOOKS.len());
    assert_eq!(
        HOOKS[nvprobe_common::HOOK_RM_IOCTL as usize].name,
        "rm_ioctl"
    );
    assert_eq!(
        HOOKS[nvprobe_common::HOOK_UVM_IOCTL as usize].name,
        "uvm_unlocked_ioctl_entry"
    );
    assert!(
        HOOKS[..nvprobe_common::HOOK_FIRST_VMLINUX as usize]
            .iter()
            .all(|h| h.target != Target::Vmlinux)
    );
    assert!(
        HOOKS[nvprobe_common::HOOK_FIRST_VMLINUX as usize..]
            .iter()
            .all(|h| h.target == Target::Vmlinux)
    );
    assert_eq!(HOOKS[2].returns, Returns::NvStatus);
    assert_eq!(HOOKS[5].returns, Returns::Bool);
    assert_eq!(HOOKS[12].returns, Returns::Void);
    assert_eq!(HOOKS[14].returns, Returns::Ptr);
    assert_eq!(HOOKS[0].returns, Returns::Errno);
}

/// The H200's 580.159.04 modules (tests/fixtures/gpu-host): every hook
/// but the HMM-only one and request_free_mem_region (not in that
/// kernel's kallsyms) is present.
#[test]
fn the_h200_has_the_hook_symbols() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hosts/healthy");
    let v: DriverVersion = "580.159.04".parse().expect("version");
    let s = survey(&root, Some(&v)).expect("kallsyms");
    assert!(
        !s.iter()
            .any(|(h, _)| h.name == "nvidia_frontend_unlocked_ioctl"),
        "≤535 only"
    );
    let missing: Vec<&str> = s.iter().filter(|(_, p)| !*p).map(|(h, _)| h.name).collect();
    assert_eq!(
        missing,
        ["uvm_hmm_va_space_initialize", "request_free_mem_region"]
    );
    assert_eq!(
        describe(&s),
        "14/16 driver-hook symbols in /proc/kallsyms (missing: uvm_hmm_va_space_initialize (HMM builds only), request_free_mem_region)"
    );
    let old: DriverVersion = "535.104.05".parse().expect("version");
    let s = survey(&root, Some(&old)).expect("kallsyms");
    assert!(describe(&s).ends_with("so the driver layer cannot cover the ioctls"));
    // Driver version unknown: both nvidia entry points apply, one is enough.
    let s = survey(&root, None).expect("kallsyms");
    let d = describe(&s);
    assert!(
        d.contains("nvidia_frontend_unlocked_ioctl (drivers <= 535 only)"),
        "{d}"
    );
    assert!(!d.contains("cannot cover"), "{d}");
}

/// `btf_prototypes` on a folder, on a thread of its own: a read that
/// blocks fails the test (after a bound far past any real read) instead
/// of hanging it.
fn prototypes_of(dir: &Path) -> Result<usize, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let d = dir.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(btf_prototypes(&d).map(|v| v.len()));
    });
    rx.recv_timeout(std::time::Duration::from_secs(120))
        .expect("btf_prototypes returned (it blocked on the file)")
}

/// A private folder for a `--btf-dir`, removed when dropped.
struct BtfDir(std::path::PathBuf);

impl BtfDir {
    fn new() -> Self {
        let (d, _) = crate::safefs::private_temp_dir(&std::env::temp_dir(), "nvprobe-btfdir-")
            .expect("mkdtemp");
        Self(d)
    }
    fn fifo(&self, name: &str) -> std::path::PathBuf {
        let p = self.0.join(name);
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("mkfifo");
        p
    }
}

impl Drop for BtfDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Issue 27, item 5: a host without the driver says so per module,
/// with the evidence; a BTF folder without a module's BTF says that.
#[test]
fn each_module_is_said_loaded_or_not() {
    let root = BtfDir::new();
    let btf = root.0.join("sys/kernel/btf");
    std::fs::create_dir_all(&btf).expect("mkdir");
    std::fs::create_dir_all(root.0.join("sys/module/nvidia")).expect("mkdir");
    std::fs::write(btf.join("nvidia"), empty_btf()).expect("btf");
    let nv = module_state(&root.0, &btf, "nvidia");
    assert_eq!((nv.loaded, nv.btf, nv.hooks), (Some(true), true, 6));
    assert_eq!(
        module_note(&nv, Path::new("/sys/kernel/btf"), true),
        "module nvidia: loaded; BTF /sys/kernel/btf/nvidia"
    );
    // No /proc/modules: a kernel that cannot load modules.
    let uvm = module_state(&root.0, &btf, "nvidia_uvm");
    assert_eq!((uvm.loaded, uvm.btf), (Some(false), false));
    assert_eq!(
        module_note(&uvm, Path::new("/sys/kernel/btf"), true),
        "module nvidia_uvm: not loaded on this host (no /sys/module/nvidia_uvm, and this kernel cannot load modules (no /proc/modules)): its 7 hooks below have no symbol in kallsyms and no BTF to check. No modprobe can load it here: use a kernel that loads modules (or has the driver built in), or check another host's BTF with --btf-dir DIR (a copy of its /sys/kernel/btf)"
    );
    std::fs::create_dir_all(root.0.join("proc")).expect("mkdir");
    std::fs::write(root.0.join("proc/modules"), "nvidia_uvm 1 0 - Live 0x0\n").expect("w");
    let uvm = module_state(&root.0, &btf, "nvidia_uvm");
    assert_eq!(uvm.loaded, Some(true));
    assert!(
        module_note(&uvm, &btf, true).contains("loaded (listed in /proc/modules, though /sys/module/nvidia_uvm is missing), but without BTF"),
        "{}",
        module_note(&uvm, &btf, true)
    );
    std::fs::write(root.0.join("proc/modules"), "other 1 0 - Live 0x0\n").expect("w");
    let uvm = module_state(&root.0, &btf, "nvidia_uvm");
    assert!(
        module_note(&uvm, Path::new("/copy"), false).starts_with(
            "module nvidia_uvm: no BTF in /copy (no /copy/nvidia_uvm): the prototypes of its 7 hooks cannot be checked; copy /sys/kernel/btf/nvidia_uvm there from a host where the module is loaded; not loaded on this host (no /sys/module/nvidia_uvm, not in /proc/modules)"
        ),
        "{}",
        module_note(&uvm, Path::new("/copy"), false)
    );
    // A kernel that loads modules: modprobe is the remedy.
    assert!(
        module_note(&uvm, Path::new("/sys/kernel/btf"), true)
            .contains("not in /proc/modules): its 7 hooks below have no symbol in kallsyms and no BTF to check. Load the driver (modprobe nvidia_uvm), or"),
        "{}",
        module_note(&uvm, Path::new("/sys/kernel/btf"), true)
    );
}

/// BTF that parses: a header and an empty string section.
fn empty_btf() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0xEB9F_u16.to_le_bytes());
    b.extend_from_slice(&[1, 0]);
    for v in [24_u32, 0, 0, 0, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.push(0);
    b
}

/// Issue 23, item 5: `hooks --btf-dir` reads as `doctor --root` does.
/// A FIFO named vmlinux is refused at once (the old read waited for a
/// writer until killed).
#[test]
fn a_fifo_in_a_btf_dir_does_not_block() {
    let d = BtfDir::new();
    let vmlinux = d.fifo("vmlinux");
    let e = prototypes_of(&d.0).expect_err("a FIFO is refused");
    assert!(
        e.starts_with(&format!(
            "{}: a FIFO, not a regular file: not read (",
            vmlinux.display()
        )),
        "{e}"
    );
    assert!(e.contains("cp /sys/kernel/btf/vmlinux DIR/"), "{e}");
    // In a module's place too: refused, not taken for a module without BTF.
    std::fs::remove_file(&vmlinux).expect("rm");
    std::fs::write(&vmlinux, empty_btf()).expect("write vmlinux");
    std::fs::write(d.0.join("nvidia_uvm"), empty_btf()).expect("write nvidia_uvm");
    assert_eq!(prototypes_of(&d.0), Ok(HOOKS.len()), "a BTF folder reads");
    d.fifo("nvidia");
    let e = prototypes_of(&d.0).expect_err("a FIFO module file is refused");
    assert!(e.contains("/nvidia: a FIFO, not a regular file"), "{e}");
}

/// A link to /dev/zero is not followed (the old read ran out of memory).
#[test]
fn a_link_out_of_a_btf_dir_is_not_followed() {
    let d = BtfDir::new();
    std::os::unix::fs::symlink("/dev/zero", d.0.join("vmlinux")).expect("ln");
    let e = prototypes_of(&d.0).expect_err("a link out is refused");
    assert!(
        e.contains("vmlinux is a link out of the tree (-> /dev/zero): not read"),
        "{e}"
    );
}

/// A sparse file over the bound is refused on its size, before any read
/// (the old read took 2.1 GB for a 2 GiB one).
#[test]
fn a_btf_file_over_the_bound_is_refused_unread() {
    let d = BtfDir::new();
    let vmlinux = d.0.join("vmlinux");
    std::fs::File::create(&vmlinux)
        .and_then(|f| f.set_len(BTF_CAP + 1))
        .expect("a sparse file");
    let e = prototypes_of(&d.0).expect_err("too large");
    // The size named is the file's own, read off its inode: a read up to
    // the bound could not know it.
    assert!(
        e.starts_with(&format!(
            "{} is 67108865 bytes, more than the 64 MiB nvprobe reads of a BTF file: not read",
            vmlinux.display()
        )),
        "{e}"
    );
}

fn fixture_prototypes() -> Vec<(String, String, Option<String>)> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/gpu-host/h200-580.159.04-hook-prototypes.txt");
    std::fs::read_to_string(p)
        .expect("fixture")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.splitn(3, '\t').collect();
            (
                f[0].to_owned(),
                f[1].to_owned(),
                (f[2] != "-").then(|| f[2].to_owned()),
            )
        })
        .collect()
}

/// The table's prototypes are the real driver's, as its BTF gives them
/// (H200, 580.159.04), for every hook that has BTF.
#[test]
fn the_table_matches_the_real_btf() {
    let fx = fixture_prototypes();
    assert_eq!(fx.len(), HOOKS.len());
    let mut checked = 0;
    for (name, module, proto) in &fx {
        let h = HOOKS.iter().find(|h| h.name == name).expect("in the table");
        assert_eq!(h.target.module(), module);
        if let Some(p) = proto {
            assert_eq!(
                parse_prototype(p),
                parse_prototype(h.prototype),
                "{name}: BTF has {p}, the table {}",
                h.prototype
            );
            checked += 1;
        }
    }
    assert!(checked >= 11, "{checked}");
}

/// The real 535.261.03 module's BTF (the kernel tier's HMM kernel, whose
/// tree gives the modules BTF): every hook it has is the table's
/// current prototype or one of its older ones, and the older ones are
/// what 535 has.
#[test]
fn the_table_knows_the_real_535_prototypes() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/vm-6.1-hmm-535-hook-prototypes.txt");
    let text = std::fs::read_to_string(p).expect("fixture");
    let mut older = Vec::new();
    let mut checked = 0;
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = l.splitn(3, '\t').collect();
        let h = HOOKS.iter().find(|h| h.name == f[0]).expect("in the table");
        assert_eq!(h.target.module(), f[1]);
        if f[2] == "-" {
            continue;
        }
        match known_form(h, f[2]) {
            Some("older") => older.push(h.name),
            Some(_) => {}
            None => panic!(
                "{}: 535's BTF has {}, the table {}",
                h.name, f[2], h.prototype
            ),
        }
        checked += 1;
    }
    assert_eq!(checked, 15);
    assert_eq!(
        older,
        ["uvm_va_space_register_gpu", "uvm_gpu_retain_by_uuid"]
    );
}

/// The definition of `name` in C source: from the start of its line to
/// the closing parenthesis, without storage and inline keywords.
fn c_definition(src: &str, name: &str) -> Option<String> {
    let pat = format!(" {name}(");
    let mut from = 0;
    while let Some(i) = src[from..].find(&pat) {
        let at = from + i;
        let line_start = src[..at].rfind('\n').map_or(0, |n| n + 1);
        let close = at + src[at..].find(')')?;
        let after = src[close + 1..].trim_start();
        let head = &src[line_start..at];
        if after.starts_with('{') && !head.trim_start().starts_with("return") && !head.contains('=')
        {
            let text = src[line_start..=close]
                .replace("static ", "")
                .replace("noinline ", "")
                .replace("__init ", "");
            return Some(text);
        }
        from = at + pat.len();
    }
    None
}

/// The stand-in modules of the VM tier define each hooked function with
/// the real prototype: the BTF's where it has one, the table's where
/// the RM core has no BTF.
#[test]
fn the_stand_ins_match_the_real_prototypes() {
    let kmod = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/kmod");
    let nv = std::fs::read_to_string(kmod.join("nvidia.c")).expect("nvidia.c");
    let uvm = std::fs::read_to_string(kmod.join("nvidia-uvm.c")).expect("nvidia-uvm.c");
    let mut checked = 0;
    for (name, module, proto) in fixture_prototypes() {
        let src = match module.as_str() {
            "nvidia" => &nv,
            "nvidia_uvm" => &uvm,
            _ => continue,
        };
        let Some(def) = c_definition(src, &name) else {
            // Hooks the stand-ins do not carry: the <=535 frontend
            // entry point only.
            assert_eq!(
                name, "nvidia_frontend_unlocked_ioctl",
                "{name} missing from the stand-in"
            );
            continue;
        };
        let want = proto.unwrap_or_else(|| {
            HOOKS
                .iter()
                .find(|h| h.name == name)
                .expect("hook")
                .prototype
                .to_owned()
        });
        assert_eq!(
            parse_prototype(&def),
            parse_prototype(&want),
            "{name}: the stand-in has {def}, the driver {want}"
        );
        checked += 1;
    }
    assert!(checked >= 12, "{checked}");
}
