#!/usr/bin/env bash
# One stream's decode speed on this machine: one node process (1 thread) vs a TP=2 group of two
# node processes (1 thread each, --parallel tp=2, exact and fast) vs a PP=2 pipeline of the same
# two nodes, and one process with 2 threads. Prints the median time per output token (TPOT) of each, in turn,
# REPEAT rounds, then the ratios of the medians over the rounds (ONLY_TP=1: the tp=2 layouts only).
# Usage: tools/bench/tp_bench.sh SHOAL MODEL [REPEAT]
set -euo pipefail
SHOAL=$1 MODEL=$2 REPEAT=${3:-3}
W=$(mktemp -d); PIDS=()
trap 'for p in "${PIDS[@]}" $(cat "$W"/*.pid 2>/dev/null); do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$W"' EXIT
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$W/key"; chmod 600 "$W/key"
FLAGS=(--max-num-seqs 4 --max-model-len 512 --port 0)
wait_ready() { for _ in $(seq 1 1200); do grep -q "ready" "$1" 2>/dev/null && break; sleep 0.1; done
  grep -o 'listening on http://127.0.0.1:[0-9]*' "$1" | grep -o '[0-9]*$'; }
# One stream: 6 requests one after another, 32 prompt tokens and 128 generated each.
tpot() { "$SHOAL" bench serve --url "http://127.0.0.1:$1" --max-concurrency 1 --input-len 32 \
  --output-len 128 --num-prompts ${PROMPTS:-6} --json 2>/dev/null | python3 -c "import json,sys; print('%.2f' % json.load(sys.stdin)['median_tpot_ms'])"; }
node() { "$SHOAL" node --listen 127.0.0.1:0 --model-dir "$(dirname "$MODEL")" --cluster-key-file "$W/key" \
  --no-measure -t 1 --name "$1" > "$W/$1.log" 2>&1 & echo $! > "$W/$1.pid"
  for _ in $(seq 1 100); do p=$(grep -so 'listening on 127.0.0.1:[0-9]*' "$W/$1.log" | grep -o '[0-9]*$' || true); [ -n "$p" ] && break; sleep 0.1; done
  echo "127.0.0.1:$p"; }
run() {  # NAME LOG serve-flags...
  local name=$1 log=$2; shift 2
  "$SHOAL" serve -m "$MODEL" "${FLAGS[@]}" "$@" > "$W/$log" 2>&1 & local sp=$!; PIDS+=($sp)
  local t; t=$(tpot "$(wait_ready "$W/$log")"); echo "$name $t" >> "$W/all"
  printf '%-28s %8s ms/token\n' "$name" "$t"; kill $sp; wait $sp || true; }
for r in $(seq 1 "$REPEAT"); do
  a=$(node "a$r"); b=$(node "b$r")
  [ -n "${ONLY_TP:-}" ] || run "1 node x 1 thread" one.log -t 1 --nodes "$a" --cluster-key-file "$W/key"
  run "tp=2 x 1 thread" tp.log -t 1 --nodes "$a,$b" --cluster-key-file "$W/key" --parallel tp=2
  run "tp=2 fast x 1 thread" tpf.log -t 1 --nodes "$a,$b" --cluster-key-file "$W/key" --parallel tp=2 --tp-mode fast
  [ -n "${ONLY_TP:-}" ] || run "pp=2 x 1 thread" pp.log -t 1 --nodes "$a,$b" --cluster-key-file "$W/key" --parallel pp=2
  kill "$(cat "$W/a$r.pid")" "$(cat "$W/b$r.pid")" 2>/dev/null || true
  [ -n "${ONLY_TP:-}" ] || run "1 process x 2 threads" local.log -t 2
done
python3 - "$W/all" <<'PY'
import statistics, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, t = line.rsplit(' ', 1)
    d[name].append(float(t))
m = {k: statistics.median(v) for k, v in d.items()}
for k, v in d.items():
    print(f"{k:28s} median {m[k]:7.2f} ms/token  (min {min(v):.2f}, max {max(v):.2f}, n {len(v)})")
tp = m["tp=2 x 1 thread"]
for other in ("1 node x 1 thread", "pp=2 x 1 thread", "1 process x 2 threads"):
    if other in m:
        print(f"tp=2 speed-up over {other + ':':24s} {m[other] / tp:.2f}x")
print(f"tp=2 fast speed-up over tp=2 exact:       {tp / m['tp=2 fast x 1 thread']:.2f}x")
PY
