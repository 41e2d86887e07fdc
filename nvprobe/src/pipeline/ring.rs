//! The ring buffer's consumer side, read in place: records are returned
//! as borrowed bytes, and the consumer position the kernel sees moves once
//! per batch, not once per record.
//!
//! Why not aya's `RingBuf`: it publishes the consumer position after every
//! record. The kernel's producer reads that position at every reserve (and
//! nvprobe's programs again when they query the fill), so while the
//! collector drains, a traced process's reserve may fetch that line from
//! the collector's CPU. Measured on the H100 (docs/BENCHMARKS.md, issue
//! 40's seventh session) this was not a visible part of a sent call's
//! cost; the line is still touched about 500 times less often. The
//! layout and the ordering are the kernel's (kernel/bpf/ringbuf.c): one
//! consumer page, read-write; one producer page and the data pages mapped
//! twice, read-only; a record's 8-byte header holds its length with the
//! busy and discard bits, and is released by the producer's commit.

use std::{
    os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd},
    sync::atomic::{AtomicU32, AtomicUsize, Ordering, fence},
};

use anyhow::Context as _;
use aya::maps::MapData;

const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HDR_SZ: usize = 8;

/// One shared mapping of the ring buffer's fd, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value; the
// ring's reads and writes go through atomics where the kernel writes.
unsafe impl Send for Mapping {}

impl Mapping {
    fn new(fd: RawFd, len: usize, prot: libc::c_int, offset: usize) -> std::io::Result<Mapping> {
        let off = libc::off_t::try_from(offset).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        // SAFETY: a new shared mapping of the map's fd; the kernel checks
        // the length, the offset and the protection against the map.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, off) };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped, once; nothing borrows it
        // past the owner's life.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A record's header, as the consumer finds it.
#[derive(Debug, PartialEq, Eq)]
enum Slot {
    /// Reserved and not yet committed.
    Busy,
    /// Committed: its length, and whether the program discarded it.
    Done { len: usize, discard: bool },
}

/// What a header word says.
fn slot_of(hdr: u32) -> Slot {
    if hdr & BUSY_BIT != 0 {
        Slot::Busy
    } else {
        Slot::Done {
            len: (hdr & !(BUSY_BIT | DISCARD_BIT)) as usize,
            discard: hdr & DISCARD_BIT != 0,
        }
    }
}

/// The bytes a record of `len` takes, header included.
fn span(len: usize) -> usize {
    (HDR_SZ + len).next_multiple_of(8)
}

/// The ring buffer of records (the `EVENTS` map), read by one consumer.
pub struct Ring {
    /// The map: its fd is what the runtime polls.
    map: MapData,
    reader: Reader,
}

impl Ring {
    pub fn new(map: MapData) -> anyhow::Result<Ring> {
        let info = map.info().context("reading the ring buffer's size")?;
        let size = info.max_entries() as usize;
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        anyhow::ensure!(
            size.is_power_of_two() && size.is_multiple_of(page),
            "the ring buffer's size {size} is not a power-of-two multiple of the page size"
        );
        let fd = map.fd().as_fd().as_raw_fd();
        let consumer = Mapping::new(fd, page, libc::PROT_READ | libc::PROT_WRITE, 0)
            .context("mapping the ring buffer's consumer page")?;
        let producer = Mapping::new(fd, page + 2 * size, libc::PROT_READ, page)
            .context("mapping the ring buffer's data")?;
        let reader = Reader::new(consumer, producer, page, size);
        Ok(Ring { map, reader })
    }

    /// Tell the kernel the records before the next one are read (their
    /// space is the producer's again).
    pub fn publish(&mut self) {
        self.reader.publish();
    }

    /// The next committed record, or None when the ring buffer is empty or
    /// its next record is still being written. The space of the records
    /// returned goes back to the kernel at [`Ring::publish`], when the
    /// ring buffer is found empty, or once a quarter of it is held.
    pub fn next(&mut self) -> Option<&[u8]> {
        self.reader.next()
    }

    /// A record header the kernel cannot have written (longer than the
    /// ring): nothing after it can be read. The error says where.
    pub fn corrupt(&self) -> anyhow::Result<()> {
        match self.reader.corrupt {
            None => Ok(()),
            Some((pos, len)) => anyhow::bail!(
                "the ring buffer's record at position {pos} claims {len} bytes, more than the \
                 ring's {} (not the kernel's ring-buffer layout): nothing after it can be read",
                self.reader.size
            ),
        }
    }
}

/// The consumer's side of the shared pages: where it reads, and what it
/// told the kernel.
struct Reader {
    consumer: Mapping,
    /// The producer page, then the data pages twice over.
    producer: Mapping,
    page: usize,
    size: usize,
    /// The next record to read.
    pos: usize,
    /// The consumer position the kernel was last told.
    published: usize,
    /// The producer position last read.
    produced: usize,
    /// Where a header claimed more than the ring holds, and its length.
    corrupt: Option<(usize, usize)>,
}

impl Reader {
    fn new(consumer: Mapping, producer: Mapping, page: usize, size: usize) -> Reader {
        let mut r = Reader {
            consumer,
            producer,
            page,
            size,
            pos: 0,
            published: 0,
            produced: 0,
            corrupt: None,
        };
        r.pos = r.consumer_pos().load(Ordering::Acquire);
        r.published = r.pos;
        r.produced = r.producer_pos();
        r
    }

    fn consumer_pos(&self) -> &AtomicUsize {
        // SAFETY: the consumer page is mapped, page-aligned and at least a
        // word long; the kernel reads it, only this consumer writes it.
        unsafe { AtomicUsize::from_ptr(self.consumer.ptr.cast()) }
    }

    fn producer_pos(&self) -> usize {
        // SAFETY: the producer page is mapped and page-aligned; the kernel
        // writes the position with release semantics. The page is mapped
        // read-only and only loaded from: on x86_64 and aarch64 an atomic
        // load is a plain load (aya's consumer reads it the same way).
        unsafe { AtomicUsize::from_ptr(self.producer.ptr.cast()) }.load(Ordering::Acquire)
    }

    /// The header word of the record at `pos`.
    fn header(&self, pos: usize) -> u32 {
        let off = self.page + (pos & (self.size - 1));
        // SAFETY: `off` is 8-aligned (records are) and inside the first
        // copy of the data pages; the producer's commit writes the word
        // with a full barrier, paired with this acquire (a load only, on a
        // read-only page, as for the producer position).
        unsafe { AtomicU32::from_ptr(self.producer.ptr.add(off).cast()) }.load(Ordering::Acquire)
    }

    fn publish(&mut self) {
        if self.pos != self.published {
            self.consumer_pos().store(self.pos, Ordering::Release);
            self.published = self.pos;
        }
    }

    fn next(&mut self) -> Option<&[u8]> {
        loop {
            if self.pos == self.produced {
                // Caught up: publish first, so that a producer that looks
                // now sees room and the wake-up logic sees an empty ring.
                self.publish();
                fence(Ordering::SeqCst);
                self.produced = self.producer_pos();
                if self.pos == self.produced {
                    return None;
                }
            }
            let (len, discard) = match slot_of(self.header(self.pos)) {
                Slot::Busy => {
                    self.publish();
                    return None;
                }
                Slot::Done { len, discard } => (len, discard),
            };
            // The kernel never commits a record larger than the ring; a
            // header claiming one is not read past the mapping, and the
            // read stops there for good (`Ring::corrupt` says where).
            if span(len) > self.size {
                self.corrupt = Some((self.pos, len));
                return None;
            }
            if self.pos.wrapping_sub(self.published) >= self.size / 4 {
                self.publish();
            }
            let at = self.page + (self.pos & (self.size - 1)) + HDR_SZ;
            self.pos = self.pos.wrapping_add(span(len));
            if discard {
                continue;
            }
            // SAFETY: `at + len` is within the data pages' two copies
            // (offset < size, len < size); the producer does not reuse the
            // space before the consumer position passes it, which happens
            // only after this borrow of `self` ends.
            return Some(unsafe { std::slice::from_raw_parts(self.producer.ptr.add(at), len) });
        }
    }
}

impl AsFd for Ring {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.map.fd().as_fd()
    }
}

impl AsRawFd for Ring {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;
    const SIZE: usize = 4096;

