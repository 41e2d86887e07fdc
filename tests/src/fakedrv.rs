//! A stand-in for /dev/nvidiactl and /dev/nvidia0 served over FUSE (test
//! fixture). The kernel's FUSE "restricted ioctl" path copies `_IOC_SIZE`
//! bytes in and out, which is exactly the shape of NVIDIA escapes, so a
//! traced process sees what it would see from the driver: ret 0 and a
//! status in the struct, or an errno.
//!
//! The answers follow the escape semantics of docs/NVIDIA-ABI.md (§1.3,
//! §2): unknown escapes and wrong sizes give -EINVAL, RM_ALLOC of a root
//! client rewrites hClass 0 to 0x41 and returns an RM-made handle.

use std::{
    ffi::OsStr,
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, UNIX_EPOCH},
};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, IoctlFlags,
    OpenFlags, ReplyAttr, ReplyDirectory, ReplyEntry, ReplyIoctl, ReplyOpen, Request,
};

pub const FILES: [(&str, u64); 3] = [("nvidiactl", 2), ("nvidia0", 3), ("nvidia-uvm", 4)];
/// A regular file whose read hangs this long, like a /proc/driver/nvidia
/// file of a stuck driver (doctor must not hang on it).
pub const HANG_FILE: (&str, u64) = ("information", 5);
pub const HANG_READ_MS: u64 = 6000;

/// The controls the stand-in knows, and what it answers (NV_STATUS).
pub const CONTROL_ANSWERS: &[(u32, u32)] = &[
    (0x0, 0x0),          // NV0000_CTRL_CMD_NULL: NV_OK
    (0x101, 0x0),        // SYSTEM_GET_BUILD_VERSION: NV_OK
    (0x214, 0x0),        // GPU_GET_PROBED_IDS: NV_OK
    (0x215, 0x26),       // GPU_ATTACH_IDS: NV_ERR_INVALID_DEVICE
    (0x2080_014A, 0x56), // GPU_GET_GID_INFO: NV_ERR_NOT_SUPPORTED (benign)
    (0x2080_0110, 0x0),  // GPU_GET_NAME_STRING: NV_OK after SLOW_CONTROL_MS
];
/// Unknown controls get NV_ERR_INVALID_COMMAND, as RM answers.
pub const UNKNOWN_CONTROL: u32 = 0x24;
/// GPU_GET_NAME_STRING is answered slowly, to give a call a known minimum
/// duration.
pub const SLOW_CONTROL: u32 = 0x2080_0110;
pub const SLOW_CONTROL_MS: u64 = 20;
/// GPU_GET_SHORT_NAME_STRING hangs this long: a call for stall reports.
pub const HANG_CONTROL: u32 = 0x2080_0111;
pub const HANG_CONTROL_MS: u64 = 2500;

/// RM_ALLOC answers by class.
pub const ALLOC_ANSWERS: &[(u32, u32)] = &[
    (0x41, 0x0),    // NV01_ROOT_CLIENT
    (0x80, 0x0),    // NV01_DEVICE_0
    (0x2080, 0x0),  // NV20_SUBDEVICE_0
    (0xC86F, 0x1A), // HOPPER_CHANNEL_GPFIFO_A: NV_ERR_INSUFFICIENT_RESOURCES
];
pub const UNKNOWN_CLASS: u32 = 0x22; // NV_ERR_INVALID_CLASS
/// SYS_PARAMS accepts this memblock size; others get -EBUSY (nv.c does so
/// when a different value was set system-wide).
pub const MEMBLOCK_SIZE: u64 = 0x800_0000;

const TTL: Duration = Duration::from_secs(3600);

pub struct FakeNv {
    next_client: AtomicU32,
}

impl Default for FakeNv {
    fn default() -> Self {
        Self {
            next_client: AtomicU32::new(1),
        }
    }
}

fn attr(ino: u64, dir: bool) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: if dir {
            FileType::Directory
        } else {
            FileType::RegularFile
        },
        perm: if dir { 0o755 } else { 0o666 },
        nlink: if dir { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    if let Some(s) = b.get_mut(off..off + 4) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

fn get32(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4)
        .map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")))
        .unwrap_or(0)
}

