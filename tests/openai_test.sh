#!/usr/bin/env bash
# Runs tests/openai_client/openai_test.mjs (the official `openai` npm package) against two real
# `shoal serve` processes on loopback: a normal one and one whose queue limit is 0 (always 429).
set -u
SHOAL=$1 SHARED=$2 WORK=$3
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=$SHARED/models/stories260K.gguf
mkdir -p "$WORK"
cp "$HERE/openai_client/package.json" "$HERE/openai_client/openai_test.mjs" "$WORK/"
if [ ! -d "$WORK/node_modules/openai" ]; then
  (cd "$WORK" && timeout 300 npm install --no-audit --no-fund --loglevel=error) || {
    echo "FAIL npm install openai"; exit 1; }
fi
LOGS=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$LOGS"' EXIT
serve() {  # serve NAME FLAGS... -> sets PORT (empty if the server did not come up)
  "$SHOAL" serve -m "$MODEL" --port 0 --chat-template chatml -t 2 --api-key k3y "${@:2}" \
    > "$LOGS/$1" 2>&1 &
  PIDS+=($!)
  PORT=""
  for _ in $(seq 1 100); do
    local port
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$LOGS/$1" | grep -o '[0-9]*$')
    if [ -n "$port" ] && curl -s "127.0.0.1:$port/health" | grep -q ok; then PORT=$port; return; fi
    sleep 0.1
  done
  cat "$LOGS/$1" >&2
}
serve main; P1=$PORT
serve busy --max-queued-requests 0; P2=$PORT
[ -n "$P1" ] && [ -n "$P2" ] || { echo "FAIL servers did not start"; exit 1; }
timeout 300 node "$WORK/openai_test.mjs" "http://127.0.0.1:$P1/v1" k3y "http://127.0.0.1:$P2/v1"
