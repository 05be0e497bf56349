#!/usr/bin/env bash
# Aggregate decode throughput with 16 concurrent streams: one process with 2 threads vs 2 stages
# x 1 thread with --pipeline-groups 1 (steps one at a time) and 2 (overlapped). Prints output
# tokens/s of each, in A/B order, REPEAT times.
# Usage: tools/bench/pipeline_bench.sh SHOAL MODEL [REPEAT]
set -euo pipefail
SHOAL=$1 MODEL=$2 REPEAT=${3:-1}
W=$(mktemp -d); PIDS=()
# node() runs inside $(...), a subshell whose PIDS the trap never sees: each node's pid goes to
# a file, and the trap kills those too (a leaked node holds ~450 MiB and answers heartbeats).
trap 'for p in "${PIDS[@]}" $(cat "$W"/*.pid 2>/dev/null); do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$W"' EXIT
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$W/key"; chmod 600 "$W/key"
FLAGS=(--max-num-seqs 16 --max-model-len 512 --max-num-batched-tokens 256 --port 0)
wait_ready() { for _ in $(seq 1 1200); do grep -q "ready" "$1" 2>/dev/null && break; sleep 0.1; done
  grep -o 'listening on http://127.0.0.1:[0-9]*' "$1" | grep -o '[0-9]*$'; }
bench() { "$SHOAL" bench serve --url "http://127.0.0.1:$1" --max-concurrency 16 --input-len 32 \
  --output-len 64 --num-prompts 32 --json 2>/dev/null | python3 -c "import json,sys; print('%.1f' % json.load(sys.stdin)['output_throughput'])"; }
node() { "$SHOAL" node --listen 127.0.0.1:0 --model-dir "$(dirname "$MODEL")" --cluster-key-file "$W/key" \
  --no-measure -t 1 --name "$1" > "$W/$1.log" 2>&1 & echo $! > "$W/$1.pid"
  for _ in $(seq 1 100); do p=$(grep -so 'listening on 127.0.0.1:[0-9]*' "$W/$1.log" | grep -o '[0-9]*$' || true); [ -n "$p" ] && break; sleep 0.1; done
  echo "127.0.0.1:$p"; }
for r in $(seq 1 "$REPEAT"); do
  "$SHOAL" serve -m "$MODEL" -t 2 "${FLAGS[@]}" > "$W/local.log" 2>&1 & sp=$!; PIDS+=($sp)
  echo "one process, 2 threads:     $(bench "$(wait_ready "$W/local.log")") tok/s"; kill $sp; wait $sp || true
  for g in 1 2; do
    a=$(node "a$r$g"); b=$(node "b$r$g")
    "$SHOAL" serve -m "$MODEL" -t 1 --nodes "$a,$b" --cluster-key-file "$W/key" --pipeline-groups $g \
      "${FLAGS[@]}" > "$W/c$g.log" 2>&1 & sp=$!; PIDS+=($sp)
    echo "2 stages x 1, groups $g:     $(bench "$(wait_ready "$W/c$g.log")") tok/s"; kill $sp; wait $sp || true
    kill "$(cat "$W/a$r$g.pid")" "$(cat "$W/b$r$g.pid")" 2>/dev/null || true
  done
done
