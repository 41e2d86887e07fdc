//! `--metrics ADDR`: OpenMetrics for Prometheus (prometheus-client), served
//! over HTTP at /metrics. Labels stay low-cardinality: call names, status
//! names, verdict results, classes and diagnosis ids; never pids, handles
//! or paths.
//!
//! Counting is cheap on the hot path: each decode thread keeps its own
//! handles to the per-call counters and histograms ([`CallCache`]), so a
//! call costs a hash lookup without allocation and a few atomic adds.

use std::{collections::HashMap, fmt::Write as _, sync::Arc};

use nvprobe_model::{
    correlate::{CuInit, DiagSeverity, Record, SignalReport},
    decode::{Event, Ioctl},
    records::StallReport,
    render::Note,
};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
        info::Info,
    },
    registry::{Registry, Unit},
};

use crate::pipeline::{EventSink, Observer};

mod http;
mod slots;
#[cfg(test)]
mod tests;

pub use http::{Exposition, HealthOnly, serve, serve_with};
pub use slots::Limits;

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    result: String,
    class: String,
    /// The diagnosis that explains the outcome (the first error, else the
    /// first one), or "none".
    diagnosis: String,
    /// The call the verdict names as failed ("NV_ESC_RM_CONTROL
    /// NV0000_CTRL_CMD_GPU_ATTACH_IDS"), or "none".
    failed_call: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DiagnosisLabels {
    diagnosis: String,
    severity: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    call: String,
    status: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallName {
    call: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    event: String,
    result: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SignalLabels {
    signal: String,
    outcome: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct XidLabels {
    xid: String,
    /// The GPU's PCI slot.
    gpu: String,
    /// The Xid table's action (drain_node, fix_program, …; "unknown").
    action: String,
}

/// A call in flight past --hang-after.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HangLabels {
    /// libcuda or driver.
    layer: String,
    call: String,
}

/// A rank of an NCCL communicator: the same labels on every node, so that
/// one expression over the fleet finds the rank behind the others.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NcclLabels {
    /// The communicator's hash (16 hex digits), the same on every rank.
    comm: String,
    rank: String,
    nranks: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabels {
    result: String,
    class: String,
    xid: String,
    drain: String,
}

fn latency_histogram() -> Histogram {
    // 1 µs … ~4.2 s, ×4 per bucket.
    Histogram::new(exponential_buckets(1e-6, 4.0, 12))
}

/// Every metric nvprobe serves.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    verdicts: Family<VerdictLabels, Counter>,
    diagnoses: Family<DiagnosisLabels, Counter>,
    calls: Family<CallLabels, Counter>,
    latency: Family<CallName, Histogram, fn() -> Histogram>,
    events: Family<EventLabels, Counter>,
    signals: Family<SignalLabels, Counter>,
    stalls: Family<CallName, Counter>,
    hangs: Family<HangLabels, Gauge>,
    hangs_total: Family<HangLabels, Counter>,
    nccl_seq: Family<NcclLabels, Gauge>,
    lost: Family<KindLabels, Counter>,
    xids: Family<XidLabels, Counter>,
    faults: Family<FaultLabels, Counter>,
    quieted: Counter,
    processes: Gauge,
    ringbuf_fill: Gauge<f64, std::sync::atomic::AtomicU64>,
    ringbuf_bytes: u32,
}

impl Metrics {
    /// `build`: the labels of `nvprobe_build_info` (version, kernel, driver).
    pub fn new(build: Vec<(String, String)>, ringbuf_bytes: u32) -> Self {
        let mut registry = Registry::with_prefix("nvprobe");
        let m = Self {
            verdicts: Family::default(),
            diagnoses: Family::default(),
            calls: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            events: Family::default(),
            signals: Family::default(),
            stalls: Family::default(),
            hangs: Family::default(),
            hangs_total: Family::default(),
            nccl_seq: Family::default(),
            lost: Family::default(),
            xids: Family::default(),
            faults: Family::default(),
            quieted: Counter::default(),
            processes: Gauge::default(),
            ringbuf_fill: Gauge::default(),
            ringbuf_bytes,
            registry: Registry::default(),
        };
        registry.register(
            "build",
            "nvprobe's version, the kernel and the NVIDIA driver it traces",
            Info::new(build),
        );
        registry.register(
            "verdicts",
            "Start-up verdicts (one per process followed), by result, class, the diagnosis that explains it and the call that failed",
            m.verdicts.clone(),
        );
        registry.register(
            "diagnoses",
            "Diagnoses in start-up verdicts, by id and severity",
            m.diagnoses.clone(),
        );
        registry.register(
            "driver_calls",
            "NVIDIA ioctls that reached nvprobe, by call (escape, RM control or UVM command) and status (NV_STATUS, errno, or ok)",
            m.calls.clone(),
        );
        registry.register_with_unit(
            "driver_call_duration",
            "Time NVIDIA ioctls took, by call",
            Unit::Seconds,
            m.latency.clone(),
        );
        registry.register(
            "events",
            "Events decoded, by type and result (ok, failed)",
            m.events.clone(),
        );
        registry.register(
            "signals",
            "Signals that reached processes in an NVIDIA call or start-up, by signal and what the call did",
            m.signals.clone(),
        );
        registry.register(
            "stalls",
            "Stall reports: an NVIDIA call or cuInit still running past --stall-after, by call",
            m.stalls.clone(),
        );
        registry.register(
            "hangs_open",
            "Calls of processes past their start-up in flight now for longer than --hang-after (hang records not yet ended), by layer and call",
            m.hangs.clone(),
        );
        registry.register(
            "hangs",
            "Hang records (a call past its start-up in flight for longer than --hang-after), by layer and call",
            m.hangs_total.clone(),
        );
        registry.register(
            "nccl_seq",
            "The number of the last collective or point-to-point call each NCCL rank on this node entered, by communicator (hash), rank and size: a rank whose number stays behind its communicator's is the one holding it back",
            m.nccl_seq.clone(),
        );
        registry.register(
            "lost_events",
            "Records the kernel could not deliver (ring buffer full, slot collisions), by kind",
            m.lost.clone(),
        );
        registry.register(
            "xids",
            "Xids the driver logged (kernel log), by number, GPU (PCI slot) and the action NVIDIA's Xid catalogue gives",
            m.xids.clone(),
        );
        registry.register(
            "faults",
            "Run-time fault verdicts, by the CUresult of the first failing call (\"none\": no call failed), class, the Xid that explains it (\"none\") and whether the node should be drained",
            m.faults.clone(),
        );
        registry.register(
            "quieted_calls",
            "Successful calls of processes past their verdict that the kernel left out (--events failures|verdicts)",
            m.quieted.clone(),
        );
        registry.register(
            "processes_tracked",
            "Processes that use NVIDIA devices followed now",
            m.processes.clone(),
        );
        registry.register(
            "ringbuf_fill_ratio",
            "Highest fill of the ring buffer seen in the last second (0-1)",
            m.ringbuf_fill.clone(),
        );
        registry.register_with_unit(
            "ringbuf_size",
            "Size of the ring buffer",
            Unit::Bytes,
            Gauge::<i64>::default().tap(|g| {
                g.set(i64::from(ringbuf_bytes));
            }),
        );
        Self { registry, ..m }
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut s = String::with_capacity(16 << 10);
        if prometheus_client::encoding::text::encode(&mut s, &self.registry).is_err() {
            s.clear();
            let _ = writeln!(s, "# EOF");
        }
        s
    }

    /// A correlator record: verdicts, their diagnoses, signals.
    fn record(&self, r: &Record) {
        match r {
            Record::Cuinit(v) => self.verdict(v),
            Record::Signal(s) => self.signal(s),
            Record::FirstContext(c) => self.late_context(c),
            Record::KernelLog(k) => {
                if let Some(x) = &k.xid {
                    self.xids
                        .get_or_create(&XidLabels {
                            xid: x.number.to_string(),
                            gpu: x.pci.clone(),
                            action: k
                                .meaning
                                .as_ref()
                                .map_or("unknown", |m| m.action.as_str())
                                .into(),
                        })
                        .inc();
                }
            }
            Record::Fault(f) => {
                self.faults
                    .get_or_create(&FaultLabels {
                        result: f
                            .call
                            .as_ref()
                            .and_then(|c| {
                                c.result_name
                                    .map(str::to_owned)
                                    .or(c.result.map(|r| r.to_string()))
                            })
                            .unwrap_or_else(|| "none".into()),
                        class: f.class.as_str().into(),
                        xid: f
                            .xid
                            .as_ref()
                            .map_or_else(|| "none".into(), |x| x.number.to_string()),
                        drain: f.drain.to_string(),
                    })
                    .inc();
            }
            Record::Stage { .. } | Record::Breakdown(_) => {}
        }
    }

    /// A first context after the verdict: its diagnoses count with the
    /// verdicts' (the start-up's end, come late).
    fn late_context(&self, c: &crate::correlate::FirstContext) {
        for d in &c.diagnoses {
            self.diagnoses
                .get_or_create(&DiagnosisLabels {
                    diagnosis: d.id.as_str().into(),
                    severity: d.severity.as_str().into(),
                })
                .inc();
        }
    }

    fn verdict(&self, v: &CuInit) {
        let primary = v
            .diagnoses
            .iter()
            .find(|d| d.severity == DiagSeverity::Error)
            .or_else(|| {
                v.diagnoses
                    .iter()
                    .find(|d| d.severity != DiagSeverity::Info)
            })
            .map_or("none", |d| d.id.as_str());
        self.verdicts
            .get_or_create(&VerdictLabels {
                result: v.result.as_str().into(),
                class: v.class.as_str().into(),
                diagnosis: primary.into(),
                failed_call: v
                    .failed_call
                    .as_ref()
                    .map_or_else(|| "none".into(), |f| f.call.clone()),
            })
            .inc();
        for d in &v.diagnoses {
            self.diagnoses
                .get_or_create(&DiagnosisLabels {
                    diagnosis: d.id.as_str().into(),
                    severity: d.severity.as_str().into(),
                })
                .inc();
        }
    }

    fn signal(&self, s: &SignalReport) {
        self.signals
            .get_or_create(&SignalLabels {
                signal: s.signal.clone(),
                outcome: s.outcome.as_str().into(),
            })
            .inc();
    }

    /// An NCCL call of a communicator whose hash and rank are known: its
    /// rank's number goes up (decode threads may hand calls over out of
    /// order: the highest is kept); an end removes the rank.
    fn nccl(&self, n: &nvprobe_model::decode::NcclCall) {
        use nvprobe_model::decode::NcclCallKind as K;
        let (Some(hash), Some(rank), Some(nranks), Some(seq)) =
            (n.comm_hash, n.rank, n.nranks, n.seq)
        else {
            return;
        };
        let l = NcclLabels {
            comm: format!("{hash:016x}"),
            rank: rank.to_string(),
            nranks: nranks.to_string(),
        };
        match n.kind {
            K::End => {
                self.nccl_seq.remove(&l);
            }
            K::Collective | K::P2p => {
                let g = self.nccl_seq.get_or_create(&l);
                g.inner().fetch_max(
                    i64::try_from(seq).unwrap_or(i64::MAX),
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
            _ => {}
        }
    }

    fn stall(&self, r: &StallReport) {
        self.stalls
            .get_or_create(&CallName {
                call: r.call.clone(),
            })
            .inc();
    }

    fn lost(&self, kind: &str, count: u64) {
        self.lost
            .get_or_create(&KindLabels { kind: kind.into() })
            .inc_by(count);
    }

    /// The kernel's running total of quieted calls.
    pub fn quieted_total(&self, total: u64) {
        let now = self.quieted.get();
        if total > now {
            self.quieted.inc_by(total - now);
        }
    }

    pub fn processes(&self, n: usize) {
        self.processes.set(n as i64);
    }

    /// The most the ring buffer held lately, in bytes.
    pub fn ringbuf_high_water(&self, bytes: u64) {
        let ratio = bytes as f64 / f64::from(self.ringbuf_bytes.max(1));
        self.ringbuf_fill.set(ratio.clamp(0.0, 1.0));
    }
}

trait Tap: Sized {
    fn tap(self, f: impl FnOnce(&Self)) -> Self {
        f(&self);
        self
    }
}
impl<T> Tap for T {}

/// What names a call in the metrics: an escape, RM control or UVM command
/// name, or the raw request of one nvprobe cannot name.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum CallKey {
    Named(&'static str),
    Raw(String),
}

impl CallKey {
    fn of(e: &Ioctl) -> Self {
        match (&e.xfer, e.name) {
            // A request nvprobe cannot name is "unknown <family>", not its
            // number: any user who can open a node could otherwise make
            // series without end.
            (Some(x), _) => x
                .name
                .map_or(CallKey::Named("unknown XFER"), CallKey::Named),
            (None, Some(n)) => CallKey::Named(n),
            (None, None) => CallKey::Raw(format!("unknown {}", e.family.as_str())),
        }
    }
    fn name(&self) -> &str {
        match self {
            CallKey::Named(n) => n,
            CallKey::Raw(s) => s,
        }
    }
}

/// A call's status label: the NV_STATUS it left, else the errno, else ok.
fn status_label(e: &Ioctl) -> String {
    if let Some(s) = &e.status {
        return s
            .name
            .map_or_else(|| format!("{:#x}", s.code), str::to_owned);
    }
    if let Some(errno) = &e.errno {
        return errno.clone();
    }
    if e.ok { "ok" } else { "failed" }.to_owned()
}

fn hang_labels(layer: nvprobe_model::hang::HangLayer, call: &str) -> HangLabels {
    HangLabels {
        layer: match layer {
            nvprobe_model::hang::HangLayer::Libcuda => "libcuda",
            nvprobe_model::hang::HangLayer::Driver => "driver",
        }
        .into(),
        call: call.to_owned(),
    }
}

/// One decode thread's handles on the per-call metrics.
/// `--metrics` sees the stream as one of the pipeline's observers: calls
/// through a per-thread [`CallCache`], records and notes directly.
impl Exposition for Metrics {
    fn encode(&self) -> String {
        Metrics::encode(self)
    }
}

impl Observer for Arc<Metrics> {
    fn event_sink(&self) -> Option<Box<dyn EventSink>> {
        Some(Box::new(CallCache::new(self.clone())))
    }
    fn record(&self, _: u64, r: &Record) {
        Metrics::record(self, r);
    }
    fn note(&self, _: u64, n: &Note<'_>) {
        match n {
            Note::Stall(r) => self.stall(r),
            Note::Hang(r) => {
                let l = hang_labels(r.layer, &r.call);
                self.hangs.get_or_create(&l).inc();
                self.hangs_total.get_or_create(&l).inc();
            }
            Note::HangEnd(e) => {
                self.hangs
                    .get_or_create(&hang_labels(e.layer, &e.call))
                    .dec();
            }
            Note::Lost { kind, count, .. } => self.lost(kind, *count),
            _ => {}
        }
    }
    fn counts(&self, c: &crate::pipeline::LiveCounts) {
        self.processes(c.processes);
        self.quieted_total(c.quieted);
        if let Some(high) = c.ringbuf_high_water {
            self.ringbuf_high_water(high);
        }
    }
}

impl EventSink for CallCache {
    fn event(&mut self, _: u64, ev: &Event) {
        CallCache::event(self, ev);
    }
}

pub struct CallCache {
    m: Arc<Metrics>,
    counters: HashMap<(CallKey, i64, u32), Counter>,
    hists: HashMap<CallKey, Histogram>,
    events: HashMap<(&'static str, bool), Counter>,
}

/// Distinct keys a cache keeps before it starts over (a flood of raw,
/// unnamed requests cannot grow it without bound; the families keep
/// their series).
const CACHE_MAX: usize = 4096;

impl CallCache {
    pub fn new(m: Arc<Metrics>) -> Self {
        Self {
            m,
            counters: HashMap::new(),
            hists: HashMap::new(),
            events: HashMap::new(),
        }
    }

    pub fn event(&mut self, ev: &Event) {
        let ok = ev.ok();
        let m = &self.m;
        self.events
            .entry((ev.type_name(), ok))
            .or_insert_with(|| {
                m.events.get_or_create_owned(&EventLabels {
                    event: ev.type_name().into(),
                    result: if ok { "ok" } else { "failed" }.into(),
                })
            })
            .inc();
        if let Event::Nccl(n) = ev {
            return m.nccl(n);
        }
        let Event::Ioctl(e) = ev else { return };
        if self.counters.len() > CACHE_MAX || self.hists.len() > CACHE_MAX {
            self.counters.clear();
            self.hists.clear();
        }
        let key = CallKey::of(e);
        let code = e.status.as_ref().map_or(u32::MAX, |s| s.code);
        self.counters
            .entry((key.clone(), e.ret, code))
            .or_insert_with(|| {
                m.calls.get_or_create_owned(&CallLabels {
                    call: key.name().to_owned(),
                    status: status_label(e),
                })
            })
            .inc();
        // An untimed call (its start not read) has no latency to count.
        if e.untimed {
            return;
        }
        self.hists
            .entry(key.clone())
            .or_insert_with(|| {
                m.latency.get_or_create_owned(&CallName {
                    call: key.name().to_owned(),
                })
            })
            .observe(e.duration_ns as f64 / 1e9);
    }
}
