#!/usr/bin/env bash
# Issue #8's target as a regression test: the stored calibration runs in
# tests/testdata/calibration/*.json (real `shoal cluster up` pipelines measured by tools/calibrate
# on the project's Zen 5 host, session 22's final code) re-priced by this build's `shoal plan`
# and `shoal sim` must stay within 10% of measured tokens/s on every configuration of every run.
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
    --probe-level-only --model "$out/cal.gguf" --out "$out" >"$out/log" 2>&1 ||
    { cat "$out/log"; exit 1; }
  grep -A 10 "^| stages | in flight | link | measured" "$out/log"
  python3 - "$out/calibration.json" <<'PY'
import json, sys
rows = [x["row"] for x in json.load(open(sys.argv[1]))["rows"]]
assert len(rows) == 8, "expected 8 configurations, got %d" % len(rows)
bad = []
for r in rows:
    for who in ("plan", "sim"):
        err = r[who + "_tps"] / r["meas_tps"] - 1
        if abs(err) > 0.10:
            bad.append("%d x %d %s: %s %+.1f%%" % (r["stages"], r["conc"], r["link"], who,
                                                   100 * err))
assert not bad, "outside 10%: " + "; ".join(bad)
print("every configuration within 10% for plan and sim")
PY
done
