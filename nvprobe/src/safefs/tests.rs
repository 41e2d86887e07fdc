use std::os::unix::fs::{PermissionsExt as _, symlink};

use super::*;

struct Tmp(PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
fn tmp(tag: &str) -> Tmp {
    let (p, _) = private_temp_dir(&std::env::temp_dir(), &format!("nvprobe-safefs-{tag}-"))
        .expect("mkdtemp");
    Tmp(p)
}

/// Both ways of resolving (openat2, and the walk where the kernel has
/// no openat2) agree, on every kind of link.
#[test]
fn links_inside_are_followed_links_out_are_not() {
    let t = tmp("links");
    let (root, outside) = (t.0.join("root"), t.0.join("outside"));
    std::fs::create_dir_all(root.join("usr/lib")).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("secret"), "secret").expect("write");
    std::fs::write(root.join("usr/lib/libcuda.so.580"), "lib").expect("write");
    symlink("libcuda.so.580", root.join("usr/lib/libcuda.so.1")).expect("ln");
    symlink("usr/lib", root.join("lib")).expect("ln");
    symlink("../../kmsg.txt", root.join("usr/lib/up")).expect("ln");
    std::fs::write(root.join("kmsg.txt"), "log").expect("write");
    symlink(outside.join("secret"), root.join("abs")).expect("ln");
    symlink("../outside/secret", root.join("rel-out")).expect("ln");
    symlink("/etc", root.join("etc")).expect("ln");
    symlink("loop", root.join("loop")).expect("ln");
    let rootfd = open_root(&root).expect("root");
    for how in [How::Auto, How::WalkOnly] {
        let read = |rel: &str| -> Result<Vec<u8>> {
            let p = resolve_at(rootfd.as_fd(), Path::new(rel), false, how)?;
            let st = fstat(p.as_fd())?;
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                return Err(SafeReadError::NotRegular(file_kind(st.st_mode)));
            }
            read_to_cap(reopen(p.as_fd())?, CAP)
        };
        assert_eq!(read("usr/lib/libcuda.so.1").as_deref(), Ok(&b"lib"[..]));
        assert_eq!(read("lib/libcuda.so.1").as_deref(), Ok(&b"lib"[..]));
        assert_eq!(read("usr/lib/up").as_deref(), Ok(&b"log"[..]));
        assert_eq!(
            read("abs"),
            Err(SafeReadError::LinkOutside {
                link: "abs".into(),
                target: outside.join("secret").display().to_string()
            })
        );
        assert_eq!(
            read("rel-out"),
            Err(SafeReadError::LinkOutside {
                link: "rel-out".into(),
                target: "../outside/secret".into()
            })
        );
        assert_eq!(
            read("etc/shadow"),
            Err(SafeReadError::LinkOutside {
                link: "etc".into(),
                target: "/etc".into()
            })
        );
        assert_eq!(read("missing"), Err(SafeReadError::NotFound));
        assert_eq!(read("kmsg.txt/x"), Err(SafeReadError::NotFound));
        assert_eq!(read("usr"), Err(SafeReadError::NotRegular("a folder")));
        assert!(matches!(read("loop"), Err(SafeReadError::Io(_))));
    }
    assert_eq!(
        SafeReadError::LinkOutside {
            link: "kmsg.txt".into(),
            target: "/root/secret".into()
        }
        .describe("kmsg.txt"),
        "kmsg.txt is a link out of the tree (-> /root/secret): not read"
    );
}

