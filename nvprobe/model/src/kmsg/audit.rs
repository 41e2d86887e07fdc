//! The kernel's seccomp audit line (`type=1326`, AUDIT_SECCOMP): the one
//! place the kernel names the system call at which a filter's kill-thread
//! action ended a thread. A thread killed alone (`do_exit(SIGSYS)` in
//! kernel/seccomp.c, while other threads live) gets no signal, and the call
//! it was making reaches no tracepoint (the filter runs before them), so
//! this line is all that says which call it was. seccomp logs every kill
//! action (its `actions_logged` sysctl, `kill_thread kill_process` by
//! default); where no audit daemon takes the record, the kernel prints it:
//!
//! `audit: type=1326 audit(1796629076.915:1): auid=4294967295 uid=0 gid=0
//! ses=4294967295 pid=725 comm="python3" exe="/usr/bin/python3.12" sig=31
//! arch=c000003e syscall=16 compat=0 ip=0x7fa748b250bd code=0x80000000`
//! (seen on the H100, kernel 6.18).
//!
//! The fields are space-separated `key=value` words; the task's name and
//! program are "untrusted strings" (kernel/audit.c
//! `audit_log_untrustedstring`): quoted only when they hold no space,
//! quote or control byte, else written in hex, so no name can write a word
//! of its own. `pid` is the thread group's id (`task_tgid_nr`).

use serde::Serialize;

/// What a seccomp filter's action was (SECCOMP_RET_ACTION_FULL, uapi
/// linux/seccomp.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SeccompAction {
    /// SECCOMP_RET_KILL_PROCESS.
    KillProcess,
    /// SECCOMP_RET_KILL_THREAD: only the calling thread ends, unless it is
    /// the last one.
    KillThread,
    /// SECCOMP_RET_TRAP: a SIGSYS the process may handle.
    Trap,
    /// SECCOMP_RET_ERRNO: the call fails with an error number.
    Errno,
    /// SECCOMP_RET_USER_NOTIF, SECCOMP_RET_TRACE: a supervisor decides.
    Supervised,
    /// SECCOMP_RET_LOG, SECCOMP_RET_ALLOW: the call ran.
    Allowed,
}

impl SeccompAction {
    /// The action of an audit line's `code`.
    pub fn of(code: u32) -> Self {
        match code & 0xffff_0000 {
            0x8000_0000 => Self::KillProcess,
            0x0000_0000 => Self::KillThread,
            0x0003_0000 => Self::Trap,
            0x0005_0000 => Self::Errno,
            0x7fc0_0000 | 0x7ff0_0000 => Self::Supervised,
            _ => Self::Allowed,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::KillProcess => "kill_process",
            Self::KillThread => "kill_thread",
            Self::Trap => "trap",
            Self::Errno => "errno",
            Self::Supervised => "supervised",
            Self::Allowed => "allowed",
        }
    }
}

/// What a seccomp audit line says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SeccompAudit {
    /// The process (thread group) whose call the filter judged.
    pub pid: u32,
    /// The system call's number, by `arch`'s table.
    pub syscall: i64,
    /// Its name ("syscall N" for a number the table does not have).
    pub call: String,
    /// The call's audit architecture (AUDIT_ARCH_*).
    pub arch: u32,
    pub action: SeccompAction,
    /// The signal the action sends or ends the thread with (31, SIGSYS,
    /// for the kill and trap actions; 0 otherwise).
    pub signal: i32,
}

/// A seccomp audit line's parts, or None when `msg` is not one the kernel
/// printed (it starts `audit: type=1326 audit(`; the caller checks the
/// record's facility is the kernel's).
pub fn seccomp_audit(msg: &str) -> Option<SeccompAudit> {
    let rest = msg.strip_prefix("audit: type=1326 audit(")?;
    let (_, fields) = rest.split_once("): ")?;
    let (mut pid, mut sig, mut arch, mut nr, mut code) = (None, None, None, None, None);
    for w in fields.split(' ') {
        let Some((k, v)) = w.split_once('=') else {
            continue;
        };
        match k {
            "pid" => pid = v.parse::<u32>().ok(),
            "sig" => sig = v.parse::<i32>().ok(),
            "arch" => arch = u32::from_str_radix(v, 16).ok(),
            "syscall" => nr = v.parse::<i64>().ok(),
            "code" => {
                code = v
                    .strip_prefix("0x")
                    .and_then(|c| u32::from_str_radix(c, 16).ok())
            }
            _ => {}
        }
    }
    let (pid, arch, syscall, code) = (pid?, arch?, nr?, code?);
    let call = i32::try_from(syscall)
        .ok()
        .and_then(|n| crate::decode::seccomp_call(arch, n))
        .unwrap_or_else(|| format!("syscall {syscall}"));
    Some(SeccompAudit {
        pid,
        syscall,
        call,
        arch,
        action: SeccompAction::of(code),
        signal: sig.unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As printed on the H100 (tests/fixtures/gpu-host/h100-unseen2.txt).
    const KILL_PROCESS: &str = "audit: type=1326 audit(1796629076.915:1): auid=4294967295 uid=0 gid=0 ses=4294967295 pid=725 comm=\"python3\" exe=\"/usr/bin/python3.12\" sig=31 arch=c000003e syscall=16 compat=0 ip=0x7fa748b250bd code=0x80000000";

    #[test]
    fn the_kernels_line_names_the_call_and_the_action() {
        let a = seccomp_audit(KILL_PROCESS).unwrap();
        assert_eq!(
            (
                a.pid,
                a.syscall,
                a.call.as_str(),
                a.arch,
                a.action,
                a.signal
            ),
            (
                725,
                16,
                "ioctl",
                0xc000_003e,
                SeccompAction::KillProcess,
                31
            )
        );
        let t = KILL_PROCESS.replace("code=0x80000000", "code=0x0");
        assert_eq!(seccomp_audit(&t).unwrap().action, SeccompAction::KillThread);
        let e = KILL_PROCESS
            .replace("sig=31", "sig=0")
            .replace("code=0x80000000", "code=0x50001");
        assert_eq!(seccomp_audit(&e).unwrap().action, SeccompAction::Errno);
        // arm64's table; a number no table has.
        let arm = KILL_PROCESS
            .replace("arch=c000003e", "arch=c00000b7")
            .replace("syscall=16", "syscall=29");
        assert_eq!(seccomp_audit(&arm).unwrap().call, "ioctl");
        let odd = KILL_PROCESS.replace("syscall=16", "syscall=99999");
        assert_eq!(seccomp_audit(&odd).unwrap().call, "syscall 99999");
    }

    #[test]
    fn a_name_cannot_write_a_field_and_other_lines_are_not_read() {
        // A name with a space is written in hex by the kernel; a quoted
        // one holds no space, so its "pid=1" is not a word of its own.
        let named = KILL_PROCESS.replace("comm=\"python3\"", "comm=\"pid=1\"");
        assert_eq!(seccomp_audit(&named).unwrap().pid, 725);
        for msg in [
            "audit: type=1400 audit(1.2:3): apparmor=\"DENIED\" pid=5",
            "python3[725]: audit: type=1326 audit(1.1:1): pid=1 arch=c000003e syscall=16 code=0x0",
            "audit: type=1326 audit(1.1:1): pid=725 arch=c000003e code=0x0",
            "audit: type=1326 audit(1.1:1): pid=x arch=c000003e syscall=16 code=0x0",
            "",
        ] {
            assert_eq!(seccomp_audit(msg), None, "{msg}");
        }
    }
}
