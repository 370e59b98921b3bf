//! Ping-pong relay server on tokio-tungstenite: a task per connection, as the library's server examples show.
//! Rooms map each member to the sender of an unbounded channel; a writer task per member drains it into the
//! member's sink, so a member that does not read only fills its own queue.
//! With --workers N, tokio's multi-thread runtime with N worker threads (Builder::worker_threads); without it, what
//! #[tokio::main] builds: the same runtime with a worker per CPU of the process's affinity mask. One process: the rooms
//! sit behind one Mutex, shared by every worker thread.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use rust_ws_pingpong::{json_string, libraries_json, parse_flags, usage_error, RUSTC_VERSION};
use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::accept_hdr_async;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::Message;

const PROGRAM: &str = "rust_ws_server";
type Rooms = Arc<Mutex<HashMap<String, HashMap<u64, mpsc::UnboundedSender<Message>>>>>;

fn main() {
    let flags = parse_flags("--host --port --loop --compression --tls-cert --tls-key --workers", "")
        .unwrap_or_else(|problem| usage_error(PROGRAM, &problem));
    let workers: Option<usize> = flags.get("--workers").map(|value| match value.parse() {
        Ok(count) if count >= 1 => count,
        _ => usage_error(PROGRAM, &format!("--workers {value}: expected an integer of at least 1")),
    });
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(count) = workers {
        builder.worker_threads(count);
    }
    let runtime = builder.enable_all().build().unwrap_or_else(|error| {
        eprintln!("{PROGRAM}: cannot start tokio's runtime: {error}");
        std::process::exit(1)
    });
    runtime.block_on(serve_all(flags, workers));
}

async fn serve_all(flags: HashMap<String, String>, workers: Option<usize>) {
    let flag = |name: &str, default: &str| flags.get(name).cloned().unwrap_or_else(|| default.to_owned());
    let (host, loop_name, compression) =
        (flag("--host", "127.0.0.1"), flag("--loop", "auto"), flag("--compression", "default"));
    let port: u16 = flags
        .get("--port")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| usage_error(PROGRAM, "--port must be an integer 0-65535"));
    if loop_name != "auto" {
        usage_error(PROGRAM, &format!("--loop {loop_name} is not available here (use auto)"));
    }
    match compression.as_str() {
        "default" | "off" => {}
        "on" => {
            usage_error(PROGRAM, "--compression on: tungstenite has no permessage-deflate (supported: default, off)")
        }
        other => usage_error(PROGRAM, &format!("--compression {other}: expected default or off")),
    }
    let tls = match (flags.get("--tls-cert"), flags.get("--tls-key")) {
        (Some(cert), Some(key)) => Some(tls_acceptor(cert, key).unwrap_or_else(|problem| {
            eprintln!("{PROGRAM}: cannot load the TLS certificate or key: {problem}");
            std::process::exit(1)
        })),
        (None, None) => None,
        _ => usage_error(PROGRAM, "--tls-cert and --tls-key go together"),
    };

    let listener = TcpListener::bind((host.as_str(), port)).await.unwrap_or_else(|error| {
        eprintln!("{PROGRAM}: cannot listen on {host}:{port}: {error}");
        std::process::exit(1)
    });
    write_info(&compression, tls.is_some(), workers);
    eprintln!("rust-tungstenite server listening on {}", listener.local_addr().unwrap());

    let rooms = Rooms::default();
    let (mut terminate, mut interrupt) =
        (signal(SignalKind::terminate()).unwrap(), signal(SignalKind::interrupt()).unwrap());
    for id in 0u64.. {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => { tokio::spawn(serve(stream, tls.clone(), rooms.clone(), id)); }
                Err(error) => {
                    eprintln!("{PROGRAM}: accept failed: {error}"); // e.g. out of file descriptors: back off a little
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
        }
    }
    std::process::exit(0);
}

async fn serve(stream: TcpStream, tls: Option<TlsAcceptor>, rooms: Rooms, id: u64) {
    match tls {
        None => relay(stream, rooms, id).await,
        Some(acceptor) => {
            if let Ok(stream) = acceptor.accept(stream).await {
                relay(stream, rooms, id).await
            }
        }
    }
}

async fn relay<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(stream: S, rooms: Rooms, id: u64) {
    let (sender, mut queue) = mpsc::unbounded_channel();
    let mut room = String::new();
    // Join in the handshake callback, before the 101 response goes out: the peer may send as soon as it has it.
    let callback = |request: &Request, response: Response| {
        room = match request.uri().path() {
            "" => "/",
            path => path,
        }
        .to_owned(); // the path without its query
        rooms.lock().unwrap().entry(room.clone()).or_default().insert(id, sender);
        Ok(response)
    };
    let accepted = accept_hdr_async(stream, callback).await;
    if let Ok(websocket) = accepted {
        let (mut sink, mut source) = websocket.split();
        tokio::spawn(async move {
            while let Some(message) = queue.recv().await {
                if sink.send(message).await.is_err() {
                    break;
                }
            }
        });
        while let Some(Ok(message)) = source.next().await {
            if message.is_text() || message.is_binary() {
                for (member, sender) in &rooms.lock().unwrap()[&room] {
                    if *member != id {
                        let _ = sender.send(message.clone()); // Bytes inside: a clone shares the payload
                    }
                }
            }
        }
    }
    // Leaving drops this member's sender, which ends its writer task once the queue is drained.
    let mut rooms = rooms.lock().unwrap();
    if let Some(members) = rooms.get_mut(&room) {
        members.remove(&id);
        if members.is_empty() {
            rooms.remove(&room);
        }
    }
}

fn tls_acceptor(cert: &str, key: &str) -> Result<TlsAcceptor, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{cert}: {e}"))?;
    let private_key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{key}: {e}"))?;
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map_err(|e| e.to_string())?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The server report, written atomically to PINGPONG_INFO_FILE when the orchestrator set it.
fn write_info(compression: &str, tls: bool, workers: Option<usize>) {
    let Ok(path) = std::env::var("PINGPONG_INFO_FILE") else { return };
    let report = format!(
        r#"{{"format_version": 1, "role": "server", "pid": {pid}, "implementation": "rust-tungstenite", "runtime": {{"name": "rust", "version": "{RUSTC_VERSION}"}}, "libraries": {libraries}, "loop_requested": "auto", "loop": "tokio", "settings": {{"compression": {compression}, "compression_effective": false, "tls": {tls}, "workers": {workers}, "worker_threads": {threads}}}}}"#,
        pid = std::process::id(),
        libraries = libraries_json(),
        compression = json_string(compression),
        workers = workers.map_or("null".to_owned(), |count| count.to_string()),
        threads = tokio::runtime::Handle::current().metrics().num_workers(),
    );
    let temporary = format!("{path}.{}.tmp", std::process::id());
    if std::fs::write(&temporary, report).and_then(|_| std::fs::rename(&temporary, &path)).is_err() {
        eprintln!("{PROGRAM}: cannot write {path}");
    }
}
