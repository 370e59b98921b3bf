//! What the rust-tungstenite server and client share: flags, payloads, versions and a little JSON.
use std::collections::HashMap;

pub const RUSTC_VERSION: &str = env!("RUSTC_VERSION");
/// tungstenite's defaults (WebSocketConfig), which both programs keep and report.
pub const MAX_MESSAGE_SIZE: usize = 64 << 20;
pub const MAX_FRAME_SIZE: usize = 16 << 20;

/// The libraries as locked in Cargo.lock, as a JSON object.
pub fn libraries_json() -> String {
    format!(
        r#"{{"tokio-tungstenite": "{}", "tungstenite": "{}", "tokio": "{}", "rustls": "{}"}}"#,
        env!("VERSION_TOKIO_TUNGSTENITE"),
        env!("VERSION_TUNGSTENITE"),
        env!("VERSION_TOKIO"),
        env!("VERSION_RUSTLS")
    )
}

/// Print one line on stderr and exit 2 (bad arguments).
pub fn usage_error(program: &str, problem: &str) -> ! {
    eprintln!("{program}: {problem}");
    std::process::exit(2)
}

/// `--flag value` or `--flag=value` for the flags in `with_value`, bare `--flag` for those in `switches` (each a
/// space-separated list).
pub fn parse_flags(with_value: &str, switches: &str) -> Result<HashMap<String, String>, String> {
    let (with_value, switches): (Vec<_>, Vec<_>) =
        (with_value.split_whitespace().collect(), switches.split_whitespace().collect());
    let mut flags = HashMap::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        if switches.contains(&name.as_str()) && inline.is_none() {
            flags.insert(name, String::new());
        } else if with_value.contains(&name.as_str()) {
            let value = inline.or_else(|| args.next()).ok_or(format!("{name} needs a value"))?;
            flags.insert(name, value);
        } else {
            return Err(format!("unknown option {arg}"));
        }
    }
    Ok(flags)
}

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const UTF8_CYCLE: [&str; 4] = ["a", "\u{e9}", "\u{20ac}", "\u{1f600}"];

/// The ping (which=0) or pong (which=1) payload of exactly `size` bytes, as pingpong/kit/payloads.py makes it.
pub fn make_payload(kind: &str, size: usize, which: usize) -> Vec<u8> {
    match kind {
        "text-ascii" => (0..size).map(|i| ALPHABET[(i + which) % 36]).collect(),
        "binary" => (0..size).map(|i| ((i * 31 + 7 + which * 101) & 0xff) as u8).collect(),
        _ => {
            let mut out = Vec::with_capacity(size);
            let mut index = which;
            while out.len() < size {
                let c = UTF8_CYCLE[index % 4].as_bytes();
                if out.len() + c.len() > size {
                    out.push(ALPHABET[(index + which) % 36]);
                } else {
                    out.extend_from_slice(c);
                }
                index += 1;
            }
            out
        }
    }
}

/// A JSON string literal.
pub fn json_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
