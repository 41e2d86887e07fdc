//! The subcommands, one file each. Every error becomes an exit code here,
//! in one place ([`Fail`], codes from [`exit`], meanings in [`EXIT_CODES`],
//! which every `--help` shows), and everything the subcommands write to
//! standard output goes through [`print`], so that a reader that went away
//! (`nvprobe schema | head -1`) ends nvprobe quietly.

mod common;
pub mod decode;
pub mod diff;
pub mod doctor;
pub mod export;
pub mod generate;
pub mod hooks;
pub mod top;
pub mod watch;

pub use self::common::*;
