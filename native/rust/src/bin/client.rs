//! Ping-pong client driver on tokio-tungstenite's connect_async: connections A and B in one room, A pings, B
//! checks and pongs, A checks; one JSON report on stdout (docs/contract.md, native/raw_tcp_client.c). One pair runs
//! on the main task; --pairs N runs N pairs at once, pair i in room ROOM-p<i>, each a task on tokio's workers.
//! SIGCONTs are counted, and a roundtrip a pause touched is not timed (PauseFilter, the rule of native/pauses.h).
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use rust_ws_pingpong::{json_string, libraries_json, make_payload, parse_flags, usage_error, RUSTC_VERSION};
use rust_ws_pingpong::{MAX_FRAME_SIZE, MAX_MESSAGE_SIZE};
use rustls::pki_types::{pem::PemObject, CertificateDer};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::{client::IntoClientRequest, handshake::client::Response, Message};
use tokio_tungstenite::{connect_async_tls_with_config, Connector, MaybeTlsStream, WebSocketStream};

const PROGRAM: &str = "rust_ws_client";
// The contract's other workloads: this client drives closed-loop ping-pong pairs only (its manifest entry says so).
const UNSUPPORTED: &str =
    "--workload --rate --idle-connections --receivers --broadcast-role --ack-processes --ab-windows";
type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

struct Options {
    url: String,
    duration: f64,
    warmup: f64,
    stall: f64,
    size: usize,
    pairs: usize,
    kind: String,
    compression: String,
    tls_ca: Option<String>,
    record: bool,
}

struct Measured {
    warmup: (u64, f64),
    roundtrips: u64,
    elapsed: f64,
    cpu: (f64, f64),
    /// SIGCONTs counted in the window, and the latencies not recorded because of them.
    pauses: (u64, u64),
    latencies: Vec<u64>,
    connections: Vec<String>,
    /// With --pairs N > 1: each pair's roundtrips and latencies (empty with one pair).
    per_pair: Vec<(u64, Vec<u64>)>,
}

fn parse_options() -> Options {
    if let Some(flag) =
        std::env::args().find(|arg| UNSUPPORTED.split(' ').any(|flag| arg.split('=').next() == Some(flag)))
    {
        usage_error(PROGRAM, &format!("{flag} is not supported: this client drives closed-loop ping-pong only"));
    }
    let flags = parse_flags(
        "--url --duration --warmup --loop --compression --payload-size --payload-kind --stall-timeout --pairs --tls-ca",
        "--no-latency",
    )
    .unwrap_or_else(|problem| usage_error(PROGRAM, &problem));
    let flag = |name: &str, default: &str| flags.get(name).cloned().unwrap_or_else(|| default.to_owned());
    let number = |name: &str, default: &str, valid: fn(f64) -> bool| match flag(name, default).parse::<f64>() {
        Ok(value) if value.is_finite() && valid(value) => value,
        _ => usage_error(PROGRAM, &format!("{name} {} is out of range", flag(name, default))),
    };
    let options = Options {
        url: flags.get("--url").cloned().unwrap_or_else(|| usage_error(PROGRAM, "--url ws[s]://H:P/ROOM is required")),
        duration: number("--duration", "5", |v| v > 0.0),
        warmup: number("--warmup", "1", |v| v >= 0.0),
        stall: number("--stall-timeout", "10", |v| v > 0.0),
        size: flag("--payload-size", "4")
            .parse()
            .ok()
            .filter(|&size| size >= 1)
            .unwrap_or_else(|| usage_error(PROGRAM, "--payload-size must be an integer >= 1")),
        pairs: flag("--pairs", "1").parse().ok().filter(|&pairs| pairs >= 1).unwrap_or_else(|| {
            usage_error(PROGRAM, "--pairs must be an integer >= 1 (this client holds no idle connections)")
        }),
        kind: flag("--payload-kind", "text-ascii"),
        compression: flag("--compression", "default"),
        tls_ca: flags.get("--tls-ca").cloned(),
        record: !flags.contains_key("--no-latency"),
    };
    if !["text-ascii", "text-utf8", "binary"].contains(&options.kind.as_str()) {
        usage_error(PROGRAM, &format!("--payload-kind {}: expected text-ascii, text-utf8 or binary", options.kind));
    }
    match options.compression.as_str() {
        "default" | "off" => {}
        "on" => {
            usage_error(PROGRAM, "--compression on: tungstenite has no permessage-deflate (supported: default, off)")
        }
        other => usage_error(PROGRAM, &format!("--compression {other}: expected default or off")),
    }
    if flag("--loop", "auto") != "auto" {
        usage_error(PROGRAM, &format!("--loop {}: only auto (tokio) is available", flag("--loop", "auto")));
    }
    let scheme_ok = options.url.starts_with("ws://") || options.url.starts_with("wss://");
    if !scheme_ok || options.url.as_str().into_client_request().is_err() {
        usage_error(PROGRAM, &format!("--url {}: expected ws[s]://H:P/ROOM", options.url));
    }
    options
}

