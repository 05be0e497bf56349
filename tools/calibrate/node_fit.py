# The node every row is priced on: the pooled node measurements fitted to the served probes
# (weight streaming slowdown per batch, co-running, the serving path's per-step and per-hop cost).
import json
import os

from pricing import ask_plan, batch_slowdowns, pool_nodes, question, served_node
from settings import OUTPUT
from stats import central, prompt_tokens


class Calibration:
    """The fitted node (its file: device) and the links as predict() takes them."""

    def __init__(self, m, device, alone, node, slowdown, per_batch, overhead, hop, collective):
        self.m, self.device, self.alone, self.node = m, device, alone, node
        self.slowdown, self.per_batch, self.overhead, self.hop = slowdown, per_batch, overhead, hop
        self.collective = collective  # seconds a collective call costs beyond its bytes

    def link_args(self, link):
        """predict()'s link bandwidth, latency, per-step overhead, CPU per byte and the
        sender's share of it."""
        m = self.m
        return (m.bw_ns if link else m.lo_bw, (m.lat_ns if link else m.lat) + self.hop,
                self.overhead, m.cpu_ns if link else m.lo_cpu,
                m.ns_share if link else m.lo_share)


def fit(shoal, model, tmp, m):
    """The Calibration of measurements `m`: its node written to tmp/local.json."""
    device = os.path.join(tmp, "local.json")
    alone = pool_nodes(m.nodes)
    # The co-running table scaled to the served probe's figure at 1 token (its central value
    # over the rounds; runs saved before session 13 have none: the node's table as measured; the
    # session-17 runs' probes at 2 streams each, tried and dropped, are left out).
    ratios = [c["ratio"] for c in m.corun if c.get("ratio") and c.get("streams", 1) == 1]
    table = alone.get("corun_slowdown", [])
    if ratios and table:
        alone["corun_slowdown"] = [max(1.0, x * central(ratios) / table[0]) for x in table]
    json.dump(alone, open(device, "w"))
    probe = m.probe
    p1 = probe["serve1"]
    p_tok = prompt_tokens(p1)
    busy = {k: central([x["stage_busy_s"] / max(1, x["completed"]) for x in probe[k]])
            for k in probe}  # per request
    # Beyond the stages' busy time, per request: the serving path.
    gap = {k: central([x["mean_e2el_ms"] / 1e3 - x["stage_busy_s"] / max(1, x["completed"])
                       for x in probe[k]]) for k in probe}
    # The probe's forward passes as plan prices them on the node alone: one stage, an
    # instant link (a latency of 0 would mean plan's default, 100 us).
    instant = (1e15, 1e-9)
    bare = ask_plan(shoal, question(model, device, 1, 1, *instant, 0.0), 1, p_tok)
    slowdown = busy["serve1"] / bare["request_s"]
    per_batch = batch_slowdowns(shoal, model, alone, slowdown, probe, tmp)
    node = served_node(alone, per_batch)
    json.dump(node, open(device, "w"))
    # What plan puts on the loopback links of one request on S stages: its time with the
    # measured link less its time with an instant one.
    link = {st: ask_plan(shoal, question(model, device, st, 1, m.lo_bw, m.lat, 0.0, m.lo_cpu),
                         st, p_tok)["request_s"] -
            ask_plan(shoal, question(model, device, st, 1, *instant, 0.0), st,
                     p_tok)["request_s"] for st in (1, 2)}
    # A request's OUTPUT steps (the prefill samples the first token); 2 stages: one hop more.
    overhead = max(0.0, (gap["serve1"] - link[1]) / OUTPUT)
    hop = max(0.0, ((gap["serve2"] - link[2]) - (gap["serve1"] - link[1])) / OUTPUT)
    print("node (harmonic mean of %d measurements): weight streaming %s GB/s; served stages stream "
          "%sx slower (1, 2, 4, 8 tokens); co-running slowdown %s%s; serving path %.2f ms per "
          "step, %.2f ms per hop beyond the priced hop (probe central values per request: busy "
          "%s; beyond it %s; priced links %.2f, %.2f ms)" % (
              len(m.nodes), ", ".join("%.1f" % (x / 1e9) for x in alone["weight_bw_batch"]),
              ", ".join("%.3f" % x for x in per_batch),
              ", ".join("%.2f" % c for c in node.get("corun_slowdown", [])),
              " (scaled to the served probe's %.3f, central value of %d)" % (
                  central(ratios), len(ratios))
              if ratios and table else "",
              overhead * 1e3, hop * 1e3,
              ", ".join("%s %.1f ms" % (k, v * 1e3) for k, v in busy.items()),
              ", ".join("%s %.1f ms" % (k, v * 1e3) for k, v in gap.items()),
              link[1] * 1e3, link[2] * 1e3), flush=True)
    collective = fit_collective(m)
    return Calibration(m, device, alone, node, slowdown, per_batch, overhead, hop, collective)


def fit_collective(m):
    """What a collective call costs beyond its bytes, from the tensor-parallel probe: its members'
    metered seconds a call (central value over the rounds) less what plan prices for a call's
    bytes on the loopback (the larger of their time at its rate and the network stacks' CPU for
    them). 0 without the probe (plan then prices the link's latency)."""
    runs = [x["collective"] for x in m.probe.get("servetp", []) if x.get("collective", [0, 0])[1]]
    if not runs:
        return 0.0
    per_call = central([s / c for s, c, _ in runs])
    nbytes = central([b / c for _, c, b in runs])
    priced = max(nbytes / m.lo_bw, nbytes * m.lo_cpu)
    print("collectives (tensor-parallel probe): %.1f us a call, %.0f bytes in (%.1f us of it "
          "priced for the bytes)" % (per_call * 1e6, nbytes, priced * 1e6), flush=True)
    return max(0.0, per_call - priced)
