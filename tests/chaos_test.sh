#!/usr/bin/env bash
# Chaos suite (docs/CLUSTER.md, "Failover"): a local cluster of 4 `shoal node` stages (or, with
# CHAOS_PARALLEL=tp=2,pp=2, 2 stages of 2 tensor-parallel members each; with CHAOS_ARCH=qwen3moe
# a MoE model, so the members split its experts) and
# a standby behind `shoal serve`, streaming greedy and seeded-sampling requests while nodes are
# killed (-9, one or two at once, the standby), stopped (SIGSTOP 3 s: the grace period; 5 s:
# past --dead-ms), restarted with the same identity during recovery, drained (`shoal node
# drain`, then joined back), or all lost (503 until a node comes back); a node is stopped while
# it loads a new plan (stop_assign), or a standby joins and the pipeline rebalances onto it
# (join_rebalance). Every trial checks
# that every request completes with exactly the chunks of an undisturbed run (no token lost,
# duplicated or changed) and records the recovery time (fault to the next chunk).
#   chaos_test.sh SHOAL            one trial of each kind (ctest, label e2e)
#   chaos_test.sh SHOAL N          N trials of random kinds (make chaos, CHAOS_TRIALS=N)
# Where network namespaces and nftables can be used (root; tests/lib_netns.sh), every node runs
# in a namespace of its own, listening on its end of a veth pair (a /30 each) to the hub
# namespace of the coordinator and the clients, which routes between the nodes; two kinds then
# join the mix: partition5 (everything one stage's link carries is dropped for 5 s, then healed)
# and loss5 (5% random loss on one stage's link while the streams run, at most 10 s, plus 100 ms
# of netem delay each way where the kernel has sch_netem). Elsewhere (or with CHAOS_NETNS=0)
# the nodes are on loopback and the suite says why the netns kinds are left out.
set -euo pipefail
SHOAL=$1 TRIALS=${2:-0}
DIR=$(cd "$(dirname "$0")" && pwd)
source "$DIR/lib_netns.sh"
TMP=$(mktemp -d)
SEED=${CHAOS_SEED:-$$}
RANDOM=$SEED
N_REQ=4 MAX_TOK=${CHAOS_MAX_TOKENS:-400}
DEAD_MS=${CHAOS_DEAD_MS:-4000}  # 4 s: a 3 s SIGSTOP stays within the grace period
PART_S=5     # partition5: the link is cut this long (past DEAD_MS, so the stage is evicted)
LOSS_PCT=5   # loss5: random loss on the link, each way...
LOSS_MAX_S=10  # ...while the streams run, at most this long (with netem's 100 ms each way a
               # stream of 400 tokens would take 400 x 0.2 s = 80 s)
