#!/bin/sh
# Builds cpp-websocketpp (build/cpp_ws_server, build/cpp_ws_client) with g++ against websocketpp 0.8.2 and
# standalone Asio from Debian's libwebsocketpp-dev and libasio-dev. Run from the project root: sh native/cpp/build.sh.
# When the compiler or a header is missing, or the build fails, it says why in build/<binary>.unavailable and
# exits 0.
set -u
cd "$(dirname "$0")/../.."
mkdir -p build
CXX="${CXX:-g++}"
binaries="cpp_ws_server cpp_ws_client"
sh native/cpp/build_cpprest.sh & # cpp-cpprestsdk's client, meanwhile: its own library, its own .unavailable

. native/build_common.sh

command -v "$CXX" >/dev/null 2>&1 || unavailable "$CXX not found on PATH (install g++ to build cpp-websocketpp)"
for header in /usr/include/websocketpp/version.hpp /usr/include/asio.hpp; do
  [ -f "$header" ] ||
    unavailable "$header is missing (apt-get install libwebsocketpp-dev libasio-dev to build cpp-websocketpp)"
done
for header in /usr/include/openssl/ssl.h /usr/include/zlib.h; do
  [ -f "$header" ] ||
    unavailable "$header is missing (apt-get install libssl-dev zlib1g-dev to build cpp-websocketpp)"
done
websocketpp=$(sed -n 's/.*user_agent\[\] = "WebSocket++\/\([^"]*\)".*/\1/p' /usr/include/websocketpp/version.hpp)
[ "$websocketpp" = "0.8.2" ] ||
  unavailable "websocketpp $websocketpp found where 0.8.2 is pinned (apt-get install libwebsocketpp-dev=0.8.2-4)"
asio=$(sed -n 's/.*define ASIO_VERSION [0-9]* \/\/ \([0-9.]*\).*/\1/p' /usr/include/asio/version.hpp)
compiler="$("$CXX" -dumpfullversion 2>/dev/null || "$CXX" -dumpversion)"

started=$(now)
# The server and the client at once (each is one translation unit of about 40 CPU-seconds; on a machine with
# several CPUs they take the time of one), each a program an earlier build kept when its inputs are the same.
for program in server client; do
  rm -f "build/cpp_ws_$program.tmp"
  cached_cxx "build/cpp_ws_$program.tmp" "native/cpp/$program.cpp" "-O2 -std=c++17 -Wall -pthread" \
    "-lssl -lcrypto -lz" >"build/cpp_ws_$program.log" 2>&1 &
done
wait
failed=
for program in server client; do
  cat "build/cpp_ws_$program.log" >&2 && rm -f "build/cpp_ws_$program.log"
  if [ -f "build/cpp_ws_$program.tmp" ]; then
    mv "build/cpp_ws_$program.tmp" "build/cpp_ws_$program"
  else
    failed="${failed:-native/cpp/$program.cpp}"
  fi
done
[ -z "$failed" ] ||
  unavailable "$CXX $compiler could not compile $failed with websocketpp $websocketpp and asio $asio (see its output)"
for binary in $binaries; do # what `run_bench.py --list` shows it was built with
  rm -f "build/$binary.unavailable"
  printf '{"g++": "%s", "websocketpp": "%s", "asio": "%s"}\n' "$compiler" "$websocketpp" "$asio" \
    >"build/$binary.versions"
done
echo "built build/cpp_ws_server and build/cpp_ws_client (websocketpp $websocketpp, asio $asio, g++ $compiler)" \
  "in $(awk "BEGIN { printf \"%.1f\", $(now) - $started }") s"
