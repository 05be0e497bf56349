#!/usr/bin/env bash
# The link cipher's cost end to end: two 4-stage local clusters of the same model, one with
# --link-cipher aes-256-gcm (A) and one with none (B), both up for the whole run; each round
# measures single-stream decode (1000 / median TPOT, and output tok/s) and 16-stream output
# throughput on both, in A B order on odd rounds and B A on even ones, so drift cancels.
# Each measurement also reports the CPU time (user + system, /proc) the cluster's five processes
# spent per output token: on a shared machine, wall-clock throughput moves with other load, the
# CPU a token costs much less. Prints one line per measurement and medians at the end; nothing
# is stored.
#   tools/bench/link_cipher_bench.sh build/bin/shoal /tmp/1b-q4_0.gguf [ROUNDS=5]
set -euo pipefail
SHOAL=$1 MODEL=$2 ROUNDS=${3:-5}
W=$(mktemp -d); PIDS=()
trap 'for p in "${PIDS[@]}" $(cat "$W"/*.pid 2>/dev/null); do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$W"' EXIT
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$W/key"; chmod 600 "$W/key"
FLAGS=(--max-num-seqs 16 --max-model-len 512 --max-num-batched-tokens 256 --port 0 -t 1)
node() {  # node NAME CIPHER -> HOST:PORT
  "$SHOAL" node --listen 127.0.0.1:0 --model-dir "$(dirname "$MODEL")" --cluster-key-file "$W/key" \
    --no-measure -t 1 --name "$1" --link-cipher "$2" > "$W/$1.log" 2>&1 & echo $! > "$W/$1.pid"
  for _ in $(seq 1 100); do p=$(grep -so 'listening on 127.0.0.1:[0-9]*' "$W/$1.log" | grep -o '[0-9]*$' || true); [ -n "$p" ] && break; sleep 0.1; done
  echo "127.0.0.1:$p"; }
cluster() {  # cluster TAG CIPHER -> the API's port
  local nodes=""
  for i in 1 2 3 4; do nodes="$nodes${nodes:+,}$(node "$1$i" "$2")"; done
  "$SHOAL" serve -m "$MODEL" --nodes "$nodes" --cluster-key-file "$W/key" --link-cipher "$2" \
    "${FLAGS[@]}" > "$W/$1.log" 2>&1 & echo $! > "$W/$1.pid"
  for _ in $(seq 1 1200); do grep -q "ready" "$W/$1.log" 2>/dev/null && break; sleep 0.1; done
  grep -o 'listening on http://127.0.0.1:[0-9]*' "$W/$1.log" | grep -o '[0-9]*$'; }
cpu() {  # cpu TAG: CPU seconds so far of the coordinator and nodes of cluster TAG
  for f in "$W/$1".pid "$W/$1"[1-4].pid; do awk '{print $14 + $15}' "/proc/$(cat "$f")/stat"; done |
    awk -v hz="$(getconf CLK_TCK)" '{s += $1} END {printf "%.2f", s / hz}'; }
measure() {  # measure TAG KIND PORT: the bench's numbers, then CPU ms per output token
  local c0 c1 out
  c0=$(cpu "$1"); out=$("$2" "$3"); c1=$(cpu "$1")  # out: the numbers, then the token count
  echo "${out% *} $(python3 -c "print('%.2f' % (($c1 - $c0) * 1e3 / ${out##* }))")"; }
single() { "$SHOAL" bench serve --url "http://127.0.0.1:$1" --max-concurrency 1 --input-len 16 \
  --output-len 64 --num-prompts 3 --json 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print('%.2f %.2f %d' % (1000/j['median_tpot_ms'], j['output_throughput'], j['total_output_tokens']))"; }
multi() { "$SHOAL" bench serve --url "http://127.0.0.1:$1" --max-concurrency 16 --input-len 32 \
  --output-len 64 --num-prompts 32 --json 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print('%.2f %d' % (j['output_throughput'], j['total_output_tokens']))"; }
PA=$(cluster A aes-256-gcm); PB=$(cluster B none)
echo "A aes-256-gcm on :$PA, B none on :$PB"
single "$PA" > /dev/null; single "$PB" > /dev/null  # warm-up: page cache, first allocations
for r in $(seq 1 "$ROUNDS"); do
  order="A B"; [ $((r % 2)) -eq 0 ] && order="B A"
  for c in $order; do p=$PA; [ "$c" = B ] && p=$PB; echo "round $r $c single $(measure $c single "$p")"; done
  for c in $order; do p=$PA; [ "$c" = B ] && p=$PB; echo "round $r $c multi16 $(measure $c multi "$p")"; done
done | tee "$W/results"
python3 - "$W/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def col(c, kind, i):
    return [float(r[4 + i]) for r in rows if r[2] == c and r[3] == kind]
for kind, i, what in [("single", 0, "decode tok/s (1000/median TPOT)"),
                      ("single", 1, "single-stream output tok/s"),
                      ("single", 2, "single-stream CPU ms per token"),
                      ("multi16", 0, "16-stream output tok/s"),
                      ("multi16", 1, "16-stream CPU ms per token")]:
    a, b = col("A", kind, i), col("B", kind, i)
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{what}: aes-256-gcm median {ma:.2f} [{min(a):.2f}, {max(a):.2f}], "
          f"none median {mb:.2f} [{min(b):.2f}, {max(b):.2f}], ratio {ma / mb:.3f}")
PY
