//! `tcmon serve`: the agent polls on its own thread; this serves what it last published.
//!
//! A request never causes a netlink dump. Each document (`/metrics` in either format, the JSON
//! snapshot and findings) is rendered at most once per poll, by the first request that wants
//! it, and then handed out as shared bytes: the cost of a scrape does not grow with the number
//! of scrapers, and formats nobody asks for cost nothing (on a 10,000-class tree one rendering
//! is tens of milliseconds; doing all four every second would exceed the agent's CPU budget).

use std::convert::Infallible;
use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;
use http_body_util::Full;
use hyper::body::{Body, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use tcmon_agent::{Agent, State};
use tcmon_export::Format;
use tcmon_probe::NameState;
use tokio::net::TcpListener;
use tokio::sync::{watch, OnceCell, Semaphore};

use crate::config::ServeConfig;
use crate::{config, ServeArgs};

/// Request line and headers together; a scraper sends a few hundred bytes.
const MAX_HEADER_BYTES: usize = 16 * 1024;
/// A connection is closed after this long whatever it is doing, so that a client reading a
/// response very slowly cannot pin an old poll's rendering in memory for long. Scrapers that
/// keep connections alive simply reconnect.
const CONNECTION_MAX_AGE: Duration = Duration::from_secs(60);

pub(crate) fn run(args: &ServeArgs) -> Result<ExitCode> {
    let cfg = config::load(args.target.config.as_deref())?;
    let listen = args.listen.unwrap_or(cfg.serve.listen);
    // Bound before the first poll, so a port in use fails at once.
    let listener =
        std::net::TcpListener::bind(listen).with_context(|| format!("listen on {listen}"))?;
    listener
        .set_nonblocking(true)
        .context("set the listening socket non-blocking")?;
    let mut opts = cfg.agent_options(
        args.target.netns.clone(),
        args.target.devices.clone(),
        args.target.no_bpf,
    );
    if let Some(i) = args.interval {
        opts.interval = i;
    }
    if !cfg.record.dir.as_os_str().is_empty() {
        opts.record = Some(cfg.record.options(&cfg.record.dir));
    }
    // No sparklines here: nobody draws them (minutes of samples of 20,000 objects are tens of
    // MB).
    opts.history_len = 0;
    let interval = opts.interval;
    let agent = match Agent::start(opts) {
        Ok(a) => a,
        // A bad --dev or --netns is the collector's (usage) error; keep it as such.
        Err(tcmon_agent::Error::Collector(e)) => {
            return Err(anyhow::Error::new(e).context(tcmon_agent::read_tc_state(
                &tcmon_agent::tc_state_place(args.target.netns.as_deref(), &args.target.devices),
            )))
        }
        Err(e) => return Err(e.into()),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("tcmon-http")
        .enable_all()
        .build()
        .context("start the HTTP runtime")?;
    runtime.block_on(async {
        let listener = TcpListener::from_std(listener).context("register the listening socket")?;
        let addr = listener
            .local_addr()
            .context("read the listening address")?;
        eprintln!(
            "tcmon serve: listening on http://{addr}/metrics (polling every {})",
            humantime::format_duration(interval)
        );
        let app = Arc::new(App::new(
            &agent,
            cfg.serve.groups(),
            cfg.names.libreqos_map.clone(),
        ));
        // On each poll, let go of the last one's renderings and state at once rather than at
        // the next request: between scrapes only one poll's worth is held.
        let mut states = agent.subscribe();
        let forget = Arc::clone(&app);
        tokio::spawn(async move {
            let mut was = None;
            let mut said = Said::default();
            while states.changed().await.is_ok() {
                forget.rendered();
                said.log(&states.borrow());
                // Said when polls start or stop being too slow for the interval, not per poll.
                let now = states.borrow().stretched;
                if now.is_some() != was.is_some() {
                    match now {
                        Some(p) => eprintln!(
                            "tcmon serve: polls take more than half the {} interval: polling \
                             every {} (twice a poll's time) until they are faster",
                            humantime::format_duration(interval),
                            humantime::format_duration(round_ms(p))
                        ),
                        None => eprintln!(
                            "tcmon serve: polls fit the interval again: polling every {}",
                            humantime::format_duration(interval)
                        ),
                    }
                }
                was = now;
            }
        });
        accept_loop(listener, app, &cfg.serve).await;
        anyhow::Ok(())
    })?;
    drop(agent);
    Ok(ExitCode::SUCCESS)
}

async fn accept_loop(listener: TcpListener, app: Arc<App>, cfg: &ServeConfig) {
    let slots = Arc::new(Semaphore::new(cfg.max_connections));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(cfg.header_timeout)
        .max_header_size(MAX_HEADER_BYTES)
        .max_buf_size(4 * MAX_HEADER_BYTES)
        .keep_alive(true);
    let mut stop = std::pin::pin!(shutdown());
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors or a connection reset before accept: wait, go on.
                    eprintln!("tcmon serve: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut stop => return,
        };
        // Over the limit the connection is closed at once: it costs nothing to hold.
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = Arc::clone(&app);
        let conn = http.serve_connection(
            TokioIo::new(stream),
            service_fn(move |req| {
                let app = Arc::clone(&app);
                async move { Ok::<_, Infallible>(app.handle(&req).await) }
            }),
        );
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CONNECTION_MAX_AGE, conn).await;
            drop(slot);
        });
    }
}

