#!/usr/bin/env bash
# kimi-k3 through a loopback pipeline of `shoal node` workers: 2 and 3 stages with f32 links give
# the same tokens as one process (the banked attention-residual inputs travel with the hidden
# rows, each stage keeps its KDA layers' recurrent state), also for n = 2 choices (the fork's
# state copy reaches every stage), and a prefix-cache hit resumes from a state snapshot copied on
# every stage (16-token steps end prefill chunks on the 16-token blocks).
set -u
SHOAL=$1 SHARED=${2:-}
SRC=$SHARED/models/tiny/kimi-k3-f32.gguf
[ -f "$SRC" ] || { echo "skip: no $SRC"; exit 77; }
TMP=$(mktemp -d)
fails=0
PIDS=()
cleanup() { for p in "${PIDS[@]}" $(cat "$TMP/pids" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done; rm -rf "$TMP"; }
trap cleanup EXIT
. "$(dirname "$0")/lib_cluster.sh"
SERVE_MAX_LEN=128
SERVE_EXTRA=(--max-num-batched-tokens 16)  # prefill chunks end on the 16-token blocks
mkdir -p "$TMP/models"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TMP/key"
chmod 600 "$TMP/key"
cp "$SRC" "$TMP/models/k.gguf"
MODEL=$TMP/models/k.gguf

# Three requests at once (micro-batches of several sequences): two greedy, one seeded with n = 2.
ask() {
  local out=$1
  : > "$out"
  local cp=()
  for i in 0 1 2; do
    local extra=""
    [ $i -eq 2 ] && extra=',"temperature":0.8,"seed":7,"n":2'
    [ $i -lt 2 ] && extra=',"temperature":0'
    curl -s -m 120 "127.0.0.1:$PORT/v1/completions" -d "{\"prompt\":\"Lily went to the park $i\",\"max_tokens\":20,\"ignore_eos\":true$extra}" > "$TMP/r$i" &
    cp+=($!)
  done
  wait "${cp[@]}"
  for i in 0 1 2; do
    python3 -c "import json; print(' '.join(c['text'].encode().hex() for c in json.load(open('$TMP/r$i'))['choices']))" >> "$out" 2>/dev/null || echo "bad response $i" >> "$out"
  done
}

# Two greedy requests one after the other sharing a long prefix: the texts, then the cached
# prompt tokens the second reports.
LONG="Once upon a time there was a little girl named Lily who loved to play in the park with her"
LONG="$LONG friends every day after school, and one day she found a shiny red ball under a big tree"
ask_prefix() {
  local out=$1
  : > "$out"
  for tail in "" " and she gave it to her mom"; do
    curl -s -m 120 "127.0.0.1:$PORT/v1/completions" -d "{\"prompt\":\"$LONG$tail\",\"max_tokens\":8,\"ignore_eos\":true,\"temperature\":0}" > "$TMP/p"
    python3 -c "import json; print(' '.join(c['text'].encode().hex() for c in json.load(open('$TMP/p'))['choices']))" >> "$out" 2>/dev/null || echo "bad response" >> "$out"
  done
  python3 -c "import json; print(json.load(open('$TMP/p'))['usage']['prompt_tokens_details']['cached_tokens'])" > "$out.cached" 2>/dev/null || echo 0 > "$out.cached"
}

serve local.log || { echo "local server failed"; cat "$TMP/local.log"; exit 1; }
ask "$TMP/want"
ask_prefix "$TMP/want_prefix"
kill -TERM $SPID; wait $SPID
check "reference answers exist" '[ $(grep -c "^bad" "$TMP/want") -eq 0 ] && [ $(wc -l < "$TMP/want") -eq 3 ]'
for k in 2 3; do
  nodes=""
  for i in $(seq 1 $k); do nodes="$nodes,$(node s$k-n$i)"; done
  if serve "c$k.log" --nodes "${nodes#,}" --link-dtype f32; then
    ask "$TMP/got$k"
    ask_prefix "$TMP/got_prefix$k"
    kill -TERM $SPID; wait $SPID
  else
    echo "cluster of $k did not start:"; tail -5 "$TMP/c$k.log"
  fi
  grep -E "^ +[0-9]+  s$k-n" "$TMP/c$k.log"
  check "kimi-k3, $k stages, f32 links: same tokens as one process (greedy, seeded, n = 2)" 'cmp -s "$TMP/want" "$TMP/got$k"'
  echo "prefix hit: $(cat "$TMP/want_prefix.cached") cached tokens in one process, $(cat "$TMP/got_prefix$k.cached" 2>/dev/null) over $k stages"
  check "kimi-k3, $k stages: a prefix hit (cached tokens > 0) gives one process's tokens" \
    '[ "$(cat "$TMP/got_prefix$k.cached")" -gt 0 ] && ! grep -q bad "$TMP/got_prefix$k" && cmp -s "$TMP/want_prefix" "$TMP/got_prefix$k"'
  check "kimi-k3, $k stages: the plan has $k stages" '[ $(grep -cE "^ +[0-9]+  s$k-n" "$TMP/c$k.log") -eq $k ]'
done
echo "$fails failure(s)"
[ $fails -eq 0 ]
