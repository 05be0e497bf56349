#!/usr/bin/env bash
# The PS3 test (issue #5): a model across N `shoal node` workers with --mem-limit each; prints
# every node's peak RSS (VmHWM, read from /proc outside the process) beside the plan's
# prediction (and, for a split stage, every member's), under load; COMPARE=1 also checks the texts
# against one process. Usage: tools/bench/ps3_test.sh SHOAL MODEL.gguf [NODES] [MEM_LIMIT] [serve flags...]
set -euo pipefail
SHOAL=$1 MODEL=$2 N=${3:-4} LIMIT=${4:-256M}
shift $(( $# < 4 ? $# : 4 ))
SERVE_FLAGS=("$@")
[ ${#SERVE_FLAGS[@]} -gt 0 ] || SERVE_FLAGS=(--max-num-seqs 4 --max-model-len 1024 --max-num-batched-tokens 256)
W=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$W/key"; chmod 600 "$W/key"
addrs=""
for i in $(seq 1 "$N"); do
  "$SHOAL" node --listen 127.0.0.1:0 --model-dir "$(dirname "$MODEL")" --mem-limit "$LIMIT" \
    --cluster-key-file "$W/key" --name "n$i" -t 1 > "$W/n$i.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 200); do
    port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$W/n$i.log" | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && break; sleep 0.1
  done
  addrs="$addrs,127.0.0.1:$port"
done
NODE_PIDS=("${PIDS[@]}")
"$SHOAL" serve -m "$MODEL" --nodes "${addrs#,}" --cluster-key-file "$W/key" --port 0 -t 1 \
  "${SERVE_FLAGS[@]}" > "$W/serve.log" 2>&1 &
PIDS+=($!)
port=""
for _ in $(seq 1 1200); do
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$W/serve.log" | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && grep -q "ready" "$W/serve.log" && break
  kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$W/serve.log"; exit 1; }
  sleep 0.1
done
hwm() { for p in "${NODE_PIDS[@]}"; do awk '/VmHWM/ {printf "%.1f ", $2/1024}' /proc/$p/status; done; }
echo "after assignment (MiB):  $(hwm)"
for p in "${NODE_PIDS[@]}"; do awk '/RssAnon|RssFile/ {printf "%s %.1f  ", $1, $2/1024} END {print ""}' /proc/$p/status; done
# Load: 4 long prompts at once (prefill chunks of max-num-batched-tokens), 32 tokens each: two
# greedy, two sampled with a seed. With COMPARE=1 the same requests then go to one process with
# the whole model, and the texts must be equal.
prompt=$(python3 -c "print(' '.join(['the quick brown fox jumps over the lazy dog']*60))")
ask() {  # PORT PREFIX
  local CPIDS=() i
  for i in 1 2 3 4; do
    curl -s -m 600 "127.0.0.1:$1/v1/completions" -d "{\"prompt\":\"$i $prompt\",\"max_tokens\":32,\"ignore_eos\":true,\"temperature\":$([ $i -le 2 ] && echo 0 || echo 0.8),\"seed\":$i}" > "$W/$2$i" &
    CPIDS+=($!)
  done
  wait "${CPIDS[@]}"
  for i in 1 2 3 4; do grep -q '"text"' "$W/$2$i" || { echo "request $i failed:"; head -c 300 "$W/$2$i"; }; done
}
ask "$port" r
echo "after load (MiB):        $(hwm)"
grep -E "^ +[0-9]+  n[0-9]|^  member " "$W/serve.log" || grep -A8 "^plan" "$W/serve.log"
if [ -n "${COMPARE:-}" ]; then
  "$SHOAL" serve -m "$MODEL" --port 0 -t 2 "${SERVE_FLAGS[@]}" > "$W/local.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 1200); do grep -q "ready" "$W/local.log" && break; sleep 0.1; done
  lport=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$W/local.log" | grep -o '[0-9]*$')
  ask "$lport" l
  same=0
  for i in 1 2 3 4; do
    python3 -c "import json,sys; a,b=(json.load(open(f))['choices'][0]['text'] for f in sys.argv[1:]); sys.exit(a!=b)" "$W/r$i" "$W/l$i" && same=$((same + 1))
  done
  echo "texts equal to one process: $same of 4"
  [ $same -eq 4 ]
fi