async fn shutdown() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

#[derive(Debug, Clone, Copy)]
enum Doc {
    Metrics(Format),
    Snapshot,
    Findings,
}

/// Each document as is and gzipped.
const SLOTS: usize = 8;

impl Doc {
    /// Where `self` (gzipped or not) keeps its rendering and its last size.
    fn slot(self, gzip: bool) -> usize {
        let doc = match self {
            Doc::Metrics(Format::OpenMetrics) => 0,
            Doc::Metrics(Format::Prometheus) => 1,
            Doc::Snapshot => 2,
            Doc::Findings => 3,
        };
        doc * 2 + usize::from(gzip)
    }
}

/// The documents of one published state, each rendered on first use.
#[derive(Debug)]
struct Rendered {
    state: Arc<State>,
    groups: tcmon_export::Groups,
    cells: [OnceCell<Bytes>; SLOTS],
    across: Arc<Across>,
}

/// What renderings leave to those of later polls.
#[derive(Debug, Default)]
struct Across {
    /// Sizes of the last renderings: buffers start at the right size instead of doubling
    /// through tens of megabytes.
    sizes: [AtomicUsize; SLOTS],
    /// The exposition's working memory (taken by one rendering at a time; another at the same
    /// moment makes its own).
    scratch: Mutex<tcmon_export::Scratch>,
}

impl Rendered {
    fn new(state: Arc<State>, groups: tcmon_export::Groups, across: Arc<Across>) -> Rendered {
        Rendered {
            state,
            groups,
            cells: Default::default(),
            across,
        }
    }

    /// Gzipped straight from the encoder: a 10,000-class exposition is ~14 MB of text and
    /// ~0.7 MB compressed, and the text is never held whole. `/metrics` gzipped copies the
    /// series that did not change from the last such rendering, already compressed.
    fn render(&self, doc: Doc, gzip: bool) -> Bytes {
        let size = &self.across.sizes[doc.slot(gzip)];
        // a little over last time's, as the tree may have grown
        let mut out = Vec::with_capacity(size.load(Ordering::Relaxed) / 16 * 17);
        if let (Doc::Metrics(format), true) = (doc, gzip) {
            out = self
                .with_scratch(|scratch| {
                    tcmon_export::render_gzip_reusing(&self.input(), format, out, scratch)
                })
                .expect("compressing in memory");
        } else if gzip {
            let mut gz = GzEncoder::new(out, Compression::fast());
            self.write(doc, &mut gz).expect("compressing in memory");
            out = gz.finish().expect("compressing in memory");
        } else {
            self.write(doc, &mut out).expect("writing to memory");
        }
        size.store(out.len(), Ordering::Relaxed);
        out.into()
    }

