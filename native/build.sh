#!/bin/sh
# Builds the native programs into build/.
#
#   sh native/build.sh                      run by `npm ci`: what every run needs, in a few seconds
#   sh native/build.sh websocket [SET...]   the compiled WebSocket programs: the sets named (go, rust, cpp), or all
#
# Without arguments, with the system C compiler (a failure here fails the set-up):
# - the C floor (raw TCP server and client);
# - the protocol floor (RFC 6455 WebSocket server and client in C, no library but libc);
# - the host sentinel (harness/measure/pacer.py, benchmarks/host_modes.py).
# With `websocket`: the compiled WebSocket servers and clients (native/go, native/rust, native/cpp), each set by its
# own build.sh from pinned versions. No run measures them unless asked (--servers native), so `npm ci` leaves them
# to their first use: the run that names one builds the sets it needs first (manifest entries' `build`,
# pingpong/harness/settings/native_build.py), about 3 minutes on 2 CPUs on a machine that never built them. A set
# whose toolchain or headers are missing writes why into build/<program>.unavailable and leaves its rows out
# (`run_bench.py --list` says why); it never fails. What they compile is kept outside the checkout for the next
# clone (native_cache in native/build_common.sh; Go keeps its own cache).
set -eu
cd "$(dirname "$0")/.."
mkdir -p build
if [ "${1:-}" != websocket ]; then
  [ $# -eq 0 ] || { echo "usage: sh native/build.sh [websocket [go] [rust] [cpp]]" >&2; exit 2; }
  CC="${CC:-cc}"
  for program in raw_tcp_server raw_tcp_client ws_floor_server ws_floor_client host_sentinel; do
    "$CC" -O2 -Wall -Wextra -o "build/$program" "native/$program.c"
  done
  echo "built build/raw_tcp_server, raw_tcp_client, ws_floor_server, ws_floor_client and host_sentinel with" \
    "$("$CC" --version | head -n 1)"
  exit 0
fi
shift
sets="${*:-go rust cpp}"
for language in $sets; do
  case "$language" in
    go | rust | cpp) ;;
    *) echo "native/build.sh websocket: unknown set '$language' (go, rust or cpp)" >&2; exit 2 ;;
  esac
done
# The sets at once: they share nothing, and each compiler waits on its own critical path part of the time (one Rust
# crate, one C++ translation unit), so on a machine with several CPUs they take the time of the longest. Each set's
# output is kept apart and shown whole, in order, when all are done.
echo "building the compiled WebSocket programs: $sets (sets at once; about 3 minutes on 2 CPUs the first time)"
for language in $sets; do
  { sh "native/$language/build.sh" || echo "native/$language/build.sh failed; its rows are left out" >&2; } \
    >"build/native-$language.log" 2>&1 &
done
wait
for language in $sets; do
  cat "build/native-$language.log" && rm -f "build/native-$language.log"
done
