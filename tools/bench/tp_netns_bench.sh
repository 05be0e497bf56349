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
  local t
  t=$("${HX[@]}" "$SHOAL" bench serve --url http://127.0.0.1:8080 --max-concurrency 1 \
    --input-len 32 --output-len 128 --num-prompts 4 --json 2>/dev/null |
    python3 -c "import json,sys; print('%.2f' % json.load(sys.stdin)['median_tpot_ms'])")
  printf '%-24s %8s ms/token (%s)\n' "$name" "$t" "$RATE links"
  sleep 0.3
  "${HX[@]}" curl -s 127.0.0.1:8080/v1/cluster > "$W/$name.json"
  kill $sp; wait $sp || true
}
run "1 node x 1 thread" 10.203.1.2:7000
run "tp=2 x 1 thread" 10.203.1.2:7000,10.203.2.2:7000 --parallel tp=2
python3 - "$W/tp=2 x 1 thread.json" "$("$SHOAL" info --model "$MODEL" | awk '$1 == "n_layer" {print $2}')" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); layers = int(sys.argv[2] or 0)
for s in j["stages"]:
    for m in s.get("members", []):
        tok = max(1, m["tokens_total"])
        coll = m["collective_seconds_total"] / tok * 1e3
        busy = m["busy_seconds_total"] / tok * 1e3
        print(f"member {m['member']}: {coll:.2f} ms of {busy:.2f} ms busy per token in collectives "
              f"({100 * coll / busy:.1f}%), {coll / max(1, layers) * 1e3:.0f} us per layer, "
              f"{m['collective_bytes_per_token'] / 1024:.0f} KiB received per token, "
              f"{m['collective_calls_total'] / tok:.0f} calls per token")
PY
