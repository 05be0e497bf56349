#!/usr/bin/env bash
# End-to-end tests of the `shoal` binary as users run it: real processes, real files.
set -u
SHOAL=$1 SHARED=$2
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails+1)); fi; }

check "--version prints version and commit" '"$SHOAL" --version | grep -Eq "^shoal [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]+"'
check "help lists every command" 'h=$("$SHOAL" --help); for c in run tokenize info perplexity synth; do echo "$h" | grep -q "$c" || exit 1; done'

# Corrupt and missing files: one clear error naming the file, exit code 1, no crash.
printf 'GGUF\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\x7f' > "$TMP/bad.gguf"
"$SHOAL" info -m "$TMP/bad.gguf" > "$TMP/out" 2> "$TMP/err"; rc=$?
check "corrupt file exits 1" '[ $rc -eq 1 ]'
check "corrupt file error names the file" 'grep -q "bad.gguf" "$TMP/err" && [ $(wc -l < "$TMP/err") -eq 1 ]'
"$SHOAL" run -m "$TMP/missing.gguf" -p hi > /dev/null 2> "$TMP/err"; rc=$?
check "missing file exits 1" '[ $rc -eq 1 ] && grep -q "missing.gguf" "$TMP/err"'

# A synthesized model round-trips through every command.
"$SHOAL" synth --preset tiny --type q8_0 --seed 3 -o "$TMP/tiny.gguf" > /dev/null 2>&1
check "synth writes a loadable model" '"$SHOAL" info -m "$TMP/tiny.gguf" | grep -q "arch            llama"'
check "run --json on the synthesized model" '"$SHOAL" run -m "$TMP/tiny.gguf" -p "Once upon a time" -n 5 --temp 0 --ignore-eos --json | python3 -c "import json,sys; j=json.load(sys.stdin); assert len(j[\"ids\"])==5, j"'
check "same seed, same output" '[ "$("$SHOAL" run -m "$TMP/tiny.gguf" -p "The dog" -n 12 --seed 7 --ignore-eos --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"ids\"])")" = "$("$SHOAL" run -m "$TMP/tiny.gguf" -p "The dog" -n 12 --seed 7 --ignore-eos --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"ids\"])")" ]'

# `shoal quantize`: the synthesized model requantized to q4_0 runs; an unknown mix is an error.
"$SHOAL" synth --preset tiny --type f32 --seed 3 -o "$TMP/tiny-f32.gguf" > /dev/null 2>&1
check "quantize to q4_0 gives a runnable model" '"$SHOAL" quantize "$TMP/tiny-f32.gguf" "$TMP/tiny-q4_0.gguf" q4_0 > /dev/null 2>&1 && "$SHOAL" run -m "$TMP/tiny-q4_0.gguf" -p "Once upon a time" -n 5 --temp 0 --ignore-eos --json | python3 -c "import json,sys; j=json.load(sys.stdin); assert len(j[\"ids\"])==5, j"'
"$SHOAL" quantize "$TMP/tiny-f32.gguf" "$TMP/bad-mix.gguf" q7_z > /dev/null 2> "$TMP/err"; rc=$?
check "quantize with an unknown mix exits 1 listing the mixes" '[ $rc -eq 1 ] && grep -q Q4_K_M "$TMP/err"'

