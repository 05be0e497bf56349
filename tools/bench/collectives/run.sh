#!/usr/bin/env bash
# Builds gloo_bench (Debian's libgloo-dev) and group_bench (against this build's collective and
# net libraries) and runs both side by side for 1..8 members: Gloo over plain TCP, then
# collective::Group over Shoal's sealed links (aes) and unsealed ones (none), member count by
# member count.
#   tools/bench/collectives/run.sh [BUILD=build] [ITERS=100] [MEMBERS="1 2 3 4 5 6 7 8"]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BUILD=${1:-build} ITERS=${2:-100} MEMBERS=${3:-"1 2 3 4 5 6 7 8"}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
dpkg -s libgloo-dev >/dev/null 2>&1 || { echo "needs libgloo-dev (apt-get install libgloo-dev)"; exit 1; }
g++ -O2 -std=c++17 -o "$W/gloo_bench" "$ROOT/tools/bench/collectives/gloo_bench.cc" -lgloo -lpthread
g++ -O2 -std=c++20 -I"$ROOT/src" -o "$W/group_bench" "$ROOT/tools/bench/collectives/group_bench.cc" \
  "$ROOT/$BUILD/src/collective/libshoal_collective.a" "$ROOT/$BUILD/src/net/libshoal_net.a" \
  "$ROOT/$BUILD/src/io/libshoal_io.a" "$ROOT/$BUILD/src/base/libshoal_base.a" -lfmt -lcrypto -lpthread
for m in $MEMBERS; do
  "$W/gloo_bench" "$m" "$ITERS" | sed 's/^/gloo       /'
  "$W/group_bench" "$m" "$ITERS" aes | sed 's/^/shoal-aes  /'
  "$W/group_bench" "$m" "$ITERS" none | sed 's/^/shoal-none /'
done
