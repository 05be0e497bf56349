# The calibration's report: the table of measured against priced rows, the same runs on their own
# CPU, where the cores went, the served co-running, and what the rows were priced on.
import json
import os

from stats import central, idle_share


def err_of(r):
    """Predicted tokens/s x as a signed percentage of row r's measured."""
    return lambda x: "%+.0f%%" % (100 * (x / r["meas_tps"] - 1)) if r["meas_tps"] else "-"


def stages_of(r):
    """A row's stages, with its tensor-parallel members and its model ("moe: 2 x tp2")."""
    s = "%d x tp%d" % (r["stages"], r["tp"]) if r.get("tp", 1) > 1 else "%d" % r["stages"]
    return "%s: %s" % (r["model"], s) if r.get("model") else s


def main_table(rows):
    hdr = ("| stages | in flight | link | measured tok/s | plan tok/s (err) | sim tok/s (err) "
           "| measured TTFT ms | plan TTFT ms | sim TTFT ms |")
    lines = [hdr, "|" + "---|" * 9]
    for r in rows:
        err = err_of(r)
        lines.append("| %s | %d | %s | %.2f | %.2f (%s) | %.2f (%s) | %.0f | %.0f | %.0f |" % (
            stages_of(r), r["conc"], r["link"], r["meas_tps"], r["plan_tps"], err(r["plan_tps"]),
            r["sim_tps"], err(r["sim_tps"]), 1e3 * r["meas_ttft"], 1e3 * r["plan_ttft"],
            1e3 * r["sim_ttft"]))
    return lines


def own_cpu_table(rows):
    lines = [""]
    lines.append("The same runs on the stages' own CPU. Level: every row priced on the pool "
                 "slowed by the central f of the other loopback rows' runs (f: how much "
                 "slower a run's stages streamed than the pool, from their CPU). Own: each "
                 "run priced on its own f, central value over the row's runs of predicted / "
                 "measured.")
    lines.append("")
    lines.append("| stages | in flight | link | level | plan tok/s (err) | sim tok/s (err) "
                 "| own: plan err | own: sim err | f central | f range |")
    lines.append("|" + "---|" * 10)
    for r in rows:
        f = r["own_f"]
        err = err_of(r)
        lines.append("| %d | %d | %s | %.3f | %.2f (%s) | %.2f (%s) | %+.0f%% | %+.0f%% | "
                     "%.3f | %.3f-%.3f |" % (
                         r["stages"], r["conc"], r["link"], r["level"],
                         r["level_plan_tps"], err(r["level_plan_tps"]), r["level_sim_tps"],
                         err(r["level_sim_tps"]), 100 * r["own_plan_err"],
                         100 * r["own_sim_err"], central(f), min(f), max(f)))
    return lines


def cores_line(raw):
    """Diagnostics: how full the cores were, measured (whole machine, and the stages' CPU
    alone) and as the sim priced the stages' compute, per row (central values over the
    runs)."""
    cores = os.cpu_count() or 1
    return ("Cores: idle (whole machine, measured) / the stages' share of them "
            "(their CPU, measured) / the stages' share the sim priced: " + "; ".join(
                "%s x %d %s %.0f%% / %.0f%% / %.0f%%" % (
                    stages_of(r["row"]), r["row"]["conc"], r["row"]["link"],
                    100 * central([idle_share(x) for x in r["bench"]]),
                    100 * central([x["stage_cpu_s"] / (cores * x["duration"])
                                   for x in r["bench"]]),
                    100 * sum(r["sim"]["stage_utilisation"]) / cores) for r in raw))


def table(rows, raw, corun, cal):
    """The report's text (Markdown) for rows priced on Calibration `cal`."""
    lines = main_table(rows)
    if rows and all("own_f" in r for r in rows):
        lines += own_cpu_table(rows)
    if rows and all("machine_cpu_s" in x for r in raw for x in r["bench"]):
        lines.append("")
        lines.append(cores_line(raw))
    cpu_ratios = [c["ratio_cpu"] for c in corun if c.get("ratio_cpu")]
    if cpu_ratios:
        lines.append("")
        lines.append("Served co-running by the stages' CPU a row (not priced): %.3f, central "
                     "value of %d (%.3f-%.3f); by their busy time (priced): %.3f." % (
                         central(cpu_ratios), len(cpu_ratios), min(cpu_ratios), max(cpu_ratios),
                         central([c["ratio"] for c in corun if c.get("ratio_cpu")])))
    lines.append("")
    lines.append("Priced on the node as measured (harmonic mean of %d measurements), every "
                 "bandwidth divided by %s at 1, 2, 4, 8 tokens (served stages' weight "
                 "streaming, probes); serving path %.2f ms per step, %.2f ms per hop beyond the "
                 "priced hop (probes)%s." % (len(cal.m.nodes),
                                             ", ".join("%.3f" % x for x in cal.per_batch),
                                             cal.overhead * 1e3, cal.hop * 1e3,
                                             "; a collective call %.1f us beyond its bytes "
                                             "(tensor-parallel probe)" % (cal.collective * 1e6)
                                             if cal.collective else ""))
    return "\n".join(lines)


def write(out, text, raw, cal):
    """DIR/calibration.md (the table) and DIR/calibration.json (rows, node, probes)."""
    os.makedirs(out, exist_ok=True)
    open(os.path.join(out, "calibration.md"), "w").write(text + "\n")
    json.dump(dict(rows=raw, node=cal.node, node_alone=cal.alone, slowdown=cal.slowdown,
                   batch_slowdown=cal.per_batch,
                   step_overhead_s=cal.overhead, hop_s=cal.hop, collective_s=cal.collective,
                   probe=cal.m.probe,
                   load=cal.m.load),
              open(os.path.join(out, "calibration.json"), "w"), indent=1)