/// The orchestrator's pipes, by fd number from the environment (absent when run by hand).
fn pipe_from_env(variable: &str) -> Option<File> {
    let fd = std::env::var(variable).ok()?.parse().ok()?;
    Some(unsafe { File::from_raw_fd(fd) })
}

/// One event line, in one write; after a failed write no more are tried.
fn event(events: &mut Option<File>, line: &str) {
    if events.as_mut().is_some_and(|file| file.write_all(line.as_bytes()).is_err()) {
        *events = None;
    }
}

/// Block until "go\n" (true) or end of file (false).
async fn wait_for_go(mut pipe: File) -> bool {
    tokio::task::spawn_blocking(move || {
        let mut line = Vec::new();
        let mut byte = [0u8];
        while pipe.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
            line.push(byte[0]);
        }
        line == b"go" && byte[0] == b'\n'
    })
    .await
    .unwrap()
}

fn cpu_seconds() -> (f64, f64) {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (seconds(usage.ru_utime), seconds(usage.ru_stime))
}

async fn connect(url: &str, options: &Options, connector: Option<Connector>) -> Result<(Ws, Response), String> {
    // connect_async's own choice: Nagle's algorithm left on (disable_nagle = false).
    let connecting = connect_async_tls_with_config(url, None, false, connector);
    match timeout(Duration::from_secs_f64(options.stall), connecting).await {
        Ok(connected) => connected.map_err(|error| format!("cannot connect to {url}: {error}")),
        Err(_) => Err(format!("cannot connect to {url}: no handshake within {} s", options.stall)),
    }
}

/// The room URL of each pair: the given room for one pair, ROOM-p0 .. ROOM-p<N-1> for N pairs, each with the URL's
/// query string (pingpong/kit/driver/core.py pair_urls).
fn pair_urls(url: &str, pairs: usize) -> Vec<String> {
    if pairs == 1 {
        return vec![url.to_owned()];
    }
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    (0..pairs).map(|index| format!("{base}-p{index}{query}")).collect()
}

fn describe(name: &str, ws: &Ws, response: &Response) -> String {
    let header = |name: &str| match response.headers().get(name).and_then(|value| value.to_str().ok()) {
        Some(value) => json_string(value),
        None => "null".into(),
    };
    let tcp = ws.get_ref().get_ref();
    let (local, peer) = (tcp.local_addr().unwrap(), tcp.peer_addr().unwrap());
    format!(
        r#"{{"name": "{name}", "extensions": {}, "subprotocol": {}, "family": "{}", "local_address": "{local}", "peer_address": "{peer}", "tcp_nodelay": {}}}"#,
        header("sec-websocket-extensions"),
        header("sec-websocket-protocol"),
        if local.is_ipv4() { "ipv4" } else { "ipv6" },
        tcp.nodelay().unwrap_or(false)
    )
}

