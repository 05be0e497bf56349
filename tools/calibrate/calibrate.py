#!/usr/bin/env python3
# Calibration of `shoal plan` and `shoal sim` against real `shoal cluster up` pipelines on this
# machine: prints predicted vs measured output tokens/s and TTFT per configuration (issue #8).
"""Usage: tools/calibrate/calibrate.py [--shoal build/bin/shoal] [--out DIR] [--quick]

Each configuration starts `shoal cluster up --nodes S` (S stages on loopback, 1 thread per
node), runs `shoal bench serve` (closed loop: B requests in flight, N in all, prompt P words,
O output tokens) and stops the cluster, once in each of --repeat rounds; this machine is
measured as a node after every run. Then `shoal plan` and `shoal sim` are asked the same
question on the pool of those node measurements, corrected by the probes (main()), and again
on that pool slowed to the CPU stage processes spent (a second table: every row on the level of
the other rows' runs, and every run on its own, price_on_own_cpu). Every stage runs on this one
machine, so plan and sim get --host-cores (its core count): the stages share its cores. The
1 Gbit/s configurations run the whole cluster inside a network namespace whose loopback is
rate-limited with tc tbf (netem, for delay, is not in this kernel). Every real run is bounded
(--total-timeout), and the load average is printed before and after: the machine is shared.
With --out DIR the runs are also saved as DIR/measurements.json; `--measured
DIR/measurements.json --out DIR2` prices the same runs again with the current plan and sim.
"""
# The modules beside this file: settings (configurations, probes), host (commands, /proc, the
# link probes probe_loopback.py and probe_link_cpu.py), pipelines (the real runs), measurements
# (their saved form), stats, pricing (plan and sim), node_fit (the node the rows are priced on),
# report (the tables).
import argparse
import os
import shutil
import sys
import tempfile

from host import del_netns, link_cpu_s_per_byte, loopback_latency_s, make_netns, sh
from measurements import Measured
from node_fit import fit
from pipelines import measure_rounds
from pricing import group_runs, price_levels, price_rows
import report
from settings import CONFIGS, EP_CONFIGS, MODEL_LAYERS, MOE_SYNTH, QUICK, TP_CONFIGS, norm


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shoal", default="build/bin/shoal")
    ap.add_argument("--out", default=None, help="write the table and raw JSON here")
    ap.add_argument("--quick", action="store_true", help="3 loopback configurations only")
    ap.add_argument("--rows", choices=("pipeline", "tp", "ep", "tp,ep"), default="pipeline",
                    help="pipeline: the 8 pipeline configurations; tp: tensor-parallel groups "
                    "beside one node (settings.TP_CONFIGS, with the tensor-parallel probe); ep: "
                    "a MoE model's experts split over a group beside one node (EP_CONFIGS)")
    ap.add_argument("--repeat", type=int, default=12,
                    help="rounds: each runs the probes and every configuration once; a row "
                    "shows its runs' central value (the middle two thirds' mean)")
    ap.add_argument("--measure-only", metavar="FILE",
                    help="run the real pipelines only and save what they measured to FILE")
    ap.add_argument("--measured", metavar="FILE",
                    help="predict only, for measurements saved by --measure-only")
    ap.add_argument("--probe-level-only", action="store_true",
                    help="price the rows on the probes' level only: no second table (each run "
                    "on its own CPU and every row on the other rows' level, ~4x the sims)")
    ap.add_argument("--model", metavar="FILE",
                    help="the calibration model: synthesised into FILE when FILE does not exist, "
                    "used as it is when it does (re-pricing several stored runs synthesises once)")
    ap.add_argument("--moe-model", metavar="FILE",
                    help="the expert-parallel rows' model, as --model (settings.MOE_SYNTH)")
    return ap.parse_args()


def measure_links():
    """This machine's loopback as a hop finds it: a fresh Measured holding it."""
    lat, lo_bw = loopback_latency_s()
    lo_cpu, lo_share = link_cpu_s_per_byte()
    print("loopback: one-way latency %.1f us, %.2f GB/s, %.2f ns of CPU per byte (%.2f of it in "
          "the sender's send)" % (lat * 1e6, lo_bw / 1e9, lo_cpu * 1e9, lo_share), flush=True)
    return Measured(lat, lo_bw, lo_cpu, lo_share)


