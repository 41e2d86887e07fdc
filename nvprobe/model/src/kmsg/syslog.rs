//! The kernel log as syslog(2) gives it (`SYSLOG_ACTION_READ_ALL`: the
//! whole buffer as text, each time), for hosts where /dev/kmsg cannot be
//! opened but syslog(2) answers: a container, whose device cgroup refuses
//! /dev/kmsg whatever its capabilities, while CAP_SYSLOG (or
//! `kernel.dmesg_restrict=0`) lets it read the same buffer this way.
//!
//! Each line is `<PRIO>[SECONDS.MICROS] message` (`[SECONDS.MICROS][T123]`
//! with CONFIG_PRINTK_CALLER). A record of several lines (a newline in a
//! task's name, quoted by a segfault line or an Xid's `name=`) has the
//! prefix again on each line: [`records`] joins them back into the one
//! record /dev/kmsg would show, so that a process cannot make a line of
//! its own (a driver line, in the kernel's facility) out of a newline. The
//! text carries no sequence numbers: [`Cursor`] finds the records a read
//! has that the last did not by where the last read's records are.

use std::borrow::Cow;

use super::KmsgRecord;

/// One line's prefix: (priority, µs), and the message after it.
fn split_line(line: &str) -> Option<(u32, u64, &str)> {
    let (prio, rest) = line.strip_prefix('<')?.split_once('>')?;
    let prio: u32 = prio.parse().ok()?;
    let (time, rest) = rest.strip_prefix('[')?.split_once(']')?;
    let (secs, micros) = time.trim().split_once('.')?;
    if micros.len() != 6 {
        return None;
    }
    let ts_us = secs
        .parse::<u64>()
        .ok()?
        .checked_mul(1_000_000)?
        .checked_add(micros.parse::<u64>().ok()?)?;
    // The caller id of CONFIG_PRINTK_CALLER: "[  T123]" or "[    C1]".
    let rest = match rest.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((id, r)) if caller_id(id.trim_start()) => r,
        _ => rest,
    };
    Some((prio, ts_us, rest.strip_prefix(' ').unwrap_or(rest)))
}

/// "T123" (a task) or "C1" (a CPU).
fn caller_id(id: &str) -> bool {
    id.len() > 1
        && matches!(id.as_bytes()[0], b'T' | b'C')
        && id[1..].bytes().all(|b| b.is_ascii_digit())
}

/// The records of syslog(2)'s text, oldest first; `seq` is the record's
/// index in `text`. Lines without the prefix (printk.time off) are not
/// records. A record of several lines (a newline in its text: a task's
/// name in a segfault line, or in an Xid's `name=`) has its prefix again
/// on each line; consecutive lines of the same prefix are joined into one
/// record with `\x0a`, as /dev/kmsg writes the newline, so that a line
/// after a newline is never read as a record of its own and the task-name
/// check sees the whole message (two records of one priority logged in
/// the same microsecond are joined too: the first one's kind is kept).
pub fn records(text: &str) -> Vec<KmsgRecord<'_>> {
    let mut out: Vec<KmsgRecord<'_>> = Vec::new();
    // The record being read: its priority, time, and lines.
    let mut cur: Option<(u32, u64, Vec<&str>)> = None;
    for line in text.lines() {
        let Some((prio, ts_us, msg)) = split_line(line) else {
            continue;
        };
        match &mut cur {
            Some((p, t, lines)) if *p == prio && *t == ts_us => lines.push(msg),
            _ => {
                if let Some(c) = cur.replace((prio, ts_us, vec![msg])) {
                    out.push(record(c, out.len()));
                }
            }
        }
    }
    if let Some(c) = cur {
        out.push(record(c, out.len()));
    }
    out
}

fn record((prio, ts_us, lines): (u32, u64, Vec<&str>), seq: usize) -> KmsgRecord<'_> {
    KmsgRecord {
        level: (prio & 7) as u8,
        facility: prio >> 3,
        seq: seq as u64,
        ts_us,
        msg: match lines.as_slice() {
            [one] => Cow::Borrowed(*one),
            _ => Cow::Owned(lines.join("\\x0a")),
        },
    }
}

