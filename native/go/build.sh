#!/bin/sh
# Builds go-gorilla (build/go_ws_server, build/go_ws_client) with the local Go toolchain, from the versions pinned in
# native/go/go.mod and go.sum. Run from the project root: sh native/go/build.sh. Without Go, or when the build
# fails, it says why in build/<binary>.unavailable and exits 0.
set -u
cd "$(dirname "$0")/../.."
mkdir -p build
binaries="go_ws_server go_ws_client"

. native/build_common.sh

command -v go >/dev/null 2>&1 || unavailable "go not found on PATH (install Go 1.24 or newer to build go-gorilla)"
started=$(now)
# The same build whatever the caller's Go environment says: this module, its go.sum, the installed toolchain.
export GOTOOLCHAIN=local GOFLAGS= GO111MODULE=on GOWORK=off CGO_ENABLED=0
for program in server client; do
  if ! output=$(cd native/go && go build -trimpath -mod=readonly -buildvcs=false \
      -o "../../build/go_ws_$program" "./$program" 2>&1); then
    printf '%s\n' "$output" >&2
    unavailable "go build of go-gorilla's $program failed with $(go version): $(printf '%s' "$output" | tail -n 1)"
  fi
done
rm -f build/go_ws_server.unavailable build/go_ws_client.unavailable
gorilla=$(awk '$2 == "github.com/gorilla/websocket" { print $3 }' native/go/go.mod)
for binary in $binaries; do # what `run_bench.py --list` shows it was built with
  printf '{"go": "%s", "gorilla/websocket": "%s"}\n' "$(go env GOVERSION | sed 's/^go//')" "$gorilla" \
    >"build/$binary.versions"
done
echo "built build/go_ws_server and build/go_ws_client (gorilla/websocket $gorilla, $(go env GOVERSION))" \
  "in $(awk "BEGIN { printf \"%.1f\", $(now) - $started }") s"
