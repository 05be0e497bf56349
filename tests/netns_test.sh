#!/usr/bin/env bash
# A 2-stage pipeline whose activation hop crosses a veth pair between two network namespaces
# this test creates, shaped with tc netem: (a) 1 Gbit/s + 0.2 ms, (b) 20 ms + 1% loss. The
# generated tokens (and their logprobs) must equal a run with both nodes on loopback; the per-hop
# overhead (ms per token vs loopback) is printed. Exit 77 (ctest skip) with the reason where
# `ip netns` or netem is not permitted. Namespaces are always removed (trap).
set -u
SHOAL=$1
SKIP=77
N_TOK=48  # decode tokens timed per request: 48 x 20 ms ~ 1 s on the slow link, 3 requests
skip() { echo "SKIP: $*"; exit $SKIP; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (uid $(id -u))"
command -v ip > /dev/null || skip "no 'ip' command (iproute2)"
command -v tc > /dev/null || skip "no 'tc' command (iproute2)"

TMP=$(mktemp -d)
NSA=shoalA$$ NSB=shoalB$$
PIDS=()
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails+1)); fi; }
# Every process started here, also from $(node ...) subshells, which cannot add to PIDS, so
# they append to $TMP/pids; then whatever still runs inside the namespaces (a namespace lives
# on, unnamed, while a process is in it).
cleanup() {
  for p in "${PIDS[@]}" $(cat "$TMP/pids" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  for ns in "$NSA" "$NSB"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  wait 2>/dev/null
  ip netns del "$NSA" 2>/dev/null
  ip netns del "$NSB" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

err=$(ip netns add "$NSA" 2>&1) || skip "ip netns add not permitted: $err"
ip netns add "$NSB" || exit 1
ip -n "$NSA" link set lo up && ip -n "$NSB" link set lo up || exit 1
# The veth pair: va (10.201.0.1, in A) <-> vb (10.201.0.2, in B). netem shapes va's egress, the
# direction of the activations (stage 0 in A -> stage 1 in B); logits return to the coordinator
# (in A) over the unshaped direction.
ip -n "$NSA" link add va type veth peer name vb netns "$NSB" || exit 1
ip -n "$NSA" addr add 10.201.0.1/24 dev va && ip -n "$NSB" addr add 10.201.0.2/24 dev vb || exit 1
ip -n "$NSA" link set va up && ip -n "$NSB" link set vb up || exit 1
NETEM=1
if nerr=$(ip netns exec "$NSA" tc qdisc add dev va root netem delay 1ms 2>&1); then
  ip netns exec "$NSA" tc qdisc del dev va root
else
  NETEM=0
fi

mkdir -p "$TMP/models"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TMP/key"
chmod 600 "$TMP/key"
"$SHOAL" synth --preset tiny --layers 8 --type f16 --seed 7 -o "$TMP/models/m.gguf" > /dev/null 2>&1 || exit 1

# node NS NAME LISTEN_HOST -> prints HOST:PORT once listening
node() {
  local ns=$1 name=$2 host=$3
  ip netns exec "$ns" "$SHOAL" node --listen "$host:0" --model-dir "$TMP/models" \
    --cluster-key-file "$TMP/key" --no-measure -t 1 --name "$name" > "$TMP/$name.log" 2>&1 &
  echo $! >> "$TMP/pids"
  for _ in $(seq 1 100); do
    local p
    p=$(grep -o "listening on $host:[0-9]*" "$TMP/$name.log" | grep -o '[0-9]*$')
    [ -n "$p" ] && { echo "$host:$p"; return; }
    sleep 0.05
  done
}
# run NAME NODES: serves in namespace A, asks two greedy requests (1 and N_TOK + 1 tokens);
# writes $TMP/NAME.ids (tokens and logprobs) and $TMP/NAME.ms (decode ms per token).
run() {
  local name=$1 nodes=$2 spid port=""
  ip netns exec "$NSA" "$SHOAL" serve -m "$TMP/models/m.gguf" --nodes "$nodes" \
    --cluster-key-file "$TMP/key" --port 0 -t 1 --max-num-seqs 2 --max-model-len 256 \
    > "$TMP/$name.serve.log" 2>&1 &
  spid=$!; PIDS+=($spid)
  for _ in $(seq 1 300); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/$name.serve.log" | grep -o '[0-9]*$')
    [ -n "$port" ] && ip netns exec "$NSA" curl -s "127.0.0.1:$port/health" | grep -q ok && break
    kill -0 $spid 2>/dev/null || break
    sleep 0.05
  done
  local t1 tn
  ask() { ip netns exec "$NSA" curl -s -m 20 -o "$TMP/$name.$1.json" -w '%{time_total}' \
    "127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"prompt\":\"Over the hills\",\"max_tokens\":$1,\"temperature\":0,\"ignore_eos\":true,\"logprobs\":0}"; }
  ask 1 > /dev/null  # warm-up
  if ! grep -q '"choices"' "$TMP/$name.1.json" 2>/dev/null; then
    echo "$name: no answer"; tail -3 "$TMP/$name.serve.log"
    echo "bad response" > "$TMP/$name.ids"; echo nan > "$TMP/$name.ms"
    kill -TERM $spid; wait $spid 2>/dev/null
    stop_nodes
    return
  fi
  # Best of 3 of each: the 2 shared cores (and 1% loss) make single timings jitter by ~0.2 ms.
  t1=$( (ask 1; echo; ask 1; echo; ask 1; echo) | sort -g | head -1)
  tn=$( (ask $((N_TOK + 1)); echo; ask $((N_TOK + 1)); echo; ask $((N_TOK + 1)); echo) | sort -g | head -1)
  python3 -c "
import json,sys
c=json.load(open('$TMP/$name.$((N_TOK + 1)).json'))['choices'][0]
print(json.dumps([c['logprobs']['tokens'], c['logprobs']['token_logprobs']]))" > "$TMP/$name.ids" 2>/dev/null \
    || echo "bad response" > "$TMP/$name.ids"
  python3 -c "print(f'{($tn - $t1) * 1000 / $N_TOK:.3f}')" > "$TMP/$name.ms" 2>/dev/null || echo nan > "$TMP/$name.ms"
  kill -TERM $spid; wait $spid 2>/dev/null
  stop_nodes
}
# The nodes of a run serve one assignment each; stop them before the next run.
stop_nodes() {
  for p in $(cat "$TMP/pids" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
}

run loopback "$(node "$NSA" l1 127.0.0.1),$(node "$NSA" l2 127.0.0.1)"
check "loopback run answers ($(cat "$TMP/loopback.ms") ms/token)" 'grep -q "^\[\[" "$TMP/loopback.ids"'
profiles=(veth)
[ $NETEM -eq 1 ] && profiles+=(gbit slow)
for prof in "${profiles[@]}"; do
  case $prof in
    veth) desc="veth, no shaping" ;;
    gbit) desc="1 Gbit/s, 0.2 ms"
          check "$desc: netem applied" 'ip netns exec "$NSA" tc qdisc replace dev va root netem delay 0.2ms rate 1gbit' ;;
    slow) desc="20 ms, 1% loss"
          check "$desc: netem applied" 'ip netns exec "$NSA" tc qdisc replace dev va root netem delay 20ms loss 1%' ;;
  esac
  [ "$prof" = veth ] || echo "     $(ip netns exec "$NSA" tc qdisc show dev va)"
  run "$prof" "$(node "$NSA" ${prof}1 127.0.0.1),$(node "$NSB" ${prof}2 10.201.0.2)"
  check "$desc: the same tokens and logprobs as loopback" 'cmp -s "$TMP/loopback.ids" "$TMP/$prof.ids"'
  check "$desc: stage 1 is the node in the other namespace (10.201.0.2)" \
    'grep -qE "^ +1  ${prof}2 " "$TMP/$prof.serve.log"'
  over=$(python3 -c "print(f'{$(cat "$TMP/$prof.ms") - $(cat "$TMP/loopback.ms"):.3f}')")
  echo "     $desc: $(cat "$TMP/$prof.ms") ms/token, per-hop overhead $over ms/token vs loopback"
  [ "$prof" = slow ] && check "20 ms link: the overhead is at least the 20 ms delay" \
    "python3 -c 'import sys; sys.exit(0 if $over >= 19.0 else 1)'"
done
echo "$fails failure(s)"
[ $fails -eq 0 ] || exit 1
[ $NETEM -eq 1 ] || skip "netem is not available here (tc: $nerr); only the unshaped veth hop ran"
exit 0
