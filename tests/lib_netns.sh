# Network-namespace helpers of netns_test.sh and chaos_test.sh (sourced; the callers run with
# `set -euo pipefail`): what this kernel permits, veth links between namespaces this process
# makes, and faults on such a link: random loss and partitions with nftables, a rate with tbf,
# a fixed delay with netem where the kernel has sch_netem. Nothing here touches a namespace it
# did not make: every one is named in NETNS_MADE and removed by netns_cleanup.
#
# A link END is "NAMESPACE DEVICE" (one side of a veth pair). Loss and partitions drop at the
# ingress of both ends (nftables netdev hook), so the sender's TCP never learns of the drop
# locally (an output-hook drop would return EPERM to it) and each direction loses packets
# independently, as on a real link. Rates and delays shape each end's egress.

NETNS_MADE=()

# netns_probe: sets NETNS_OK=1, or NETNS_OK=0 and NETNS_WHY; NETEM=1, or NETEM=0 and NETEM_WHY;
# TBF=1, or TBF=0 and TBF_WHY. It makes (and removes) one scratch namespace.
netns_probe() {
  NETNS_OK=0 NETNS_WHY="" NETEM=0 NETEM_WHY="" TBF=0 TBF_WHY=""
  if [ "$(id -u)" -ne 0 ]; then NETNS_WHY="network namespaces need root (uid $(id -u))"; return 0; fi
  local c
  for c in ip tc nft; do
    command -v $c > /dev/null || { NETNS_WHY="no '$c' command (Debian: apt-get install iproute2 nftables)"; return 0; }
  done
  local ns=shoalprobe$$ err
  if ! err=$(ip netns add $ns 2>&1); then NETNS_WHY="ip netns add not permitted: $err"; return 0; fi
  NETNS_MADE+=($ns)  # so netns_cleanup removes it if the caller stops before the end of this
  if ! err=$(ip -n $ns link add p0 type veth peer name p1 2>&1); then
    ip netns del $ns; NETNS_WHY="no veth pairs: $err"; return 0
  fi
  if ! err=$(ip netns exec $ns nft -f - 2>&1 <<EOF
table netdev shoalprobe {
  chain in { type filter hook ingress device "p0" priority 0; numgen random mod 100 < 1 counter drop; }
}
EOF
  ); then
    ip netns del $ns; NETNS_WHY="nft cannot filter a veth's ingress in a namespace: $err"; return 0
  fi
  if err=$(ip netns exec $ns tc qdisc add dev p0 root netem delay 1ms 2>&1); then NETEM=1
  else NETEM_WHY="the kernel lacks sch_netem (tc: ${err//$'\n'/ })"; fi
  ip netns exec $ns tc qdisc del dev p0 root 2> /dev/null || true
  if err=$(ip netns exec $ns tc qdisc add dev p0 root tbf rate 1gbit burst 16kb latency 10ms 2>&1); then TBF=1
  else TBF_WHY="the kernel lacks sch_tbf (tc: ${err//$'\n'/ })"; fi
  ip netns del $ns
  NETNS_MADE=(${NETNS_MADE[@]/$ns})
  NETNS_OK=1
}

# netns_add NAME: a namespace with its loopback up.
netns_add() {
  ip netns add "$1"
  NETNS_MADE+=("$1")
  ip -n "$1" link set lo up
}

# netns_link NS_A DEV_A ADDR_A/PREFIX NS_B DEV_B ADDR_B/PREFIX: a veth pair between two of them.
netns_link() {
  ip -n "$1" link add "$2" type veth peer name "$5" netns "$4"
  ip -n "$1" link set "$2" up
  ip -n "$4" link set "$5" up
  ip -n "$1" addr add "$3" dev "$2"
  ip -n "$4" addr add "$6" dev "$5"
}

# link_gso SEGS NS_A DEV_A NS_B DEV_B: caps GSO on both ends at SEGS segments per packet, for
# the sockets opened afterwards. 1 makes every packet at most one MTU (1500 bytes), as on a
# wire, so a 1% drop loses 1% of wire packets: uncapped, the stack hands the veth 64 KB
# super-packets, and "1%" of a 25 MB transfer was 4 drops of 65 KB each (measured). The cost is
# CPU: 1-MTU packets reach ~330 Mbit/s on the 2-core VM, against 8.5 Gbit/s uncapped (65535,
# the veth default), so a rate test leaves it uncapped (tbf meters bytes either way).
link_gso() {
  ip -n "$2" link set "$3" gso_max_segs "$1"
  ip -n "$4" link set "$5" gso_max_segs "$1"
}

