#!/usr/bin/env bash
# The shoal binary holds no VEX-encoded VNNI (AVX-VNNI) instruction: the AVX3_DL kernels run on
# CPUs with AVX512-VNNI only (Zen 4), where {vex} vpdpbusd/vpdpwssd fault with SIGILL.
set -euo pipefail
BIN=${1:?usage: isa_test.sh SHOAL_BINARY}
command -v objdump >/dev/null || { echo "SKIP: objdump not found"; exit 77; }
n=$(objdump -d --no-show-raw-insn "$BIN" | grep -c '{vex} vpdp' || true)
evex=$(objdump -d --no-show-raw-insn "$BIN" | grep -c 'vpdpbusd' || true)
echo "VEX VNNI instructions: $n; all vpdpbusd: $evex"
[ "$evex" -gt 0 ] || { echo "FAIL: no vpdpbusd at all (is the AVX3_DL target compiled?)"; exit 1; }
[ "$n" -eq 0 ] || { echo "FAIL: $n VEX-encoded VNNI instructions"; exit 1; }
echo PASS
