//! What watches the stream beside the writer: the Prometheus metrics, the
//! Perfetto timeline and the `top` view each implement [`Observer`] in
//! their own file and are registered once, in [`super::PipeOpts::observers`].
//! The pipeline hands them typed events and records; none of them sees a
//! rendered line.
//!
//! Events are seen on the decode threads (each observer gets one
//! [`EventSink`] per thread, so per-thread caches need no lock), in no
//! order across threads; the correlator's records on the output thread,
//! in stream order; the collector's notes (stall, lost) where they are made
//! (the collector's thread), in the order they are made. `process`
//! records reach no observer (none needs them).

use std::sync::Arc;

use nvprobe_model::{correlate::Record, decode::Event, render::Note};

/// A consumer of the typed stream.
pub trait Observer: Send + Sync {
    /// The part that sees decoded events on one decode thread; `None` when
    /// the observer wants records only.
    fn event_sink(&self) -> Option<Box<dyn EventSink>> {
        None
    }
    /// A record the correlator made (stage, verdict, signal, breakdown),
    /// at the time of the event that caused it.
    fn record(&self, _mono_ns: u64, _r: &Record) {}
    /// A record the collector made (stall, lost count, …), on the
    /// collector's thread.
    fn note(&self, _mono_ns: u64, _n: &Note<'_>) {}
    /// What only the live collector knows, on its clock (about once a
    /// second): the processes it follows, the ring buffer's fill.
    fn counts(&self, _c: &LiveCounts) {}
    /// Whether it wants the calls in flight ([`Observer::flights`]), which
    /// cost a read of the kernel's in-flight table.
    fn wants_flights(&self) -> bool {
        false
    }
    /// The NVIDIA calls in flight now (a few times a second).
    fn flights(&self, _calls: Vec<Flight>) {}
}

/// What only the live collector knows, for [`Observer::counts`].
#[derive(Clone, Copy, Debug, Default)]
pub struct LiveCounts {
    /// Processes followed now.
    pub processes: usize,
    /// Successful calls the kernel left out (`--events`), since the start.
    pub quieted: u64,
    /// The ring buffer's highest fill since the last report, when read
    /// (every fifth report: reading resets it).
    pub ringbuf_high_water: Option<u64>,
}

/// An NVIDIA call in flight.
#[derive(Clone, Debug, PartialEq)]
pub struct Flight {
    pub tid: u32,
    /// The process, when the collector knows it (cuInit); else looked up.
    pub pid: Option<u32>,
    pub start_ns: u64,
    pub call: String,
}

/// One decode thread's view of the events.
pub trait EventSink: Send {
    /// A decoded event that the filters kept, whatever `--events` writes.
    fn event(&mut self, mono_ns: u64, ev: &Event);
    /// The end of a batch (a few hundred events): a sink that takes a lock
    /// can take it once here.
    fn batch_done(&mut self) {}
}

/// The observers of one run.
pub type Observers = Vec<Arc<dyn Observer>>;

/// Every observer's sink for one decode thread.
pub(super) struct Sinks(Vec<Box<dyn EventSink>>);

impl Sinks {
    pub(super) fn of(observers: &[Arc<dyn Observer>]) -> Self {
        Self(observers.iter().filter_map(|o| o.event_sink()).collect())
    }
    pub(super) fn event(&mut self, mono_ns: u64, ev: &Event) {
        for s in &mut self.0 {
            s.event(mono_ns, ev);
        }
    }
    pub(super) fn batch_done(&mut self) {
        for s in &mut self.0 {
            s.batch_done();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::output::{Clock, Format, Opened, Output};
    use crate::pipeline::{PipeOpts, replay};
    use nvprobe_model::render::Level;

    /// An observer of its own: what a new sink is, and that registering
    /// it is all the pipeline needs.
    #[derive(Default)]
    struct Counting {
        events: Arc<Mutex<(u64, u64)>>,
        records: Mutex<Vec<String>>,
    }

    struct CountingSink(Arc<Mutex<(u64, u64)>>, u64);

    impl EventSink for CountingSink {
        fn event(&mut self, _: u64, ev: &Event) {
            // The summary counts calls; process records go by too.
            if !matches!(ev, Event::Proc(_)) {
                self.1 += 1;
            }
        }
        fn batch_done(&mut self) {
            let mut g = self.0.lock().expect("lock");
            g.0 += std::mem::take(&mut self.1);
            g.1 += 1;
        }
    }

    impl Observer for Counting {
        fn event_sink(&self) -> Option<Box<dyn EventSink>> {
            Some(Box::new(CountingSink(self.events.clone(), 0)))
        }
        fn record(&self, _: u64, r: &Record) {
            if let Record::Cuinit(v) = r {
                self.records
                    .lock()
                    .expect("lock")
                    .push(format!("{} {}", v.pid, v.result));
            }
        }
    }

    #[test]
    fn a_registered_observer_sees_every_event_and_each_verdict() {
        let name = "h200-580.159.04-verdicts.ndjson";
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures")
            .join(name);
        let c = Arc::new(Counting::default());
        let opts = PipeOpts {
            workers: 2,
            summary_only: false,
            level: Level::Verdicts,
            observers: vec![c.clone()],
            host_facts: false,
            all_processes: false,
        };
        let f = std::fs::File::open(path).expect("fixture");
        let out = Output::opened(Opened::sink(), Format::Json, Clock::fixed(0));
        let r = replay::run(std::io::BufReader::new(f), name, out, None, &opts).expect("replay");
        let (events, batches) = *c.events.lock().expect("lock");
        // Every kernel event, though --events verdicts writes none of them.
        assert_eq!(
            events,
            r.summary.events.values().sum::<u64>(),
            "events seen"
        );
        assert!(events > 100);
        assert!(batches >= 1);
        let verdicts = c.records.lock().expect("lock");
        assert!(!verdicts.is_empty());
        assert!(
            verdicts.iter().any(|v| v.ends_with(" killed")),
            "{verdicts:?}"
        );
    }
}
