//! The kernel's log buffer through syslog(2) (`klogctl`), for where
//! /dev/kmsg cannot be opened (a container's device cgroup refuses the node
//! whatever its capabilities): the same records, as text
//! (`nvprobe_model::kmsg::syslog` reads it). Each call is checked against
//! CAP_SYSLOG where `kernel.dmesg_restrict` is 1.
//!
//! Every call walks the whole buffer (the kernel formats each record to
//! size it): about 0.55 ms for 1,000 records here, whatever the length
//! asked for, and `SYSLOG_ACTION_SIZE_UNREAD` 0.19 ms; so a follower asks
//! seldom.

/// The most read (the buffer is the kernel's `log_buf_len`, 128 KiB to a
/// few MiB).
const MAX: usize = 32 << 20;

const SYSLOG_ACTION_READ_ALL: libc::c_int = 3;
const SYSLOG_ACTION_SIZE_BUFFER: libc::c_int = 10;

/// The buffer's size (what [`read_all`] needs to read it whole).
pub fn size() -> Result<usize, String> {
    // SAFETY: SYSLOG_ACTION_SIZE_BUFFER takes no buffer.
    let n = unsafe { libc::klogctl(SYSLOG_ACTION_SIZE_BUFFER, std::ptr::null_mut(), 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok((n as usize).clamp(4096, MAX))
}

/// The buffer as text (its newest `buf.len()` bytes), without consuming
/// it (other readers see the same).
pub fn read_all(buf: &mut [u8]) -> Result<std::borrow::Cow<'_, str>, String> {
    let len = libc::c_int::try_from(buf.len()).unwrap_or(libc::c_int::MAX);
    // SAFETY: the kernel writes at most `len` bytes into `buf`.
    let n = unsafe { libc::klogctl(SYSLOG_ACTION_READ_ALL, buf.as_mut_ptr().cast(), len) };
    if n < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(String::from_utf8_lossy(&buf[..n as usize]))
}

/// The whole buffer, read once.
pub fn text() -> Result<String, String> {
    let mut buf = vec![0u8; size()?];
    read_all(&mut buf).map(std::borrow::Cow::into_owned)
}
