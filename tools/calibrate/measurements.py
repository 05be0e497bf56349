#!/usr/bin/env python3
# What a calibration measured, in the form --measure-only and --out save and --measured reads.
"""Run as a program, trims saved measurements to what the calibration reads (compact JSON):

  tools/calibrate/measurements.py --trim FILE...

tests/testdata/calibration's fixture was made so; every figure priced stays as measured."""
import json
import sys

from settings import LOOPBACK_SEND_SHARE, SHAPED_SEND_SHARE, norm

# The fields the calibration reads of a saved file (calibrate.py, pricing.py, report.py):
# a row's run (its central values, its own-CPU pricing, the cores diagnostics), a probe's run
# (busy time, serving path, prompt length), a co-running pair, and the node measurements that
# pool_nodes pools (the last node is kept whole: its other fields make the device file).
RUN_KEYS = ("completed", "duration", "mean_ttft_ms", "output_throughput", "total_input_tokens",
            "stage_cpu_s", "machine_busy_s", "machine_cpu_s", "collective")
PROBE_KEYS = ("completed", "mean_e2el_ms", "stage_busy_s", "total_input_tokens", "collective")
CORUN_KEYS = ("ratio", "ratio_cpu", "streams")
POOLED_NODE_KEYS = ("mem_bw", "weight_bw", "attn_flops", "weight_bw_batch", "corun_slowdown",
                    "type_bw_batch", "matmul_flops")


class Measured:
    """The links' probes, the served probes' runs, the co-running pairs, the node measurements
    and the rows' runs (meas: (stages, concurrency, requests, link, tp, model, bench JSON) in
    run order; files saved before tensor-parallel rows have 4-field configurations: tp 1, the
    calibration model)."""

    def __init__(self, lat, lo_bw, lo_cpu, lo_share):
        self.lat, self.lo_bw, self.lo_cpu, self.lo_share = lat, lo_bw, lo_cpu, lo_share
        self.lat_ns = self.bw_ns = self.cpu_ns = self.ns_share = None
        self.load = None
        self.probe, self.corun, self.nodes, self.meas = {}, [], [], []

    @classmethod
    def load_file(cls, path):
        saved = json.load(open(path))
        m = cls(saved["latency_s"], saved["loopback_bw"], saved["loopback_cpu"],
                saved.get("loopback_send_share", LOOPBACK_SEND_SHARE))
        m.meas = [norm(x["config"]) + (x["bench"],) for x in saved["runs"]]
        m.lat_ns, m.cpu_ns = saved["latency_ns_s"], saved["shaped_cpu"]
        m.ns_share = saved.get("shaped_send_share", SHAPED_SEND_SHARE)
        m.bw_ns, m.nodes, m.probe = saved["shaped_bw"], saved["nodes"], saved["probe"]
        m.load, m.corun = saved["load"], saved.get("corun", [])
        return m

    def save(self, path):
        json.dump(dict(latency_s=self.lat, latency_ns_s=self.lat_ns, loopback_bw=self.lo_bw,
                       shaped_bw=self.bw_ns, loopback_cpu=self.lo_cpu, shaped_cpu=self.cpu_ns,
                       loopback_send_share=self.lo_share, shaped_send_share=self.ns_share,
                       load=self.load, probe=self.probe, corun=self.corun, nodes=self.nodes,
                       runs=[dict(config=list(x[:6]), bench=x[6]) for x in self.meas]),
                  open(path, "w"), indent=1)


def trimmed(saved):
    """A saved file's JSON with only the fields the calibration reads."""
    pick = lambda d, keys: {k: d[k] for k in keys if k in d}
    out = dict(saved)
    out["runs"] = [dict(config=x["config"], bench=pick(x["bench"], RUN_KEYS))
                   for x in saved["runs"]]
    out["probe"] = {k: [pick(x, PROBE_KEYS) for x in v] for k, v in saved["probe"].items()}
    out["corun"] = [pick(x, CORUN_KEYS) for x in saved.get("corun", [])]
    out["nodes"] = [pick(x, POOLED_NODE_KEYS) for x in saved["nodes"][:-1]] + saved["nodes"][-1:]
    return out


def main(argv):
    if len(argv) < 2 or argv[0] != "--trim":
        print(__doc__, file=sys.stderr)
        return 2
    for path in argv[1:]:
        out = trimmed(json.load(open(path)))
        with open(path, "w") as f:
            json.dump(out, f, separators=(",", ":"))
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
