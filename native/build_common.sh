# What the native set's build scripts (native/go, native/rust, native/cpp) share; sourced by each after it has set
# $binaries (the programs it builds into build/) and moved to the project root.

# Why this set cannot be built here, in one line: written to build/<binary>.unavailable for each binary (which
# --list and every skipped cell then give as the reason), with any older build removed; the set-up goes on.
unavailable() {
  for binary in $binaries; do
    rm -f "build/$binary" "build/$binary.versions" # not an older build: the harness reads the note without one
    printf '%s\n' "$1" >"build/$binary.unavailable"
  done
  printf '%s\n' "$1" >&2
  exit 0
}

# Seconds since the epoch, with a fraction where date has one.
now() { date +%s.%N 2>/dev/null | grep -v N || date +%s; }