    fn input(&self) -> tcmon_export::Input<'_> {
        let s = &self.state;
        tcmon_export::Input {
            snapshot: &s.snapshot,
            findings: &s.findings,
            probes: &s.probes,
            polls_total: s.polls_total,
            poll_errors_total: s.poll_errors_total,
            poll_interval: s.effective_interval(),
            poll_overruns_total: s.overruns_total,
            polls_changed_while_read_total: s.changed_while_read_total,
            groups: self.groups,
            version: env!("CARGO_PKG_VERSION"),
            names: &s.names,
        }
    }

    /// `f` with the memory of earlier renderings, or, while another rendering holds it,
    /// with its own (which reuses nothing).
    fn with_scratch<T>(&self, f: impl FnOnce(&mut tcmon_export::Scratch) -> T) -> T {
        match self.across.scratch.try_lock() {
            Ok(mut shared) => f(&mut shared),
            Err(_) => f(&mut tcmon_export::Scratch::default()),
        }
    }

    fn write(&self, doc: Doc, w: &mut dyn Write) -> std::io::Result<()> {
        let s = &self.state;
        match doc {
            Doc::Metrics(format) => self.with_scratch(|scratch| {
                tcmon_export::render_to_reusing(&self.input(), format, w, scratch)
            }),
            Doc::Snapshot => {
                // names joined as `dump --json` joins them
                let mut w = std::io::BufWriter::with_capacity(64 * 1024, w);
                tcmon_render::write_snapshot_json_owned(&mut w, &s.snapshot, &s.names, &s.owners)?;
                w.write_all(b"\n")?;
                w.flush()
            }
            Doc::Findings => json(
                &tcmon_diag::CheckReport {
                    status: s.status,
                    findings: &s.findings,
                    plan: tcmon_diag::fix_plans(s.findings.iter(), tcmon_diag::Scope::default()),
                },
                w,
            ),
        }
    }
}

fn json<T: Serialize + ?Sized>(v: &T, w: &mut dyn Write) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::with_capacity(64 * 1024, w);
    serde_json::to_writer(&mut w, v)?;
    w.write_all(b"\n")?;
    w.flush()
}

/// Whether the client takes gzip (`Accept-Encoding: gzip`, not `gzip;q=0`), as Prometheus does.
fn accepts_gzip(header: Option<&str>) -> bool {
    header.is_some_and(|h| {
        h.split(',').any(|part| {
            let mut it = part.split(';').map(str::trim);
            let coding = it.next().unwrap_or("");
            let q_zero = it.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !q_zero
        })
    })
}

#[derive(Debug)]
struct App {
    states: watch::Receiver<Arc<State>>,
    groups: tcmon_export::Groups,
    current: Mutex<Arc<Rendered>>,
    across: Arc<Across>,
    /// LibreQoS's map, which `/api/v1/classify` opens at each request (it may be pinned later).
    libreqos_map: std::path::PathBuf,
}

impl App {
    fn new(agent: &Agent, groups: tcmon_export::Groups, libreqos_map: std::path::PathBuf) -> App {
        let across = Arc::new(Across::default());
        App {
            current: Mutex::new(Arc::new(Rendered::new(
                agent.state(),
                groups,
                Arc::clone(&across),
            ))),
            groups,
            states: agent.subscribe(),
            across,
            libreqos_map,
        }
    }

    /// The renderings of the latest state; the previous poll's go when its last reader is done.
    fn rendered(&self) -> Arc<Rendered> {
        let state = Arc::clone(&self.states.borrow());
        let mut cur = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if !Arc::ptr_eq(&cur.state, &state) {
            *cur = Arc::new(Rendered::new(state, self.groups, Arc::clone(&self.across)));
        }
        Arc::clone(&cur)
    }

    async fn doc(&self, doc: Doc, gzip: bool) -> Bytes {
        let r = self.rendered();
        r.cells[doc.slot(gzip)]
            .get_or_init(|| {
                let r = Arc::clone(&r);
                async move {
                    // Off the I/O threads: a big tree takes tens of milliseconds.
                    tokio::task::spawn_blocking(move || r.render(doc, gzip))
                        .await
                        .expect("rendering does not panic")
                }
            })
            .await
            .clone()
    }

