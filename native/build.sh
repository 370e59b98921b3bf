#!/bin/sh
# Builds the native programs into build/, run by `npm ci`:
# - the C floor (raw TCP server and client) with the system C compiler; a failure here fails the set-up;
# - the protocol floor (RFC 6455 WebSocket server and client in C, no library but libc), the same way;
# - the host sentinel (harness/measure/pacer.py, benchmarks/host_modes.py), the same way;
# - the compiled WebSocket servers and clients (native/go, native/rust, native/cpp), each by its own build.sh from
#   pinned versions. One whose toolchain or headers are missing writes why into build/<program>.unavailable and
#   leaves its rows out (`run_bench.py --list` says why); it never fails the set-up. What they compile is kept
#   outside the checkout for the next clone (native_cache in native/build_common.sh; Go keeps its own cache).
set -eu
cd "$(dirname "$0")/.."
mkdir -p build
CC="${CC:-cc}"
for program in raw_tcp_server raw_tcp_client ws_floor_server ws_floor_client host_sentinel; do
  "$CC" -O2 -Wall -Wextra -o "build/$program" "native/$program.c"
done
echo "built build/raw_tcp_server, raw_tcp_client, ws_floor_server, ws_floor_client and host_sentinel with" \
  "$("$CC" --version | head -n 1)"
if [ -n "${PINGPONG_SKIP_NATIVE_WEBSOCKET:-}" ]; then
  echo "PINGPONG_SKIP_NATIVE_WEBSOCKET is set: the Go, Rust and C++ WebSocket programs are not built" >&2
  exit 0
fi
# The three sets at once: they share nothing, and each compiler waits on its own critical path part of the time
# (one Rust crate, one C++ translation unit), so on a machine with several CPUs they take the time of the longest.
# Each set's output is kept apart and shown whole, in order, when all are done.
echo "building the Go, Rust and C++ WebSocket programs at once (a few minutes the first time on 2 CPUs)"
for language in go rust cpp; do
  { sh "native/$language/build.sh" || echo "native/$language/build.sh failed; its rows are left out" >&2; } \
    >"build/native-$language.log" 2>&1 &
done
wait
for language in go rust cpp; do
  cat "build/native-$language.log" && rm -f "build/native-$language.log"
done
