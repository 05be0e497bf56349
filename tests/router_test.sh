#!/usr/bin/env bash
# `shoal router` in front of two `shoal serve` replicas (stories260K, loopback): greedy and seeded
# texts through the router equal a replica's own, streamed and not; requests with the same
# prompt prefix stay on one replica while different prefixes use both; /health, /metrics and
# /v1/cluster; a bearer key on the router and another on the replicas; every replica full ->
# 429; a replica killed -> new requests go to the other and /health names one up; no replica ->
# 503; malformed bodies pass through to the replica's 400; SIGTERM stops the router.
set -u
SHOAL=$1 SHARED=${2:-}
TMP=$(mktemp -d)
fails=0
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
. "$(dirname "$0")/lib_cluster.sh"
[ -f "$SHARED/models/stories260K.gguf" ] || { echo "SKIP: no stories260K"; exit 77; }
MODEL=$SHARED/models/stories260K.gguf
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TMP/key"
echo "replica-secret" > "$TMP/rkey"

serve r1.log --api-key-file "$TMP/rkey" || { cat "$TMP/r1.log"; exit 1; }
P1=$PORT S1=$SPID
serve r2.log --api-key-file "$TMP/rkey" || { cat "$TMP/r2.log"; exit 1; }
P2=$PORT S2=$SPID

# start_router REPLICA_PORT... -- ARGS... -> RPORT, RPID; waits until every replica is up
# (returns 1 if not within 6 s).
start_router() {
  local reps=() n=0
  while [ "$1" != "--" ]; do reps+=(--replica "http://127.0.0.1:$1"); n=$((n+1)); shift; done
  shift
  "$SHOAL" router --listen 127.0.0.1:0 "${reps[@]}" "$@" > "$TMP/router.log" 2>&1 &
  RPID=$!; PIDS+=($RPID); RPORT=""
  for _ in $(seq 1 60); do
    RPORT=$(grep -so 'listening on http://127.0.0.1:[0-9]*' "$TMP/router.log" | grep -o '[0-9]*$')
    [ -n "$RPORT" ] && curl -s "127.0.0.1:$RPORT/health" | grep -q "\"replicas_up\":$n" && return 0
    sleep 0.1
  done
  return 1
}
# router ARGS...: in front of the two stories260K replicas, with their key.
router() { start_router "$P1" "$P2" -- --replica-api-key-file "$TMP/rkey" "$@"; }
router --api-key client-secret --affinity-bytes 24 || { echo "router did not start"; cat "$TMP/router.log"; exit 1; }
AUTH=(-H "Authorization: Bearer client-secret")

