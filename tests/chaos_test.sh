#!/usr/bin/env bash
# Chaos suite (docs/CLUSTER.md, "Failover"): a loopback cluster of 4 `shoal node` stages and
# a standby behind `shoal serve`, streaming greedy and seeded-sampling requests while nodes are
# killed (-9, one or two at once, the standby), stopped (SIGSTOP 3 s: the grace period; 5 s:
# past --dead-ms), restarted with the same identity during recovery, drained (`shoal node
# drain`, then joined back), or all lost (503 until a node comes back). Every trial checks that every request completes with exactly the chunks of
# an undisturbed run (no token lost, duplicated or changed) and records the recovery time
# (fault to the next chunk).
#   chaos_test.sh SHOAL            one trial of each kind (ctest, label e2e)
#   chaos_test.sh SHOAL N          N trials of random kinds (make chaos, CHAOS_TRIALS=N)
set -u
SHOAL=$1 TRIALS=${2:-0}
DIR=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
SEED=${CHAOS_SEED:-$$}
RANDOM=$SEED
N_REQ=4 MAX_TOK=${CHAOS_MAX_TOKENS:-400}
DEAD_MS=${CHAOS_DEAD_MS:-4000}  # 4 s: a 3 s SIGSTOP stays within the grace period
fails=0
PIDS=()
cleanup() {
  for f in "$TMP"/*.pid; do [ -f "$f" ] && kill -CONT "$(cat "$f")" 2>/dev/null && kill -9 "$(cat "$f")" 2>/dev/null; done
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  if [ -n "${KEEP_TMP:-}" ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
echo "chaos seed $SEED (CHAOS_SEED=$SEED repeats this run)"

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TMP/key"
chmod 600 "$TMP/key"
mkdir -p "$TMP/models"
"$SHOAL" synth --preset tiny --layers 8 --type q8_0 --seed 5 -o "$TMP/models/m.gguf" > /dev/null 2>&1

# start_node NAME [PORT]: starts (or restarts, on the same port) node NAME; sets its port file.
start_node() {
  local name=$1 port=${2:-0}
  "$SHOAL" node --listen "127.0.0.1:$port" --model-dir "$TMP/models" --cluster-key-file "$TMP/key" \
    --no-measure -t 1 --name "$name" >> "$TMP/$name.log" 2>&1 &
  echo $! > "$TMP/$name.pid"
  for _ in $(seq 1 200); do
    local p
    p=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$TMP/$name.log" | tail -1 | grep -o '[0-9]*$')
    if [ -n "$p" ] && { [ "$port" = 0 ] || [ "$(grep -c 'listening on' "$TMP/$name.log")" -gt "$(cat "$TMP/$name.starts" 2>/dev/null || echo 0)" ]; }; then
      echo "$p" > "$TMP/$name.port"
      grep -c 'listening on' "$TMP/$name.log" > "$TMP/$name.starts"
      return 0
    fi
    sleep 0.02
  done
  echo "node $name did not start"; tail -3 "$TMP/$name.log"; return 1
}
NAMES="n1 n2 n3 n4 n5"
for n in $NAMES; do start_node "$n" || exit 1; done
addr() { echo "127.0.0.1:$(cat "$TMP/$1.port")"; }
name_of() { for n in $NAMES; do [ "$(addr "$n")" = "$1" ] && echo "$n"; done; }
alive() { kill -0 "$(cat "$TMP/$1.pid")" 2>/dev/null; }

"$SHOAL" serve -m "$TMP/models/m.gguf" --port 0 --max-num-seqs 8 --max-model-len 512 -t 1 \
  --cluster-key-file "$TMP/key" --nodes "$(addr n1),$(addr n2),$(addr n3),$(addr n4)" \
  --standby "$(addr n5)" --link-dtype f32 --suspect-ms 500 --dead-ms $DEAD_MS > "$TMP/serve.log" 2>&1 &
SPID=$!; PIDS+=($SPID); PORT=""
for _ in $(seq 1 300); do
  PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/serve.log" | grep -o '[0-9]*$')
  [ -n "$PORT" ] && curl -s "127.0.0.1:$PORT/health" | grep -q ok && break
  kill -0 $SPID 2>/dev/null || break
  PORT=""; sleep 0.05
done
[ -n "$PORT" ] || { echo "server did not start"; tail -20 "$TMP/serve.log"; exit 1; }

python3 "$DIR/chaos_client.py" "$PORT" "$TMP/ref.json" $N_REQ $MAX_TOK
python3 - "$TMP/ref.json" $MAX_TOK <<'PY' || { echo "reference run failed"; exit 1; }
import json, sys
rs = json.load(open(sys.argv[1]))["requests"]
assert all(r["error"] is None and len(r["chunks"]) >= int(sys.argv[2]) // 2 for r in rs), rs
PY
ref_s=$(python3 -c "import json; r=json.load(open('$TMP/ref.json'))['requests']; print('%.2f' % (max(x['times'][-1] for x in r) - min(x['times'][0] for x in r)))")
echo "undisturbed run: $N_REQ streams of $MAX_TOK tokens in ${ref_s} s"

cluster() { curl -s -m 5 "127.0.0.1:$PORT/v1/cluster"; }
# Nodes by role now: stages (alive), standbys (whose process runs).
stages() { cluster | python3 -c "import json,sys; [print(n['address']) for n in json.load(sys.stdin).get('nodes',[]) if n['role'].startswith('stage')]" | while read -r a; do name_of "$a"; done; }
standbys() { cluster | python3 -c "import json,sys; [print(n['address']) for n in json.load(sys.stdin).get('nodes',[]) if n['role'] in ('standby','spare')]" | while read -r a; do n=$(name_of "$a"); [ -n "$n" ] && alive "$n" && echo "$n"; done; }
# pick SEED N: N random lines of stdin (the seed comes from the caller: $RANDOM in a pipeline
# runs in a subshell and would repeat).
pick() { python3 -c "import random,sys; l=sys.stdin.read().split(); random.seed($1); print(' '.join(random.sample(l, min($2, len(l)))))"; }

restore() {  # every node running and not stopped again (a killed one restarts on its port)
  for n in $NAMES; do
    kill -CONT "$(cat "$TMP/$n.pid")" 2>/dev/null
    alive "$n" || start_node "$n" "$(cat "$TMP/$n.port")" > /dev/null
  done
}

ALL_KINDS="kill1 kill2 kill_standby stop3 stop_dead restart drain all_lost"
# Random trials draw from this list: all_lost (every stream stalls until a node returns) is
# half as likely as each other kind.
WEIGHTED="kill1 kill1 kill2 kill2 kill_standby kill_standby stop3 stop3 stop_dead stop_dead restart restart drain drain all_lost"
# Membership trials (fault_stop_assign, fault_join_rebalance below), as likely as the others.
ALL_KINDS="$ALL_KINDS stop_assign join_rebalance"
WEIGHTED="$WEIGHTED stop_assign stop_assign join_rebalance join_rebalance"
KINDS=${CHAOS_KINDS:-$ALL_KINDS}  # e.g. CHAOS_KINDS="kill1 stop3"

# stop_assign: kill -9 a stage and SIGSTOP the node that gets its layers (the first live
# standby, else a survivor) as soon as the coordinator sends the new plan: the coordinator must
# give that assignment up within --dead-ms and serve a newer plan without the node while it is
# still stopped (it stays stopped --dead-ms + 3 s). Sets victims and extra of trial().
epoch_now() { cluster | python3 -c "import json,sys; print(json.load(sys.stdin)['epoch'])"; }
fault_stop_assign() {
  local r=$RANDOM dead target plans silent t e0
  e0=$(epoch_now)
  dead=$(stages | pick $r 1)
  target=$(standbys | head -1)
  [ -n "$target" ] || target=$(stages | grep -vx "$dead" | pick $r 1)
  victims="$dead $target"
  plans=$(grep -c "plan of epoch" "$TMP/serve.log")
  silent=$(grep -c "assignment: node .*silent" "$TMP/serve.log")
  kill -9 "$(cat "$TMP/$dead.pid")"
  for _ in $(seq 1 2000); do [ "$(grep -c "plan of epoch" "$TMP/serve.log")" -gt "$plans" ] && break; sleep 0.005; done
  kill -STOP "$(cat "$TMP/$target.pid")"
  sleep $((DEAD_MS / 1000 + 3))
  # Still stopped: a newer plan must serve, without it.
  [ "$(epoch_now)" -gt "$e0" ] || extra="no new plan served while $target is stopped"
  stages | grep -qx "$target" && extra="$target still holds layers while stopped"
  cluster | grep -q '"unavailable"' && extra="unavailable while $target is stopped"
  kill -CONT "$(cat "$TMP/$target.pid")"
  t=$(grep -c "assignment: node .*silent" "$TMP/serve.log")
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
    "$SHOAL" node drain "$(addr "$v")" --url "http://127.0.0.1:$PORT" > /dev/null || { extra="drain $v failed"; return; }
    for _ in $(seq 1 500); do stages | grep -qx "$v" || break; sleep 0.02; done
  fi
  victims=$v
  "$SHOAL" node join "$(addr "$v")" --url "http://127.0.0.1:$PORT" > /dev/null || { extra="join $v failed"; return; }
  for _ in $(seq 1 500); do stages | grep -qx "$v" && return; sleep 0.02; done
  extra="$v holds no layers 10 s after joining"
}
trial() {
  local kind=$1 i=$2 victims="" t_fault r=$RANDOM
  rm -f "$TMP/started"
  python3 "$DIR/chaos_client.py" "$PORT" "$TMP/t$i.json" $N_REQ $MAX_TOK "$TMP/started" &
  local cp=$!
  for _ in $(seq 1 1500); do [ -f "$TMP/started" ] && break; sleep 0.02; done
  case $kind in
    kill1|restart|stop3|stop_dead|drain) victims=$(stages | pick $r 1) ;;
    kill2) victims=$(stages | pick $r 2) ;;
    kill_standby) victims=$(standbys | pick $r 1) ;;
    all_lost) victims=$NAMES ;;
    stop_assign|join_rebalance) ;;  # chosen by their fault_ functions
  esac
  t_fault=$(date +%s.%N)
  local extra=""
  case $kind in
    kill1|kill2|kill_standby) for v in $victims; do kill -9 "$(cat "$TMP/$v.pid")"; done ;;
    drain) for v in $victims; do "$SHOAL" node drain "$(addr "$v")" --url "http://127.0.0.1:$PORT" > /dev/null || extra="drain $v failed"; done ;;
    restart) for v in $victims; do kill -9 "$(cat "$TMP/$v.pid")"; wait "$(cat "$TMP/$v.pid")" 2>/dev/null; start_node "$v" "$(cat "$TMP/$v.port")" > /dev/null; done ;;
    stop3) for v in $victims; do kill -STOP "$(cat "$TMP/$v.pid")"; done; sleep 3; for v in $victims; do kill -CONT "$(cat "$TMP/$v.pid")"; done ;;
    stop_dead) for v in $victims; do kill -STOP "$(cat "$TMP/$v.pid")"; done; sleep $((DEAD_MS / 1000 + 1)); for v in $victims; do kill -CONT "$(cat "$TMP/$v.pid")"; done ;;
    all_lost)
      for v in $victims; do kill -9 "$(cat "$TMP/$v.pid")"; done
      # New requests get 503 with the reason while the streams in flight wait.
      local code=""
      for _ in $(seq 1 100); do
        code=$(curl -s -o "$TMP/503.json" -w '%{http_code}' -m 5 "127.0.0.1:$PORT/v1/completions" -d '{"prompt":"x","max_tokens":1}')
        [ "$code" = 503 ] && break; sleep 0.05
      done
      [ "$code" = 503 ] && grep -q "cannot serve yet" "$TMP/503.json" || extra="new request got $code, not 503 with the reason ($(head -c 200 "$TMP/503.json"))"
      sleep 1
      start_node n3 "$(cat "$TMP/n3.port")" > /dev/null ;;
    stop_assign) fault_stop_assign ;;
    join_rebalance) fault_join_rebalance ;;
  esac
  wait $cp
  if [ $kind = drain ]; then  # the drained node joins again, as a standby
    for v in $victims; do "$SHOAL" node join --standby "$(addr "$v")" --url "http://127.0.0.1:$PORT" > /dev/null || extra="join $v failed"; done
  fi
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
  [ "$v" = ok ] || { echo "     $v"; fails=$((fails+1)); }
  [ "$mid" = 1 ] && echo "$kind $rec" >> "$TMP/recoveries"
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
echo "metrics:"; curl -s "127.0.0.1:$PORT/metrics" | grep -E '^shoal_(cluster_epoch|failovers_total|replayed_tokens_total|recovery_seconds_max|cluster_available) '
"$SHOAL" status --url "http://127.0.0.1:$PORT" | tail -8
python3 - "$TMP/recoveries" "$n" "$fails" <<'PY'
import sys, statistics
try:
    rows = [l.split() for l in open(sys.argv[1])]
except FileNotFoundError:
    rows = []
print(f"chaos: {sys.argv[2]} trials, {sys.argv[3]} failed")
def show(name, xs):
    xs = sorted(xs)
    if not xs: return
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    print(f"  recovery {name:<13} n={len(xs):3d} median {statistics.median(xs):6.3f} s  p90 {p90:6.3f} s  max {xs[-1]:6.3f} s")
show("(all kinds)", [float(r[1]) for r in rows])
for k in sorted(set(r[0] for r in rows)):
    show(k, [float(r[1]) for r in rows if r[0] == k])
PY
n_sa=$(grep -c '^stop_assign ' "$TMP/recoveries" 2>/dev/null)
[ "${n_sa:-0}" -gt 0 ] && echo "stop_assign: $(cat "$TMP/stopped_loading" 2>/dev/null | wc -l) of $n_sa stops landed while the node was loading its assignment"
kill -TERM $SPID 2>/dev/null
[ $fails -eq 0 ]