/// Where a reader of syslog(2)'s text is: the last records it saw (their
/// times and contents), found again in a later read of the whole buffer
/// by where they are, not by time alone (two CPUs logging at once may
/// store their records out of time order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    tail: Vec<(u64, u64)>,
}

/// Records of the last read that the next one looks for.
const TAIL: usize = 4;

/// What one read had that the last did not.
#[derive(Debug)]
pub struct Read<'a> {
    pub new: Vec<KmsgRecord<'a>>,
    /// The last read's records are gone from a full buffer: records
    /// written between the two reads may have been overwritten before
    /// this one.
    pub gap: bool,
}

/// A record's time and a hash of what it says.
fn key(r: &KmsgRecord<'_>) -> (u64, u64) {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (r.facility, r.level, r.msg.as_ref()).hash(&mut h);
    (r.ts_us, h.finish())
}

impl Cursor {
    /// A cursor past every record of `text` (what was logged before the
    /// reader started is not news).
    pub fn at_end(text: &str) -> Self {
        let keys: Vec<(u64, u64)> = records(text).iter().map(key).collect();
        Cursor {
            tail: keys[keys.len().saturating_sub(TAIL)..].to_vec(),
        }
    }

    /// The records of `text` (a later read of the whole buffer) past the
    /// cursor, which moves past them. `full`: the read filled the buffer
    /// it was given (the log is full, so records are being overwritten).
    pub fn advance<'a>(&mut self, text: &'a str, full: bool) -> Read<'a> {
        let all = records(text);
        let keys: Vec<(u64, u64)> = all.iter().map(key).collect();
        let (from, gap) = match self.found_in(&keys) {
            Some(end) => (end + 1, false),
            None => match self.tail.last() {
                // Nothing was there before: all of it is new.
                None => (0, false),
                // Our place is gone: overwritten (a full buffer), or the
                // buffer was cleared (`dmesg -c`). What is later than the
                // last record seen is new.
                Some(&(last, _)) => (
                    keys.iter().position(|k| k.0 > last).unwrap_or(keys.len()),
                    full,
                ),
            },
        };
        if !keys.is_empty() || !full {
            self.tail = keys[keys.len().saturating_sub(TAIL)..].to_vec();
        }
        Read {
            new: all.into_iter().skip(from).collect(),
            gap,
        }
    }

    /// Where the last read's tail ends in `keys` (its latest place), also
    /// when only its newest records are left at the start of the buffer.
    fn found_in(&self, keys: &[(u64, u64)]) -> Option<usize> {
        if self.tail.is_empty() {
            return None;
        }
        (0..keys.len()).rev().find(|&end| {
            let n = self.tail.len().min(end + 1);
            keys[end + 1 - n..=end] == self.tail[self.tail.len() - n..]
        })
    }
}

/// The offset from the kernel log's stamps (its local clock) to
/// CLOCK_MONOTONIC, from the records read: each record read at `read_at`
/// says the offset is at most `read_at - stamp` (it was logged before it
/// was read) and, when read by a poll, at least `previous read - stamp`
/// (it was not there at the previous read). /dev/kmsg wakes its reader at
/// once, so its smallest upper bound is close; a poll leaves up to its
/// interval, so there a prior is taken within the bounds: 0, the stamps
/// read as CLOCK_MONOTONIC (both count from boot; on the GPU hosts the
/// two were within 3 ms, while CLOCK_MONOTONIC_RAW was 88 ms away), which
/// NTP's slewing moves apart over a long uptime: then the bounds decide.
#[derive(Clone, Debug, Default)]
pub struct Offsets {
    /// (upper, lower) bounds of the last [`Offsets::KEPT`] records, ns.
    bounds: std::collections::VecDeque<(i128, i128)>,
}

impl Offsets {
    /// Records whose bounds are kept.
    pub const KEPT: usize = 32;

