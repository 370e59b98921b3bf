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
  wait # a build this script started meanwhile (its own set, its own note) ends before the script does
  exit 0
}

# Seconds since the epoch, with a fraction where date has one.
now() { date +%s.%N 2>/dev/null | grep -v N || date +%s; }

# Where compiled work is kept between checkouts: $PINGPONG_NATIVE_CACHE_DIR, else $XDG_CACHE_HOME (or ~/.cache)
# /websocket-pingpong-bench/native; "off" keeps nothing. Outside the checkout, like the old-release environments,
# so a second clone (a CI run, a newcomer's fresh clone) reuses what an earlier one compiled from the same inputs.
native_cache() {
  if [ -n "${PINGPONG_NATIVE_CACHE_DIR:-}" ]; then
    printf '%s\n' "$PINGPONG_NATIVE_CACHE_DIR"
  else
    printf '%s\n' "${XDG_CACHE_HOME:-$HOME/.cache}/websocket-pingpong-bench/native"
  fi
}

# cached_cxx OUTPUT SOURCE "FLAGS" "LIBRARIES": $CXX FLAGS -o OUTPUT SOURCE LIBRARIES, or the program an earlier
# build made from the same inputs. The key is a hash of the compiler's version, the command and the source as the
# preprocessor expands it (every header it includes, with its version), so a changed header or flag compiles anew.
# FLAGS and LIBRARIES are split on spaces; SOURCE is relative to the project root, so clones share their keys.
cached_cxx() {
  output=$1 source=$2 flags=$3 libraries=$4
  cache=$(native_cache)
  # shellcheck disable=SC2086 # FLAGS and LIBRARIES are lists of words
  if [ "$cache" = off ] || ! key=$({ "$CXX" --version && printf '%s\n' "$flags" "$libraries" &&
      "$CXX" $flags -E "$source"; } | sha256sum | cut -c1-32); then
    "$CXX" $flags -o "$output" "$source" $libraries
    return
  fi
  kept="$cache/cxx/$key/$(basename "$output")"
  if [ -f "$kept" ]; then
    cp "$kept" "$output" && return
  fi
  "$CXX" $flags -o "$output" "$source" $libraries || return 1
  mkdir -p "$cache/cxx/$key" && cp "$output" "$kept.$$" && mv "$kept.$$" "$kept" ||
    echo "could not keep $output in $cache/cxx (it is built again next time)" >&2
  return 0
}
