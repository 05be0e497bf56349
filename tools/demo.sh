#!/usr/bin/env bash
# make demo: a 4-node Shoal cluster on loopback answers a prompt. `shoal cluster up` starts four
# `shoal node` workers and a coordinator serving the OpenAI API, prints its layer plan; one
# request streams the answer; `shoal status` shows each stage's measured load; Ctrl-C (here a
# SIGTERM) stops the whole cluster.
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
CPID=""
trap '[ -n "$CPID" ] && kill "$CPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT

echo "== shoal $("$SHOAL" --version | cut -d' ' -f2-)"
echo "== model: $MODEL"
"$SHOAL" info -m "$MODEL" | head -8
echo "== shoal cluster up -m $(basename "$MODEL") --nodes $NODES --node-mem 256M --port 0"
"$SHOAL" cluster up -m "$MODEL" --nodes "$NODES" --node-mem 256M --port 0 \
  --max-num-seqs 4 --max-model-len 512 > "$WORK/cluster.log" 2>&1 &
CPID=$!
port=""
for _ in $(seq 1 600); do
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$WORK/cluster.log" | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && curl -s "127.0.0.1:$port/health" | grep -q ok && break
  kill -0 "$CPID" 2>/dev/null || break
  sleep 0.1
done
grep -E "^(shoal cluster: node|plan|stage|  +[0-9]|decode|\(memory)" "$WORK/cluster.log" || true
curl -s "127.0.0.1:$port/health" | grep -q ok || { cat "$WORK/cluster.log"; exit 1; }
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
echo "== shoal status"
"$SHOAL" status --url "http://127.0.0.1:$port"
echo "== stopping the cluster (SIGTERM, as Ctrl-C)"
kill -TERM "$CPID"
wait "$CPID" || true
CPID=""
tail -1 "$WORK/cluster.log"
