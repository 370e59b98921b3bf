#!/bin/sh
# Builds cpp-cpprestsdk's client (build/cpp_cpprest_client) with g++ against cpprestsdk 2.10.18 from Debian's
# libcpprest-dev (its websocket_client runs on websocketpp and Boost.Asio). Run by native/cpp/build.sh, or from the
# project root: sh native/cpp/build_cpprest.sh. When the compiler or the library is missing, or the build fails, it
# says why in build/cpp_cpprest_client.unavailable and exits 0.
set -u
cd "$(dirname "$0")/../.."
mkdir -p build
CXX="${CXX:-g++}"
binaries="cpp_cpprest_client"

. native/build_common.sh

command -v "$CXX" >/dev/null 2>&1 || unavailable "$CXX not found on PATH (install g++ to build cpp-cpprestsdk)"
for header in /usr/include/cpprest/ws_client.h /usr/include/openssl/ssl.h; do
  [ -f "$header" ] || unavailable "$header is missing (apt-get install libcpprest-dev to build cpp-cpprestsdk)"
done
version() { sed -n "s/.*define CPPREST_VERSION_$1 \([0-9]*\).*/\1/p" /usr/include/cpprest/version.h; }
cpprest="$(version MAJOR).$(version MINOR).$(version REVISION)"
[ "$cpprest" = "2.10.18" ] ||
  unavailable "cpprestsdk $cpprest found where 2.10.18 is pinned (apt-get install libcpprest-dev=2.10.18-1+b1)"
boost=$(sed -n 's/.*define BOOST_LIB_VERSION "\([0-9_]*\)".*/\1/p' /usr/include/boost/version.hpp | tr _ .)
compiler="$("$CXX" -dumpfullversion 2>/dev/null || "$CXX" -dumpversion)"

started=$(now)
if ! cached_cxx build/cpp_cpprest_client.tmp native/cpp/cpprest_client.cpp "-O2 -std=c++17 -Wall -pthread" \
    "-lcpprest -lssl -lcrypto -lboost_system"; then
  rm -f build/cpp_cpprest_client.tmp
  unavailable "$CXX $compiler could not compile native/cpp/cpprest_client.cpp with cpprestsdk $cpprest (see its output)"
fi
mv build/cpp_cpprest_client.tmp build/cpp_cpprest_client
rm -f build/cpp_cpprest_client.unavailable # what `run_bench.py --list` shows it was built with
printf '{"g++": "%s", "cpprestsdk": "%s", "boost": "%s"}\n' "$compiler" "$cpprest" "$boost" \
  >build/cpp_cpprest_client.versions
echo "built build/cpp_cpprest_client (cpprestsdk $cpprest, boost $boost, g++ $compiler)" \
  "in $(awk "BEGIN { printf \"%.1f\", $(now) - $started }") s"
