//! Drawing the live view on its own thread: a full-screen table on a
//! terminal (ratatui), plain-text tables otherwise. A frame copies the
//! view under its lock and draws after releasing it; a slow terminal
//! drops frames, the pipeline never waits for one.

use std::{
    io::{self, IsTerminal, Write},
    os::fd::{AsFd, OwnedFd},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use ratatui::{
    Frame,
    crossterm::event::{self, Event as Key, KeyCode, KeyEventKind, KeyModifiers},
    layout::{Constraint, Layout},
    style::{Color, Modifier, Style},
    text::Line,
    widgets::{Cell, Paragraph, Row as TRow, Table},
};

use super::{Rank, RowView, Snapshot, View};

/// How the view is drawn.
#[derive(Clone, Copy, Debug)]
pub struct Opts {
    /// Between two frames.
    pub interval: Duration,
    /// Full screen (stdout is a terminal and --plain was not given).
    pub tui: bool,
}

impl Opts {
    /// Full screen when stdout is a terminal that can show one.
    pub fn for_stdout(plain: bool, interval: Option<Duration>) -> Self {
        let tui = !plain
            && io::stdout().is_terminal()
            && std::env::var("TERM").is_ok_and(|t| !t.is_empty() && t != "dumb");
        Self {
            interval: interval.unwrap_or(if tui {
                Duration::from_millis(250)
            } else {
                Duration::from_secs(2)
            }),
            tui,
        }
    }
}

/// nvprobe's stderr while the view owns the terminal: a pipe whose lines
/// go into the view, and the real stderr to put back.
static SAVED_STDERR: Mutex<Option<OwnedFd>> = Mutex::new(None);

/// Set by the panic hook: the drawing thread stops touching the screen.
static PANICKED: AtomicBool = AtomicBool::new(false);

/// The view cannot be shown any more (the terminal or the reader went
/// away): stop the run as SIGTERM would, rather than trace unseen.
fn stop_run() {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::Signal::SIGTERM);
}

/// Put the real stderr back (idempotent; also from the panic hook).
fn restore_stderr() {
    let saved = SAVED_STDERR
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(fd) = saved {
        let _ = nix::unistd::dup2_stderr(fd.as_fd());
    }
}

/// Send what is written to stderr into the view until [`restore_stderr`].
fn capture_stderr(view: &View) -> anyhow::Result<JoinHandle<()>> {
    // Close-on-exec, both: no child holds the pipe open after the end.
    let saved = nix::fcntl::fcntl(
        io::stderr().as_fd(),
        nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3),
    )
    .context("saving stderr")?;
    // SAFETY: F_DUPFD_CLOEXEC returned a new descriptor that nothing else owns.
    let saved = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(saved) };
    let (rd, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("a pipe for stderr")?;
    nix::unistd::dup2_stderr(wr.as_fd()).context("redirecting stderr")?;
    drop(wr);
    *SAVED_STDERR.lock().unwrap_or_else(|e| e.into_inner()) = Some(saved);
    let view = view.clone();
    std::thread::Builder::new()
        .name("nvprobe-stderr".into())
        .spawn(move || {
            let mut r = io::BufReader::new(std::fs::File::from(rd));
            let mut line = Vec::new();
            // Lines of at most 4 KiB each: a runaway message cannot grow
            // this without bound.
            while let Ok(n) =
                io::BufRead::read_until(&mut io::Read::take(&mut r, 4096), b'\n', &mut line)
            {
                if n == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&line).trim_end().to_owned();
                if !text.is_empty() {
                    view.message(text);
                }
                line.clear();
            }
        })
        .context("starting the stderr reader")
}

/// The drawing thread, running until [`Drawer::finish`].
pub struct Drawer {
    stop: Arc<AtomicBool>,
    /// Set by the drawing thread as it ends.
    done: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    view: View,
    tui: bool,
}