/// A file as the process whose root it is sees it: an absolute link (a
/// container's `/etc/ld.so.preload -> /etc/real.preload`) and `..` above
/// the root resolve inside it, never to the host's file of that name; a
/// FIFO or a folder is refused, a file over the cap is TooLarge.
#[test]
fn a_file_is_read_as_the_process_in_its_root_sees_it() {
    let t = tmp("seen");
    let (root, outside) = (t.0.join("root"), t.0.join("outside"));
    std::fs::create_dir_all(root.join("etc")).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(root.join("etc/real.preload"), "/lib/libshim.so\n").expect("write");
    std::fs::write(outside.join("secret"), "secret").expect("write");
    symlink("/etc/real.preload", root.join("etc/ld.so.preload")).expect("ln");
    symlink("../../../etc/real.preload", root.join("etc/up")).expect("ln");
    symlink(outside.join("secret"), root.join("etc/abs-out")).expect("ln");
    let fifo = CString::new(root.join("etc/fifo").into_os_string().into_vec()).expect("path");
    // SAFETY: NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");
    assert_eq!(
        read_seen_in(&root, "etc/ld.so.preload", CAP).as_deref(),
        Ok(&b"/lib/libshim.so\n"[..])
    );
    assert_eq!(
        read_seen_in(&root, "etc/up", CAP).as_deref(),
        Ok(&b"/lib/libshim.so\n"[..])
    );
    // The host path the link names does not exist inside the root.
    assert_eq!(
        read_seen_in(&root, "etc/abs-out", CAP),
        Err(SafeReadError::NotFound)
    );
    assert!(matches!(
        read_seen_in(&root, "etc/fifo", CAP),
        Err(SafeReadError::NotRegular(_))
    ));
    assert!(matches!(
        read_seen_in(&root, "etc", CAP),
        Err(SafeReadError::NotRegular(_))
    ));
    assert_eq!(
        read_seen_in(&root, "etc/ld.so.preload", 4),
        Err(SafeReadError::TooLarge(4))
    );
}

/// A FIFO is refused at once (no wait for a writer); a file over the
/// cap is TooLarge; a gzip bomb stops at its cap.
#[test]
fn fifos_and_large_files_are_not_read() {
    let t = tmp("fifo");
    let root = &t.0;
    nix::unistd::mkfifo(
        &root.join("kmsg.txt"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .expect("mkfifo");
    let started = std::time::Instant::now();
    assert_eq!(
        read_capped(root, "kmsg.txt", CAP),
        Err(SafeReadError::NotRegular("a FIFO"))
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    std::fs::write(root.join("big"), vec![b'x'; 1000]).expect("write");
    assert_eq!(
        read_capped(root, "big", 999),
        Err(SafeReadError::TooLarge(999))
    );
    assert_eq!(read_capped(root, "big", 1000).map(|v| v.len()), Ok(1000));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    io::Write::write_all(&mut gz, &vec![0u8; 8 << 20]).expect("gz");
    std::fs::write(root.join("config.gz"), gz.finish().expect("gz")).expect("write");
    let rp = root.to_path_buf();
    assert_eq!(
        read_gz_noted(&rp, "config.gz", CAP, 1 << 20),
        Err(SafeReadError::TooLarge(1 << 20))
    );
    assert_eq!(
        take_notes(&rp),
        [("config.gz".to_owned(), SafeReadError::TooLarge(1 << 20)),]
    );
}

/// New files and folders: never over something that is there, never
/// through a link, 0600/0700 whatever the umask.
#[test]
fn creates_new_paths_only() {
    let t = tmp("create");
    let d = t.0.join("out");
    let fd = create_new_dir(&d).expect("new");
    assert!(create_new_dir(&d).is_err(), "exists");
    let mode = |p: &Path| {
        std::fs::symlink_metadata(p)
            .expect("stat")
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode(&d), 0o700);
    let mut f = create_file_at(fd.as_fd(), Path::new("a/b/c.txt")).expect("file");
    io::Write::write_all(&mut f, b"x").expect("write");
    assert_eq!(mode(&d.join("a/b")), 0o700);
    assert_eq!(mode(&d.join("a/b/c.txt")), 0o600);
    assert!(create_file_at(fd.as_fd(), Path::new("a/b/c.txt")).is_err());
    symlink(&t.0, d.join("l")).expect("ln");
    assert!(create_file_at(fd.as_fd(), Path::new("l/x")).is_err());
    assert!(create_file_at(fd.as_fd(), Path::new("l")).is_err());
    assert!(create_file_at(fd.as_fd(), Path::new("../x")).is_err());
    assert!(create_file_at(fd.as_fd(), Path::new("/x")).is_err());
    assert!(!t.0.join("x").exists());
    let victim = t.0.join("victim");
    symlink(&victim, t.0.join("dangling")).expect("ln");
    assert!(create_new_file(&t.0.join("dangling")).is_err());
    assert!(!victim.exists(), "the link was not followed");
    let (p, _) = private_temp_dir(&t.0, "x-").expect("mkdtemp");
    assert_eq!(mode(&p), 0o700);
    assert!(p.file_name().is_some_and(|n| n.len() == 8));
}
