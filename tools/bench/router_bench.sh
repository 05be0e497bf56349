#!/usr/bin/env bash
# Replicas behind `shoal router` on this machine (issue #38's targets):
#  1. Aggregate output tokens/s at 16 concurrent streams: one `shoal serve` replica (1 thread)
#     alone, against two replicas (1 thread each) behind one router, and the same two without a
#     router (8 streams each from two clients: the machine's ceiling); REPEAT rounds side by
#     side, then the median of each and the ratios.
#  2. Prefix-cache hit rate of a shared-prefix workload (8 system prompts of ~200 words, each
#     followed by a different question; 64 requests, 8 at once) through the router with
#     --policy affinity and with --policy round-robin: the replicas' vllm:prefix_cache_hits_total
#     over vllm:prefix_cache_queries_total, summed.
# Usage: tools/bench/router_bench.sh SHOAL MODEL [REPEAT]   (MODEL: e.g. `shoal synth --preset 1b
# --layers 8 --type q4_0`)
set -euo pipefail
SHOAL=$1 MODEL=$2 REPEAT=${3:-3}
W=$(mktemp -d); PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$W"' EXIT
replica() {  # LOG -> REP (its port), its pid in PIDS
  "$SHOAL" serve -m "$MODEL" -t 1 --port 0 --max-num-seqs 16 --max-model-len 1024 > "$W/$1" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 600); do
    REP=$(grep -so 'listening on http://127.0.0.1:[0-9]*' "$W/$1" | grep -o '[0-9]*$' || true)
    [ -n "$REP" ] && curl -s "127.0.0.1:$REP/health" | grep -q ok && return
    sleep 0.1
  done
  echo "replica did not start" >&2; exit 1
}
router() {  # POLICY PORT... -> R (its port), RPID
  local policy=$1; shift
  local args=(); for p in "$@"; do args+=(--replica "http://127.0.0.1:$p"); done
  "$SHOAL" router --listen 127.0.0.1:0 --policy "$policy" "${args[@]}" > "$W/router.log" 2>&1 &
  RPID=$!; PIDS+=($RPID)
  for _ in $(seq 1 100); do
    R=$(grep -so 'listening on http://127.0.0.1:[0-9]*' "$W/router.log" | grep -o '[0-9]*$' || true)
    [ -n "$R" ] && curl -s "127.0.0.1:$R/health" | grep -q "\"replicas_up\":$#" && return
    sleep 0.1
  done
  echo "router did not start" >&2; exit 1
}
tps() {  # PORT -> output tokens/s of 32 requests, 16 at once (after a warm-up of 16)
  "$SHOAL" bench serve --url "http://127.0.0.1:$1" -n 16 --max-concurrency 16 --input-len 32 \
    --output-len 16 --seed 1 --json > /dev/null 2>&1
  "$SHOAL" bench serve --url "http://127.0.0.1:$1" -n 32 --max-concurrency 16 --input-len 32 \
    --output-len 64 --json 2>/dev/null | python3 -c "import json,sys; print('%.2f' % json.load(sys.stdin)['output_throughput'])"
}
half() {  # PORT -> output tokens/s of 16 requests, 8 at once
  "$SHOAL" bench serve --url "http://127.0.0.1:$1" -n 16 --max-concurrency 8 --input-len 32 \
    --output-len 64 --json 2>/dev/null | python3 -c "import json,sys; print('%.2f' % json.load(sys.stdin)['output_throughput'])"
}
replica r1.log; P1=$REP; replica r2.log; P2=$REP
echo "aggregate output tokens/s at 16 streams (32 requests of 32 + 64 tokens):"
for r in $(seq 1 "$REPEAT"); do
  one=$(tps "$P1")
  router least-loaded "$P1" "$P2"; two=$(tps "$R"); kill $RPID; wait $RPID 2>/dev/null || true
  # The ceiling: the same two replicas without a router, 8 streams each from two clients.
  half "$P1" > "$W/h1" & h=$!; half "$P2" > "$W/h2"; wait $h
  direct=$(python3 -c "print('%.2f' % ($(cat "$W/h1") + $(cat "$W/h2")))")
  echo "  round $r: one replica $one, two behind the router $two, two without it $direct"
  echo "$one $two $direct" >> "$W/tps"
done
python3 - "$W/tps" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
one = statistics.median(r[0] for r in rows); two = statistics.median(r[1] for r in rows)
direct = statistics.median(r[2] for r in rows)
print("  median: one %.2f, two behind the router %.2f (%.2fx; per round %s), two without it %.2f "
      "(%.2fx)" % (one, two, two / one, ", ".join("%.2f" % (r[1] / r[0]) for r in rows), direct,
                   direct / one))
PY
python3 - "$W/prefix.jsonl" <<'PY'
import random, sys
rnd = random.Random(5)
words = "the a little big dog cat house tree river sun moon story happy sad red blue".split()
systems = [" ".join(rnd.choice(words) for _ in range(200)) for _ in range(8)]
with open(sys.argv[1], "w") as f:
    for i in range(64):
        s = systems[rnd.randrange(8)]
        f.write('{"prompt": "%s Question %d: %s?", "output_len": 8}\n' % (
            s, i, " ".join(rnd.choice(words) for _ in range(6))))
PY
hits() {  # PORTS -> "hits queries" summed over the replicas
  for p in "$@"; do curl -s "127.0.0.1:$p/metrics"; done | awk '
    /^vllm:prefix_cache_hits_total/ {h += $NF} /^vllm:prefix_cache_queries_total/ {q += $NF}
    END {print h, q}'
}
echo "prefix-cache hit rate, 64 requests over 8 shared system prompts, 8 at once:"
for policy in affinity round-robin; do
  kill "${PIDS[0]}" "${PIDS[1]}"; wait "${PIDS[0]}" "${PIDS[1]}" 2>/dev/null || true; PIDS=()
  replica r1.log; P1=$REP; replica r2.log; P2=$REP
  router "$policy" "$P1" "$P2"
  read -r h0 q0 < <(hits "$P1" "$P2")
  "$SHOAL" bench serve --url "http://127.0.0.1:$R" --dataset "$W/prefix.jsonl" -n 64 \
    --max-concurrency 8 --json > /dev/null 2>&1
  read -r h1 q1 < <(hits "$P1" "$P2")
  python3 -c "print('  %-12s %.1f%% (%d of %d blocks)' % ('$policy', 100.0 * ($h1 - $h0) / max(1, $q1 - $q0), $h1 - $h0, $q1 - $q0))"
  kill $RPID; wait $RPID 2>/dev/null || true
done
