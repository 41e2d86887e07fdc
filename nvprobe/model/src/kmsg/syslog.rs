//! The kernel log as syslog(2) gives it (`SYSLOG_ACTION_READ_ALL`: the
//! whole buffer as text, each time), for hosts where /dev/kmsg cannot be
//! opened but syslog(2) answers: a container, whose device cgroup refuses
//! /dev/kmsg whatever its capabilities, while CAP_SYSLOG (or
//! `kernel.dmesg_restrict=0`) lets it read the same buffer this way.
//!
//! Each line is `<PRIO>[SECONDS.MICROS] message` (`[SECONDS.MICROS][T123]`
//! with CONFIG_PRINTK_CALLER). A record of several lines (a task's name
//! with a newline in it, in a segfault line) has the prefix again on each
//! line, so a line with the very same time as the line before it, when
//! that one is not the driver's, is taken for its continuation, not a
//! record of its own: a process cannot forge a driver line that way (the
//! rule `doctor` applies to a saved log). The text carries no sequence
//! numbers: [`Cursor`] finds the records a read has that the last did not
//! by their times.

use std::borrow::Cow;

use super::{KmsgRecord, driver_line};

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

/// The records of syslog(2)'s text, oldest first, continuations folded
/// into their record (dropped); `seq` is the record's index in `text`.
/// Lines without the prefix (printk.time off) are not records.
pub fn records(text: &str) -> Vec<KmsgRecord<'_>> {
    let mut out: Vec<KmsgRecord<'_>> = Vec::new();
    // The time of the last record's first line, and whether it was the
    // driver's.
    let mut prev: Option<(u64, bool)> = None;
    for line in text.lines() {
        let Some((prio, ts_us, msg)) = split_line(line) else {
            continue;
        };
        if matches!(prev, Some((t, false)) if t == ts_us) {
            continue;
        }
        let facility = prio >> 3;
        prev = Some((ts_us, facility == 0 && driver_line(msg)));
        out.push(KmsgRecord {
            level: (prio & 7) as u8,
            facility,
            seq: out.len() as u64,
            ts_us,
            msg: Cow::Borrowed(msg),
        });
    }
    out
}

/// Where a reader of syslog(2)'s text is: the time of the last record it
/// saw and how many records of that time it saw (several may share one
/// microsecond).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    last: Option<(u64, usize)>,
}

/// What one read had that the last did not.
#[derive(Debug)]
pub struct Read<'a> {
    pub new: Vec<KmsgRecord<'a>>,
    /// The oldest record of the read is newer than the last one seen:
    /// records written between the two reads may have been overwritten
    /// before this one.
    pub gap: bool,
}

impl Cursor {
    /// A cursor past every record of `text` (what was logged before the
    /// reader started is not news).
    pub fn at_end(text: &str) -> Self {
        Cursor {
            last: tail(&records(text)),
        }
    }

    /// The records of `text` (a later read of the whole buffer) past the
    /// cursor, which moves past them.
    pub fn advance<'a>(&mut self, text: &'a str) -> Read<'a> {
        let all = records(text);
        let gap = match (self.last, all.first()) {
            (Some((t, _)), Some(first)) => first.ts_us > t,
            _ => false,
        };
        let mut same = 0usize;
        let new: Vec<KmsgRecord<'a>> = all
            .iter()
            .filter(|r| match self.last {
                None => true,
                Some((t, seen)) if r.ts_us == t => {
                    same += 1;
                    same > seen
                }
                Some((t, _)) => r.ts_us > t,
            })
            .cloned()
            .collect();
        // A buffer cleared (SYSLOG_ACTION_CLEAR, `dmesg -c`) starts over:
        // the cursor stays, and older times are not news.
        if let Some(t) = tail(&all)
            && self.last.is_none_or(|(lt, _)| t.0 >= lt)
        {
            self.last = Some(t);
        }
        Read { new, gap }
    }
}

/// The time of the last record and how many records have it.
fn tail(all: &[KmsgRecord<'_>]) -> Option<(u64, usize)> {
    let t = all.last()?.ts_us;
    Some((t, all.iter().rev().take_while(|r| r.ts_us == t).count()))
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
    fn a_continuation_of_another_record_is_not_a_driver_line() {
        // A segfault line of a task whose name holds a newline: syslog(2)
        // repeats the prefix, with the same time, on the second line.
        let text = format!(
            "<6>[   50.000100] evil\n<6>[   50.000100] {XID}[77]: segfault at 0 ip 0\n<3>[   51.000000] {XID}\n"
        );
        let r = records(&text);
        let msgs: Vec<&str> = r.iter().map(|x| x.msg.as_ref()).collect();
        assert_eq!(msgs, vec!["evil", XID]);
        assert_eq!(r[1].ts_us, 51_000_000);
    }

    #[test]
    fn two_driver_lines_of_one_microsecond_are_two_records() {
        let text = format!(
            "<3>[    9.000000] {XID}\n<3>[    9.000000] NVRM: GPU 0000:00:06.0: RmInitAdapter failed!\n"
        );
        assert_eq!(records(&text).len(), 2);
    }

    #[test]
    fn the_cursor_gives_each_record_once() {
        // Two driver lines of one microsecond (not continuations).
        let first =
            format!("<6>[    1.000000] a\n<3>[    2.000000] {XID}\n<3>[    2.000000] {XID}\n");
        let first = first.as_str();
        let mut c = Cursor::at_end(first);
        assert!(c.advance(first).new.is_empty(), "nothing new");
        // A third record of the same microsecond, then a later one.
        let second = format!("{first}<3>[    2.000000] {XID}\n<3>[    3.000000] {XID}\n");
        let r = c.advance(&second);
        let got: Vec<u64> = r.new.iter().map(|x| x.ts_us).collect();
        assert_eq!(got, vec![2_000_000, 3_000_000]);
        assert!(!r.gap);
        assert!(c.advance(&second).new.is_empty(), "given once");
    }

    #[test]
    fn a_wrapped_buffer_is_a_gap_and_a_cleared_one_no_news() {
        let mut c = Cursor::at_end("<6>[    5.000000] a\n");
        let wrapped = format!("<3>[    7.000000] {XID}\n");
        let r = c.advance(&wrapped);
        assert!(r.gap);
        assert_eq!(r.new.len(), 1);
        // Cleared, then an older-looking text: nothing is news, the cursor
        // stays at 7 s.
        let r = c.advance("<6>[    6.000000] old\n");
        assert!(r.new.is_empty());
        assert_eq!(c.last, Some((7_000_000, 1)));
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
