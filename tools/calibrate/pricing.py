# The calibration's prices: `shoal plan` and `shoal sim` asked about each configuration on the
# pooled node measurements, slowed as the served probes say, beside what the runs measured.
import json
import os

from host import sh
from settings import ALL_CONFIGS, BATCH_PROBES, CONTEXT, OUTPUT
from stats import central, prompt_tokens


def pool_nodes(nodes):
    """The node over a session's measurements: the harmonic mean of every rate (bandwidths,
    weight streaming per batch and type, matmul speed per type, attention speed: a run's time
    is the sum of its steps', each the bytes or flops over the rate of its moment) and the
    central co-running slowdown. One measurement's 1-token streaming rate read 10-32 GB/s here
    and did not follow the runs around it (runs at 44.5, 42.1, 41.6 tokens/s beside 22.1, 27.5,
    28.2 GB/s); over a session's ~45 the pooled figure moved ~1% between sessions."""
    def hm(xs):
        xs = [x for x in xs if x > 0]
        return len(xs) / sum(1.0 / x for x in xs) if xs else 0

    def tables(ts, f):
        n = min(len(t) for t in ts)
        return [f([t[i] for t in ts]) for i in range(n)] if n else []

    out = dict(nodes[-1])
    for k in ("mem_bw", "weight_bw", "attn_flops"):
        out[k] = hm([x.get(k, 0) for x in nodes])
    out["weight_bw_batch"] = tables([x.get("weight_bw_batch", []) for x in nodes], hm)
    out["corun_slowdown"] = tables([x.get("corun_slowdown", []) for x in nodes], central)
    for k in ("type_bw_batch", "matmul_flops"):
        keys = set.intersection(*[set(x.get(k, {})) for x in nodes])
        if k == "type_bw_batch":
            out[k] = {t: tables([x[k][t] for x in nodes], hm) for t in keys}
        else:
            out[k] = {t: hm([x[k][t] for x in nodes]) for t in keys}
    return out


def served_node(node, slowdown):
    """The node as a served stage streams its weights: every bandwidth divided by `slowdown`
    (the stage's own decode time over the one plan prices on the node as measured alone), a
    number for every batch or a list, one per entry of the streaming tables (1, 2, 4, 8 tokens;
    the last one on for the entries beyond). Compute rates stay: prefill, compute-bound, read
    within 10% of plan unslowed (TTFT 230 ms priced, 238 measured) and 8% over it slowed."""
    per = slowdown if isinstance(slowdown, list) else [slowdown]
    at = lambda i: per[min(i, len(per) - 1)]
    out = dict(node)
    for k in ("mem_bw", "weight_bw"):
        out[k] = node[k] / per[0]
    out["weight_bw_batch"] = [x / at(i) for i, x in enumerate(node["weight_bw_batch"])]
    out["type_bw_batch"] = {t: [x / at(i) for i, x in enumerate(v)]
                            for t, v in node["type_bw_batch"].items()}
    return out


def batch_slowdowns(shoal, model, node, slowdown, probe, tmp):
    """The served slowdown at 1, 2, 4 and 8 tokens a step: `slowdown` (the 1-stream probe's) at
    1 and 2 tokens, and at each batch probe's b tokens and beyond the factor that makes the
    sim's priced stage time for its work (1 stage, b streams in one wave, an instant link)
    equal its stages' measured busy time (central value over the rounds; a fixed point, 3 steps:
    the prompts' prefill, priced on the unslowed compute rates, is ~5% of it). Calibrations saved
    before session 17 have no batch probe: one factor for every batch, as then."""
    per = [slowdown] * 4
    dev = os.path.join(tmp, "batch.json")
    for b, key in BATCH_PROBES:
        runs = probe.get(key) or []
        if not runs:
            continue
        i = b.bit_length() - 1
        per[i:] = [per[i - 1]] * (len(per) - i)
        n = max(1, round(central([x["completed"] for x in runs])))
        prompt = prompt_tokens(runs)
        busy = central([x["stage_busy_s"] / max(1, x["completed"]) for x in runs])
        for _ in range(3):
            json.dump(served_node(node, per), open(dev, "w"))
            sim = ask_sim(shoal, question(model, dev, 1, b, 1e15, 1e-9, 0.0), 1, b, n, prompt)
            priced = priced_busy_s(sim) / n
            per[i:] = [x * busy / max(priced, 1e-9) for x in per[i:]]
    return per


