#!/usr/bin/env bash
# `shoal sim` end to end on a small platform: requests finish, failures are survived with no
# token lost, JSON parses. Exit 77 (skip) when the binary was built without SimGrid.
set -euo pipefail
SHOAL="$1"
"$SHOAL" sim --help >/dev/null 2>&1 || { echo "shoal built without SimGrid: skipped"; exit 77; }
json=$("$SHOAL" sim --model llama-3.1-8b --device h100-sxm --nodes 4 --duration 2m \
  --workload poisson:2,in:128,out:32 --failures mtbf:0.02 --seed 3 --json)
python3 - "$json" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
assert j["requests_done"] > 100, j["requests_done"]
assert j["tokens_lost"] == 0 and j["tokens_duplicated"] == 0
assert j["failures"] >= 1, j["failures"]
assert j["ttft_s"]["n"] > 0 and j["tpot_s"]["p50"] > 0
assert j["tokens_generated"] >= 32 * j["requests_done"]
PY
"$SHOAL" sim --model llama-3.1-8b --device h100-sxm --nodes 1 --topology hypercube 2>/dev/null \
  && { echo "FAIL: unknown topology accepted"; exit 1; }
echo "sim_cli_test: ok"