    /// A record stamped `stamp_ns`, read at `read_at`, logged after
    /// `after` (the previous read; None for a reader woken at once).
    pub fn sample(&mut self, stamp_ns: i128, read_at: i128, after: Option<i128>) {
        if self.bounds.len() == Self::KEPT {
            self.bounds.pop_front();
        }
        let lower = after.map_or(i128::MIN, |a| a - stamp_ns);
        self.bounds.push_back((read_at - stamp_ns, lower));
    }

    /// The offset: `prior` within the bounds, or the smallest upper bound
    /// (no prior, or bounds that disagree: the clocks moved).
    pub fn estimate(&self, prior: Option<i128>) -> i128 {
        let upper = self.bounds.iter().map(|b| b.0).min().unwrap_or(0);
        let lower = self.bounds.iter().map(|b| b.1).max().unwrap_or(i128::MIN);
        match prior {
            Some(p) if lower <= upper => p.clamp(lower, upper),
            _ => upper,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const XID: &str = "NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus.";

    #[test]
    fn lines_with_and_without_the_caller_id() {
        let text = format!(
            "<6>[    1.000001] Linux version 6.12\n<4>[  123.456789][  T42] {XID}\n<14>[  124.000000] NVRM: Xid (PCI:0000:00:06): 13, written by a user\nno prefix here\n"
        );
        let r = records(&text);
        assert_eq!(r.len(), 3);
        assert_eq!((r[1].facility, r[1].level, r[1].ts_us), (0, 4, 123_456_789));
        assert_eq!(r[1].msg, XID);
        // The user facility (1): written to /dev/kmsg by a process.
        assert_eq!((r[2].facility, r[2].level), (1, 6));
        assert_eq!(r[0].ts_us, 1_000_001);
    }

    #[test]
    fn a_newline_in_a_task_name_makes_no_driver_line() {
        use crate::kmsg::driver_line;
        // A task named "evil\nNVRM: Xid …" that segfaults: syslog(2)
        // repeats the prefix on the second line of the one record.
        let text = format!(
            "<6>[   50.000100] evil\n<6>[   50.000100] {XID}[77]: segfault at 0 ip 0\n<3>[   51.000000] {XID}\n"
        );
        let r = records(&text);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].msg, format!("evil\\x0a{XID}[77]: segfault at 0 ip 0"));
        assert!(!driver_line(&r[0].msg));
        assert!(driver_line(&r[1].msg));
        // A task named "NVRM: Xid 79\n": the segfault line's first line
        // starts like the driver's; joined, the task's [pid] shows.
        let text = "<6>[   60.000000] NVRM: Xid 79\n<6>[   60.000000] [4242]: segfault at 0 ip 0 sp 0 error 4\n";
        let r = records(text);
        assert_eq!(r.len(), 1);
        assert!(!driver_line(&r[0].msg), "{}", r[0].msg);
        // A real Xid quoting a task named "x\nNVRM: GPU has fallen off the
        // bus": one record, the driver's Xid, nothing after the newline.
        let text = "<4>[   70.000000] NVRM: Xid (PCI:0000:00:06): 13, pid=9, name=x\n<4>[   70.000000] NVRM: GPU has fallen off the bus., Graphics Exception\n";
        let r = records(text);
        assert_eq!(r.len(), 1);
        assert!(r[0].msg.starts_with("NVRM: Xid (PCI:0000:00:06): 13,"));
        assert_eq!(
            crate::kmsg::kind_of(&r[0].msg),
            Some(crate::kmsg::LogKind::Xid)
        );
    }

    #[test]
    fn the_cursor_gives_each_record_once() {
        let first =
            format!("<6>[    1.000000] a\n<3>[    2.000000] {XID}\n<4>[    2.000000] {XID}\n");
        let first = first.as_str();
        let mut c = Cursor::at_end(first);
        assert!(c.advance(first, false).new.is_empty(), "nothing new");
        // A third record of the same microsecond, then a later one.
        let second = format!("{first}<3>[    2.000000] b\n<3>[    3.000000] {XID}\n");
        let r = c.advance(&second, false);
        let got: Vec<&str> = r.new.iter().map(|x| x.msg.as_ref()).collect();
        assert_eq!(got, vec!["b", XID]);
        assert!(!r.gap);
        assert!(c.advance(&second, false).new.is_empty(), "given once");
    }