/// Receive one message and check that it is exactly `expected`.
async fn expect(ws: &mut Ws, expected: &Message, who: &str) -> Result<(), String> {
    let received = match ws.next().await {
        Some(Ok(Message::Close(frame))) => return Err(format!("connection {who} closed by the server: {frame:?}")),
        Some(Ok(message)) => message,
        Some(Err(error)) => return Err(format!("connection {who}: {error}")),
        None => return Err(format!("connection {who} closed by the server")),
    };
    let kind = |m: &Message| match m {
        Message::Text(_) => "text",
        Message::Binary(_) => "binary",
        _ => "control",
    };
    if kind(&received) != kind(expected) {
        return Err(format!(
            "payload mismatch: connection {who} expected a {} message, received {}",
            kind(expected),
            kind(&received)
        ));
    }
    if received.len() != expected.len() {
        return Err(format!(
            "payload mismatch: connection {who} expected {} bytes, received {}",
            expected.len(),
            received.len()
        ));
    }
    if received != *expected {
        return Err(format!("payload mismatch: connection {who} received other bytes"));
    }
    Ok(())
}

/// SIGCONTs this process received: each ends a pause (the measured cell kept off its CPU while the host sentinel is
/// timed there, then sent a SIGCONT).
static CONTINUED: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_continue(_signal: libc::c_int) {
    CONTINUED.fetch_add(1, Ordering::Relaxed); // lock-free: safe in a signal handler
}

/// Counts every SIGCONT from now on, in a handler of its own. SA_RESTART resumes the blocking calls it interrupts;
/// tokio's epoll_wait, which returns EINTR all the same (as it may after a stop and continue with no handler), is
/// retried by tokio.
fn count_pauses() {
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = count_continue as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGCONT, &action, std::ptr::null_mut());
    }
}

/// One pair's latencies through its window, by the rule every compiled client keeps (native/pauses.h): with c_k the
/// count read at roundtrip k's end, just before its end timestamp (c_0: before the first roundtrip's start),
/// roundtrip k's latency is recorded iff c_{k+1} == c_{k-1}, and the window's last roundtrip K's iff
/// c_K == c_{K-1}; otherwise it is dropped. Every roundtrip still counts.
#[derive(Default)]
struct PauseFilter {
    before: u64, // c_{k-1} and c_k, around the held roundtrip k
    after: u64,
    held: Option<u64>, // roundtrip k's latency, held until roundtrip k+1 ends
    dropped: u64,      // latencies not recorded
}

impl PauseFilter {
    fn open(seen: u64) -> Self {
        PauseFilter { after: seen, ..Default::default() }
    }

    /// The roundtrip that just ended, its latency and the count read at its end: the one before it is recorded
    /// unless a pause touched it.
    fn next(&mut self, latency: u64, seen: u64, latencies: &mut Vec<u64>) {
        if let Some(held) = self.held {
            if seen == self.before {
                latencies.push(held);
            } else {
                self.dropped += 1;
            }
        }
        (self.before, self.after, self.held) = (self.after, seen, Some(latency));
    }

    /// The window ended: its last roundtrip is recorded unless a pause touched it.
    fn close(&mut self, latencies: &mut Vec<u64>) {
        if let Some(held) = self.held.take() {
            if self.after == self.before {
                latencies.push(held);
            } else {
                self.dropped += 1;
            }
        }
    }
}

/// One ping-pong pair, A and B in one room, with its counts.
struct Pair {
    label: String, // "" with one pair, its index with --pairs N
    names: [String; 2],
    a: Ws,
    b: Ws,
    warmup_roundtrips: u64,
    roundtrips: u64,
    latencies: Vec<u64>,
    pauses: PauseFilter,
    end: Instant,
}

async fn roundtrip(a: &mut Ws, b: &mut Ws, ping: &Message, pong: &Message, names: &[String; 2]) -> Result<(), String> {
    a.send(ping.clone()).await.map_err(|error| format!("connection {}: {error}", names[0]))?;
    expect(b, ping, &names[1]).await?;
    b.send(pong.clone()).await.map_err(|error| format!("connection {}: {error}", names[1]))?;
    expect(a, pong, &names[0]).await
}

