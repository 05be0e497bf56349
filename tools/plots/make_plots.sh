#!/usr/bin/env bash
# Regenerates docs/plots/*.svg (tokens/s against node count and against failure rate) from
# `shoal plan` and `shoal sim` output. Usage: tools/plots/make_plots.sh [build/bin/shoal]
# Needs gnuplot (Debian: gnuplot-nox; `make plots` installs it and runs this). Takes ~2 minutes
# on a 2-core machine.
set -euo pipefail
SHOAL=${1:-build/bin/shoal}
DIR=$(cd "$(dirname "$0")/../../docs/plots" && pwd)  # the plots stay beside the docs
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
j() { python3 -c "import json,sys; d=json.load(sys.stdin); print(*[d[k] for k in sys.argv[1:]])" "$@"; }

# 1. Kimi K2 on DGX Sparks (5 per replica): closed loop of 32 requests per replica, 512 in,
#    128 out, 4096 tokens of context, 10 simulated minutes per point (a round of 32 requests
#    takes ~2.4 minutes).
W="in:512,out:128"
: > "$DIR/nodes_dgx.dat"
# The plan columns are the planner's answer for the sim's own placement (the sim's JSON carries
# them), so both price the same replicas.
for n in 5 10 20 40 80 160; do
  s=$("$SHOAL" sim -m kimi-k2 -d dgx-spark -n $n --context 4096 --duration 10m \
      --workload closed:32,$W --json |
      j plan_served_tokens_per_s plan_tokens_per_s throughput_tokens_per_s)
  echo "$n $s" >> "$DIR/nodes_dgx.dat"
done

# 2. The same 17 replicas (85 Sparks) plus 3 spares under host failures: MTBF per node from
#    10,000 h down to 0.5 h, 10 simulated minutes each; plan has no failure model (flat line).
: > "$DIR/failures_dgx.dat"
p=$("$SHOAL" sim -m kimi-k2 -d dgx-spark -n 88 --context 4096 --duration 10s \
    --workload closed:32,$W --json | j plan_served_tokens_per_s)
for mtbf in 10000 1000 100 10 3 1 0.5; do
  s=$("$SHOAL" sim -m kimi-k2 -d dgx-spark -n 88 --context 4096 --duration 10m \
      --workload closed:32,$W --failures mtbf:$mtbf --seed 2 --json |
      j throughput_tokens_per_s failures replicas_lost)
  echo "$mtbf $p $s" >> "$DIR/failures_dgx.dat"
done

# 3. Kimi K3 on PS3s, plan only (a 100k-node sim takes ~80 s a point): aggregate decode
#    against node count, 64 sequences per replica.
: > "$DIR/nodes_ps3.dat"
npr=$("$SHOAL" plan -m kimi-k3 -d ps3 -n 100000 --context 4096 --concurrency 64 --json |
      j nodes_per_replica)  # one replica for 64 sequences
for n in 10000 20000 30000 40000 50000 60000 70000 80000 90000 100000; do
  reps=$((n / npr))
  [ $reps -ge 1 ] || continue
  p=$("$SHOAL" plan -m kimi-k3 -d ps3 -n $n --context 4096 --concurrency $((64 * reps)) --json |
      j decode_tokens_per_s_aggregate decode_tokens_per_s_overlapped replicas)
  echo "$n $p" >> "$DIR/nodes_ps3.dat"
done

gnuplot <<GP
set terminal svg size 640,400 dynamic font "sans,11"
set key top left
set grid
set output "$DIR/tokens_vs_nodes_dgx.svg"
set title "Kimi K2 on DGX Spark: output tokens/s against node count"
set xlabel "nodes (5 per replica)"; set ylabel "output tokens/s"
set logscale xy
plot "$DIR/nodes_dgx.dat" u 1:4 w lp pt 7 t "sim (prefill included)", \
     "" u 1:2 w lp pt 5 t "plan, served (prefill included)", \
     "" u 1:3 w lp dt 2 t "plan, decode only"
set output "$DIR/tokens_vs_failures_dgx.svg"
set title "Kimi K2 on 88 DGX Sparks (17 replicas + 3 spares): tokens/s against failure rate"
set xlabel "failures per node-hour (1 / MTBF)"; set ylabel "output tokens/s"
set logscale x; unset logscale y; set yrange [0:*]
set key bottom left
plot "$DIR/failures_dgx.dat" u (1/\$1):3 w lp pt 7 t "sim", \
     "" u (1/\$1):2 w l dt 2 t "plan (no failures)"
set output "$DIR/tokens_vs_nodes_ps3.svg"
set title "Kimi K3 on PS3s (plan): aggregate decode tokens/s against node count"
set xlabel "nodes"; set ylabel "tokens/s"; unset logscale; set yrange [0:*]; set key top left
plot "$DIR/nodes_ps3.dat" u 1:2 w lp pt 7 t "one step in flight (shoal today)", \
     "" u 1:3 w lp pt 5 t "overlapped steps (ideal pipeline)"
GP
echo "wrote $DIR/*.svg"