fails=0
PIDS=()
cleanup() {
  local f p
  exec 2> /dev/null  # not the shell's "Killed" notice of every node
  for f in "$TMP"/*.pid; do
    [ -f "$f" ] || continue
    kill -CONT "$(cat "$f")" 2>/dev/null || true
    kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  for p in ${PIDS[@]+"${PIDS[@]}"}; do kill -9 "$p" 2>/dev/null || true; done
  netns_cleanup
  if [ -n "${KEEP_TMP:-}" ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
echo "chaos seed $SEED (CHAOS_SEED=$SEED repeats this run)"
NAMES="n1 n2 n3 n4 n5"

# The topology. HX runs a command in the hub (coordinator, clients, CLI); empty on loopback.
NETNS=0 HX=() HUB=""
if [ "${CHAOS_NETNS:-1}" = 0 ]; then
  NET_WHY="CHAOS_NETNS=0"
else
  netns_probe
  if [ "$NETNS_OK" = 1 ]; then NETNS=1; else NET_WHY=$NETNS_WHY; fi
fi
if [ $NETNS = 1 ]; then
  HUB=shoalH$$
  netns_add $HUB
  ip netns exec $HUB sysctl -qw net.ipv4.ip_forward=1  # node to node (stage links) via the hub
  HX=(ip netns exec $HUB)
  k=0
  for n in $NAMES; do
    k=$((k + 1))
    netns_add "shoal${n}_$$"
    netns_link $HUB "$n" "10.202.$k.1/30" "shoal${n}_$$" eth0 "10.202.$k.2/30"
    link_gso 1 $HUB "$n" "shoal${n}_$$" eth0  # a 5% drop is 5% of wire packets (lib_netns.sh)
    ip -n "shoal${n}_$$" route add default via "10.202.$k.1"
    echo "10.202.$k.2" > "$TMP/$n.host"
  done
  echo "topology: 5 nodes in network namespaces of their own, each a veth pair (10.202.K.0/30) to the coordinator's hub"
  [ "$NETEM" = 1 ] || echo "loss5: the 200 ms round trip is not emulated ($NETEM_WHY); the 5% loss is (nftables)"
else
  echo "topology: loopback; partition5 and loss5 left out: $NET_WHY"
fi
host_of() { cat "$TMP/$1.host" 2>/dev/null || echo 127.0.0.1; }
ns_of() { if [ $NETNS = 1 ]; then echo "shoal${1}_$$"; fi; }
link_of() { echo "$HUB $1 $(ns_of "$1") eth0"; }  # a node's link: the hub's end, the node's end

NET_KINDS="partition5 loss5"
ALL_KINDS="kill1 kill2 kill_standby stop3 stop_dead restart drain stop_assign join_rebalance all_lost"
# Random trials draw from this list: all_lost (every stream stalls until a node returns) is
# half as likely as each other kind.
WEIGHTED="kill1 kill1 kill2 kill2 kill_standby kill_standby stop3 stop3 stop_dead stop_dead restart restart drain drain stop_assign stop_assign join_rebalance join_rebalance all_lost"
if [ $NETNS = 1 ]; then
  # Before all_lost, after which one node serves alone: a partition of a middle stage leaves
  # late frames in flight to a stage of the next plan, which must drop them.
  ALL_KINDS="${ALL_KINDS% all_lost} $NET_KINDS all_lost"
  WEIGHTED="$WEIGHTED partition5 partition5 loss5 loss5"
fi
KINDS=${CHAOS_KINDS:-$ALL_KINDS}  # e.g. CHAOS_KINDS="kill1 stop3"
# CHAOS_PARALLEL (e.g. tp=2,pp=2) serves a forced layout of tensor-parallel groups: a fifth node
# then has no place in it (groups of 2 x 2 stages), so a node that joins holds no layers.
if [ -n "${CHAOS_PARALLEL:-}" ] && [ "${KINDS#*join_rebalance}" != "$KINDS" ]; then
  echo "left out join_rebalance: --parallel $CHAOS_PARALLEL has no place for a joining node"
  KINDS=$(echo " $KINDS " | sed 's/ join_rebalance / /; s/^ //; s/ $//')
fi
if [ $NETNS = 0 ]; then
  k=""
  for x in $KINDS; do case " $NET_KINDS " in *" $x "*) echo "left out $x: $NET_WHY" ;; *) k="$k $x" ;; esac; done
  KINDS=${k# }
  [ -n "$KINDS" ] || { echo "SKIP: no trial kind left to run"; exit 77; }
fi

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TMP/key"
chmod 600 "$TMP/key"
# The admin key opens drain/join (an inference key cannot change the cluster).
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TMP/admin.key"
chmod 600 "$TMP/admin.key"
mkdir -p "$TMP/models"
# CHAOS_ARCH=qwen3moe: a MoE model, whose experts the tensor-parallel members split (expert
# parallel trials).
"$SHOAL" synth ${CHAOS_ARCH:+--arch "$CHAOS_ARCH"} --preset tiny --layers 8 --type q8_0 --seed 5 \
  -o "$TMP/models/m.gguf" > /dev/null 2>&1

# start_node NAME [PORT]: starts (or restarts, on the same port) node NAME, in its namespace
# if it has one; sets its port file. Debug logging shows the frames of an older epoch it drops.
start_node() {
  local name=$1 port=${2:-0} host ns
  host=$(host_of "$name") ns=$(ns_of "$name")
  SHOAL_LOG_LEVEL=debug ${ns:+ip netns exec "$ns"} "$SHOAL" node --listen "$host:$port" \
    --model-dir "$TMP/models" --cluster-key-file "$TMP/key" \
    --no-measure -t 1 --name "$name" >> "$TMP/$name.log" 2>&1 &
  echo $! > "$TMP/$name.pid"
  for _ in $(seq 1 200); do
    local p
    p=$(grep -o "listening on $host:[0-9]*" "$TMP/$name.log" | tail -1 | grep -o '[0-9]*$') || true
    if [ -n "$p" ] && { [ "$port" = 0 ] || [ "$(grep -c 'listening on' "$TMP/$name.log")" -gt "$(cat "$TMP/$name.starts" 2>/dev/null || echo 0)" ]; }; then
      echo "$p" > "$TMP/$name.port"
      grep -c 'listening on' "$TMP/$name.log" > "$TMP/$name.starts"
      return 0
    fi
    sleep 0.02
  done
  echo "node $name did not start"; tail -3 "$TMP/$name.log"; return 1
}
for n in $NAMES; do start_node "$n" || exit 1; done
addr() { echo "$(host_of "$1"):$(cat "$TMP/$1.port")"; }
name_of() { local n; for n in $NAMES; do if [ "$(addr "$n")" = "$1" ]; then echo "$n"; fi; done; }
alive() { kill -0 "$(cat "$TMP/$1.pid")" 2>/dev/null; }

"${HX[@]}" "$SHOAL" serve -m "$TMP/models/m.gguf" --port 0 --max-num-seqs 8 --max-model-len 512 -t 1 \
  --cluster-key-file "$TMP/key" --admin-key-file "$TMP/admin.key" --nodes "$(addr n1),$(addr n2),$(addr n3),$(addr n4)" \
  --standby "$(addr n5)" --link-dtype f32 --suspect-ms 500 --dead-ms $DEAD_MS \
  ${CHAOS_PARALLEL:+--parallel "$CHAOS_PARALLEL"} > "$TMP/serve.log" 2>&1 &
SPID=$!; PIDS+=($SPID); PORT=""
for _ in $(seq 1 300); do
  PORT=$(grep -so 'listening on http://127.0.0.1:[0-9]*' "$TMP/serve.log" | grep -o '[0-9]*$') || true
  [ -n "$PORT" ] && "${HX[@]}" curl -s "127.0.0.1:$PORT/health" | grep -q ok && break
  kill -0 $SPID 2>/dev/null || break
  PORT=""; sleep 0.05
done
[ -n "$PORT" ] || { echo "server did not start"; tail -20 "$TMP/serve.log"; exit 1; }

"${HX[@]}" python3 "$DIR/chaos_client.py" "$PORT" "$TMP/ref.json" $N_REQ $MAX_TOK
python3 - "$TMP/ref.json" $MAX_TOK <<'PY' || { echo "reference run failed"; exit 1; }
import json, sys
rs = json.load(open(sys.argv[1]))["requests"]
assert all(r["error"] is None and len(r["chunks"]) >= int(sys.argv[2]) // 2 for r in rs), rs
PY
ref_s=$(python3 -c "import json; r=json.load(open('$TMP/ref.json'))['requests']; print('%.2f' % (max(x['times'][-1] for x in r) - min(x['times'][0] for x in r)))")
echo "undisturbed run: $N_REQ streams of $MAX_TOK tokens in ${ref_s} s"

cluster() { "${HX[@]}" curl -s -m 5 "127.0.0.1:$PORT/v1/cluster" || echo '{}'; }
# Nodes by role now: stages (alive), standbys (whose process runs).
stages() { cluster | python3 -c "import json,sys; [print(n['address']) for n in json.load(sys.stdin).get('nodes',[]) if n['role'].startswith('stage')]" | while read -r a; do name_of "$a"; done; }
standbys() { cluster | python3 -c "import json,sys; [print(n['address']) for n in json.load(sys.stdin).get('nodes',[]) if n['role'] in ('standby','spare')]" | while read -r a; do n=$(name_of "$a"); if [ -n "$n" ] && alive "$n"; then echo "$n"; fi; done; }
# role_of NAME: "ROLE (STATE)" in /v1/cluster now.
role_of() { cluster | python3 -c "import json,sys; [print(n['role'], '(' + n['state'] + ')') for n in json.load(sys.stdin).get('nodes',[]) if n['address'] == sys.argv[1]]" "$(addr "$1")"; }
failovers() {
  { "${HX[@]}" curl -s -m 5 "127.0.0.1:$PORT/metrics" || true; } |
    awk '$1 == "shoal_failovers_total" {n = $2} END {print n + 0}'
}
# Late frames of an older epoch the nodes dropped so far (their debug log).
stale_frames() { cat "$TMP"/n?.log | grep -c 'dropped a frame of epoch' || true; }
# pick SEED N: N random lines of stdin (the seed comes from the caller: $RANDOM in a pipeline
# runs in a subshell and would repeat).
pick() { python3 -c "import random,sys; l=sys.stdin.read().split(); random.seed($1); print(' '.join(random.sample(l, min($2, len(l)))))"; }

restore() {  # every node running and not stopped again (a killed one restarts on its port)
  local n
  for n in $NAMES; do
    kill -CONT "$(cat "$TMP/$n.pid")" 2>/dev/null || true
    alive "$n" || start_node "$n" "$(cat "$TMP/$n.port")" > /dev/null || echo "restart of $n failed"
  done
}

# stop_assign: kill -9 a stage and SIGSTOP the node that gets its layers (the first live
# standby, else a survivor) as soon as the coordinator sends the new plan: the coordinator must
# give that assignment up within --dead-ms and serve a newer plan without the node while it is
# still stopped (it stays stopped --dead-ms + 3 s). Sets victims and extra of trial().
epoch_now() { cluster | python3 -c "import json,sys; print(json.load(sys.stdin)['epoch'])"; }
# Chosen before the trial's streams start (sa_* of trial()), as every trial's victims are.
prepare_stop_assign() {
  local r=$RANDOM
  sa_e0=$(epoch_now)
  sa_dead=$(stages | pick $r 1)
  sa_target=$(standbys | sed -n 1p)  # reads all its input: head would SIGPIPE the pipeline
  [ -n "$sa_target" ] || sa_target=$(stages | grep -vx "$sa_dead" | pick $r 1)
  sa_plans=$(grep -c "plan of epoch" "$TMP/serve.log" || true)
  sa_silent=$(grep -c "assignment: node .*silent" "$TMP/serve.log" || true)
}
fault_stop_assign() {
  local dead=$sa_dead target=$sa_target plans=$sa_plans silent=$sa_silent e0=$sa_e0 t
  victims="$dead $target"
  kill -9 "$(cat "$TMP/$dead.pid")"
  for _ in $(seq 1 2000); do [ "$(grep -c "plan of epoch" "$TMP/serve.log" || true)" -gt "$plans" ] && break; sleep 0.005; done
  kill -STOP "$(cat "$TMP/$target.pid")"
  sleep $((DEAD_MS / 1000 + 3))
  # Still stopped: a newer plan must serve, without it.
  [ "$(epoch_now)" -gt "$e0" ] || extra="no new plan served while $target is stopped"
  stages | grep -x "$target" > /dev/null && extra="$target still holds layers while stopped"
  cluster | grep '"unavailable"' > /dev/null && extra="unavailable while $target is stopped"
  kill -CONT "$(cat "$TMP/$target.pid")"
  t=$(grep -c "assignment: node .*silent" "$TMP/serve.log" || true)
  if [ "$t" -gt "$silent" ]; then echo "$target" >> "$TMP/stopped_loading"; fi
}

# join_rebalance: a live standby joins as a full node (`shoal node join` without --standby):
# the pipeline re-plans onto it at the next step, the streams go on unchanged, and it must then
# hold layers. With no standby, a stage is drained first and joins back the same way.
fault_join_rebalance() {
  local r=$RANDOM v
  v=$(standbys | pick $r 1)
  if [ -z "$v" ]; then
    v=$(stages | pick $r 1)
    "${HX[@]}" "$SHOAL" node drain "$(addr "$v")" --url "http://127.0.0.1:$PORT" --admin-key-file "$TMP/admin.key" > /dev/null || { extra="drain $v failed"; return; }
    for _ in $(seq 1 500); do stages | grep -x "$v" > /dev/null || break; sleep 0.02; done
  fi
  victims=$v
  "${HX[@]}" "$SHOAL" node join "$(addr "$v")" --url "http://127.0.0.1:$PORT" --admin-key-file "$TMP/admin.key" > /dev/null || { extra="join $v failed"; return; }
  for _ in $(seq 1 500); do stages | grep -x "$v" > /dev/null && return; sleep 0.02; done
  extra="$v holds no layers 10 s after joining"
}
trial() {
  local kind=$1 i=$2 victims="" t_fault r=$RANDOM v note="" fo0 st0
  local sa_e0 sa_dead sa_target sa_plans sa_silent
  rm -f "$TMP/started"
  fo0=$(failovers) st0=$(stale_frames)
  # Victims are chosen before the streams start, so the fault lands while they run: the
  # queries take ~0.3-1 s, and 4 streams of 400 tokens last ~1.8 s on a Zen 5 host (a fault
  # after them finds an idle pipeline, which fails no step).
  case $kind in
    kill1|restart|stop3|stop_dead|drain|partition5|loss5) victims=$(stages | pick $r 1) ;;
    kill2) victims=$(stages | pick $r 2) ;;
    kill_standby) victims=$(standbys | pick $r 1) ;;
    all_lost) victims=$NAMES ;;
    stop_assign) prepare_stop_assign ;;
    join_rebalance) ;;  # chosen by its fault_ function
  esac
  "${HX[@]}" python3 "$DIR/chaos_client.py" "$PORT" "$TMP/t$i.json" $N_REQ $MAX_TOK "$TMP/started" &
  local cp=$!
  for _ in $(seq 1 1500); do [ -f "$TMP/started" ] && break; sleep 0.02; done
  t_fault=$(date +%s.%N)
  local extra=""
  case $kind in
    kill1|kill2|kill_standby) for v in $victims; do kill -9 "$(cat "$TMP/$v.pid")" || true; done ;;
    drain) for v in $victims; do "${HX[@]}" "$SHOAL" node drain "$(addr "$v")" --url "http://127.0.0.1:$PORT" --admin-key-file "$TMP/admin.key" > /dev/null || extra="drain $v failed"; done ;;
    restart) for v in $victims; do kill -9 "$(cat "$TMP/$v.pid")" || true; wait "$(cat "$TMP/$v.pid")" 2>/dev/null || true; start_node "$v" "$(cat "$TMP/$v.port")" > /dev/null || extra="$v did not restart"; done ;;
    partition5)
      for v in $victims; do link_cut $(link_of "$v"); done
      sleep $PART_S
      for v in $victims; do note="$note$v's link: $(link_counts $(link_of "$v")) in ${PART_S} s; "; link_heal $(link_of "$v"); done ;;
    loss5)
      for v in $victims; do
        link_loss $LOSS_PCT $(link_of "$v")
        if [ "$NETEM" = 1 ]; then link_shape "" 100ms $(link_of "$v"); fi
      done
      for _ in $(seq 1 $((LOSS_MAX_S * 20))); do kill -0 $cp 2>/dev/null || break; sleep 0.05; done
      for v in $victims; do
        note="$note$v's link: $(link_counts $(link_of "$v")) in $(python3 -c "import time; print(f'{time.time() - $t_fault:.1f}')") s; "
        link_heal $(link_of "$v"); link_unshape $(link_of "$v")
      done ;;
    stop3) for v in $victims; do kill -STOP "$(cat "$TMP/$v.pid")" || true; done; sleep 3; for v in $victims; do kill -CONT "$(cat "$TMP/$v.pid")" || true; done ;;
    stop_dead) for v in $victims; do kill -STOP "$(cat "$TMP/$v.pid")" || true; done; sleep $((DEAD_MS / 1000 + 1)); for v in $victims; do kill -CONT "$(cat "$TMP/$v.pid")" || true; done ;;
    all_lost)
      for v in $victims; do kill -9 "$(cat "$TMP/$v.pid")" || true; done
      # New requests get 503 with the reason while the streams in flight wait.
      local code=""
      for _ in $(seq 1 100); do
        code=$("${HX[@]}" curl -s -o "$TMP/503.json" -w '%{http_code}' -m 5 "127.0.0.1:$PORT/v1/completions" -d '{"prompt":"x","max_tokens":1}') || true
        [ "$code" = 503 ] && break; sleep 0.05
      done
      [ "$code" = 503 ] && grep -q "cannot serve yet" "$TMP/503.json" || extra="new request got $code, not 503 with the reason ($(head -c 200 "$TMP/503.json"))"
      sleep 1
      start_node n3 "$(cat "$TMP/n3.port")" > /dev/null || extra="n3 did not restart" ;;
    stop_assign) fault_stop_assign ;;
    join_rebalance) fault_join_rebalance ;;
  esac
  wait $cp || extra="the client exited with status $?"
  if [ $kind = partition5 ]; then
    # What the healed link still delivers: the victim's peers retransmit what the partition
    # held, on TCP's backed-off timer (0.2, 0.4, ... 3.2 s after 5 s of silence), so the
    # victim's late frames reach the next stage (which must drop them) within ~3.2 s of the
    # heal; wait 4 s from it, so they count in this trial.
    sleep "$(python3 -c "import time; print(max(0.0, $t_fault + $PART_S + 4 - time.time()))")"
  fi
  if [ $kind = drain ]; then  # the drained node joins again, as a standby
    for v in $victims; do "${HX[@]}" "$SHOAL" node join --standby "$(addr "$v")" --url "http://127.0.0.1:$PORT" --admin-key-file "$TMP/admin.key" > /dev/null || extra="join $v failed"; done
  fi
  # Failovers the trial caused, late frames dropped, and for the network kinds what became of
  # the victim once its link was whole again (it must live on, as a standby, and harm nothing).
  local dfo=$(( $(failovers) - fo0 )) dst=$(( $(stale_frames) - st0 ))
  case $kind in
    partition5|loss5)
      for v in $victims; do
        alive "$v" || extra="$v died under $kind"
        note="${note}failovers +$dfo, $v now $(role_of "$v")"
      done
      echo "$kind $dfo" >> "$TMP/netfaults"
      # Silent past DEAD_MS, the stage must have been evicted.
      if [ $kind = partition5 ] && [ $((PART_S * 1000)) -gt "$DEAD_MS" ] && [ $dfo -lt 1 ]; then
        extra="the ${PART_S} s partition of $victims caused no failover (--dead-ms $DEAD_MS)"
      fi ;;
  esac
  [ $dst -gt 0 ] && note="${note:+$note; }$dst late frame(s) of an older epoch dropped by the nodes"
  restore
  local verdict
  verdict=$(python3 - "$TMP/ref.json" "$TMP/t$i.json" "$t_fault" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1]))["requests"]
got = json.load(open(sys.argv[2]))["requests"]
t = float(sys.argv[3])
bad = []
rec = 0.0
mid = False
for k, (a, b) in enumerate(zip(ref, got)):
    if b["error"]:
        bad.append(f"request {k}: {b['error']}")
    elif b["chunks"] != a["chunks"]:
        n = next((j for j, (x, y) in enumerate(zip(a["chunks"], b["chunks"])) if x != y), min(len(a["chunks"]), len(b["chunks"])))
        bad.append(f"request {k}: chunks differ from chunk {n} ({len(b['chunks'])} vs {len(a['chunks'])} chunks)")
    # Recovery: the longest wait for a chunk from the fault on (fault to next token, or a
    # later stall while the cluster re-plans).
    ts = b["times"]
    for x, y in zip(ts, ts[1:]):
        if y > t:
            mid = mid or x <= t
            rec = max(rec, y - max(x, t))
print(("ok" if not bad else "FAIL " + "; ".join(bad)) + f"|{rec:.3f}|{int(mid)}")
PY
)
  [ -n "$extra" ] && verdict="FAIL $extra|${verdict#*|}"
  local v=${verdict%%|*} rest=${verdict#*|}
  local rec=${rest%%|*} mid=${rest#*|}
  printf '%-4s trial %3d %-13s victims %-8s recovery %6.3f s%s\n' "${v%% *}" "$i" "$kind" "$(echo $victims | tr ' ' ',')" "$rec" "$([ "$mid" = 1 ] || echo ' (fault after the streams ended)')"
  [ -n "$note" ] && echo "     $note"
  [ "$v" = ok ] || { echo "     $v"; fails=$((fails+1)); }
  [ "$mid" = 1 ] && echo "$kind $rec" >> "$TMP/recoveries"
  return 0
}

i=0
if [ "$TRIALS" = 0 ]; then
  for k in $KINDS; do i=$((i+1)); trial "$k" $i; done
else
  set -- $KINDS
  for i in $(seq 1 "$TRIALS"); do
    if [ "$KINDS" = "$ALL_KINDS" ]; then set -- $WEIGHTED; else set -- $KINDS; fi
    shift $((RANDOM % $#)); k=$1
    trial "$k" "$i"
  done
fi
n=$i
echo "metrics:"; "${HX[@]}" curl -s "127.0.0.1:$PORT/metrics" | grep -E '^shoal_(cluster_epoch|failovers_total|replayed_tokens_total|recovery_seconds_max|cluster_available) ' || true
"${HX[@]}" "$SHOAL" status --url "http://127.0.0.1:$PORT" | tail -8 || true
python3 - "$TMP/recoveries" "$n" "$fails" "$TMP/netfaults" <<'PY'
import sys, statistics
def rows_of(path):
    try:
        return [l.split() for l in open(path)]
    except FileNotFoundError:
        return []
rows = rows_of(sys.argv[1])
print(f"chaos: {sys.argv[2]} trials, {sys.argv[3]} failed")
for k, what in (("partition5", "with a failover (the partition detected)"),
                ("loss5", "with a failover (a false death: the link only lost packets)")):
    fo = [int(r[1]) for r in rows_of(sys.argv[4]) if r[0] == k]
    if fo:
        print(f"  {k}: {len(fo)} trials, {sum(1 for x in fo if x > 0)} {what}")
def show(name, xs):
    xs = sorted(xs)
    if not xs: return
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    print(f"  recovery {name:<13} n={len(xs):3d} median {statistics.median(xs):6.3f} s  p90 {p90:6.3f} s  max {xs[-1]:6.3f} s")
show("(all kinds)", [float(r[1]) for r in rows])
for k in sorted(set(r[0] for r in rows)):
    show(k, [float(r[1]) for r in rows if r[0] == k])
PY
n_sa=$(grep -c '^stop_assign ' "$TMP/recoveries" 2>/dev/null || true)
[ "${n_sa:-0}" -gt 0 ] && echo "stop_assign: $(cat "$TMP/stopped_loading" 2>/dev/null | wc -l) of $n_sa stops landed while the node was loading its assignment"
kill -TERM $SPID 2>/dev/null || true
[ $fails -eq 0 ]