impl Pair {
    /// One verified roundtrip; none within `stall` is reported as a stall (of this pair, with several).
    async fn roundtrip(&mut self, ping: &Message, pong: &Message, stall: Duration) -> Result<(), String> {
        match timeout(stall, roundtrip(&mut self.a, &mut self.b, ping, pong, &self.names)).await {
            Ok(done) => done,
            Err(_) if self.label.is_empty() => {
                Err(format!("stall: no roundtrip completed for {} s", stall.as_secs_f64()))
            }
            Err(_) => {
                Err(format!("stall: no roundtrip completed for {} s on pair {}", stall.as_secs_f64(), self.label))
            }
        }
    }

    async fn warm_up(
        &mut self,
        ping: &Message,
        pong: &Message,
        stall: Duration,
        deadline: Instant,
    ) -> Result<(), String> {
        while Instant::now() < deadline {
            self.roundtrip(ping, pong, stall).await?;
            self.warmup_roundtrips += 1;
        }
        Ok(())
    }

    /// Roundtrips from `start` until the first one that completes at or after `deadline`.
    async fn window(
        &mut self,
        ping: &Message,
        pong: &Message,
        stall: Duration,
        start: Instant,
        deadline: Instant,
        record: bool,
    ) -> Result<(), String> {
        self.end = start;
        self.pauses = PauseFilter::open(CONTINUED.load(Ordering::Relaxed)); // c_0, before the first roundtrip's start
        while self.end < deadline {
            let sent = Instant::now();
            self.roundtrip(ping, pong, stall).await?;
            let seen = CONTINUED.load(Ordering::Relaxed);
            self.end = Instant::now();
            if record {
                self.pauses.next((self.end - sent).as_nanos() as u64, seen, &mut self.latencies);
            }
            self.roundtrips += 1;
        }
        if record {
            self.pauses.close(&mut self.latencies);
        }
        Ok(())
    }
}

/// Runs one phase on every pair at once, a task each on tokio's workers, and gives the pairs back in their order.
/// The first failure is returned and the other tasks are aborted (dropping their connections).
async fn together<F, Phase>(pairs: Vec<Pair>, phase: F) -> Result<Vec<Pair>, String>
where
    F: Fn(Pair) -> Phase,
    Phase: std::future::Future<Output = Result<Pair, String>> + Send + 'static,
{
    let mut tasks = tokio::task::JoinSet::new();
    let mut done: Vec<Option<Pair>> = pairs.iter().map(|_| None).collect();
    for (index, pair) in pairs.into_iter().enumerate() {
        let running = phase(pair);
        tasks.spawn(async move { (index, running.await) });
    }
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((index, Ok(pair))) => done[index] = Some(pair),
            Ok((_, Err(error))) => return Err(error), // dropping the JoinSet aborts the other pairs' tasks
            Err(error) => return Err(format!("a pair's task failed: {error}")),
        }
    }
    Ok(done.into_iter().map(|pair| pair.unwrap()).collect())
}

