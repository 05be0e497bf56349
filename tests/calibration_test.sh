#!/usr/bin/env bash
# Issues #8's and #37's targets as a regression test: the stored calibration runs in
# tests/testdata/calibration/*.json (real `shoal cluster up` pipelines measured by tools/calibrate
# on the project's Zen 5 host, session 22's final code; tensor- and expert-parallel groups beside
# one node on a 2-core Xeon VM, session 26) re-priced by this build's `shoal plan` and `shoal sim`
# must stay within 10% of measured tokens/s on every configuration of every run.
# A change to the cost model, the simulator or the calibration's statistics that moves a row out
# fails here (~8 s a run). Exit 77 (skip) when the binary was built without SimGrid. The figures
# of every earlier run are in docs/SCALE.md's tables. The fixture holds only the fields the tool
# reads, as compact JSON (`tools/calibrate/measurements.py --trim FILE`).
set -euo pipefail
SHOAL="$1"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUNS=("$ROOT"/tests/testdata/calibration/*.json)
[ -e "${RUNS[0]}" ] || { echo "no stored runs in tests/testdata/calibration"; exit 1; }
"$SHOAL" sim --help >/dev/null 2>&1 || { echo "shoal built without SimGrid: skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for runs in "${RUNS[@]}"; do
  echo "== $(basename "$runs")"
  python3 "$ROOT/tools/calibrate/calibrate.py" --shoal "$SHOAL" --measured "$runs" \
    --probe-level-only --model "$out/cal.gguf" --moe-model "$out/moe.gguf" --out "$out" \
    >"$out/log" 2>&1 ||
    { cat "$out/log"; exit 1; }
  grep -A 14 "^| stages | in flight | link | measured" "$out/log"
  python3 - "$out/calibration.json" "$runs" <<'PY'
import json, sys
rows = [x["row"] for x in json.load(open(sys.argv[1]))["rows"]]
configs = {tuple(x["config"]) for x in json.load(open(sys.argv[2]))["runs"]}
assert len(rows) == len(configs), "expected %d configurations, got %d" % (len(configs), len(rows))
# Rows the cost model is known to miss (docs/SCALE.md, "Tensor- and expert-parallel rows"): the
# error allowed is the recorded one plus 5 points, so that a change making them worse still fails.
# Two member processes per stage of a 2-stage pipeline and 4 streams put 4 polling processes on
# 2 cores; the MoE model's experts (256 x 1024 matrices, 8 a token and layer) run slower than the
# node measurement's dense layer streams, which the cost model does not know.
known = {"1 stages x tp2 x 4 loopback": 0.16, "2 stages x tp2 x 4 loopback": 0.21,
         "moe 1 stages x tp1 x 1 loopback": 0.46, "moe 1 stages x tp1 x 4 loopback": 0.44,
         "moe 1 stages x tp2 x 1 loopback": 0.50, "moe 1 stages x tp2 x 4 loopback": 0.62}
tp_file = "s26_tp_ep" in sys.argv[2]
bad = []
for r in rows:
    name = "%s%d stages x tp%d x %d %s" % (r.get("model") and r["model"] + " " or "",
                                           r["stages"], r.get("tp", 1), r["conc"], r["link"])
    limit = known.get(name, 0.10) if tp_file else 0.10
    for who in ("plan", "sim"):
        err = r[who + "_tps"] / r["meas_tps"] - 1
        if abs(err) > limit:
            bad.append("%s: %s %+.1f%% (allowed %.0f%%)" % (name, who, 100 * err, 100 * limit))
assert not bad, "outside 10%: " + "; ".join(bad)
print("every configuration within 10% for plan and sim" + (", but the known misses within "
      "their recorded error + 5 points" if tp_file else ""))
PY
done
