// Hands the compiler's version and the locked library versions to the programs' reports.
use std::{env, fs, process::Command};

fn main() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let output = Command::new(rustc).arg("--version").output().expect("rustc --version");
    let version = String::from_utf8_lossy(&output.stdout).split_whitespace().nth(1).unwrap_or("unknown").to_owned();
    println!("cargo:rustc-env=RUSTC_VERSION={version}");
    let lock = fs::read_to_string("Cargo.lock").expect("Cargo.lock");
    for name in ["tokio", "tokio-tungstenite", "tungstenite", "rustls"] {
        let version = lock
            .split("[[package]]")
            .find(|entry| entry.contains(&format!("\nname = \"{name}\"\n")))
            .and_then(|entry| entry.split("\nversion = \"").nth(1))
            .and_then(|rest| rest.split('"').next())
            .expect("a locked version");
        println!("cargo:rustc-env=VERSION_{}={version}", name.to_uppercase().replace('-', "_"));
    }
    println!("cargo:rerun-if-changed=Cargo.lock");
}
