# Shared helpers of the loopback cluster tests (sourced). Needs SHOAL, TMP (holding key and
# models/), MODEL for serve, and the arrays/files the callers clean up: PIDS and $TMP/pids.
# Safe under `set -euo pipefail` (netns_test.sh) as under `set -u` (the others).

# check NAME CMD: runs CMD, prints ok/FAIL and counts failures in $fails.
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails+1)); fi; }

# node NAME [flags...] -> prints "HOST:PORT" once listening (nothing if it did not start within
# 5 s); pid in $TMP/NAME.pid. HOST is $NODE_HOST (default 127.0.0.1); with $NODE_NS set, the
# node runs in that network namespace (`ip netns exec` execs, so the pid is the node's). The
# model directory is $NODE_MODEL_DIR (default $TMP/models).
node() {
  local name=$1 host=${NODE_HOST:-127.0.0.1}; shift
  ${NODE_NS:+ip netns exec "$NODE_NS"} "$SHOAL" node --listen "$host:0" \
    --model-dir "${NODE_MODEL_DIR:-$TMP/models}" --cluster-key-file "$TMP/key" --no-measure -t 1 \
    --name "$name" "$@" > "$TMP/$name.log" 2>&1 &
  echo $! >> "$TMP/pids"
  echo $! > "$TMP/$name.pid"
  for _ in $(seq 1 100); do
    local p
    p=$(grep -so "listening on $host:[0-9]*" "$TMP/$name.log" | grep -o '[0-9]*$') || true
    [ -n "$p" ] && { echo "$host:$p"; return 0; }
    sleep 0.05
  done
  return 0
}

# serve LOG [flags...] -> sets PORT, SPID; waits for /health 200 (or the process to exit).
# Context: $SERVE_MAX_LEN tokens (default 256); the array SERVE_EXTRA adds flags to every call;
# with $SERVE_NS set, the server (and the health check) run in that network namespace.
serve() {
  local log=$1; shift
  ${SERVE_NS:+ip netns exec "$SERVE_NS"} "$SHOAL" serve -m "$MODEL" --port 0 --max-num-seqs 8 \
    --max-model-len "${SERVE_MAX_LEN:-256}" -t 1 --cluster-key-file "$TMP/key" \
    ${SERVE_EXTRA[@]+"${SERVE_EXTRA[@]}"} "$@" > "$TMP/$log" 2>&1 &
  SPID=$!; PIDS+=($SPID); PORT=""
  for _ in $(seq 1 200); do
    PORT=$(grep -so 'listening on http://127.0.0.1:[0-9]*' "$TMP/$log" | grep -o '[0-9]*$') || true
    [ -n "$PORT" ] && ${SERVE_NS:+ip netns exec "$SERVE_NS"} curl -s "127.0.0.1:$PORT/health" |
      grep -q ok && return 0
    kill -0 $SPID 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# ask OUT [MAX_TOKENS]: four requests at once to $PORT (so steps are cut into micro-batches), two
# greedy and two seeded; their texts hex-encoded in OUT, one per line ("bad response I" if not).
ask() {
  local out=$1 n=${2:-24} cp=() i
  : > "$out"
  for i in 0 1 2 3; do
    curl -s -m 120 "127.0.0.1:$PORT/v1/completions" -d "{\"prompt\":\"Story number $i begins\",\"max_tokens\":$n,\"temperature\":$([ $i -lt 2 ] && echo 0 || echo 0.8),\"seed\":$i,\"ignore_eos\":true}" > "$TMP/r$i" &
    cp+=($!)
  done
  wait "${cp[@]}"
  for i in 0 1 2 3; do python3 -c "import json; print(json.load(open('$TMP/r$i'))['choices'][0]['text'].encode().hex())" >> "$out" 2>/dev/null || echo "bad response $i" >> "$out"; done
}