body() { echo "{\"prompt\":\"$1\",\"max_tokens\":24,\"temperature\":$2,\"seed\":7,\"ignore_eos\":true$3}"; }
text() { python3 -c "import json,sys; print(json.load(sys.stdin)['choices'][0]['text'])"; }
for t in 0 0.8; do
  want=$(curl -s "127.0.0.1:$P1/v1/completions" -H "Authorization: Bearer replica-secret" -d "$(body 'Once upon a time' $t '')" | text)
  got=$(curl -s "127.0.0.1:$RPORT/v1/completions" "${AUTH[@]}" -d "$(body 'Once upon a time' $t '')" | text)
  check "temperature $t: the router's text equals the replica's" '[ -n "$want" ] && [ "$want" = "$got" ]'
  streamed=$(curl -sN "127.0.0.1:$RPORT/v1/completions" "${AUTH[@]}" -d "$(body 'Once upon a time' $t ',"stream":true')" |
    python3 -c "
import json, sys
out, done = '', False
for line in sys.stdin:
    line = line.strip()
    if line == 'data: [DONE]': done = True
    elif line.startswith('data: '): out += json.loads(line[6:])['choices'][0]['text']
print(out if done else 'no [DONE]')")
  check "temperature $t: streamed through the router, the same text and [DONE]" '[ "$want" = "$streamed" ]'
done
check "no key at the router: 401" '[ "$(curl -s -o /dev/null -w "%{http_code}" "127.0.0.1:$RPORT/v1/models")" = 401 ]'
check "/v1/models through the router" 'curl -s "127.0.0.1:$RPORT/v1/models" "${AUTH[@]}" | grep -q stories260K'
check "a malformed body gets the replica's 400" \
  '[ "$(curl -s -o /dev/null -w "%{http_code}" "127.0.0.1:$RPORT/v1/completions" "${AUTH[@]}" -d "{\"prompt\": [1, 2,")" = 400 ]'

# Affinity: 6 requests sharing a prefix land on one replica; 8 different prefixes use both.
count() { curl -s "127.0.0.1:$RPORT/metrics" | grep "^shoal_router_requests_total{replica=\"http://127.0.0.1:$1\"}" | awk '{print $2}'; }
a1=$(count $P1) a2=$(count $P2)
for i in 1 2 3 4 5 6; do curl -s "127.0.0.1:$RPORT/v1/completions" "${AUTH[@]}" -d "$(body "The little dog and the big cat, part $i" 0 '')" > /dev/null; done
b1=$(count $P1) b2=$(count $P2)
check "one shared prefix: all 6 on one replica" '[ $((b1 - a1)) -eq 6 -o $((b2 - a2)) -eq 6 ]'
for i in 1 2 3 4 5 6 7 8; do curl -s "127.0.0.1:$RPORT/v1/completions" "${AUTH[@]}" -d "$(body "Prefix $i: a tale" 0 '')" > /dev/null; done
c1=$(count $P1) c2=$(count $P2)
check "8 different prefixes: both replicas used" '[ $((c1 - b1)) -gt 0 ] && [ $((c2 - b2)) -gt 0 ]'
curl -s "127.0.0.1:$RPORT/v1/cluster" "${AUTH[@]}" > "$TMP/cluster.json"
check "/v1/cluster lists both replicas up with their counts" \
  "python3 -c \"import json; j=json.load(open('$TMP/cluster.json')); r=j['replicas']; assert j['role']=='router' and len(r)==2 and all(x['up'] and x['requests_total']>0 for x in r), j\""
"$SHOAL" status --url "http://127.0.0.1:$RPORT" --api-key client-secret > "$TMP/status" 2>&1
check "shoal status on the router lists both replicas up" '[ $(grep -c "^  replica .* up " "$TMP/status") -eq 2 ]'
kill -TERM $RPID; wait $RPID 2>/dev/null
check "SIGTERM: the router exits" '! kill -0 $RPID 2>/dev/null'

# Every replica full: with 1 in flight each and both replicas stopped (SIGSTOP), two requests
# hold both and a third gets 429; continued, the two complete.
router --max-in-flight 1 || { echo "router did not restart"; exit 1; }
kill -STOP $S1 $S2
curl -s -m 30 "127.0.0.1:$RPORT/v1/completions" -d "$(body 'first held' 0 '')" > "$TMP/h1" & H1=$!
curl -s -m 30 "127.0.0.1:$RPORT/v1/completions" -d "$(body 'second held' 0 '')" > "$TMP/h2" & H2=$!
sleep 0.5
code=$(curl -s -o "$TMP/busy" -w "%{http_code}" "127.0.0.1:$RPORT/v1/completions" -d "$(body 'third' 0 '')")
kill -CONT $S1 $S2
wait $H1 $H2
check "both replicas full: 429 with an OpenAI error" '[ "$code" = 429 ] && grep -q "\"error\"" "$TMP/busy"'
check "...and the two held requests complete once the replicas continue" 'grep -q "\"text\"" "$TMP/h1" && grep -q "\"text\"" "$TMP/h2"'
check "/metrics counts the 429" 'curl -s "127.0.0.1:$RPORT/metrics" | grep -q "^shoal_router_rejected_total [1-9]"'
sleep 1.2  # a health check after the stop may have marked them down; the next one brings them up

# A replica healthy to the checks that answers requests with garbage (a raw socket: bytes that
# are no HTTP, headers past 64 KiB, a connection closed mid-headers, in turn): the router retries
# on the real replica, never crashes, and the bad one's failures are counted.
python3 - "$TMP/bad.port" <<'PY' &
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
answers = [b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n",
           b"HTTP/1.1 200 OK\r\nContent-Ty"]
s.settimeout(20)
try:
    for k in range(200):
        c, _ = s.accept()
        c.settimeout(2)
        try:
            if c.recv(65536).startswith(b"GET /health"):  # healthy to the checks, so it is used
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            else:
                c.sendall(answers[k % 3])
        except OSError:
            pass
        c.close()
except OSError:
    pass
PY
BADPID=$!; PIDS+=($BADPID)
for _ in $(seq 1 50); do [ -s "$TMP/bad.port" ] && break; sleep 0.1; done
kill -TERM $RPID; wait $RPID 2>/dev/null
start_router "$(cat "$TMP/bad.port")" "$P2" -- --replica-api-key-file "$TMP/rkey" \
  --policy round-robin || { echo "router did not start"; cat "$TMP/router.log"; }
ok=0
for i in 1 2 3 4 5 6; do
  curl -s -m 10 "127.0.0.1:$RPORT/v1/completions" -d "$(body "garbage check $i" 0 '')" > "$TMP/g$i"; grep -q '"text"' "$TMP/g$i" && ok=$((ok+1)) || { echo "     garbage $i:"; head -c 300 "$TMP/g$i"; tail -3 "$TMP/router.log"; }
done
check "a replica answering garbage: 6 of 6 requests answered by the other" '[ $ok -eq 6 ]'
check "...the router is alive and counted the bad replica's failures" \
  'kill -0 $RPID && curl -s "127.0.0.1:$RPORT/metrics" | grep -qE "^shoal_router_replica_failures_total\{replica=\"http://127.0.0.1:$(cat "$TMP/bad.port")\"\} [1-9]"'
kill $BADPID 2>/dev/null

# A replica killed -9 in the middle of 4 streams (2 greedy, 2 seeded) of a synth model: the router
# resumes each on the other replica from the tokens its client has, and every client's text
# equals an undisturbed run's.
"$SHOAL" synth --preset tiny --layers 8 --type q8_0 --seed 5 -o "$TMP/tiny8.gguf" > /dev/null 2>&1
kill -TERM $RPID; wait $RPID 2>/dev/null
MODEL_SAVED=$MODEL; MODEL=$TMP/tiny8.gguf
SERVE_MAX_LEN=512
serve t1.log || { cat "$TMP/t1.log"; exit 1; }
T1=$PORT TS1=$SPID
serve t2.log || { cat "$TMP/t2.log"; exit 1; }
T2=$PORT TS2=$SPID
SERVE_MAX_LEN=256; MODEL=$MODEL_SAVED
start_router "$T1" "$T2" -- --affinity-bytes 16 || { echo "router did not start"; exit 1; }
python3 "$(dirname "$0")/router_stream_client.py" "$RPORT" "$TMP/want" "$TMP/progress0" 400
busy() { curl -s "127.0.0.1:$RPORT/v1/cluster" | python3 -c "
import json, sys
r = json.load(sys.stdin)['replicas']
print(' '.join(x['url'].rsplit(':', 1)[1] for x in r if x['in_flight'] > 0))"; }
python3 "$(dirname "$0")/router_stream_client.py" "$RPORT" "$TMP/got" "$TMP/progress" 400 & CL=$!
victim=""
for _ in $(seq 1 400); do
  n=$(cat "$TMP/progress" 2>/dev/null || echo 0)
  if [ "${n:-0}" -ge 200 ]; then victim=$(busy); break; fi
  sleep 0.01
done
case "$victim" in
  "$T1") kill -9 $TS1 ;;
  "$T2") kill -9 $TS2 ;;