    #[test]
    fn records_out_of_time_order_are_given_once() {
        // Two CPUs logged at once: 105 µs stored before 103 µs.
        let first = "<6>[    1.000105] B\n<6>[    1.000103] C\n";
        let mut c = Cursor::at_end(first);
        for _ in 0..3 {
            assert!(c.advance(first, false).new.is_empty(), "B again");
        }
        // A record stamped before the last one seen, stored after it.
        let second = format!("{first}<6>[    1.000104] D\n");
        let r = c.advance(&second, false);
        let got: Vec<&str> = r.new.iter().map(|x| x.msg.as_ref()).collect();
        assert_eq!(got, vec!["D"]);
    }

    #[test]
    fn a_wrapped_buffer_is_a_gap_and_a_cleared_one_is_not() {
        let mut c = Cursor::at_end("<6>[    5.000000] a\n<6>[    5.500000] b\n");
        // Full, and our records gone: overwritten.
        let wrapped = format!("<3>[    7.000000] {XID}\n");
        let r = c.advance(&wrapped, true);
        assert!(r.gap);
        assert_eq!(r.new.len(), 1);
        // Only the newest of the last read left at the start: no gap.
        let later = format!("<3>[    7.000000] {XID}\n<6>[    8.000000] c\n");
        let r = c.advance(&later, true);
        assert!(!r.gap);
        assert_eq!(r.new.len(), 1);
        // Cleared (`dmesg -c`), then a new record: news, and no gap.
        let r = c.advance("<6>[    9.000000] d\n", false);
        assert!(!r.gap);
        assert_eq!(r.new.len(), 1);
        // Cleared and empty: nothing, and what comes next is news.
        assert!(c.advance("", false).new.is_empty());
        assert_eq!(c.advance("<6>[    9.500000] e\n", false).new.len(), 1);
    }

    #[test]
    fn a_polled_record_takes_the_prior_within_its_bounds() {
        // Logged at 10 ms on the kernel's clock; the polls were at 5 ms
        // and 160 ms (monotonic): the offset is in [-5, 150] ms.
        let mut o = Offsets::default();
        o.sample(10_000_000, 160_000_000, Some(5_000_000));
        assert_eq!(o.estimate(None), 150_000_000);
        assert_eq!(o.estimate(Some(0)), 0);
        // A clock that drifted 40 ms ahead of the stamps: the bounds rule.
        let mut o = Offsets::default();
        o.sample(10_000_000, 90_000_000, Some(45_000_000));
        assert_eq!(o.estimate(Some(0)), 35_000_000);
        // A second record read sooner narrows the upper bound.
        o.sample(200_000_000, 240_100_000, Some(230_000_000));
        assert_eq!(o.estimate(Some(0)), 35_000_000);
        // Bounds that disagree (the clocks moved): the upper one.
        o.sample(300_000_000, 320_000_000, Some(319_000_000));
        assert_eq!(o.estimate(Some(0)), 20_000_000);
    }

    #[test]
    fn a_woken_reader_keeps_the_smallest_upper_bound() {
        let mut o = Offsets::default();
        o.sample(1_000, 110_000, None);
        o.sample(2_000, 111_500, None);
        assert_eq!(o.estimate(None), 109_000);
        for i in 0..40 {
            o.sample(i * 1000, i * 1000 + 200_000, None);
        }
        assert_eq!(o.estimate(None), 200_000, "only the last 32 count");
    }

    #[test]
    fn hostile_text_neither_panics_nor_forges() {
        for t in [
            "<",
            "<99999999999999999999>[1.000000] x",
            "<0>[18446744073709551615.999999] NVRM: x",
            "<0>[1.00000] NVRM: short micros",
            "<0>[ 1.000000][T] x",
            "\u{0}<0>[1.000000]",
        ] {
            let _ = records(t);
        }
        assert!(records("<0>[18446744073709551615.999999] NVRM: x").is_empty());
    }
}