    async fn handle(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        // Nothing here takes a body: refuse one rather than read it.
        if req.body().size_hint().lower() > 0
            || req.headers().contains_key(header::TRANSFER_ENCODING)
        {
            let mut r = text(StatusCode::PAYLOAD_TOO_LARGE, "no request body accepted\n");
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return r;
        }
        let gzip = accepts_gzip(
            req.headers()
                .get(header::ACCEPT_ENCODING)
                .and_then(|v| v.to_str().ok()),
        );
        let doc = match req.uri().path() {
            "/metrics" => {
                let accept = req
                    .headers()
                    .get(header::ACCEPT)
                    .and_then(|v| v.to_str().ok());
                Some(Doc::Metrics(Format::negotiate(accept)))
            }
            "/api/v1/snapshot" => Some(Doc::Snapshot),
            "/api/v1/findings" => Some(Doc::Findings),
            _ => None,
        };
        if let Some(doc) = doc {
            let content_type = match doc {
                Doc::Metrics(format) => format.content_type(),
                Doc::Snapshot | Doc::Findings => "application/json",
            };
            let mut r = ok(content_type, self.doc(doc, gzip).await);
            let h = r.headers_mut();
            // /metrics picks its format by Accept: a cache between must not mix them up
            let vary = match doc {
                Doc::Metrics(_) => "Accept, Accept-Encoding",
                Doc::Snapshot | Doc::Findings => "Accept-Encoding",
            };
            h.insert(header::VARY, HeaderValue::from_static(vary));
            if gzip {
                h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            }
            return r;
        }
        match req.uri().path() {
            "/api/v1/classify" => {
                let s = Arc::clone(&self.states.borrow());
                match crate::classify::from_query(
                    &s.snapshot,
                    &s.names,
                    &self.libreqos_map,
                    req.uri().query().unwrap_or(""),
                ) {
                    Ok(c) => match serde_json::to_vec(&c) {
                        Ok(body) => ok("application/json", body.into()),
                        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
                    },
                    Err(e) => text(StatusCode::BAD_REQUEST, format!("{e:#}\n")),
                }
            }
            "/healthz" => self.health(),
            "/" => text(
                StatusCode::OK,
                "tcmon serve\n/metrics            Prometheus text 0.0.4 or OpenMetrics 1.0\n\
                 /api/v1/snapshot    the last poll (tcmon dump --json)\n\
                 /api/v1/findings    the diagnosis (tcmon check --json)\n\
                 /api/v1/classify?dev=IF&dst=IP[&src=IP&proto=tcp&sport=N&dport=N&tos=N&mark=N&ingress=1]\n\
                 \x20                   which class a packet lands in (tcmon classify --json)\n\
                 /healthz            200 while polls succeed\n",
            ),
            _ => text(StatusCode::NOT_FOUND, "not found: see /\n"),
        }
    }

    /// Healthy while the last good poll is recent: a few intervals, so one slow or failed poll
    /// does not flap it. Either way it says what is wrong now.
    fn health(&self) -> Response<Full<Bytes>> {
        let s = Arc::clone(&self.states.borrow());
        let age = s.snapshot.taken_at.elapsed();
        let mut notes = String::new();
        if let Some(e) = &s.last_error {
            let _ = write!(notes, "; the latest poll failed: {e}");
        }
        if s.snapshot.changed_while_read {
            notes.push_str(
                "; the tc tree kept changing during every read of the last good poll: its \
                 objects may mix states, and some may be missing",
            );
        }
        for n in s.probe_names.iter() {
            let since = n.since;
            let for_ = since.elapsed().unwrap_or_default().as_secs();
            let since = humantime::format_rfc3339_seconds(since);
            match &n.state {
                NameState::Resolving => {
                    let _ = write!(notes, "; probe target {} resolving since {since}", n.target);
                }
                NameState::Failed(e) => {
                    let _ = write!(
                        notes,
                        "; probe target {} not probed since {since} ({for_}s ago): {e}; tried \
                         again up to every {}",
                        n.target,
                        humantime::format_duration(tcmon_probe::RETRY_MAX)
                    );
                }
                NameState::Resolved(_) => {}
            }
        }
        // A slow poll is not an error: the limit follows the stretched period.
        let limit = s.effective_interval() * 3 + Duration::from_secs(1);
        if s.paused || age <= limit {
            return text(
                StatusCode::OK,
                format!(
                    "ok: last poll {:.1}s ago, took {:.1} ms; {} polls, {} failed{notes}\n",
                    age.as_secs_f64(),
                    s.snapshot.poll_duration_ns as f64 / 1e6,
                    s.polls_total,
                    s.poll_errors_total
                ),
            );
        }
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "stale: last good poll {:.1}s ago{notes}\n",
                age.as_secs_f64(),
            ),
        )
    }
}

