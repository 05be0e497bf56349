#!/usr/bin/env bash
# `shoal cluster up` and `shoal serve --cluster FILE.toml` end to end on loopback: the same
# tokens as one process, the plan, measured per-stage load in /metrics, /v1/cluster and
# `shoal status`, failover onto a `--standby` node after kill -9 of a stage, and no node left
# behind after SIGTERM or SIGKILL of the cluster process.
set -u
SHOAL=$1
TMP=$(mktemp -d)
fails=0
PIDS=()
# $(node ...) runs in a subshell, which cannot add to PIDS: it appends to $TMP/pids.
cleanup() {
  for p in "${PIDS[@]}" $(cat "$TMP/pids" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
. "$(dirname "$0")/lib_cluster.sh"

mkdir -p "$TMP/models"
"$SHOAL" synth --preset tiny --layers 8 --type f16 --seed 5 -o "$TMP/models/m.gguf" > /dev/null 2>&1
MODEL=$TMP/models/m.gguf
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TMP/key"
chmod 600 "$TMP/key"

# wait_http LOG PID -> sets PORT once /health answers ok (or returns 1 when PID exits)
wait_http() {
  PORT=""
  for _ in $(seq 1 400); do
    PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$1" | grep -o '[0-9]*$')
    [ -n "$PORT" ] && curl -s "127.0.0.1:$PORT/health" | grep -q ok && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
node_pids() { grep -o 'shoal cluster: node[0-9]* (pid [0-9]*)' "$1" | grep -o 'pid [0-9]*' | grep -o '[0-9]*'; }
# A process counts as gone once it is not running: a killed orphan may stay a zombie until the
# system's init (here perhaps no reaper at all) collects it.
alive() { [ -r "/proc/$1/stat" ] && ! awk '{exit $3 == "Z" ? 0 : 1}' "/proc/$1/stat" 2>/dev/null; }
all_gone() { for p in $(node_pids "$1"); do alive "$p" && return 1; done; return 0; }

"$SHOAL" serve -m "$MODEL" --port 0 -t 1 --max-num-seqs 8 --max-model-len 256 > "$TMP/local.log" 2>&1 &
SPID=$!; PIDS+=($SPID)
wait_http "$TMP/local.log" $SPID || { cat "$TMP/local.log"; exit 1; }
ask "$TMP/want"
kill -TERM $SPID; wait $SPID
check "reference answers exist" '[ $(grep -c "^bad" "$TMP/want") -eq 0 ] && [ $(wc -l < "$TMP/want") -eq 4 ]'

# 1. shoal cluster up: 3 nodes, f32 links.
"$SHOAL" cluster up -m "$MODEL" --nodes 3 --node-mem 128M --no-measure --port 0 \
  --max-num-seqs 8 --max-model-len 256 > "$TMP/up.log" 2>&1 &
CPID=$!; PIDS+=($CPID)
if wait_http "$TMP/up.log" $CPID; then
  ask "$TMP/got_up"
  curl -s "127.0.0.1:$PORT/metrics" > "$TMP/metrics"
  sleep 0.3  # a few heartbeats after the last step, so the reported peaks are the final ones
  curl -s "127.0.0.1:$PORT/v1/cluster" > "$TMP/cluster.json"
  "$SHOAL" status --url "http://127.0.0.1:$PORT" > "$TMP/status" 2>&1
  # Every node's peak RSS read from outside (/proc), by name, for the check below.
  grep -o 'shoal cluster: node[0-9]* (pid [0-9]*)' "$TMP/up.log" | while read -r _ _ n _ p; do
    echo "${n} $(awk '/VmHWM/ {print $2 * 1024}' "/proc/${p%)}/status")"; done > "$TMP/hwm"
else
  echo "cluster up did not start:"; tail -20 "$TMP/up.log"
fi
check "cluster up: 3 nodes started, each reported with its pid" '[ $(node_pids "$TMP/up.log" | wc -l) -eq 3 ]'
check "cluster up: the plan has 3 stages" '[ $(grep -cE "^ +[0-9]+  node[123] " "$TMP/up.log") -eq 3 ]'
check "cluster up: same tokens as one process (greedy and seeded)" 'cmp -s "$TMP/want" "$TMP/got_up"'
check "/metrics: shoal_stage_busy_fraction for stages 0..2, each in (0, 1]" \
  'python3 - "$TMP/metrics" <<PY
import re, sys
v = {m.group(1): float(m.group(2)) for m in re.finditer(r"^shoal_stage_busy_fraction\{[^}]*stage=\"(\d)\",node=\"node\d\"\} (\S+)$", open(sys.argv[1]).read(), re.M)}
sys.exit(0 if sorted(v) == ["0", "1", "2"] and all(0 < x <= 1 for x in v.values()) else 1)
PY'
check "/metrics: per-stage tokens/s and counters" 'grep -qE "^shoal_stage_tokens_per_second\{.*stage=\"2\".*\} [0-9.e+-]+$" "$TMP/metrics" && grep -q "^shoal_stage_busy_seconds_total" "$TMP/metrics" && grep -qE "^shoal_stage_tokens_total\{.*\} [1-9]" "$TMP/metrics"'
check "/v1/cluster: busy_fraction and tokens_per_s per stage" \
  'python3 -c "import json,sys; c=json.load(open(\"$TMP/cluster.json\")); s=c[\"stages\"]; sys.exit(0 if len(s)==3 and all(0<x[\"busy_fraction\"]<=1 and x[\"tokens_per_s\"]>0 and x[\"tokens_total\"]>=96 for x in s) and c[\"load_window_s\"]==10 else 1)"'
check "/v1/cluster: each stage's measured peak RSS (its heartbeat) is /proc's VmHWM within 2%, under its limit" \
  'python3 - "$TMP/cluster.json" "$TMP/hwm" <<PY
import json, sys
c = json.load(open(sys.argv[1]))
hwm = dict(l.split() for l in open(sys.argv[2]) if len(l.split()) == 2)
ok = len(c["stages"]) == 3 and c["server_rss_bytes"] > 0
for s in c["stages"]:
    got, want = s["mem_peak_rss_bytes"], float(hwm.get(s["node"], 0))
    ok = ok and 0 < s["mem_rss_bytes"] <= got <= s["mem_limit_bytes"] and abs(got / want - 1) < 0.02
    print(s["node"], got, want, s["mem_predicted_bytes"])
sys.exit(0 if ok else 1)
PY'
check "shoal status: RSS and peak columns" 'grep -q "RSS MiB" "$TMP/status" && grep -q "peak MiB" "$TMP/status"'
check "shoal status: busy % and tok/s columns" 'grep -q "busy %" "$TMP/status" && [ $(grep -cE "^[0-2] +node[1-3] " "$TMP/status") -eq 3 ]'
kill -TERM $CPID; wait $CPID; rc=$?
check "SIGTERM: cluster up exits 0 and says stopped" '[ $rc -eq 0 ] && grep -q "shoal cluster: stopped" "$TMP/up.log"'
check "SIGTERM: every node process is gone" 'sleep 0.2; all_gone "$TMP/up.log"'
KDIR=$(grep -o 'keys and logs in [^ ]*' "$TMP/up.log" | cut -d' ' -f5)
check "SIGTERM: the temp dir with the key is removed" '[ -n "$KDIR" ] && [ ! -e "$KDIR" ]'

# Ctrl-C (SIGINT) stops it the same way; --dry-run prints the plan and stops everything.
"$SHOAL" cluster up -m "$MODEL" --nodes 1 --node-mem 96M --no-measure --port 0 \
  --max-num-seqs 4 --max-model-len 256 > "$TMP/int.log" 2>&1 &
CPID=$!; PIDS+=($CPID)
wait_http "$TMP/int.log" $CPID; up=$?
kill -INT $CPID; wait $CPID; rc=$?
check "SIGINT: cluster up stops cleanly, its node too" '[ $up -eq 0 ] && [ $rc -eq 0 ] && grep -q "shoal cluster: stopped" "$TMP/int.log" && sleep 0.2 && all_gone "$TMP/int.log"'
timeout 60 "$SHOAL" cluster up -m "$MODEL" --nodes 2 --node-mem 128M --no-measure --max-num-seqs 4 \
  --max-model-len 256 --dry-run > "$TMP/dry.log" 2>&1; rc=$?
check "cluster up --dry-run prints a 2-stage plan and exits 0, no node left" '[ $rc -eq 0 ] && [ $(grep -cE "^ +[0-9]+  node[12] " "$TMP/dry.log") -eq 2 ] && all_gone "$TMP/dry.log"'

# 2. SIGKILL of the cluster process: the nodes die with it (PR_SET_PDEATHSIG).
"$SHOAL" cluster up -m "$MODEL" --nodes 2 --node-mem 128M --no-measure --port 0 \
  --max-num-seqs 4 --max-model-len 256 > "$TMP/kill.log" 2>&1 &
CPID=$!; PIDS+=($CPID)
wait_http "$TMP/kill.log" $CPID; up=$?
check "SIGKILL test: 2 nodes and the API were up" '[ $up -eq 0 ] && [ $(node_pids "$TMP/kill.log" | wc -l) -eq 2 ]'
kill -9 $CPID; wait $CPID 2>/dev/null
check "SIGKILL: the nodes do not outlive the cluster process" 'sleep 0.5; all_gone "$TMP/kill.log"'
rm -rf "$(grep -o 'keys and logs in [^ ]*' "$TMP/kill.log" | cut -d' ' -f5)"  # left by SIGKILL

# 3. A node that dies is failed over: with --standby 1 the standby takes its place, a request
# streaming meanwhile completes with the undisturbed tokens, and cluster up keeps serving. Only
# when the last node is gone does it stop (non-zero, promptly, no node left).
"$SHOAL" cluster up -m "$MODEL" --nodes 2 --standby 1 --node-mem 128M --no-measure --port 0 \
  --max-num-seqs 4 --max-model-len 512 > "$TMP/die.log" 2>&1 &
CPID=$!; PIDS+=($CPID)
wait_http "$TMP/die.log" $CPID; up=$?
check "cluster up --nodes 2 --standby 1: 3 nodes started, a 2-stage plan, the third a standby" \
  '[ $up -eq 0 ] && [ $(node_pids "$TMP/die.log" | wc -l) -eq 3 ] && [ $(grep -cE "^ +[0-9]+  node[12] " "$TMP/die.log") -eq 2 ] && grep -q "node3 (pid [0-9]*) standby" "$TMP/die.log"'
long='{"prompt":"Story number 7 begins","max_tokens":480,"temperature":0,"ignore_eos":true}'
curl -s -m 60 "127.0.0.1:$PORT/v1/completions" -d "$long" > "$TMP/long_want"
curl -s -m 60 -N "127.0.0.1:$PORT/v1/completions" -d "${long%\}},\"stream\":true}" > "$TMP/long_got" &
cp=$!
for _ in $(seq 1 200); do [ "$(grep -c '^data: {' "$TMP/long_got")" -ge 3 ] && break; sleep 0.01; done
victim=$(node_pids "$TMP/die.log" | sed -n 2p)
kill -9 "$victim"
wait $cp
curl -s "127.0.0.1:$PORT/v1/cluster" > "$TMP/die_cluster.json"
check "a stage killed (kill -9) mid-stream: cluster up names it and fails over" \
  'grep -q "node2 (pid $victim) exited (signal 9); the coordinator fails over (2 of 3 nodes left)" "$TMP/die.log" && kill -0 $CPID'
check "...the stream completes with the undisturbed tokens" \
  'python3 - "$TMP/long_want" "$TMP/long_got" <<PY
import json, sys
want = json.load(open(sys.argv[1]))["choices"][0]["text"]
got = "".join(json.loads(l[6:])["choices"][0].get("text", "") for l in open(sys.argv[2]) if l.startswith("data: {"))
sys.exit(0 if got == want and len(want) > 0 else 1)
PY'
check "...the standby holds layers now (/v1/cluster: node3 a stage, 1 failover)" \
  'python3 -c "import json,sys; c=json.load(open(\"$TMP/die_cluster.json\")); sys.exit(0 if c[\"failovers\"]==1 and any(n[\"name\"]==\"node3\" and n[\"role\"].startswith(\"stage\") for n in c[\"nodes\"]) else 1)"'
for p in $(node_pids "$TMP/die.log"); do kill -9 "$p" 2>/dev/null; done
for _ in $(seq 1 200); do kill -0 $CPID 2>/dev/null || break; sleep 0.05; done
kill -0 $CPID 2>/dev/null && still=1 || still=0
wait $CPID 2>/dev/null; rc=$?
check "every node killed: cluster up says so and exits non-zero within 10 s, no node left" \
  '[ $still -eq 0 ] && [ $rc -ne 0 ] && grep -q "no node left: stopping" "$TMP/die.log" && all_gone "$TMP/die.log"'

# 4. A plan that cannot fit stops the nodes too and fails.
"$SHOAL" cluster up -m "$MODEL" --nodes 2 --node-mem 8M --no-measure --port 0 \
  --max-model-len 256 > "$TMP/short.log" 2>&1; rc=$?
check "cluster up with 2 x 8 MiB nodes fails with the shortfall and leaves no node" \
  '[ $rc -ne 0 ] && grep -q "short by" "$TMP/short.log" && all_gone "$TMP/short.log"'

cat > "$TMP/cluster.toml" <<TOML
# Two stages on loopback.
key_file = "key"
link_dtype = "f32"

[[node]]
address = "$(node t1)"
name = "alpha"
mem_limit = "96M"

[[node]]
address = "$(node t2)"
name = "beta"
link_latency_ms = 0.5
TOML
"$SHOAL" serve -m "$MODEL" --cluster "$TMP/cluster.toml" --port 0 -t 1 --max-num-seqs 8 \
  --max-model-len 256 > "$TMP/toml.log" 2>&1 &
SPID=$!; PIDS+=($SPID)
if wait_http "$TMP/toml.log" $SPID; then
  ask "$TMP/got_toml"
  "$SHOAL" status --url "http://127.0.0.1:$PORT" > "$TMP/status_toml" 2>&1
  kill -TERM $SPID; wait $SPID
else
  echo "serve --cluster did not start:"; tail -5 "$TMP/toml.log"
fi
check "serve --cluster: same tokens as one process" 'cmp -s "$TMP/want" "$TMP/got_toml"'
check "serve --cluster: stages named from the file, alpha planned with its 96 MiB cap" \
  'grep -qE "^0 +alpha " "$TMP/status_toml" && grep -qE "^1 +beta " "$TMP/status_toml" && grep -qE "^0 +alpha .* 96\.0 " "$TMP/status_toml"'
sed 's/mem_limit = "96M"/mem_limit = "4M"/' "$TMP/cluster.toml" > "$TMP/small.toml"
"$SHOAL" serve -m "$MODEL" --cluster "$TMP/small.toml" --dry-run --max-model-len 256 > "$TMP/small.out" 2>&1; rc=$?
check "a 4 MiB cap in the file gives a shortfall naming the node" '[ $rc -ne 0 ] && grep -q "alpha" "$TMP/small.out" && grep -q "short by" "$TMP/small.out"'
printf 'key_file = "key"\n[[node]]\nadress = "127.0.0.1:1"\n' > "$TMP/typo.toml"
"$SHOAL" serve -m "$MODEL" --cluster "$TMP/typo.toml" --dry-run > "$TMP/typo.out" 2>&1; rc=$?
check "a typo in the cluster file is an error with its line" '[ $rc -ne 0 ] && grep -q "typo.toml:3.*unknown key .adress." "$TMP/typo.out"'
"$SHOAL" serve -m "$MODEL" --cluster "$TMP/cluster.toml" --nodes 127.0.0.1:1 --dry-run > "$TMP/both.out" 2>&1; rc=$?
check "--cluster with --nodes is refused" '[ $rc -ne 0 ] && grep -q "not both" "$TMP/both.out"'

echo "$fails failure(s)"
[ $fails -eq 0 ]