esac
wait $CL
echo "     killed the replica on port ${victim:-none} after $(cat "$TMP/progress" 2>/dev/null) chunks"
same=0
for i in 0 1 2 3; do cmp -s "$TMP/want$i" "$TMP/got$i" && same=$((same+1)); done
check "a replica killed mid-stream: 4 of 4 streams resumed with the undisturbed texts" '[ -n "$victim" ] && [ $same -eq 4 ]'
check "...counted in shoal_router_resumed_total" 'curl -s "127.0.0.1:$RPORT/metrics" | grep -q "^shoal_router_resumed_total [1-9]"'
kill -9 $TS1 $TS2 2>/dev/null
kill -TERM $RPID; wait $RPID 2>/dev/null
router || { echo "router did not restart"; exit 1; }

# A replica killed: requests keep being answered by the other; then none: 503.
kill -9 $S1; wait $S1 2>/dev/null
ok=0
for i in 1 2 3 4; do
  curl -s "127.0.0.1:$RPORT/v1/completions" -d "$(body "after the kill $i" 0 '')" | grep -q '"text"' && ok=$((ok+1))
done
check "replica 1 killed: 4 of 4 requests answered by replica 2" '[ $ok -eq 4 ]'
sleep 1.2
check "/health: 1 replica up" 'curl -s "127.0.0.1:$RPORT/health" | grep -q "\"replicas_up\":1"'
kill -9 $S2; wait $S2 2>/dev/null
sleep 1.2
check "no replica: /health 503 and requests 503" \
  '[ "$(curl -s -o /dev/null -w "%{http_code}" "127.0.0.1:$RPORT/health")" = 503 ] && [ "$(curl -s -o /dev/null -w "%{http_code}" "127.0.0.1:$RPORT/v1/completions" -d "$(body x 0 "")")" = 503 ]'
kill -TERM $RPID; wait $RPID 2>/dev/null
[ $fails -eq 0 ] && echo "all router checks passed"
exit $fails