def question(model, device, stages, conc, link_bw, lat_s, overhead_s, cpu_s=0.0, tp=1,
             collective_s=0.0):
    """The options plan and sim share for one configuration on the node file `device` (tp > 1:
    stages of tp-member groups, a collective call priced at collective_s beyond its bytes)."""
    split = (["--parallel", "tp=%d,pp=%d" % (tp, stages), "--collective-us",
              "%g" % (collective_s * 1e6)] if tp > 1 else [])
    return split + ["-m", model, "-d", device, "--context", str(CONTEXT),
            "--link-cpu-ns-per-byte", "%g" % (cpu_s * 1e9),
            "--step-overhead-ms", "%g" % (overhead_s * 1e3),
            "--concurrency", str(conc), "--stages", str(stages), "--link-type", "f32",
            "--link-mbit", "%g" % (link_bw * 8 / 1e6), "--link-latency-us",
            "%g" % (lat_s * 1e6), "--host-cores", str(os.cpu_count() or 1), "--json"]


def ask_plan(shoal, common, stages, prompt):
    return json.loads(sh([shoal, "plan"] + common + ["--prompt", str(prompt), "--output",
                                                     str(OUTPUT), "--nodes", str(stages)]))


def ask_sim(shoal, common, stages, conc, n, prompt):
    """`shoal sim` of the closed loop: conc requests in flight, n in all."""
    return json.loads(sh([shoal, "sim"] + common + [
        "--nodes", str(stages), "--duration", "10m",
        "--workload", "closed:%d,requests:%d,in:%d,out:%d" % (conc, n, prompt, OUTPUT)]))


def priced_busy_s(sim):
    """The stages' compute seconds the sim priced, summed over stages."""
    return sum(sim["stage_utilisation"]) * sim["end_s"]


def predict(shoal, model, device, stages, conc, n, prompt, link_bw, lat_s, overhead_s, cpu_s,
            send_share=1.0, tp=1, collective_s=0.0):
    """Plan and sim of one configuration; the sim also splits the link's CPU (send_share)."""
    common = question(model, device, stages, conc, link_bw, lat_s, overhead_s, cpu_s, tp,
                      collective_s)
    split = ["--link-cpu-send-share", "%g" % send_share]
    return (ask_plan(shoal, common, stages * tp, prompt),
            ask_sim(shoal, common + split, stages * tp, conc, n, prompt))


def price_on_own_cpu(shoal, model, node, tmp, st, conc, n, prompt, link, run):
    """Plan and sim for one run, on the pooled node slowed by a factor f chosen so that the sim's
    priced stage compute for the run's work equals the CPU its stage processes spent (bandwidths
    divided by f, as the probe's factor does; a fixed point, 4 steps: the compute-bound share of
    the work, 20-40% here, shrinks the error of each step by that share). A run's stage processes
    streamed at their own speed: identical 1-stage clusters started side by side read 11.5-12.9
    and 15.2-18.9 ms of compute a token, each keeping its speed over six trials, and one cluster
    drifted from 59.6 to 42.7 tokens/s within 30 s; on the pool a row's runs carry that spread,
    priced on their own CPU what is left is the model's (pipelining, batching, co-running,
    prompts queueing, the serving path). Returns (f, plan, sim)."""
    dev = os.path.join(tmp, "own.json")
    f = 1.0
    for _ in range(4):
        json.dump(served_node(node, f), open(dev, "w"))
        _, sim = predict(shoal, model, dev, st, conc, n, prompt, *link)
        busy = priced_busy_s(sim)
        f *= run["stage_cpu_s"] / max(busy, 1e-9)
    json.dump(served_node(node, f), open(dev, "w"))
    return (f,) + predict(shoal, model, dev, st, conc, n, prompt, *link)