impl Drawer {
    pub fn start(view: View, opts: Opts) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let terminal = if opts.tui {
            let t = ratatui::try_init().context("setting up the terminal")?;
            // After ratatui's hook: the drawing stops and stderr comes back
            // before the panic is printed (ratatui's hook then restores the
            // screen).
            let prev = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                PANICKED.store(true, Ordering::Relaxed);
                restore_stderr();
                prev(info);
            }));
            // The reader thread ends when the pipe closes (at the restore);
            // nothing waits for it.
            if let Err(e) = capture_stderr(&view) {
                view.message(format!("nvprobe: {e:#}"));
            }
            Some(t)
        } else {
            None
        };
        let (v, s) = (view.clone(), stop.clone());
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let spawned = std::thread::Builder::new()
            .name("nvprobe-top".into())
            .spawn(move || {
                match terminal {
                    Some(t) => tui_loop(t, &v, &s, opts.interval),
                    None => plain_loop(&v, &s, opts.interval),
                }
                d.store(true, Ordering::Relaxed);
            });
        let handle = match spawned {
            Ok(h) => h,
            Err(e) => {
                if opts.tui {
                    let _ = ratatui::try_restore();
                    restore_stderr();
                }
                return Err(anyhow::Error::new(e).context("starting the drawing thread"));
            }
        };
        Ok(Self {
            stop,
            done,
            handle: Some(handle),
            view,
            tui: opts.tui,
        })
    }

    /// Stop drawing, give the terminal back, and print the last view as
    /// text (what a person reads after the screen is gone), then what
    /// nvprobe wrote to stderr meanwhile.
    pub fn finish(mut self) {
        self.stop_drawing();
        if self.tui {
            let _ = ratatui::try_restore();
            restore_stderr();
            // What the reader has not taken from the pipe yet.
            std::thread::sleep(Duration::from_millis(20));
        }
        let snap = self.view.snapshot(crate::output::Clock::mono_now());
        let mut out = io::stdout().lock();
        let _ = out.write_all(plain(&snap, None).as_bytes());
        let _ = out.flush();
        if self.tui {
            for m in &snap.messages {
                eprintln!("{m}");
            }
        }
    }
}

impl Drop for Drawer {
    fn drop(&mut self) {
        // An error path that never called finish: the terminal comes back.
        if self.handle.is_some() {
            self.stop_drawing();
            if self.tui {
                let _ = ratatui::try_restore();
                restore_stderr();
            }
        }
    }
}

impl Drawer {
    /// Stop the drawing thread; wait a second at most for it (a terminal
    /// that hung up can keep crossterm's poll from returning: the process
    /// ends without that thread).
    fn stop_drawing(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let until = Instant::now() + Duration::from_secs(1);
        while !self.done.load(Ordering::Relaxed) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(h) = self.handle.take()
            && self.done.load(Ordering::Relaxed)
        {
            let _ = h.join();
        }
    }
}

/// Events per second between two frames.
struct Rate {
    at: Instant,
    events: u64,
    per_s: f64,
}

impl Rate {
    fn new() -> Self {
        Self {
            at: Instant::now(),
            events: 0,
            per_s: 0.0,
        }
    }

    fn update(&mut self, events: u64) -> f64 {
        let now = Instant::now();
        let dt = now.duration_since(self.at).as_secs_f64();
        if dt >= 0.5 {
            self.per_s = events.saturating_sub(self.events) as f64 / dt;
            self.at = now;
            self.events = events;
        }
        self.per_s
    }
}

fn plain_loop(view: &View, stop: &AtomicBool, every: Duration) {
    let mut rate = Rate::new();
    let mut next = Instant::now() + every;
    while !stop.load(Ordering::Relaxed) && !PANICKED.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        if Instant::now() < next {
            continue;
        }
        next += every;
        let snap = view.snapshot(crate::output::Clock::mono_now());
        let r = rate.update(snap.events);
        let mut out = io::stdout().lock();
        // A reader that went away: the run stops.
        if out.write_all(plain(&snap, Some(r)).as_bytes()).is_err() || out.flush().is_err() {
            stop_run();
            break;
        }
    }
}

fn tui_loop(mut term: ratatui::DefaultTerminal, view: &View, stop: &AtomicBool, every: Duration) {
    let mut rate = Rate::new();
    let mut quitting = false;
    while !stop.load(Ordering::Relaxed) && !PANICKED.load(Ordering::Relaxed) {
        let snap = view.snapshot(crate::output::Clock::mono_now());
        let r = rate.update(snap.events);
        // The terminal went away (a closed ssh session): the run stops.
        if term.draw(|f| frame(f, &snap, r, quitting)).is_err() {
            stop_run();
            break;
        }
        let until = Instant::now() + every;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            match event::poll(left) {
                Ok(true) => {}
                Ok(false) => break,
                // No keyboard to read (stdin gone): wait out the frame
                // rather than spin.
                Err(_) => {
                    std::thread::sleep(left);
                    break;
                }
            }
            if let Ok(Key::Key(k)) = event::read()
                && k.kind == KeyEventKind::Press
            {
                let ctrl_c = k.modifiers.contains(KeyModifiers::CONTROL)
                    && matches!(k.code, KeyCode::Char('c'));
                if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                    // Raw mode turned Ctrl-C into a key: stop the way the
                    // terminal would have (the collector drains and ends).
                    quitting = true;
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::this(),
                        nix::sys::signal::Signal::SIGINT,
                    );
                }
            }
        }
    }
}

fn style(rank: Rank) -> Style {
    match rank {
        Rank::Stalled | Rank::Failed => Style::default().fg(Color::Red),
        Rank::Failing => Style::default().fg(Color::Yellow),
        Rank::Starting => Style::default(),
        Rank::Done => Style::default().fg(Color::DarkGray),
    }
}

