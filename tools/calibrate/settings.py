# The calibration's fixed choices: request shape, configurations, probes and their reasons.
import os

# Request shape: a 1.1B-wide model (TinyLlama widths) cut to 8 layers decodes at ~10-30
# tokens/s on one core here, so N requests of P + O tokens take seconds, not minutes.
PROMPT_WORDS = 64
OUTPUT = 32
MODEL_LAYERS = 8
CONTEXT = 256  # --max-model-len: prompt (~70 tokens) + output with room to spare
# A run that has not finished in this long is stopped (the brief: each real run < 30 s).
RUN_TIMEOUT_S = 30
# The sender's share of a link's CPU (link_cpu_s_per_byte) for runs saved before session 22,
# which did not measure it: its central value over 12 measurements then, on the same host
# (loopback 0.40-0.44, the 1 Gbit/s shaper at MTU 1500 0.15-0.23).
LOOPBACK_SEND_SHARE = 0.42
SHAPED_SEND_SHARE = 0.18
# (stages, concurrency, requests, link): link None = plain loopback, "1gbit" = tbf-shaped.
CONFIGS = [
    (1, 1, 3, None),
    (2, 1, 3, None),
    (4, 1, 3, None),
    (1, 4, 8, None),
    (2, 4, 8, None),
    (4, 4, 8, None),
    (2, 1, 3, "1gbit"),
    (2, 4, 8, "1gbit"),
]
QUICK = [CONFIGS[0], CONFIGS[1], CONFIGS[3]]
# Tensor-parallel rows (issue #37), a fifth field: the members of every stage's group (`cluster up
# --parallel tp=T,pp=S`, S x T node processes of 1 thread). Beside them the 1-stage rows, so that
# TP and one node are measured in the same rounds. `--rows tp` runs these.
TP_CONFIGS = [
    (1, 1, 3, None),
    (1, 4, 8, None),
    (1, 1, 3, None, 2),
    (1, 4, 8, None, 2),
    (2, 1, 3, None, 2),
    (2, 4, 8, None, 2),
]


# Expert-parallel rows, a sixth field: the model, "moe" = a qwen3moe-shaped model (MOE_SYNTH:
# n_embd 1024, 8 layers of 64 experts, top-8, ~230 MB in Q4_0) whose experts a group of tp
# members splits (each holds 64 / tp whole experts); priced on the node the dense probes fit.
# `--rows ep` runs these.
EP_CONFIGS = [
    (1, 1, 3, None, 1, "moe"),
    (1, 4, 8, None, 1, "moe"),
    (1, 1, 3, None, 2, "moe"),
    (1, 4, 8, None, 2, "moe"),
]
MOE_SYNTH = ["--arch", "qwen3moe", "--preset", "small", "--type", "q4_0", "--seed", "7"]


def norm(c):
    """A configuration as (stages, concurrency, requests, link, tp, model): tp 1 and the
    calibration model (None) where not given."""
    c = tuple(c)
    return c[:4] + (c[4] if len(c) > 4 else 1, c[5] if len(c) > 5 else None)


ALL_CONFIGS = [norm(c) for c in CONFIGS + TP_CONFIGS + EP_CONFIGS]
# The probes' prompt: 2 words (~5 tokens), so a stage's time is nearly all decode steps.
PROBE_WORDS = 2
# The probes: (name, stages, in flight, requests, clusters a round): the calibration model served
# one stream on 1 and on 2 stages. (A 2-layer cut, used before, streamed ~11% faster served than
# the node measurements priced it on the Zen 5 host, while the 8-layer model streamed ~3% slower:
# the cut's factor made every row ~10% fast; docs/SCALE.md.) The 1-stage probe sets the level
# every row is priced on, and a stage process's speed is a draw of its own here (identical
# clusters side by side read 11.5-12.9 and 15.2-18.9 ms a token): 3 fresh clusters a round, so
# the level is the central value of 3x the rounds' draws (9 draws moved it 1.049-1.179 between
# runs).
PROBES = (("serve1", 1, 1, 3, 3), ("serve2", 2, 1, 3, 1), ("serve1b4", 1, 4, 4, 1))
# The batch probe (serve1b4: 1 stage, 4 streams in one wave, the same 2-word prompts) sets how
# much slower a served stage streams at 4 tokens a step (and 8) than the pool says: the node
# measurement's 4-token rate over its 1-token rate read 0.70-0.85 between calibrations while the
# served stages' ratio (the 1 x 4 row's runs on their own CPU against the 1-stage rows') read
# 0.72-0.83, and did not follow it, so one factor for every batch priced the 1 x 4 row 7-10%
# fast in session 16 and 6-10% slow in sessions 14-15. A 2-stream probe for the 2-token entry
# (with co-running probed at 2 streams each) was tried in session 17 and dropped: its step read
# 1.09x the 1-stream probe's slowdown, and on it plan priced the 2 x 4 rows 5-6% slower than
# without it, -11% against measured in one of two runs (docs/SCALE.md).
BATCH_PROBES = ((4, "serve1b4"),)
# The tensor-parallel probe (rounds with TP rows only): the calibration model on 1 stage of 2
# members, one stream, the probes' prompt; its members' metered collectives (`/v1/cluster`:
# seconds, calls and bytes) give what a collective call costs beyond its bytes (the members'
# meeting: messages each way, wake-ups, the wait for the slower one), priced as --collective-us.
# (name, stages, in flight, requests, clusters a round, tp).
TP_PROBES = (("servetp", 1, 1, 3, 1, 2),)
NETNS = "shoalcal%d" % os.getpid()