# netns_cleanup: kills what still runs in our namespaces (a namespace lives on, unnamed, while
# a process is in it), then removes them. Never fails.
netns_cleanup() {
  local ns p
  for ns in ${NETNS_MADE[@]+"${NETNS_MADE[@]}"}; do
    for p in $(ip netns pids "$ns" 2> /dev/null); do kill -CONT "$p" 2> /dev/null || true; kill -9 "$p" 2> /dev/null || true; done
  done
  for ns in ${NETNS_MADE[@]+"${NETNS_MADE[@]}"}; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do  # <= 1 s for the killed processes to leave it
      [ -z "$(ip netns pids "$ns" 2> /dev/null)" ] && break
      sleep 0.1
    done
    ip netns del "$ns" 2> /dev/null || true
  done
  NETNS_MADE=()
}

# _fault NS DEV RULE: replaces the fault at DEV's ingress with RULE, atomically (one nft
# transaction: declare, delete, define). Its table is named after the device, so faults on
# different links of one namespace (the chaos hub) stay apart. The first rule counts every
# packet, so link_counts can say how many of how many were dropped.
_fault() {
  ip netns exec "$1" nft -f - <<EOF
table netdev shoal_fault_$2
delete table netdev shoal_fault_$2
table netdev shoal_fault_$2 {
  chain in {
    type filter hook ingress device "$2" priority 0;
    counter
    $3
  }
}
EOF
}

# link_loss PCT NS_A DEV_A NS_B DEV_B: drops PCT% (an integer) of the packets each end
# receives, at random (nft numgen: an independent draw per packet).
link_loss() {
  _fault "$2" "$3" "numgen random mod 100 < $1 counter drop"
  _fault "$4" "$5" "numgen random mod 100 < $1 counter drop"
}

# link_cut NS_A DEV_A NS_B DEV_B: drops everything both ends receive (a partition: the
# processes and their sockets stay up, nothing crosses; unlike `ip link set down`, neither side
# sees a carrier loss or a route change).
link_cut() {
  _fault "$1" "$2" "counter drop"
  _fault "$3" "$4" "counter drop"
}

# link_counts NS_A DEV_A NS_B DEV_B: "dropped D of N packets" over both ends so far.
link_counts() {
  local n=0 d=0 end c
  for end in "$1 $2" "$3 $4"; do
    c=($(ip netns exec "${end% *}" nft list table netdev "shoal_fault_${end#* }" 2> /dev/null |
      grep -o 'packets [0-9]*' | grep -o '[0-9]*')) || true
    n=$((n + ${c[0]:-0})) d=$((d + ${c[1]:-0}))
  done
  echo "dropped $d of $n packets"
}

# link_heal NS_A DEV_A NS_B DEV_B: removes the loss or partition of both ends.
link_heal() {
  ip netns exec "$1" nft delete table netdev "shoal_fault_$2" 2> /dev/null || true
  ip netns exec "$3" nft delete table netdev "shoal_fault_$4" 2> /dev/null || true
}

# link_shape RATE DELAY NS_A DEV_A NS_B DEV_B: each end's egress at RATE (tbf; "" for none)
# after a one-way DELAY (netem; "" for none), so the link is symmetric. netem is the root and
# tbf its child, the order of the netem documentation's rate example. Needs TBF / NETEM as
# netns_probe found them; the caller says what it could not emulate.
link_shape() {
  local rate=$1 delay=$2 ns dev
  shift 2
  while [ $# -ge 2 ]; do
    ns=$1 dev=$2
    shift 2
    ip netns exec "$ns" tc qdisc del dev "$dev" root 2> /dev/null || true
    # tbf: burst 16 KiB = 131 us at 1 Gbit/s (11 full frames: a NIC's ring does not send
    # faster than its line rate; hrtimers make the old rate/HZ minimum, 125 KB at HZ=1000,
    # unnecessary); latency 10 ms bounds the queue at 1.25 MB + burst, far above the few KB of
    # activations a step sends, so the shaper only delays, never drops.
    local tbf="tbf rate $rate burst 16kb latency 10ms"
    # netem: limit 10000 packets, above what a 1 Gbit/s link holds in 20 ms (2.5 MB, 1,700
    # full frames; netem's default of 1000 would drop the excess).
    if [ -n "$delay" ] && [ "$NETEM" = 1 ]; then
      ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: netem delay "$delay" limit 10000
      [ -n "$rate" ] && [ "$TBF" = 1 ] && ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:1 handle 10: $tbf
    elif [ -n "$rate" ] && [ "$TBF" = 1 ]; then
      ip netns exec "$ns" tc qdisc add dev "$dev" root $tbf
    fi
  done
  return 0
}

# link_unshape NS_A DEV_A NS_B DEV_B: the default qdiscs again.
link_unshape() {
  ip netns exec "$1" tc qdisc del dev "$2" root 2> /dev/null || true
  ip netns exec "$3" tc qdisc del dev "$4" root 2> /dev/null || true
}
