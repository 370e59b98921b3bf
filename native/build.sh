#!/bin/sh
# Builds the C floor (raw TCP server and client) into build/ with the system C compiler. Run by `npm ci`.
set -eu
cd "$(dirname "$0")/.."
mkdir -p build
CC="${CC:-cc}"
for program in raw_tcp_server raw_tcp_client; do
  "$CC" -O2 -Wall -Wextra -o "build/$program" "native/$program.c"
done
echo "built build/raw_tcp_server and build/raw_tcp_client with $("$CC" --version | head -n 1)"