check "bench --json has llama-bench's fields" '"$SHOAL" bench -m "$TMP/tiny.gguf" -p 16 -n 4 -r 2 --json | python3 -c "
import json,sys
a=json.load(sys.stdin); assert [(t[\"n_prompt\"],t[\"n_gen\"]) for t in a]==[(16,0),(0,4)], a
for t in a:
  for k in (\"n_threads\",\"avg_ts\",\"stddev_ts\",\"samples_ts\",\"model_size\",\"model_type\"): assert k in t, k
  assert len(t[\"samples_ts\"])==2 and t[\"avg_ts\"]>0
"'
check "bench table prints pp and tg rows" '"$SHOAL" bench -m "$TMP/tiny.gguf" -p 8 -n 2 -r 1 | grep -q "tg2"'

# MoE synth presets: each arch's tiny model loads, runs greedily the same twice (also from a
# second file of the same seed), and bench counts only the routed experts a token uses.
ids() { "$SHOAL" run -m "$1" -p "Once upon a time" -n 8 --temp 0 --ignore-eos --json | python3 -c "import json,sys; j=json.load(sys.stdin); assert len(j[\"ids\"])==8, j; print(j[\"ids\"])"; }
for a in qwen3moe deepseek2 kimi-k3; do
  "$SHOAL" synth --arch $a --preset tiny --type q8_0 -o "$TMP/$a.gguf" > /dev/null 2>&1
  "$SHOAL" synth --arch $a --preset tiny --type q8_0 -o "$TMP/$a-2.gguf" > /dev/null 2>&1
  check "synth --arch $a writes a loadable $a model" '"$SHOAL" info -m "$TMP/$a.gguf" | grep -q "arch            $a"'
  check "synth $a: run is deterministic" 'x=$(ids "$TMP/$a.gguf") && [ -n "$x" ] && [ "$x" = "$(ids "$TMP/$a.gguf")" ] && [ "$x" = "$(ids "$TMP/$a-2.gguf")" ]'
  check "bench $a: active params below total" '"$SHOAL" bench -m "$TMP/$a.gguf" -p 0 -n 2 -r 1 --json | python3 -c "
import json,sys
t=json.load(sys.stdin)[0]; assert 0 < t[\"model_n_params_active\"] < t[\"model_n_params\"] and 0 < t[\"model_size_active\"] < t[\"model_size\"], t
"'
done
check "bench table has an active column for MoE" '"$SHOAL" bench -m "$TMP/qwen3moe.gguf" -p 0 -n 2 -r 1 | grep -q "active"'
check "bench table has no active column for dense" '! "$SHOAL" bench -m "$TMP/tiny.gguf" -p 0 -n 2 -r 1 | grep -q "active"'

# `shoal bench serve` against a real local SSE server (tests/sse_server.py), then a dead port.
check "help lists bench serve" '"$SHOAL" bench --help | grep -q serve'
"$SHOAL" bench > /dev/null 2> "$TMP/err"; rc=$?
check "bench without -m still requires it" '[ $rc -ne 0 ] && grep -q -- "--model" "$TMP/err"'
python3 "$(dirname "$0")/sse_server.py" "$TMP/port" & SSE_PID=$!
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
check "bench serve --json against an SSE server" '"$SHOAL" bench serve --url "http://127.0.0.1:$(cat "$TMP/port")" --model m -n 6 --input-len 5 --output-len 4 --request-rate 200 --max-concurrency 3 --seed 1 --json | python3 -c "
import json,sys
j=json.load(sys.stdin); assert j[\"completed\"]==6 and j[\"failed\"]==0, j
assert j[\"total_input_tokens\"]==36 and j[\"total_output_tokens\"]==24, j
assert j[\"mean_ttft_ms\"]>0 and j[\"mean_itl_ms\"]>0 and j[\"p99_e2el_ms\"]>0, j
"'
kill $SSE_PID 2>/dev/null; wait $SSE_PID 2>/dev/null
"$SHOAL" bench serve --url "http://127.0.0.1:$(cat "$TMP/port")" --model m -n 2 --json > "$TMP/out" 2> /dev/null; rc=$?
check "bench serve counts refused connections, exits 1" '[ $rc -eq 1 ] && python3 -c "import json; j=json.load(open(\"$TMP/out\")); assert j[\"failed\"]==2 and \"connect\" in j[\"errors\"][0][\"message\"], j"'

M=$SHARED/models/stories260K.gguf
if [ -f "$M" ]; then
  check "tokenize equals llama.cpp ids" '[ "$("$SHOAL" tokenize -m "$M" -p "Once upon a time")" = "1 403 407 261 378" ]'
  check "greedy run continues like llama.cpp" '"$SHOAL" run -m "$M" -p "Once upon a time" -n 16 --temp 0 2>/dev/null | grep -q "there was a little girl named Lily"'
  check "split model loads as one" '[ "$("$SHOAL" run -m "$SHARED/models/split/stories260K-split-00001-of-00003.gguf" -p "Once upon a time" -n 16 --temp 0 --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"ids\"])")" = "$("$SHOAL" run -m "$M" -p "Once upon a time" -n 16 --temp 0 --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"ids\"])")" ]'
  check "perplexity -c 128 equals llama.cpp 4.1778" '"$SHOAL" perplexity -m "$M" -f "$SHARED/testdata/golden/ppl_story.txt" -c 128 2>/dev/null | grep -q "PPL = 4.177"'
  check "stop string ends generation before it" 'out=$("$SHOAL" run -m "$M" -p "Once upon a time" -n 32 --temp 0 --stop Lily 2>/dev/null); echo "$out" | grep -q "little girl named" && ! echo "$out" | grep -q Lily'
  check "chat with an explicit template" '"$SHOAL" run -m "$M" -p "Hi" -n 4 --temp 0 --chat --chat-template chatml > /dev/null 2>&1'
  "$SHOAL" run -m "$M" -p "Hi" -n 4 --chat > /dev/null 2> "$TMP/err"; rc=$?
  check "chat without a template says so" '[ $rc -eq 1 ] && grep -q "chat-template" "$TMP/err"'
fi
echo "$fails failure(s)"
[ $fails -eq 0 ]