async fn run(options: &Options, events: &mut Option<File>) -> Result<Option<Measured>, String> {
    let message = |which| {
        let bytes = make_payload(&options.kind, options.size, which);
        if options.kind == "binary" {
            Message::binary(bytes)
        } else {
            Message::text(String::from_utf8(bytes).unwrap())
        }
    };
    let (ping, pong) = (message(0), message(1));
    let connector = match &options.tls_ca {
        None => None, // wss:// then trusts the webpki roots; ws:// needs none
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(path).map_err(|error| format!("--tls-ca {path}: {error}"))? {
                roots
                    .add(cert.map_err(|error| format!("--tls-ca {path}: {error}"))?)
                    .map_err(|error| error.to_string())?;
            }
            Some(Connector::Rustls(Arc::new(
                rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth(),
            )))
        }
    };
    if let Some(start) = pipe_from_env("PINGPONG_START_FD") {
        event(events, "armed\n");
        if !wait_for_go(start).await {
            return Ok(None); // not needed: exit 0 without a report
        }
    }
    let mut pairs = Vec::new();
    let mut connections = Vec::new();
    for (index, url) in pair_urls(&options.url, options.pairs).iter().enumerate() {
        let label = if options.pairs > 1 { index.to_string() } else { String::new() };
        let names = [format!("A{label}"), format!("B{label}")];
        let (a, response_a) = connect(url, options, connector.clone()).await?;
        let (b, response_b) = connect(url, options, connector.clone()).await?;
        connections.push(describe(&names[0], &a, &response_a));
        connections.push(describe(&names[1], &b, &response_b));
        let latencies = Vec::new();
        let (pauses, end) = (PauseFilter::default(), Instant::now());
        pairs.push(Pair { label, names, a, b, warmup_roundtrips: 0, roundtrips: 0, latencies, pauses, end });
    }
    event(events, "ready\n");
    if let Some(go) = pipe_from_env("PINGPONG_GO_FD") {
        if !wait_for_go(go).await {
            return Err("start barrier: the orchestrator closed it without a go (another client process failed or did not get ready)".into());
        }
    }

    // One pair runs on this task, as it always has; N pairs warm up together, then share one window.
    let stall = Duration::from_secs_f64(options.stall);
    let duration = Duration::from_secs_f64(options.duration);
    let warmup_start = Instant::now();
    let warmup_deadline = warmup_start + Duration::from_secs_f64(options.warmup);
    let (cpu_start, start, continued);
    if let [pair] = pairs.as_mut_slice() {
        pair.warm_up(&ping, &pong, stall, warmup_deadline).await?;
        continued = CONTINUED.load(Ordering::Relaxed); // before the event, on which the orchestrator may pause the cell
        event(events, "window-start\n");
        cpu_start = cpu_seconds();
        start = Instant::now();
        pair.window(&ping, &pong, stall, start, start + duration, options.record).await?;
    } else {
        let (ping_, pong_) = (ping.clone(), pong.clone());
        pairs = together(pairs, move |mut pair| {
            let (ping, pong) = (ping_.clone(), pong_.clone());
            async move { pair.warm_up(&ping, &pong, stall, warmup_deadline).await.map(|_| pair) }
        })
        .await?;
        continued = CONTINUED.load(Ordering::Relaxed); // before the event, on which the orchestrator may pause the cell
        event(events, "window-start\n");
        cpu_start = cpu_seconds();
        start = Instant::now();
        let (deadline, record) = (start + duration, options.record);
        pairs = together(pairs, move |mut pair| {
            let (ping, pong) = (ping.clone(), pong.clone());
            async move { pair.window(&ping, &pong, stall, start, deadline, record).await.map(|_| pair) }
        })
        .await?;
    }
    let continued_in_window = CONTINUED.load(Ordering::Relaxed) - continued;
    let cpu_end = cpu_seconds();
    event(events, "window-end\n");
    for pair in pairs.iter_mut() {
        for ws in [&mut pair.a, &mut pair.b] {
            let _ = timeout(Duration::from_secs(1), ws.close(None)).await;
        }
    }
    let end = pairs.iter().map(|pair| pair.end).max().unwrap();
    let (warmup_roundtrips, roundtrips) =
        pairs.iter().fold((0, 0), |(warmup, window), pair| (warmup + pair.warmup_roundtrips, window + pair.roundtrips));
    let per_pair: Vec<(u64, Vec<u64>)> = if pairs.len() > 1 {
        pairs.iter_mut().map(|pair| (pair.roundtrips, std::mem::take(&mut pair.latencies))).collect()
    } else {
        Vec::new()
    };
    let latencies = match pairs.as_mut_slice() {
        [pair] => std::mem::take(&mut pair.latencies),
        _ => per_pair.iter().flat_map(|(_, latencies)| latencies.iter().copied()).collect(),
    };
    Ok(Some(Measured {
        warmup: (warmup_roundtrips, (start - warmup_start).as_secs_f64()),
        roundtrips,
        elapsed: (end - start).as_secs_f64(),
        cpu: (cpu_end.0 - cpu_start.0, cpu_end.1 - cpu_start.1),
        pauses: (continued_in_window, pairs.iter().map(|pair| pair.pauses.dropped).sum()),
        latencies,
        connections,
        per_pair,
    }))
}

