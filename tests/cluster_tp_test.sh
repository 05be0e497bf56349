#!/usr/bin/env bash
# Layers split across `shoal node` processes on loopback (`--parallel tp=T,pp=P`, exact mode):
# stories260K over tp=2, 3, 4 and tp=2,pp=2, a qwen3moe model whose experts are split over tp=2
# and 4 (expert parallel), a deepseek2 one (MLA heads, shared experts) over tp=2 and 3 and a
# kimi-k3 one (KDA heads and states, latent experts, banked residuals) over tp=2 and tp=2,pp=2
# give the same greedy and seeded tokens as one process; --dry-run
# names every member's heads, columns, experts and vocabulary; /v1/cluster and `shoal status`
# show the members and their collectives; stories260K's perplexity on exact tp=2 equals one
# process's and fast tp=2's is reproducible; a member killed with -9 in the middle of the
# streams, or stopped, fails over to the standby with every token as undisturbed.
set -u
SHOAL=$1 SHARED=${2:-}
TMP=$(mktemp -d)
fails=0
PIDS=()
cleanup() {
  for p in "${PIDS[@]}" $(cat "$TMP/pids" 2>/dev/null); do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
. "$(dirname "$0")/lib_cluster.sh"
for m in stories260K.gguf tiny/qwen3moe-q8_0.gguf tiny/deepseek2-q8_0.gguf tiny/kimi-k3-q8_0.gguf; do
  [ -f "$SHARED/models/$m" ] || { echo "SKIP: no $SHARED/models/$m"; exit 77; }
done
mkdir -p "$TMP/models"
ln -s "$SHARED/models/stories260K.gguf" "$TMP/models/s.gguf"
ln -s "$SHARED/models/tiny/qwen3moe-q8_0.gguf" "$TMP/models/moe.gguf"
ln -s "$SHARED/models/tiny/deepseek2-q8_0.gguf" "$TMP/models/ds.gguf"
ln -s "$SHARED/models/tiny/kimi-k3-q8_0.gguf" "$TMP/models/k3.gguf"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TMP/key"
chmod 600 "$TMP/key"

nodes() {  # K PREFIX -> K node addresses, comma-separated
  local list="" i
  for i in $(seq 1 "$1"); do list="$list,$(node "$2$i")"; done
  echo "${list#,}"
}

for name in s moe ds k3; do
  MODEL=$TMP/models/$name.gguf
  serve "$name-local.log" || { echo "local server failed"; cat "$TMP/$name-local.log"; exit 1; }
  ask "$TMP/$name-want"
  kill -TERM $SPID; wait $SPID
  check "$name: reference answers exist" '[ $(grep -c "^bad" "$TMP/$name-want") -eq 0 ] && [ $(wc -l < "$TMP/$name-want") -eq 4 ]'
  layouts="tp=2 tp=3 tp=4 tp=2,pp=2"
  [ $name = moe ] && layouts="tp=2 tp=4"
  [ $name = ds ] && layouts="tp=2 tp=3"
  [ $name = k3 ] && layouts="tp=2 tp=2,pp=2"
  for par in $layouts; do
    tp=${par#tp=}; tp=${tp%%,*}; pp=1
    case $par in *pp=*) pp=${par##*pp=} ;; esac
    list=$(nodes $((tp * pp)) "$name-${par//[=,]/}-")
    if serve "$name-$par.log" --nodes "$list" --parallel "$par"; then
      ask "$TMP/$name-got-$par"
      sleep 0.3  # a heartbeat answer after the last step carries the members' load
      curl -s "127.0.0.1:$PORT/v1/cluster" > "$TMP/$name-cluster-$par.json"
      "$SHOAL" status --url "http://127.0.0.1:$PORT" > "$TMP/$name-status-$par" 2>&1
      kill -TERM $SPID; wait $SPID
    else
      echo "cluster $par did not start:"; tail -5 "$TMP/$name-$par.log"
    fi
    check "$name, $par: same tokens as one process (greedy and seeded)" 'cmp -s "$TMP/$name-want" "$TMP/$name-got-$par"'
    check "$name, $par: $pp stage(s) of $tp members each" '[ $(grep -c "split over $tp members (exact)" "$TMP/$name-$par.log") -eq $pp ]'
    check "$name, $par: /v1/cluster shows every member with its slices and collectives" \
      "python3 -c \"import json,sys; j=json.load(open('\$TMP/$name-cluster-$par.json')); m=[x for s in j['stages'] for x in s['members']]; assert len(m) == $tp * $pp and all(x['slices'].startswith('heads') and x['collective_calls_total'] > 0 and x['collective_bytes_per_token'] > 0 and x['busy_fraction'] > 0 for x in m), m\""
    check "$name, $par: shoal status lists the members" '[ $(grep -c "^  member" "$TMP/$name-status-$par") -eq $((tp * pp)) ]'
  done
done

# --dry-run: the slices of every member (moe: 8 experts over 4 members, 2 each).
MODEL=$TMP/models/moe.gguf
"$SHOAL" serve -m "$MODEL" --cluster-key-file "$TMP/key" --nodes "$(nodes 4 dry-)" --parallel tp=4 \
  --dry-run > "$TMP/dry.log" 2>&1
check "dry run names each member's heads, experts and vocabulary" \
  'grep -q "member 3 .*heads \[3, 4) .*experts \[6, 8) vocab \[384, 512)" "$TMP/dry.log"'
check "--parallel rejects ep other than tp" \
  '! "$SHOAL" serve -m "$MODEL" --cluster-key-file "$TMP/key" --nodes 127.0.0.1:1 --parallel tp=2,ep=3 --dry-run > /dev/null 2>&1'
check "--tp-mode other than exact or fast is refused" \
  '"$SHOAL" serve -m "$MODEL" --cluster-key-file "$TMP/key" --nodes 127.0.0.1:1 --tp-mode quick --dry-run 2>&1 | grep -q "exact or fast"'

# Perplexity (stories260K, llama-perplexity's method): exact tp=2 equals one process; fast
# tp=2 is the same on two fresh groups (its change from one process is printed).
ppl() { "$SHOAL" perplexity -m "$TMP/models/s.gguf" -f "$SHARED/testdata/golden/ppl_story.txt" -c 128 -t 1 "$@" 2>/dev/null | grep -o 'PPL = [0-9.]*' | grep -o '[0-9.]*$'; }
p1=$(ppl)
pe=$(ppl --nodes "$(nodes 2 ppl-e)" --cluster-key-file "$TMP/key" --parallel tp=2)
pf=$(ppl --nodes "$(nodes 2 ppl-f)" --cluster-key-file "$TMP/key" --parallel tp=2 --tp-mode fast)
pf2=$(ppl --nodes "$(nodes 2 ppl-g)" --cluster-key-file "$TMP/key" --parallel tp=2 --tp-mode fast)
echo "     perplexity: one process $p1, tp=2 exact $pe, tp=2 fast $pf and $pf2"
check "perplexity, tp=2 exact: equal to one process" '[ -n "$p1" ] && [ "$p1" = "$pe" ]'
"$SHOAL" perplexity -m "$TMP/models/moe.gguf" -f "$SHARED/testdata/golden/ppl_story.txt" -c 128 \
  -t 1 --expert-load > "$TMP/eload" 2>/dev/null
check "perplexity --expert-load: the busiest member's share for 2, 4, 8 members" \
  '[ $(grep -cE "^[248] +[0-9.]+ \([0-9.]+\) +[0-9.]+ \([0-9.]+\) +[0-9.]+ \([0-9.]+\)" "$TMP/eload") -eq 3 ]'
check "perplexity, tp=2 fast: the same on two groups, within 0.1% of one process" \
  '[ -n "$pf" ] && [ "$pf" = "$pf2" ] && python3 -c "import sys; sys.exit(abs($pf / $p1 - 1) > 1e-3)"'

# Failover: tp=2 with a standby; member 1 killed (-9) or stopped mid-stream. Long answers (700
# tokens: ~2 s on loopback), so the fault lands while they stream.
MODEL=$TMP/models/s.gguf
SERVE_MAX_LEN=1024
serve long-local.log || exit 1
ask "$TMP/long-want" 700
kill -TERM $SPID; wait $SPID
for fault in KILL STOP; do
  a=$(node "f$fault-a") b=$(node "f$fault-b") c=$(node "f$fault-c")
  if serve "f$fault.log" --nodes "$a,$b" --standby "$c" --parallel tp=2 --dead-ms 600 --suspect-ms 300; then
    ask "$TMP/long-got-$fault" 700 &
    asker=$!
    sleep 0.5
    kill -$fault "$(cat "$TMP/f$fault-b.pid")"
    wait $asker
    kill -CONT "$(cat "$TMP/f$fault-b.pid")" 2>/dev/null
    kill -TERM $SPID; wait $SPID
  fi
  check "tp=2, member 1 SIG$fault mid-stream: every token as undisturbed" 'cmp -s "$TMP/long-want" "$TMP/long-got-$fault"'
  check "tp=2, member 1 SIG$fault: the coordinator failed over while the streams ran" \
    'grep -q "serving again at epoch" "$TMP/f$fault.log"'
done

if [ $fails -gt 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all tensor-parallel cluster checks passed"
