# Shared helpers of the loopback cluster tests (sourced). Needs SHOAL, TMP (holding key and
# models/), MODEL for serve, and the arrays/files the callers clean up: PIDS and $TMP/pids.

# check NAME CMD: runs CMD, prints ok/FAIL and counts failures in $fails.
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails+1)); fi; }

# node NAME [flags...] -> prints "127.0.0.1:PORT" once listening; pid in $TMP/NAME.pid. The model
# directory is $NODE_MODEL_DIR (default $TMP/models).
node() {
  local name=$1; shift
  "$SHOAL" node --listen 127.0.0.1:0 --model-dir "${NODE_MODEL_DIR:-$TMP/models}" \
    --cluster-key-file "$TMP/key" --no-measure -t 1 --name "$name" "$@" > "$TMP/$name.log" 2>&1 &
  echo $! >> "$TMP/pids"
  echo $! > "$TMP/$name.pid"
  for _ in $(seq 1 100); do
    local p
    p=$(grep -so 'listening on 127.0.0.1:[0-9]*' "$TMP/$name.log" | grep -o '[0-9]*$')
    [ -n "$p" ] && { echo "127.0.0.1:$p"; return; }
    sleep 0.05
  done
}

# serve LOG [flags...] -> sets PORT, SPID; waits for /health 200 (or the process to exit).
# Context: $SERVE_MAX_LEN tokens (default 256); the array SERVE_EXTRA adds flags to every call.
serve() {
  local log=$1; shift
  "$SHOAL" serve -m "$MODEL" --port 0 --max-num-seqs 8 --max-model-len "${SERVE_MAX_LEN:-256}" \
    -t 1 --cluster-key-file "$TMP/key" ${SERVE_EXTRA[@]+"${SERVE_EXTRA[@]}"} "$@" > "$TMP/$log" 2>&1 &
  SPID=$!; PIDS+=($SPID); PORT=""
  for _ in $(seq 1 200); do
    PORT=$(grep -so 'listening on http://127.0.0.1:[0-9]*' "$TMP/$log" | grep -o '[0-9]*$')
    [ -n "$PORT" ] && curl -s "127.0.0.1:$PORT/health" | grep -q ok && return 0
    kill -0 $SPID 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