/// Latencies rounded to 11 significant bits (HdrHistogram's precision at 3 digits), sorted and counted.
fn value_counts(mut latencies: Vec<u64>) -> String {
    for value in latencies.iter_mut() {
        let shift = (64 - (*value | 1).leading_zeros()).saturating_sub(11);
        *value = (*value >> shift) << shift;
    }
    latencies.sort_unstable();
    let mut pairs = Vec::new();
    for group in latencies.chunk_by(|x, y| x == y) {
        pairs.push(format!("[{}, {}]", group[0], group.len()));
    }
    pairs.join(", ")
}

#[tokio::main]
async fn main() {
    let options = parse_options();
    count_pauses();
    let mut events = pipe_from_env("PINGPONG_EVENTS_FD");
    let outcome = run(&options, &mut events).await;
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    let mut report = format!(
        r#"{{"format_version": 1, "role": "client", "implementation": "rust-tungstenite", "runtime": {{"name": "rust", "version": "{RUSTC_VERSION}"}}, "libraries": {}, "loop": "tokio", "settings": {{"compression": {}, "compression_offered": false, "tls": {}, "max_message_size": {MAX_MESSAGE_SIZE}, "max_frame_size": {MAX_FRAME_SIZE}, "tokio_worker_threads": {workers}, "latency_recorded": {}}}, "payload": {{"kind": "{}", "size": {}}}, "workload": "pingpong", "pairs": {}"#,
        libraries_json(),
        json_string(&options.compression),
        options.url.starts_with("wss://"),
        options.record,
        options.kind,
        options.size,
        options.pairs
    );
    match outcome {
        Ok(None) => std::process::exit(0),
        Err(error) => {
            report += &format!(r#", "error": {}, "errors": 1}}"#, json_string(&error));
            println!("{report}");
            eprintln!("rust-tungstenite client: {error}");
            std::process::exit(1);
        }
        Ok(Some(m)) => {
            let per_pair = if m.per_pair.is_empty() {
                String::new()
            } else {
                let counts: Vec<String> = m.per_pair.iter().map(|(count, _)| count.to_string()).collect();
                let mut fields = format!(r#", "per_pair_roundtrips": [{}]"#, counts.join(", "));
                if options.record {
                    let each: Vec<String> =
                        m.per_pair.into_iter().map(|(_, latencies)| format!("[{}]", value_counts(latencies))).collect();
                    fields += &format!(r#", "per_pair_value_counts": [{}]"#, each.join(", "));
                }
                fields
            };
            let latency = if options.record {
                format!(r#""recorded": true, "hdr_histogram": null, "value_counts": [{}]"#, value_counts(m.latencies))
            } else {
                r#""recorded": false, "hdr_histogram": null"#.to_owned()
            };
            report += &format!(
                r#", "error": null, "errors": 0, "warmup": {{"roundtrips": {}, "elapsed_s": {:.9}}}, "roundtrips": {}, "elapsed_s": {:.9}, "roundtrips_per_s": {:.6}, "cpu": {{"user_s": {:.6}, "system_s": {:.6}}}, "pauses": {{"continued": {}, "latency_dropped": {}}}, "latency": {{"unit": "ns", {latency}}}, "connections": [{}]{per_pair}}}"#,
                m.warmup.0,
                m.warmup.1,
                m.roundtrips,
                m.elapsed,
                m.roundtrips as f64 / m.elapsed,
                m.cpu.0,
                m.cpu.1,
                m.pauses.0,
                m.pauses.1,
                m.connections.join(", ")
            );
            println!("{report}");
        }
    }
}
