#!/usr/bin/env bash
# Installs the Debian 12 packages Shoal builds and tests with, and any named as arguments (e.g.
# gnuplot-nox for `make plots`); does nothing when all are present.
set -euo pipefail

PKGS=(
  g++ make cmake ninja-build pkg-config git ca-certificates
  libhwy-dev libboost-dev libssl-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libpcre2-dev libxxhash-dev libgtest-dev libgmock-dev libbenchmark-dev libtomlplusplus-dev libsimgrid-dev
  curl python3 iproute2 nftables clang libclang-rt-14-dev
  "$@"
)
# clang and libclang-rt-14-dev (libFuzzer) serve `make test-fuzz`.
# iproute2 (ip netns, tc) and nftables (loss and partitions) serve tests/netns_test.sh and the
# chaos suite's network trials, which run where they are root.

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The server's end-to-end test drives it with the official `openai` npm package. Node from
# another source (e.g. NodeSource, which bundles npm) counts as present.
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "error: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
