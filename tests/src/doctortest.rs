//! Helpers the doctor tests share: the nvprobe binary under test (or
//! NVPROBE_BIN, to run the tests against another build), private temp
//! folders, and a planter for the predictable paths old builds used.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::harness::bin;

pub fn nvprobe() -> PathBuf {
    std::env::var_os("NVPROBE_BIN").map_or_else(|| bin("nvprobe"), PathBuf::from)
}

/// A private folder of the test's own (mkdtemp, 0700), removed at the
/// end, kept when the test fails (see [`crate::harness::TestDir`]).
pub struct Tmp(pub PathBuf);

impl Tmp {
    pub fn new(tag: &str) -> Self {
        let t = std::env::temp_dir().join(format!("nvprobe-test-{tag}-XXXXXX"));
        Self(nix::unistd::mkdtemp(&t).expect("mkdtemp"))
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        crate::harness::remove_test_dir(&self.0);
    }
}

/// Before exec, in the child: make TMP/PREFIX<its pid>/keep.txt, what a
/// local user could have planted at the old predictable name (the pid is
/// known in the child only; no allocation there).
pub fn plant_at_child_pid(cmd: &mut Command, tmp: &Path, prefix: &str) {
    use std::os::unix::{ffi::OsStrExt as _, process::CommandExt as _};
    let mut base = tmp.as_os_str().as_bytes().to_vec();
    base.push(b'/');
    base.extend_from_slice(prefix.as_bytes());
    assert!(base.len() < 400);
    // SAFETY: the closure makes only system calls (getpid, mkdir, open,
    // close) on a stack buffer.
    unsafe {
        cmd.pre_exec(move || {
            let mut buf = [0u8; 512];
            let mut n = base.len();
            buf[..n].copy_from_slice(&base);
            let mut pid = libc::getpid() as u32;
            let mut digits = [0u8; 10];
            let mut d = 0;
            loop {
                digits[d] = b'0' + (pid % 10) as u8;
                d += 1;
                pid /= 10;
                if pid == 0 {
                    break;
                }
            }
            while d > 0 {
                d -= 1;
                buf[n] = digits[d];
                n += 1;
            }
            buf[n] = 0;
            libc::mkdir(buf.as_ptr().cast(), 0o755);
            for (i, b) in b"/keep.txt\0".iter().enumerate() {
                buf[n + i] = *b;
            }
            let fd = libc::open(
                buf.as_ptr().cast(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o644,
            );
            if fd >= 0 {
                libc::close(fd);
            }
            Ok(())
        });
    }
}
