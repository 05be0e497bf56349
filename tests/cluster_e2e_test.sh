#!/usr/bin/env bash
# Multi-process pipeline tests on loopback: `shoal node` workers behind `shoal serve --nodes`.
# Split equivalence (1, 2, 4, 8 stages give the same tokens as one process, f32 links), auth
# refusal, memory-cap refusal, garbage on a node port, a node without the model file (receives
# its tensors), a node with a different file (refused); each node's peak RSS within its plan.
set -u
SHOAL=$1 SHARED=${2:-}
TMP=$(mktemp -d)
fails=0
PIDS=()
# $(node ...) runs in a subshell, which cannot add to PIDS: it appends to $TMP/pids.
cleanup() { for p in "${PIDS[@]}" $(cat "$TMP/pids" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done; rm -rf "$TMP"; }
trap cleanup EXIT
. "$(dirname "$0")/lib_cluster.sh"

mkdir -p "$TMP/models" "$TMP/empty"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TMP/key"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TMP/otherkey"
chmod 600 "$TMP/key" "$TMP/otherkey"
"$SHOAL" synth --preset tiny --layers 8 --type q8_0 --seed 5 -o "$TMP/models/m.gguf" > /dev/null 2>&1
MODEL=$TMP/models/m.gguf


serve local.log || { echo "local server failed"; cat "$TMP/local.log"; exit 1; }
ask "$TMP/want"
kill -TERM $SPID; wait $SPID
check "reference answers exist" '[ $(grep -c "^bad" "$TMP/want") -eq 0 ] && [ $(wc -l < "$TMP/want") -eq 4 ]'

for k in 1 2 4 8; do
  nodes=""
  for i in $(seq 1 $k); do nodes="$nodes,$(node s$k-n$i)"; done
  nodes=${nodes#,}
  if serve "c$k.log" --nodes "$nodes" --link-dtype f32; then
    ask "$TMP/got$k"
    # Peak RSS of every node (from outside) against the plan's predicted total for it.
    for i in $(seq 1 $k); do
      pred=$(grep -E "^ +[0-9]+  s$k-n$i " "$TMP/c$k.log" | awk '{print $9}')
      hwm=$(awk '/VmHWM/ {printf "%.1f", $2/1024}' "/proc/$(cat "$TMP/s$k-n$i.pid")/status")
      echo "$k $i $pred $hwm" >> "$TMP/rss"
    done
    "$SHOAL" status --url "http://127.0.0.1:$PORT" > "$TMP/status$k" 2>&1
    kill -TERM $SPID; wait $SPID
  else
    echo "cluster of $k did not start:"; tail -5 "$TMP/c$k.log"
  fi
  check "$k stage(s), f32 links: same tokens as one process (greedy and seeded)" 'cmp -s "$TMP/want" "$TMP/got$k"'
  check "$k stage(s): every node's peak RSS (VmHWM) is within its predicted memory" '[ $(awk -v k=$k '"'"'$1 == k && $3 > 0 && $4 > 0 && $4 <= $3'"'"' "$TMP/rss" | wc -l) -eq $k ]'
  check "$k stage(s): the plan was printed with $k stages" '[ $(grep -cE "^ +[0-9]+  s$k-n" "$TMP/c$k.log") -eq $k ]'
  check "$k stage(s): shoal status lists $k stages" '[ $(grep -cE "^[0-9]+ +s$k-n" "$TMP/status$k") -eq $k ] && grep -q "pipeline" "$TMP/status$k"'
done

n1=$(node q1); n2=$(node q2)
if serve q8.log --nodes "$n1,$n2" --link-dtype q8_0; then
  ask "$TMP/gotq8"; kill -TERM $SPID; wait $SPID
fi
check "q8_0 links serve complete answers" '[ $(grep -c "^bad" "$TMP/gotq8") -eq 0 ] && [ $(wc -l < "$TMP/gotq8") -eq 4 ]'

# Perplexity through the pipeline (stories260K, llama-perplexity's method): f32 links equal one
# process exactly; q8_0 links move it by less than 0.5%.
if [ -n "$SHARED" ] && [ -f "$SHARED/models/stories260K.gguf" ]; then
  cp "$SHARED/models/stories260K.gguf" "$TMP/models/"
  ppl() { "$SHOAL" perplexity -m "$TMP/models/stories260K.gguf" -f "$SHARED/testdata/golden/ppl_story.txt" -c 128 -t 1 "$@" 2>/dev/null | grep -o 'PPL = [0-9.]*' | grep -o '[0-9.]*$'; }
  p0=$(ppl)
  p32=$(ppl --nodes "$(node pa1),$(node pa2)" --cluster-key-file "$TMP/key" --link-dtype f32)
  pq8=$(ppl --nodes "$(node pb1),$(node pb2)" --cluster-key-file "$TMP/key" --link-dtype q8_0)
  echo "     perplexity: one process $p0, 2 stages f32 links $p32, q8_0 links $pq8"
  check "perplexity through 2 stages with f32 links equals one process" '[ -n "$p0" ] && [ "$p0" = "$p32" ]'
  check "q8_0 links change perplexity by < 0.5%" 'python3 -c "import sys; a,b=$p0,$pq8; sys.exit(0 if abs(b-a)/a < 0.005 else 1)"'
fi

# Security and limits: each failure is a clear error, never a hang or a crash.
n1=$(node a1)
"$SHOAL" serve -m "$MODEL" --nodes "$n1" --cluster-key-file "$TMP/otherkey" --dry-run > "$TMP/auth.out" 2>&1; rc=$?
check "a coordinator with the wrong key is refused" '[ $rc -ne 0 ] && grep -qi "proof\|auth\|goodbye" "$TMP/auth.out"'
check "the node logged and dropped the unauthenticated peer" 'sleep 0.2; grep -qi "unauthenticated" "$TMP/a1.log"'
exec 3<>"/dev/tcp/${n1%:*}/${n1#*:}" && head -c 4096 /dev/urandom >&3; exec 3>&-
check "garbage on a node port: the node still plans with a good coordinator" '"$SHOAL" serve -m "$MODEL" --nodes "$n1" --cluster-key-file "$TMP/key" --dry-run > /dev/null 2>&1'
m1=$(node m1 --mem-limit 20M); m2=$(node m2 --mem-limit 20M)
"$SHOAL" serve -m "$MODEL" --nodes "$m1,$m2" --cluster-key-file "$TMP/key" --dry-run > "$TMP/mem.out" 2>&1; rc=$?
check "a model that does not fit 2 x 20 MiB fails with each node's shortfall" '[ $rc -ne 0 ] && grep -q "short by" "$TMP/mem.out" && grep -q "m1" "$TMP/mem.out" && grep -q "m2" "$TMP/mem.out"'
# A node without the model file receives just its stage's tensors (cached by content hash) and
# the answers are identical; a second assignment finds them in the cache.
e1=$(NODE_MODEL_DIR=$TMP/empty node e1); f2=$(node f2)
if serve e1serve.log --nodes "$e1,$f2" --link-dtype f32; then
  ask "$TMP/gote1"; kill -TERM $SPID; wait $SPID
fi
check "a node without the model file receives its tensors: same tokens as one process" 'cmp -s "$TMP/want" "$TMP/gote1"'
check "the received tensors are cached by content hash in its model dir" '[ $(ls "$TMP/empty/.shoal-cache/" | grep -cE "^[0-9a-f]{16}\.gguf$") -eq 1 ]'
mtime1=$(stat -c %y "$TMP"/empty/.shoal-cache/*.gguf)
e2=$(NODE_MODEL_DIR=$TMP/empty node e2); f3=$(node f3)
if serve e2serve.log --nodes "$e2,$f3" --link-dtype f32; then
  ask "$TMP/gote2"; kill -TERM $SPID; wait $SPID
fi
check "a second node on the same cache serves from it without writing to it" 'cmp -s "$TMP/want" "$TMP/gote2" && [ "$mtime1" = "$(stat -c %y "$TMP"/empty/.shoal-cache/*.gguf)" ]'
# A node whose m.gguf is another model (same shapes, other weights) refuses, naming a tensor.
mkdir -p "$TMP/other"
"$SHOAL" synth --preset tiny --layers 8 --type q8_0 --seed 6 -o "$TMP/other/m.gguf" > /dev/null 2>&1
o1=$(NODE_MODEL_DIR=$TMP/other node o1)
serve o1serve.log --nodes "$o1"; rc=$?
check "a node whose file differs from the coordinator's refuses, naming the tensor" '[ $rc -ne 0 ] && grep -q "differs from the coordinator" "$TMP/o1serve.log"'

echo "$fails failure(s)"
[ $fails -eq 0 ]