/// The counts line above the table.
fn headline(s: &Snapshot, rate: Option<f64>) -> String {
    let n = |r: Rank| s.rows.iter().filter(|x| x.rank == r).count();
    let mut h = format!(
        "nvprobe top: {} processes ({} starting, {} failed, {} stalled)",
        s.rows.len(),
        n(Rank::Starting) + n(Rank::Failing),
        n(Rank::Failed),
        n(Rank::Stalled),
    );
    if let Some(r) = rate {
        h.push_str(&format!(" · {r:.0} events/s"));
    }
    h.push_str(&format!(
        " · {} events · {} lost · {} stalls · {} hangs · {} faults · {} Xids",
        s.events, s.lost, s.stalls, s.hangs, s.faults, s.xids
    ));
    h
}

fn frame(f: &mut Frame, s: &Snapshot, rate: f64, quitting: bool) {
    let msgs = s.messages.len().min(3) as u16;
    let [top, table, why, log, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(msgs),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(
        Paragraph::new(headline(s, Some(rate)))
            .style(Style::default().add_modifier(Modifier::BOLD)),
        top,
    );
    let header = TRow::new(COLUMNS.iter().map(|(h, _)| Cell::from(*h)))
        .style(Style::default().add_modifier(Modifier::REVERSED));
    let rows = s
        .rows
        .iter()
        .map(|r| TRow::new(cells(r).into_iter().map(Cell::from)).style(style(r.rank)));
    let widths = COLUMNS.iter().map(|(_, w)| match w {
        0 => Constraint::Fill(1),
        w => Constraint::Length(*w as u16),
    });
    f.render_widget(Table::new(rows, widths).header(header), table);
    // The first row that is not fine, and why.
    let first = s
        .rows
        .iter()
        .find(|r| r.rank < Rank::Starting && !r.why.is_empty());
    if let Some(r) = first {
        f.render_widget(
            Paragraph::new(clean(&format!("{} [{}]: {}", r.comm, r.pid, r.why)))
                .style(style(r.rank)),
            why,
        );
    }
    let tail = &s.messages[s.messages.len() - msgs as usize..];
    f.render_widget(
        Paragraph::new(
            tail.iter()
                .map(|m| Line::from(clean(m)))
                .collect::<Vec<_>>(),
        )
        .style(Style::default().fg(Color::Yellow)),
        log,
    );
    let keys = if quitting { "stopping…" } else { "q: quit" };
    f.render_widget(
        Paragraph::new(format!("probes: {} · {keys}", s.probes))
            .style(Style::default().add_modifier(Modifier::DIM)),
        foot,
    );
}

/// The columns: name and width (0: the rest).
const COLUMNS: [(&str, usize); 8] = [
    ("PID", 8),
    ("COMM", 16),
    ("CLASS", 6),
    ("STAGE", 21),
    ("TIME", 8),
    ("IN FLIGHT", 40),
    ("LAST FAILURE", 44),
    ("STATE", 0),
];

fn cells(r: &RowView) -> [String; 8] {
    [
        r.pid.to_string(),
        clean(&r.comm),
        r.class.clone(),
        r.stage.clone(),
        super::secs((r.time_ms * 1e6) as u64),
        clean(&r.in_flight),
        clean(&r.last_failure),
        r.state.clone(),
    ]
}

/// Control and reordering characters (U+202E and its kin) shown as `?`:
/// what a traced process named itself is never a terminal command, and
/// never turns the rest of its row around.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if nvprobe_model::decode::terminal_unsafe(c) {
                '?'
            } else {
                c
            }
        })
        .collect()
}

/// `s` cut to `w` characters (an ellipsis marks the cut), [`clean`].
fn fit(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return clean(s);
    }
    let mut t = clean(&s.chars().take(w.saturating_sub(1)).collect::<String>());
    t.push('…');
    t
}

/// The view as text: the counts line, the table, and why the first rows
/// that are not fine are so; a blank line ends it.
pub fn plain(s: &Snapshot, rate: Option<f64>) -> String {
    let mut out = headline(s, rate);
    out.push('\n');
    let line = |cols: [String; 8]| -> String {
        let mut l = String::new();
        for (i, c) in cols.iter().enumerate() {
            let w = COLUMNS[i].1;
            if w == 0 {
                l.push_str(&fit(c, 40));
            } else {
                l.push_str(&format!("{:<w$} ", fit(c, w), w = w));
            }
        }
        l.trim_end().to_owned() + "\n"
    };
    out.push_str(&line(COLUMNS.map(|(h, _)| h.to_owned())));
    for r in &s.rows {
        out.push_str(&line(cells(r)));
    }
    for r in s
        .rows
        .iter()
        .filter(|r| r.rank < Rank::Starting && !r.why.is_empty())
    {
        out.push_str(&format!(
            "  {} [{}]: {}\n",
            fit(&r.comm, 64),
            r.pid,
            fit(&r.why, 400)
        ));
    }
    out.push_str(&format!("probes: {}\n\n", s.probes));
    out
}
