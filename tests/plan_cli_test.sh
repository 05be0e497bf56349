#!/usr/bin/env bash
# `shoal plan` end to end: the seed check's numbers, a preset plan in text and JSON, errors.
set -euo pipefail
SHOAL="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$SHOAL" plan --seed-check)
for s in "20 PFLOPS" "24.41 TiB" "2.56 PB/s" "13.039 GiB" "32.596 GiB" "= 53 nodes" "= 131 nodes" "KV cache"; do
  grep -qF "$s" <<<"$out" || fail "seed check lacks '$s'"
done

out=$("$SHOAL" plan --model kimi-k3 --device ps3 --context 4096 --concurrency 16)
for s in "69 KDA" "24 MLA" "layer split" "binding:" "power:"; do
  grep -qF "$s" <<<"$out" || fail "kimi-k3 plan lacks '$s'"
done

json=$("$SHOAL" plan --model llama-3.1-70b --device h100-sxm --nodes 4 --json)
python3 - "$json" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
assert j["mode"] in ("pipeline", "single node"), j["mode"]
assert j["nodes_used"] <= 4 and j["nodes_used"] >= 1
assert j["decode_tokens_per_s_aggregate"] > 0
assert j["weights"]["total"] > 35 * 2**30, j["weights"]["total"]
PY

"$SHOAL" plan --model llama-3.1-405b --device rpi5-8g --nodes 2 2>/dev/null && fail "405B on 2 Pis planned"
"$SHOAL" plan --model nope --device ps3 2>/dev/null && fail "unknown model accepted"
echo "plan_cli_test: ok"