def group_runs(meas):
    """config (stages, concurrency, requests, link, tp, model) -> [measured], in run order; rows
    in ALL_CONFIGS' order."""
    runs = {}
    order = lambda x: ALL_CONFIGS.index(x[:6]) if x[:6] in ALL_CONFIGS else len(ALL_CONFIGS)
    for x in sorted(meas, key=order):
        runs.setdefault(x[:6], []).append(x[6])
    return runs


def price_rows(shoal, models, tmp, cal, runs, probe_level_only):
    """Each configuration's row: its runs' central values beside plan and sim on the calibrated
    node, and (unless probe_level_only) each run priced on its own stages' CPU. (rows, raw).
    models: a row's model tag -> its file."""
    rows, raw = [], []
    model = models[None]
    for (st, conc, n, link, tp, tag), v in runs.items():
        prompt = prompt_tokens(v)
        plan, sim = predict(shoal, models[tag], cal.device, st, conc, n, prompt,
                            *cal.link_args(link), tp=tp, collective_s=cal.collective)
        row = dict(stages=st, tp=tp, model=tag, conc=conc, n=n, link=link or "loopback",
                   repeats=len(v),
                   prompt=prompt,
                   meas_tps=central([x["output_throughput"] for x in v]),
                   meas_ttft=central([x["mean_ttft_ms"] for x in v]) / 1e3,
                   plan_tps=plan["served_tokens_per_s"], plan_ttft=plan["ttft_batch_s"],
                   sim_tps=sim["throughput_tokens_per_s"], sim_ttft=sim["ttft_s"]["mean"],
                   runs_tps=[x["output_throughput"] for x in v])
        # The same runs, each priced on its own stages' CPU (runs saved before session 13
        # have no CPU figure: none then).
        if (all("stage_cpu_s" in x for x in v) and not probe_level_only and tp == 1 and
                tag is None):
            own = [price_on_own_cpu(shoal, model, cal.node, tmp, st, conc, n, prompt,
                                    cal.link_args(link), x) for x in v]
            row.update(own_f=[o[0] for o in own],
                       own_plan_err=central([o[1]["served_tokens_per_s"]
                                             / x["output_throughput"] - 1
                                             for o, x in zip(own, v)]),
                       own_sim_err=central([o[2]["throughput_tokens_per_s"]
                                            / x["output_throughput"] - 1
                                            for o, x in zip(own, v)]))
        rows.append(row)
        raw.append(dict(row=row, bench=v, plan=plan, sim=sim))
    return rows, raw


def price_levels(shoal, model, tmp, cal, rows, runs):
    """Every row again on one level for this host: the pool slowed by the central f of the
    other loopback rows' runs (5 rows x the rounds: 60 process draws in 12 rounds; the
    1 Gbit/s rows' f reads low, 0.68-0.89, where the shaper's CPU is spent outside the
    node processes). A row's own runs do not set its level. Needs every row's own_f."""
    level_dev = os.path.join(tmp, "level.json")
    for r, ((st, conc, n, link, _, _), v) in zip(rows, runs.items()):
        level = central([f for q in rows if q is not r and q["link"] == "loopback"
                         for f in q["own_f"]])
        json.dump(served_node(cal.node, level), open(level_dev, "w"))
        plan_l, sim_l = predict(shoal, model, level_dev, st, conc, n, r["prompt"],
                                *cal.link_args(link))
        r.update(level=level, level_plan_tps=plan_l["served_tokens_per_s"],
                 level_sim_tps=sim_l["throughput_tokens_per_s"])