    impl Mapping {
        /// Private anonymous memory standing in for the kernel's pages.
        fn anon(len: usize) -> Mapping {
            // SAFETY: a new private anonymous mapping.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(ptr, libc::MAP_FAILED);
            Mapping {
                ptr: ptr.cast(),
                len,
            }
        }
    }

    /// A reader over fake pages, and the producer's side of them.
    struct Fake {
        r: Reader,
        prod: *mut u8,
        cons: *mut usize,
        at: usize,
    }

    impl Fake {
        fn new() -> Fake {
            let cons = Mapping::anon(PAGE);
            let prod = Mapping::anon(PAGE + 2 * SIZE);
            // The data pages twice over, as the kernel maps them: one
            // memfd at both places, so that a record past the end is read
            // whole from the second copy.
            // SAFETY: a new memfd, sized, mapped over the anonymous range
            // just made (MAP_FIXED within it), then closed (the mappings
            // keep it).
            unsafe {
                let fd = libc::memfd_create(c"nvprobe-ring-test".as_ptr(), 0);
                assert!(fd >= 0, "memfd_create");
                assert_eq!(libc::ftruncate(fd, SIZE as libc::off_t), 0);
                for i in 0..2 {
                    let at = prod.ptr.add(PAGE + i * SIZE).cast();
                    let prot = libc::PROT_READ | libc::PROT_WRITE;
                    let flags = libc::MAP_SHARED | libc::MAP_FIXED;
                    assert_eq!(libc::mmap(at, SIZE, prot, flags, fd, 0), at);
                }
                libc::close(fd);
            }
            let (c, p) = (cons.ptr.cast(), prod.ptr);
            Fake {
                r: Reader::new(cons, prod, PAGE, SIZE),
                prod: p,
                cons: c,
                at: 0,
            }
        }