/// What the log said last, so that it says each failure, recovery and warning once, when it
/// starts, rather than on every poll.
#[derive(Default)]
struct Said {
    error: Option<String>,
    warnings: std::collections::HashSet<String>,
    /// The measurement's state last said.
    sojourn: Option<Measured>,
    /// The state last said of each probe target configured by name.
    names: std::collections::HashMap<String, std::mem::Discriminant<NameState>>,
}

impl Said {
    fn log(&mut self, s: &State) {
        match (&s.last_error, &self.error) {
            (Some(e), was) if was.as_ref() != Some(e) => eprintln!(
                "tcmon serve: poll failed: {e} (/metrics keeps the last good poll; \
                 tcmon_poll_errors_total counts the failures)"
            ),
            (None, Some(_)) => eprintln!("tcmon serve: polls succeed again"),
            _ => {}
        }
        self.error.clone_from(&s.last_error);
        if let Some(m) = &s.snapshot.sojourn {
            let now = match m.off_reason() {
                None => Measured::On,
                Some(why) => Measured::Off(why.to_owned()),
            };
            if self.sojourn.as_ref() != Some(&now) {
                match &now {
                    Measured::On => eprintln!(
                        "tcmon serve: measuring the queueing delay of real packets (eBPF): \
                         tcmon_qdisc_sojourn_seconds (per class: the class_sojourn metrics \
                         group)"
                    ),
                    Measured::Off(why) => eprintln!(
                        "tcmon serve: the queueing delay of real packets is not measured: {why} \
                         (tcmon_sojourn_enabled 0; delays are estimated from backlog and rate)"
                    ),
                }
                self.sojourn = Some(now);
            }
        }
        for n in s.probe_names.iter() {
            let now = std::mem::discriminant(&n.state);
            if self.names.insert(n.target.clone(), now) == Some(now) {
                continue;
            }
            match &n.state {
                NameState::Resolving => {}
                NameState::Failed(e) => eprintln!(
                    "tcmon serve: probe target {}: {e}; not probed for now (tried again up \
                     to every {}; /healthz says it meanwhile)",
                    n.target,
                    humantime::format_duration(tcmon_probe::RETRY_MAX)
                ),
                NameState::Resolved(at) => {
                    eprintln!("tcmon serve: probe target {} is {at}: probing it", n.target);
                }
            }
        }
        if s.last_error.is_none() {
            for w in &s.snapshot.warnings {
                if !self.warnings.contains(w) {
                    eprintln!("tcmon serve: {w}");
                }
            }
            // a set: a poll can carry a warning per undecodable message of a big tree
            self.warnings = s.snapshot.warnings.iter().cloned().collect();
        }
    }
}

#[derive(PartialEq)]
enum Measured {
    On,
    Off(String),
}

/// Whole milliseconds, for messages.
fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

fn ok(content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = ok("text/plain; charset=utf-8", body.into());
    *r.status_mut() = status;
    r
}

#[cfg(test)]
mod tests {
    use super::accepts_gzip;

    #[test]
    fn gzip_is_taken_when_offered_and_not_refused() {
        for yes in [
            "gzip",
            "gzip, deflate",
            "deflate, gzip;q=0.5",
            "GZIP",
            "identity, *",
            "br, gzip ; q=1",
        ] {
            assert!(accepts_gzip(Some(yes)), "{yes}");
        }
        for no in [
            "",
            "identity",
            "deflate, br",
            "gzip;q=0",
            "gzip; q=0.0",
            "xgzip",
        ] {
            assert!(!accepts_gzip(Some(no)), "{no}");
        }
        assert!(!accepts_gzip(None));
    }
}
