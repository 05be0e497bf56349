#!/usr/bin/env bash
# A tensor-parallel group across network namespaces shaped to a rate (tbf, default 1gbit): each
# of 2 nodes in a namespace of its own with a veth pair to a hub namespace (coordinator, client),
# which routes between them, every end shaped. One stream of the model decodes on one node, then
# on tp=2; prints the time per output token of each and, from /v1/cluster, each member's
# collective time per token and per layer and the share of its busy time spent in collectives.
# Needs root, ip, tc (tbf). Usage: tools/bench/tp_netns_bench.sh SHOAL MODEL [RATE]
set -euo pipefail
SHOAL=$(realpath "$1") MODEL=$(realpath "$2") RATE=${3:-1gbit}
DIR=$(cd "$(dirname "$0")/../../tests" && pwd)
source "$DIR/lib_netns.sh"
W=$(mktemp -d)
trap 'netns_cleanup; rm -rf "$W"' EXIT
netns_probe
[ "$NETNS_OK" = 1 ] || { echo "SKIP: $NETNS_WHY"; exit 77; }
[ "$TBF" = 1 ] || { echo "SKIP: no tbf: $TBF_WHY"; exit 77; }
HUB=shoaltpH$$
netns_add $HUB
ip netns exec $HUB sysctl -qw net.ipv4.ip_forward=1
for k in 1 2; do
  ns=shoaltp${k}_$$
  netns_add "$ns"
  netns_link $HUB "n$k" "10.203.$k.1/30" "$ns" eth0 "10.203.$k.2/30"
  ip -n "$ns" route add default via "10.203.$k.1"
  link_shape "$RATE" "" $HUB "n$k" "$ns" eth0
done
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$W/key"; chmod 600 "$W/key"
for k in 1 2; do
  ip netns exec "shoaltp${k}_$$" "$SHOAL" node --listen "10.203.$k.2:7000" \
    --model-dir "$(dirname "$MODEL")" --cluster-key-file "$W/key" --no-measure -t 1 \
    --name "n$k" > "$W/n$k.log" 2>&1 &
done
sleep 1
HX=(ip netns exec $HUB)
run() {  # NAME NODES [flags...]
  local name=$1 nodes=$2; shift 2
  "${HX[@]}" "$SHOAL" serve -m "$MODEL" --port 8080 -t 1 --max-num-seqs 4 --max-model-len 512 \
    --nodes "$nodes" --cluster-key-file "$W/key" "$@" > "$W/$name.log" 2>&1 &
  local sp=$!
  for _ in $(seq 1 1200); do grep -q ready "$W/$name.log" && break; sleep 0.1; done
  sleep 0.3
  "${HX[@]}" curl -s 127.0.0.1:8080/v1/cluster > "$W/$name.before.json"
  local t
  t=$("${HX[@]}" "$SHOAL" bench serve --url http://127.0.0.1:8080 --max-concurrency 1 \
    --input-len 32 --output-len 128 --num-prompts 4 --json 2>/dev/null |
    python3 -c "import json,sys; print('%.2f' % json.load(sys.stdin)['median_tpot_ms'])")
  printf '%-24s %8s ms/token (%s)\n' "$name" "$t" "$RATE links"
  echo "$t" > "$W/$name.tpot"
  sleep 0.3
  "${HX[@]}" curl -s 127.0.0.1:8080/v1/cluster > "$W/$name.json"
  kill $sp; wait $sp || true
}
run "1 node x 1 thread" 10.203.1.2:7000
run "tp=2 x 1 thread" 10.203.1.2:7000,10.203.2.2:7000 --parallel tp=2
# The members' counters over the timed requests only (their difference across the run), per
# token the nodes ran (4 x (32 prompt + 128 generated): 80% decode steps).
python3 - "$W/tp=2 x 1 thread" "$("$SHOAL" info --model "$MODEL" | awk '$1 == "n_layer" {print $2}')" <<'PY'
import json, sys
base = sys.argv[1]; layers = int(sys.argv[2] or 1)
a = json.load(open(base + ".before.json")); b = json.load(open(base + ".json"))
tpot = float(open(base + ".tpot").read())
members = lambda j: [m for s in j["stages"] for m in s.get("members", [])]
for m0, m1 in zip(members(a), members(b)):
    d = lambda k: m1[k] - m0[k]
    tok = max(1, d("tokens_total"))
    coll = d("collective_seconds_total") / tok * 1e3
    busy = d("busy_seconds_total") / tok * 1e3
    print(f"member {m1['member']}: collectives {coll:.2f} ms per token ({coll / layers * 1e3:.0f} us "
          f"per layer, {d('collective_calls_total') / tok:.0f} calls, "
          f"{d('collective_bytes_in_total') / tok / 1024:.0f} KiB in); busy {busy:.2f} ms per token; "
          f"collectives are {100 * coll / busy:.1f}% of its busy time, {100 * coll / tpot:.1f}% of "
          f"the {tpot:.2f} ms per output token")
PY