impl FakeNv {
    /// Answer one escape: Ok(out bytes) for ret 0, Err(errno) otherwise.
    pub fn escape(&self, cmd: u32, input: &[u8], out_size: usize) -> Result<Vec<u8>, Errno> {
        if (cmd >> 8) & 0xff != 0x46 {
            return Err(Errno::ENOTTY);
        }
        let nr = cmd & 0xff;
        let size = ((cmd >> 16) & 0x3fff) as usize;
        let mut b = input.to_vec();
        b.resize(out_size.max(size), 0);
        match (nr, size) {
            (0x2B, 32 | 48) => {
                let status_at = if size == 32 { 28 } else { 40 };
                let mut class = get32(&b, 12);
                if matches!(class, 0 | 1) {
                    class = 0x41;
                    put32(&mut b, 12, class);
                }
                if class == 0x41 && get32(&b, 8) == 0 {
                    let n = self.next_client.fetch_add(1, Ordering::Relaxed);
                    put32(&mut b, 8, 0xC1D0_0000 | n);
                }
                let st = ALLOC_ANSWERS
                    .iter()
                    .find(|(c, _)| *c == class)
                    .map_or(UNKNOWN_CLASS, |a| a.1);
                put32(&mut b, status_at, st);
            }
            (0x2A, 32) => {
                let control = get32(&b, 8);
                if control == SLOW_CONTROL {
                    std::thread::sleep(Duration::from_millis(SLOW_CONTROL_MS));
                }
                if control == HANG_CONTROL {
                    // NVFIXTURE_HANG_MS (for `serve`): a longer hang.
                    let ms = std::env::var("NVFIXTURE_HANG_MS")
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(HANG_CONTROL_MS);
                    std::thread::sleep(Duration::from_millis(ms));
                }
                let st = CONTROL_ANSWERS
                    .iter()
                    .find(|(c, _)| *c == control)
                    .map_or(UNKNOWN_CONTROL, |a| a.1);
                put32(&mut b, 28, st);
            }
            (0x29, 16) => put32(&mut b, 12, 0),
            (0xCE | 0xCF, 16) => put32(&mut b, 12, 0),
            (0xC9, 4) => {}
            (0xD6, 8) => {
                let v = u64::from_le_bytes(b[0..8].try_into().expect("8 bytes"));
                if v != MEMBLOCK_SIZE {
                    return Err(Errno::EBUSY);
                }
            }
            (0xC8, s) if s > 0 && s % 72 == 0 => {
                b.iter_mut().for_each(|x| *x = 0);
                b[0] = 1; // valid
                put32(&mut b, 4, 0); // domain
                b[8] = 0x17; // bus
                b[9] = 0; // slot
                b[10] = 0; // function
                b[12..14].copy_from_slice(&0x10deu16.to_le_bytes());
                b[14..16].copy_from_slice(&0x2335u16.to_le_bytes()); // H200
                put32(&mut b, 16, 0x1700);
                put32(&mut b, 56, 0);
            }
            (0xD2, 72) => {
                put32(&mut b, 4, 1);
                let v = b"580.159.04\0";
                b[8..8 + v.len()].copy_from_slice(v);
            }
            // XFER: the wrapper comes back unchanged; FUSE cannot reach the
            // inner pointer, so the caller stands in for the write-back.
            (0xD3, 16) => {}
            _ => return Err(Errno::EINVAL),
        }
        b.truncate(out_size);
        Ok(b)
    }
}

impl Filesystem for FakeNv {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match FILES
            .iter()
            .chain([&HANG_FILE])
            .find(|(n, _)| OsStr::new(n) == name)
        {
            Some((_, ino)) if parent == INodeNo::ROOT => {
                reply.entry(&TTL, &attr(*ino, false), Generation(0))
            }
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if ino == INodeNo::ROOT {
            reply.attr(&TTL, &attr(1, true));
        } else if FILES.iter().chain([&HANG_FILE]).any(|(_, i)| *i == ino.0) {
            reply.attr(&TTL, &attr(ino.0, false));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // Direct I/O: reads reach `read` whatever the (zero) file size.
        let flags = if ino.0 == HANG_FILE.1 {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::empty()
        };
        reply.opened(FileHandle(0), flags);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino != INodeNo::ROOT {
            reply.error(Errno::ENOENT);
            return;
        }
        let mut entries = vec![
            (1u64, FileType::Directory, "."),
            (1, FileType::Directory, ".."),
        ];
        entries.extend(
            FILES
                .iter()
                .chain([&HANG_FILE])
                .map(|(n, i)| (*i, FileType::RegularFile, *n)),
        );
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        _size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: fuser::ReplyData,
    ) {
        if ino.0 != HANG_FILE.1 {
            reply.error(Errno::EINVAL);
            return;
        }
        std::thread::sleep(Duration::from_millis(HANG_READ_MS));
        let text = b"Model: \t\t NVIDIA H200\nDevice Minor: \t 0\n";
        reply.data(text.get(offset as usize..).unwrap_or(&[]));
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: ReplyIoctl,
    ) {
        match self.escape(cmd, in_data, out_size as usize) {
            Ok(out) => reply.ioctl(0, &out),
            Err(e) => reply.error(e),
        }
    }
}

/// Mount the stand-in at `dir` and serve it on a background thread until
/// the returned session is dropped.
pub fn mount(dir: &std::path::Path) -> std::io::Result<fuser::BackgroundSession> {
    let mut cfg = fuser::Config::default();
    cfg.mount_options = vec![fuser::MountOption::FSName("nvprobe-fakedrv".into())];
    fuser::spawn_mount(FakeNv::default(), dir, &cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_like_the_driver() {
        let f = FakeNv::default();
        // RM_ALLOC NVOS21 with hClass 0: rewritten to 0x41, RM handle, NV_OK.
        let out = f.escape(0xc020_462b, &[0u8; 32], 32).expect("ok");
        assert_eq!(get32(&out, 12), 0x41);
        assert_eq!(get32(&out, 8) & 0xfff0_0000, 0xc1d0_0000);
        assert_eq!(get32(&out, 28), 0);
        let mut c = [0u8; 32];
        put32(&mut c, 8, 0x215);
        assert_eq!(get32(&f.escape(0xc020_462a, &c, 32).expect("ok"), 28), 0x26);
        assert_eq!(f.escape(0xc008_46d6, &[0u8; 8], 8), Err(Errno::EBUSY));
        assert_eq!(f.escape(0xc030_462a, &[0u8; 48], 48), Err(Errno::EINVAL));
        assert_eq!(f.escape(0x5401, &[], 0), Err(Errno::ENOTTY));
    }
}
