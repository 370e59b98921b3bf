#!/bin/sh
# Builds rust-tungstenite (build/rust_ws_server, build/rust_ws_client) with cargo, from the versions pinned in
# native/rust/Cargo.toml and Cargo.lock (--locked), in a target folder kept outside the checkout (native_cache in
# native/build_common.sh: a later clone compiles only this crate, not its dependencies). Run from the project root:
# sh native/rust/build.sh. Without cargo, or when the build fails, it says why in build/<binary>.unavailable and
# exits 0.
set -u
cd "$(dirname "$0")/../.."
mkdir -p build
binaries="rust_ws_server rust_ws_client"

. native/build_common.sh

command -v cargo >/dev/null 2>&1 ||
  unavailable "cargo not found on PATH (install Rust 1.85 or newer to build rust-tungstenite)"
started=$(now)
target="$(native_cache)/rust-target"
[ "$(native_cache)" != off ] || target=build/rust-target
if ! cargo build --release --locked --quiet --manifest-path native/rust/Cargo.toml --target-dir "$target"; then
  unavailable "cargo build of rust-tungstenite failed with $(cargo --version) (see its output)"
fi
tungstenite=$(sed -n 's/^tokio-tungstenite = { version = "=\([^"]*\)".*/\1/p' native/rust/Cargo.toml)
tokio=$(sed -n 's/^tokio = { version = "=\([^"]*\)".*/\1/p' native/rust/Cargo.toml)
for binary in $binaries; do
  cp "$target/release/$binary" "build/$binary" && rm -f "build/$binary.unavailable"
  printf '{"rustc": "%s", "tokio": "%s", "tokio-tungstenite": "%s"}\n' "$(rustc --version | cut -d' ' -f2)" \
    "$tokio" "$tungstenite" >"build/$binary.versions" # what `run_bench.py --list` shows it was built with
done
echo "built build/rust_ws_server and build/rust_ws_client (tokio-tungstenite" \
  "$(sed -n 's/^tokio-tungstenite = { version = "=\([^"]*\)".*/\1/p' native/rust/Cargo.toml), $(rustc --version | cut -d' ' -f1,2))" \
  "in $(awk "BEGIN { printf \"%.1f\", $(now) - $started }") s"