def open_netns(configs):
    """The 1 Gbit/s namespace when a configuration needs it: whether it is up."""
    if any(c[3] for c in configs):
        try:
            make_netns()
            return True
        except Exception as e:  # no root, no tbf: the shaped rows are skipped
            print("1 Gbit/s configurations skipped: %s" % str(e).splitlines()[0])
    return False


def main():
    a = parse_args()
    shoal = os.path.abspath(a.shoal)
    tmp = tempfile.mkdtemp(prefix="shoal-cal-")
    model = os.path.abspath(a.model) if a.model else os.path.join(tmp, "cal.gguf")
    print("load before:", sh(["uptime"]).strip(), flush=True)
    if not os.path.exists(model):
        sh([shoal, "synth", "--preset", "1b", "--layers", str(MODEL_LAYERS), "--type", "q4_0",
            "--seed", "7", "-o", model], timeout=300)
    configs = (QUICK if a.quick else
               {"tp": TP_CONFIGS, "ep": EP_CONFIGS,
                "tp,ep": TP_CONFIGS + EP_CONFIGS}.get(a.rows, CONFIGS))
    models = {None: model}
    saved = Measured.load_file(a.measured).meas if a.measured else []
    if any(norm(c)[5] for c in configs) or any(x[5] for x in saved):
        models["moe"] = (os.path.abspath(a.moe_model) if a.moe_model
                         else os.path.join(tmp, "moe.gguf"))
        if not os.path.exists(models["moe"]):
            sh([shoal, "synth"] + MOE_SYNTH + ["-o", models["moe"]], timeout=300)
    # The probes: the same model, one stream with a 2-word prompt, served on 1 stage and on 2
    # (alternately with the rows). On 1 stage, the stage's own forward-pass time (its busy
    # seconds) over what plan prices for the same passes on the pooled node is how much slower a
    # served stage streams its weights than the node's measurements say; plan and sim price
    # every stage on the node so slowed. A request's time beyond its stages' busy time is the
    # serving path (the coordinator's sampling and bookkeeping, wake-ups, the logits' hop): what
    # it has beyond the hops plan prices is the per-step overhead (--step-overhead-ms), and what
    # 2 stages add to it beyond their priced extra hop is a hop's own cost, added to every hop's
    # latency. Both come from measured times alone, not from a price of the stages' work.
    m = measure_links()
    have_ns = open_netns(configs)
    try:
        # Measurements first, in one batch; predictions afterwards. This machine as one node
        # of 1 thread sees it (STREAM triad, weight streaming, matmuls, attention) is measured
        # after every run, and every row is priced on the pool of all of them (pool_nodes).
        if a.measured:
            m = Measured.load_file(a.measured)
            print("measurements from %s (%s)" % (a.measured, m.load))
        else:
            measure_rounds(shoal, models, tmp, m, configs, have_ns, a.repeat,
                           os.path.join(tmp, "local.json"))
        # What was measured, in the form --measured reads: a later plan or sim can re-price
        # the same runs (DIR/measurements.json beside the table).
        saves = [a.measure_only] if a.measure_only else []
        if a.out and not a.measured:
            os.makedirs(a.out, exist_ok=True)
            saves.append(os.path.join(a.out, "measurements.json"))
        for f in saves:
            m.save(f)
        if a.measure_only:
            shutil.rmtree(tmp, ignore_errors=True)
            return 0
        cal = fit(shoal, model, tmp, m)
        runs = group_runs(m.meas)
        rows, raw = price_rows(shoal, models, tmp, cal, runs, a.probe_level_only)
        if rows and all("own_f" in r for r in rows):
            price_levels(shoal, model, tmp, cal, rows, runs)
    finally:
        if have_ns:
            del_netns()
    text = report.table(rows, raw, m.corun, cal)
    print(text)
    print("load after:", sh(["uptime"]).strip())
    if a.out:
        report.write(a.out, text, raw, cal)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