        /// Write a record of `len` bytes of `fill` with header bits `bits`
        /// at the producer's position, and move the producer on.
        fn put(&mut self, len: usize, fill: u8, bits: u32) {
            // SAFETY: inside the fake data pages (the tests stay in the
            // first copy).
            unsafe {
                let rec = self.prod.add(PAGE + (self.at & (SIZE - 1)));
                rec.cast::<u32>().write(len as u32 | bits);
                std::ptr::write_bytes(rec.add(HDR_SZ), fill, len);
                self.at += span(len);
                self.prod.cast::<usize>().write(self.at);
            }
        }

        /// What the kernel sees of the consumer.
        fn consumed(&self) -> usize {
            // SAFETY: the fake consumer page.
            unsafe { self.cons.read() }
        }
    }

    #[test]
    fn records_come_in_order_and_the_kernel_hears_once_the_ring_is_empty() {
        let mut f = Fake::new();
        f.put(5, 0xa1, 0);
        f.put(16, 0xb2, DISCARD_BIT);
        f.put(8, 0xc3, 0);
        // The reader was made before: it learns the producer moved on.
        assert_eq!(f.r.next(), Some(&[0xa1u8; 5][..]));
        assert_eq!(f.consumed(), 0);
        assert_eq!(f.r.next(), Some(&[0xc3u8; 8][..]));
        assert_eq!(f.consumed(), 0, "the kernel was told record by record");
        assert_eq!(f.r.next(), None);
        assert_eq!(f.consumed(), span(5) + span(16) + span(8));
    }

    #[test]
    fn a_record_still_being_written_stops_the_read_and_what_was_read_goes_back() {
        let mut f = Fake::new();
        f.put(24, 1, 0);
        f.put(24, 2, BUSY_BIT);
        assert_eq!(f.r.next().map(<[u8]>::len), Some(24));
        assert_eq!(f.r.next(), None);
        assert_eq!(f.consumed(), span(24));
        // Committed since: read on the next call.
        // SAFETY: the busy record's header in the fake data pages.
        unsafe { f.prod.add(PAGE + span(24)).cast::<u32>().write(24) };
        assert_eq!(f.r.next(), Some(&[2u8; 24][..]));
        f.r.publish();
        assert_eq!(f.consumed(), 2 * span(24));
    }

    #[test]
    fn a_quarter_of_the_ring_held_goes_back_before_the_next_record() {
        let mut f = Fake::new();
        for i in 0..3 {
            f.put(SIZE / 4 - HDR_SZ, i, 0);
        }
        assert!(f.r.next().is_some());
        assert_eq!(f.consumed(), 0);
        assert!(f.r.next().is_some());
        assert_eq!(
            f.consumed(),
            SIZE / 4,
            "the first record's space, not the one returned"
        );
        assert!(f.r.next().is_some());
        assert_eq!(f.consumed(), SIZE / 2);
    }

    #[test]
    fn a_record_across_the_end_of_the_ring_is_read_whole() {
        let mut f = Fake::new();
        for _ in 0..3 {
            f.put(1016, 1, 0);
        }
        f.put(1000, 2, 0);
        while f.r.next().is_some() {}
        assert_eq!(f.consumed(), 4080);
        // Header at 4080, body from 4088 to 4128: 32 bytes past the end.
        f.put(40, 0x5a, 0);
        f.put(8, 0x6b, 0);
        assert_eq!(f.r.next(), Some(&[0x5au8; 40][..]));
        // The body's end is the ring's start (the second copy is the first).
        // SAFETY: the fake data pages.
        assert_eq!(unsafe { *f.prod.add(PAGE + 31) }, 0x5a);
        assert_eq!(f.r.next(), Some(&[0x6bu8; 8][..]));
        assert_eq!(f.r.next(), None);
        assert_eq!(f.consumed(), 4080 + span(40) + span(8));
    }

    #[test]
    fn a_header_longer_than_the_ring_is_not_read() {
        let mut f = Fake::new();
        f.put(8, 7, 0);
        // SAFETY: the record's header in the fake data pages.
        unsafe { f.prod.add(PAGE).cast::<u32>().write(SIZE as u32) };
        assert_eq!(f.r.next(), None);
        assert_eq!(f.r.corrupt, Some((0, SIZE)));
        assert_eq!(f.r.next(), None, "nothing after it is read");
    }

    #[test]
    fn a_header_says_busy_discard_and_length() {
        assert_eq!(slot_of(BUSY_BIT | 40), Slot::Busy);
        assert_eq!(slot_of(BUSY_BIT | DISCARD_BIT | 40), Slot::Busy);
        assert_eq!(
            slot_of(DISCARD_BIT | 40),
            Slot::Done {
                len: 40,
                discard: true
            }
        );
        assert_eq!(
            slot_of(212),
            Slot::Done {
                len: 212,
                discard: false
            }
        );
    }

    #[test]
    fn a_record_takes_its_header_and_rounds_to_eight() {
        assert_eq!(span(0), 8);
        assert_eq!(span(1), 16);
        assert_eq!(span(8), 16);
        assert_eq!(span(212), 224);
    }
}
