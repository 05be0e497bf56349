#!/usr/bin/env bash
# End-to-end tests of `shoal serve` with curl over loopback: SSE framing, every endpoint, the
# error shapes and codes, metrics that rise by the right amounts, and a clean SIGTERM exit.
set -u
SHOAL=$1 SHARED=$2
MODEL=$SHARED/models/stories260K.gguf
TMP=$(mktemp -d)
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails+1)); fi; }
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$TMP"; }
trap cleanup EXIT

# Starts a server with extra flags; sets PORT and PID. Waits (bounded) for /health 200.
start() {
  "$SHOAL" serve -m "$MODEL" --port 0 --chat-template chatml -t 2 "$@" > "$TMP/log" 2>&1 &
  PID=$!; PIDS+=("$PID")
  PORT=""
  for _ in $(seq 1 100); do
    PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/log" | grep -o '[0-9]*$')
    [ -n "$PORT" ] && curl -s -o /dev/null -w '%{http_code}' "localhost:$PORT/health" | grep -q 200 && return 0
    sleep 0.1
  done
  echo "server did not start:"; cat "$TMP/log"; return 1
}
URL() { echo "http://127.0.0.1:$PORT$1"; }
# HTTP status of a request: code METHOD PATH [BODY] [extra curl args...]
code() { local m=$1 p=$2 b=${3:-}; shift 3 2>/dev/null || shift $#;
  curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$(URL "$p")" ${b:+-d "$b"} -H 'Content-Type: application/json' "$@"; }
jq_() { python3 -c "import json,sys; d=json.load(open('$TMP/body')); $1"; }
metric() { curl -s "$(URL /metrics)" | grep "^$1{" | grep -F "${2:-}" | head -1 | awk '{print $NF}'; }

start --api-key sekret || exit 1
AUTH=(-H 'Authorization: Bearer sekret')

check "/health is 200 when ready" '[ "$(code GET /health "")" = 200 ]'
check "/metrics is open without a key" '[ "$(code GET /metrics "")" = 200 ]'
check "/v1 without a key is 401 authentication_error" '[ "$(code GET /v1/models "")" = 401 ] && jq_ "assert d[\"error\"][\"type\"]==\"authentication_error\""'
check "/v1 with a wrong key is 401" '[ "$(code GET /v1/models "" -H "Authorization: Bearer nope")" = 401 ]'
check "/v1/models lists the served model" '[ "$(code GET /v1/models "" "${AUTH[@]}")" = 200 ] && jq_ "assert d[\"object\"]==\"list\" and d[\"data\"][0][\"id\"]==\"stories260K.gguf\""'

p0=$(metric vllm:prompt_tokens_total); g0=$(metric vllm:generation_tokens_total)
s0=$(metric vllm:request_success_total 'finished_reason="length"')
check "completion: 16 greedy tokens, usage and finish_reason" '[ "$(code POST /v1/completions "{\"prompt\":\"Once upon a time\",\"max_tokens\":16,\"temperature\":0}" "${AUTH[@]}")" = 200 ] && jq_ "
c=d[\"choices\"][0]; u=d[\"usage\"]
assert d[\"object\"]==\"text_completion\" and c[\"finish_reason\"]==\"length\", d
assert u[\"completion_tokens\"]==16 and u[\"prompt_tokens\"]==5 and u[\"total_tokens\"]==21, u
assert c[\"text\"].startswith(\", there was a little girl\"), c"'
check "metrics: prompt/generation/success counters rose by 5/16/1" '
[ "$(metric vllm:prompt_tokens_total)" = "$((p0+5))" ] && [ "$(metric vllm:generation_tokens_total)" = "$((g0+16))" ] &&
[ "$(metric vllm:request_success_total "finished_reason=\"length\"")" = "$((s0+1))" ]'
check "metrics: every vLLM name is exported" 'm=$(curl -s "$(URL /metrics)"); for n in num_requests_running num_requests_waiting kv_cache_usage_perc prompt_tokens_total generation_tokens_total request_success_total num_preemptions_total prefix_cache_queries_total prefix_cache_hits_total time_to_first_token_seconds_bucket inter_token_latency_seconds_bucket e2e_request_latency_seconds_count; do echo "$m" | grep -q "^vllm:$n{" || { echo "missing $n"; exit 1; }; done'
check "metrics: TTFT histogram counted the request" '[ "$(metric vllm:time_to_first_token_seconds_count)" -ge 1 ]'

# SSE framing: every event is "data: <json>\n\n", the last is "data: [DONE]", usage at the end.
curl -sN "$(URL /v1/chat/completions)" "${AUTH[@]}" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":6,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' > "$TMP/sse"
check "chat stream: SSE framing, role first, usage chunk, [DONE] last" 'python3 - "$TMP/sse" <<PY
import json,sys
raw=open(sys.argv[1]).read()
assert raw.endswith("data: [DONE]\n\n"), repr(raw[-40:])
events=raw.split("\n\n")[:-1]
assert all(e.startswith("data: ") for e in events), events
objs=[json.loads(e[6:]) for e in events[:-1]]
assert objs[0]["choices"][0]["delta"]["role"]=="assistant"
assert all(o["object"]=="chat.completion.chunk" for o in objs)
assert objs[-1]["choices"]==[] and objs[-1]["usage"]["completion_tokens"]==6, objs[-1]
fins=[o["choices"][0]["finish_reason"] for o in objs if o["choices"]]
assert fins[-1]=="length" and all(f is None for f in fins[:-1]), fins
PY'
check "completion stream text equals the non-stream text" '
a=$(curl -sN "$(URL /v1/completions)" "${AUTH[@]}" -d "{\"prompt\":\"The cat\",\"max_tokens\":12,\"temperature\":0,\"stream\":true}" | python3 -c "
import json,sys
print(\"\".join(json.loads(l[6:])[\"choices\"][0][\"text\"] for l in sys.stdin if l.startswith(\"data: {\")))")
b=$(curl -s "$(URL /v1/completions)" "${AUTH[@]}" -d "{\"prompt\":\"The cat\",\"max_tokens\":12,\"temperature\":0}" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"choices\"][0][\"text\"])")
[ -n "$a" ] && [ "$a" = "$b" ]'
check "stop string: text ends before it, finish_reason stop" '[ "$(code POST /v1/completions "{\"prompt\":\"Once upon a time\",\"max_tokens\":30,\"temperature\":0,\"stop\":[\" girl\"]}" "${AUTH[@]}")" = 200 ] && jq_ "
c=d[\"choices\"][0]; assert c[\"finish_reason\"]==\"stop\" and c[\"text\"]==\", there was a little\", c"'
check "seeded sampling is reproducible" '
r1=$(curl -s "$(URL /v1/completions)" "${AUTH[@]}" -d "{\"prompt\":\"A dog\",\"max_tokens\":20,\"temperature\":0.9,\"seed\":42}")
r2=$(curl -s "$(URL /v1/completions)" "${AUTH[@]}" -d "{\"prompt\":\"A dog\",\"max_tokens\":20,\"temperature\":0.9,\"seed\":42}")
[ "$(echo "$r1" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"choices\"][0][\"text\"])")" = "$(echo "$r2" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"choices\"][0][\"text\"])")" ]'
check "logprobs: 3 alternatives per token, sampled one first under greedy" '[ "$(code POST /v1/completions "{\"prompt\":\"Once upon a time\",\"max_tokens\":4,\"temperature\":0,\"logprobs\":3}" "${AUTH[@]}")" = 200 ] && jq_ "
lp=d[\"choices\"][0][\"logprobs\"]; assert len(lp[\"tokens\"])==4 and len(lp[\"top_logprobs\"][0])==3, lp
assert abs(lp[\"token_logprobs\"][0]-max(lp[\"top_logprobs\"][0].values()))<1e-6 and lp[\"token_logprobs\"][0]<=0"'
check "/tokenize gives llama.cpp's ids for the golden text" '[ "$(code POST /tokenize "{\"content\":\"Once upon a time\"}")" = 200 ] && jq_ "assert d[\"tokens\"]==json.load(open(\"$SHARED/testdata/golden/server/tokenize.json\"))[\"tokens\"], d"'
check "/detokenize inverts /tokenize" '[ "$(code POST /detokenize "{\"tokens\":[403,407,261,378]}")" = 200 ] && jq_ "assert d[\"prompt\"]==\"Once upon a time\", d"'

# Errors: OpenAI's shape, the right status, never a crash.
shape='e=d["error"]; assert set(e)=={"message","type","param","code"} and e["message"], d'
check "bad JSON is 400" '[ "$(code POST /v1/completions "{\"prompt\": " "${AUTH[@]}")" = 400 ] && jq_ "$shape"'
check "wrong type is 400 naming the field" '[ "$(code POST /v1/completions "{\"prompt\":\"x\",\"max_tokens\":\"5\"}" "${AUTH[@]}")" = 400 ] && jq_ "$shape; assert \"max_tokens\" in d[\"error\"][\"message\"]"'
check "out-of-range temperature is 400" '[ "$(code POST /v1/completions "{\"prompt\":\"x\",\"temperature\":7}" "${AUTH[@]}")" = 400 ]'
check "huge number is 400" '[ "$(code POST /v1/completions "{\"prompt\":\"x\",\"max_tokens\":1e999}" "${AUTH[@]}")" = 400 ]'
check "unknown model is 404 model_not_found" '[ "$(code POST /v1/completions "{\"model\":\"gpt-9\",\"prompt\":\"x\"}" "${AUTH[@]}")" = 404 ] && jq_ "$shape; assert d[\"error\"][\"code\"]==\"model_not_found\""'
check "prompt + max_tokens over the model length is 400 context_length_exceeded" '[ "$(code POST /v1/completions "{\"prompt\":\"x\",\"max_tokens\":5000}" "${AUTH[@]}")" = 400 ] && jq_ "assert d[\"error\"][\"code\"]==\"context_length_exceeded\""'
printf '{"prompt":"\xff\xfe bad"}' > "$TMP/badutf8"
check "invalid UTF-8 is 400" '[ "$(curl -s -o "$TMP/body" -w "%{http_code}" "$(URL /v1/completions)" "${AUTH[@]}" --data-binary @"$TMP/badutf8")" = 400 ]'
python3 -c "print('{\"prompt\":' + '['*100000 + ']'*100000 + '}')" > "$TMP/deep"
check "deeply nested JSON is 400" '[ "$(curl -s -o "$TMP/body" -w "%{http_code}" "$(URL /v1/completions)" "${AUTH[@]}" --data-binary @"$TMP/deep")" = 400 ]'
head -c 9000000 /dev/zero | tr '\0' 'a' > "$TMP/big"
check "oversized body is 413" '[ "$(curl -s -o /dev/null -w "%{http_code}" "$(URL /v1/completions)" "${AUTH[@]}" --data-binary @"$TMP/big")" = 413 ]'
check "unknown path is 404, wrong method 405" '[ "$(code GET /v1/nothing "" "${AUTH[@]}")" = 404 ] && [ "$(code GET /v1/completions "" "${AUTH[@]}")" = 405 ]'
check "server still healthy after the bad requests" '[ "$(code GET /health "")" = 200 ]'

# A client that disconnects mid-stream frees its sequence: running drops back to 0.
# head closes the pipe after the first chunk, so curl hangs up mid-stream however fast the
# machine generates (a 1 s timeout let stories260K finish 1500 tokens first at ~2800 tok/s).
curl -sN "$(URL /v1/completions)" "${AUTH[@]}" -d '{"prompt":"Once","max_tokens":2000,"ignore_eos":true,"stream":true}' | head -c 200 > /dev/null
check "disconnect cancels the request (abort counted, nothing running)" 'for _ in $(seq 1 50); do [ "$(metric vllm:num_requests_running)" = 0 ] && break; sleep 0.1; done; [ "$(metric vllm:num_requests_running)" = 0 ] && [ "$(metric vllm:request_success_total "finished_reason=\"abort\"")" -ge 1 ]'

kill -TERM "$PID"; wait "$PID"; rc=$?
check "SIGTERM with nothing in flight exits 0" '[ $rc -eq 0 ]'

# Queue limit: one running, one waiting, the third gets 429 with Retry-After. (3,000 tokens at
# up to 8,192 positions keep the first request busy for seconds; the polls below are bounded.)
start --max-num-seqs 1 --max-queued-requests 1 --max-model-len 8192 --drain-timeout 2 || exit 1
# 8000 tokens: ~2.9 s at stories260K's ~2800 tok/s on 2 cores, past the 2 s drain timeout.
long='{"prompt":"Once","max_tokens":8000,"ignore_eos":true,"stream":true}'
poll() { for _ in $(seq 1 100); do [ "$(metric "$1")" = "$2" ] && return 0; sleep 0.1; done; return 1; }
curl -sN "$(URL /v1/completions)" -d "$long" > "$TMP/a" & A=$!
poll vllm:num_requests_running 1
curl -sN "$(URL /v1/completions)" -d "$long" > "$TMP/b" & B=$!
check "metrics show 1 running and 1 waiting" 'poll vllm:num_requests_waiting 1 && [ "$(metric vllm:num_requests_running)" = 1 ]'
check "queue full is 429 with Retry-After" 'curl -s -D "$TMP/h" -o "$TMP/body" -w "%{http_code}" "$(URL /v1/completions)" -d "{\"prompt\":\"x\",\"max_tokens\":2}" | grep -q 429 && grep -qi "^retry-after:" "$TMP/h" && jq_ "$shape"'
# Graceful shutdown: the drain timeout (2 s) cancels both streams, which still end with
# [DONE], and the process exits 0.
kill -TERM "$PID"
check "/health is 503 while draining" 'sleep 0.2; [ "$(curl -s -o /dev/null -w "%{http_code}" "$(URL /health)")" != 200 ]'
wait "$PID"; rc=$?
wait $A $B
check "SIGTERM drains in-flight streams and exits 0" '[ $rc -eq 0 ] && tail -c 20 "$TMP/a" | grep -q "\[DONE\]" && tail -c 20 "$TMP/b" | grep -q "\[DONE\]" && grep -q "\"finish_reason\":\"abort\"" "$TMP/a"'

# 1,000 concurrent streaming clients (all sent at once, bounded by --total-timeout): none fails,
# and the server's thread count does not grow with connections (io, engine, one compute worker,
# two work threads for parsing and tokenizing).
start || exit 1
( for _ in $(seq 1 40); do grep '^Threads:' "/proc/$PID/status" 2>/dev/null; sleep 0.25; done ) > "$TMP/threads" &
T=$!
"$SHOAL" bench serve --url "$(URL "")" --num-prompts 1000 --request-rate inf --input-len 8 \
  --output-len 16 --total-timeout 240 --json > "$TMP/bench.json" 2> "$TMP/bench.err"
wait $T
maxthreads=$(awk '{print $2}' "$TMP/threads" | sort -n | tail -1)
echo "     1000 streams: $(python3 -c "import json; d=json.load(open('$TMP/bench.json')); print(d['completed'], 'completed,', d['failed'], 'failed, output', round(d['output_throughput']), 'tok/s')"); server threads max $maxthreads; $(grep VmHWM /proc/$PID/status)"
check "1,000 concurrent streams: 0 failed, 16 tokens each" 'python3 -c "import json; d=json.load(open(\"$TMP/bench.json\")); assert d[\"completed\"]==1000 and d[\"failed\"]==0 and d[\"total_output_tokens\"]==16000, d"'
check "1,000 concurrent streams: no thread per connection (<= 6 threads)" '[ -n "$maxthreads" ] && [ "$maxthreads" -le 6 ]'
check "1,000 concurrent streams: server RSS stays under 256 MiB" '[ "$(grep VmHWM /proc/$PID/status | awk "{print \$2}")" -lt 262144 ]'
kill -TERM "$PID"; wait "$PID"

echo "$fails failure(s)"
[ $fails -eq 0 ]
