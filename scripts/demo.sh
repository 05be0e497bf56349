#!/usr/bin/env bash
# make demo: a 4-node Shoal cluster on loopback answers a prompt. Four `shoal node` workers and
# a `shoal serve --nodes` coordinator start here, the coordinator prints its layer plan, one
# OpenAI-style request streams the answer, then everything stops.
set -euo pipefail
SHOAL=$1 MODEL=${2:-} SHARED=${3:-../shared} PROMPT=${4:-Once upon a time}
NODES=${NODES:-4}

if [ -z "$MODEL" ]; then
  if [ -f "$SHARED/models/stories260K.gguf" ]; then
    MODEL="$SHARED/models/stories260K.gguf"
  else
    MODEL=build/demo-tiny-q8_0.gguf
    [ -f "$MODEL" ] || "$SHOAL" synth --arch llama --preset tiny --type q8_0 -o "$MODEL"
  fi
fi
MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")
WORK=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$WORK"' EXIT
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$WORK/cluster.key"
chmod 600 "$WORK/cluster.key"

echo "== shoal $("$SHOAL" --version | cut -d' ' -f2-)"
echo "== model: $MODEL"
"$SHOAL" info -m "$MODEL" | head -8
echo "== starting $NODES nodes on loopback (each with a 256 MiB memory limit)"
addrs=""
for i in $(seq 1 "$NODES"); do
  "$SHOAL" node --listen 127.0.0.1:0 --model-dir "$(dirname "$MODEL")" --mem-limit 256M \
    --cluster-key-file "$WORK/cluster.key" --name "node$i" -t 1 > "$WORK/node$i.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do
    port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$WORK/node$i.log" | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$WORK/node$i.log"; exit 1; }
  head -1 "$WORK/node$i.log"
  addrs="$addrs,127.0.0.1:$port"
done
echo "== coordinator: shoal serve --nodes ${addrs#,}"
"$SHOAL" serve -m "$MODEL" --nodes "${addrs#,}" --cluster-key-file "$WORK/cluster.key" --port 0 \
  --max-num-seqs 4 --max-model-len 512 > "$WORK/serve.log" 2>&1 &
PIDS+=($!)
port=""
for _ in $(seq 1 300); do
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$WORK/serve.log" | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && curl -s "127.0.0.1:$port/health" | grep -q ok && break
  sleep 0.1
done
grep -E "^(plan|stage|  +[0-9]|decode|\(memory)" "$WORK/serve.log" || true
curl -s "127.0.0.1:$port/health" | grep -q ok || { cat "$WORK/serve.log"; exit 1; }
echo "== prompt: $PROMPT"
start=$(date +%s.%N)
curl -sN "127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d "$(printf '{"prompt": "%s", "max_tokens": 96, "temperature": 0.7, "seed": 42, "stream": true, "stream_options": {"include_usage": true}}' "$PROMPT")" \
  > "$WORK/answer.sse"
end=$(date +%s.%N)
python3 - "$WORK/answer.sse" "$PROMPT" "$start" "$end" "$NODES" <<'PY'
import json, sys
path, prompt, t0, t1, nodes = sys.argv[1:]
text, n = "", 0
for line in open(path, encoding="utf-8"):
    if line.startswith("data: {"):
        ev = json.loads(line[6:])
        for c in ev["choices"]:
            text += c.get("text", "")
        if ev.get("usage"):
            n = ev["usage"]["completion_tokens"]
print(prompt + text)
dt = float(t1) - float(t0)
print(f"== {n} tokens through {nodes} pipeline stages in {dt:.2f} s ({n / dt:.0f} tokens/s)")
PY
