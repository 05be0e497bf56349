# The calibration's real runs: `shoal cluster up` pipelines on this machine loaded by `shoal bench
# serve`, the served co-running pairs, the node measurements, and the shuffled rounds of them all.
import json
import os
import random
import re
import subprocess
import threading
import time

from host import (link_cpu_s_per_byte, loopback_latency_s, machine_cpu_s, node_cpu_s, own_cpu_s,
                  sh)
from settings import (CONTEXT, NETNS, OUTPUT, PROBE_WORDS, PROBES, PROMPT_WORDS, RUN_TIMEOUT_S,
                      TP_PROBES, norm)
from stats import idle_share, per_token


def stage_totals(port, ns):
    """The stages' compute seconds and rows so far, summed over stages (the coordinator's
    /metrics: each stage times its own forward passes, shoal_stage_busy_seconds_total)."""
    cmd = ["curl", "-s", "127.0.0.1:%s/metrics" % port]
    text = sh(cmd, timeout=10, ns=ns)
    busy = sum(float(m) for m in re.findall(r"^shoal_stage_busy_seconds_total\{[^}]*\} (\S+)",
                                            text, re.M))
    rows = sum(float(m) for m in re.findall(r"^shoal_stage_tokens_total\{[^}]*\} (\S+)", text,
                                            re.M))
    return busy, rows


def collectives(port, ns):
    """The split stages' members' collectives so far, summed over members (the coordinator's
    /v1/cluster): seconds, calls and bytes received; zeros without split stages."""
    text = sh(["curl", "-s", "127.0.0.1:%s/v1/cluster" % port], timeout=10, ns=ns)
    members = [x for s in json.loads(text).get("stages", []) for x in s.get("members", [])]
    return [sum(x.get(k, 0) for x in members) for k in
            ("collective_seconds_total", "collective_calls_total", "collective_bytes_in_total")]


def start_cluster(shoal, model, stages, conc, ns, tmp, tag="", tp=1):
    """`shoal cluster up` with S stages of 1 thread (each a group of tp members), up and
    healthy: (process, port)."""
    log = os.path.join(tmp, "up_%d_%d_%d_%s%s.log" % (stages, tp, conc, ns or "lo", tag))
    cmd = [shoal, "cluster", "up", "-m", model, "--nodes", str(stages * tp), "--threads-per-node",
           "1", "--no-measure", "--port", "0", "--max-num-seqs", str(max(conc, 1)),
           "--max-model-len", str(CONTEXT)]
    if tp > 1:
        cmd += ["--parallel", "tp=%d,pp=%d" % (tp, stages)]
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    with open(log, "w") as f:
        up = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
    port = None
    deadline = time.time() + 60
    while time.time() < deadline and up.poll() is None:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(log).read())
        if m:
            port = m.group(1)
            break
        time.sleep(0.1)
    while port and time.time() < deadline and up.poll() is None:
        curl = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                "127.0.0.1:%s/health" % port]
        code = subprocess.run(["ip", "netns", "exec", ns] + curl if ns else curl,
                              capture_output=True, text=True).stdout
        if code == "200":
            break
        time.sleep(0.1)
    else:
        port = None
    if port is None:
        stop_cluster(up)
        raise RuntimeError("cluster up did not start:\n" + open(log).read()[-2000:])
    return up, port


def stop_cluster(up):
    up.terminate()
    try:
        up.wait(10)
    except subprocess.TimeoutExpired:
        up.kill()
        up.wait()


def bench(shoal, port, n, conc, words, output, ns=None, seed=None):
    """`shoal bench serve` against the cluster at `port`: its JSON."""
    cmd = [shoal, "bench", "serve", "--url", "http://127.0.0.1:" + port, "-n", str(n),
           "--max-concurrency", str(conc), "--input-len", str(words), "--output-len", str(output),
           "--total-timeout", str(RUN_TIMEOUT_S), "--json"]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    return json.loads(sh(cmd, timeout=RUN_TIMEOUT_S + 15, ns=ns))


def measure(shoal, model, stages, conc, n, ns, tmp, words=PROMPT_WORDS, tp=1):
    up, port = start_cluster(shoal, model, stages, conc, ns, tmp, tp=tp)
    try:
        # A warm-up round first, as llama-bench and vLLM's benchmarks do: the first steps of a
        # fresh cluster at a new batch shape ran 30% slower here (38.6 tok/s cold against 56.3
        # warm for 1 stage x 4 in flight), which is start-up, not the steady state priced. Its
        # prompts come from another seed: the measured run's first prompts were otherwise served
        # from the prefix cache (1 stage x 4 in flight: mean TTFT 2.2 s, against 4.4 s priced).
        bench(shoal, port, conc, conc, words, 8, ns, seed=1)
        busy0, rows0 = stage_totals(port, ns)
        coll0 = collectives(port, ns) if tp > 1 else None
        cpu0, coord0, mach0 = node_cpu_s(up.pid), own_cpu_s(up.pid), machine_cpu_s()
        out = bench(shoal, port, n, conc, words, OUTPUT, ns)
        mach1 = machine_cpu_s()
        busy1, rows1 = stage_totals(port, ns)
        if tp > 1:
            # The members' heartbeat answers carry their counters: one more after the last step.
            time.sleep(0.3)
            out["collective"] = [b - a for a, b in zip(coll0, collectives(port, ns))]
        out["stage_cpu_s"] = node_cpu_s(up.pid) - cpu0
        # Where the cores went (diagnostics, not priced): the coordinator's own CPU, and the
        # whole machine's busy and total CPU seconds over the run (the load generator, the
        # kernel's network work and any other tenant included; busy over total is how full
        # the cores were).
        out["coord_cpu_s"] = own_cpu_s(up.pid) - coord0
        out["machine_busy_s"], out["machine_cpu_s"] = mach1[0] - mach0[0], mach1[1] - mach0[1]
        out["stage_busy_s"], out["stage_rows"] = busy1 - busy0, rows1 - rows0
        return out
    finally:
        stop_cluster(up)


def measure_corun(shoal, model, tmp):
    """Served co-running: two 1-stage clusters serving one stream each (the probe's prompt),
    each alone in turn, then both at once, then alone again; the stages' compute a row at once
    over alone, each read over a 1.5 s window inside its run (0.8 s in; a run lasts ~3 s), so
    that the faster cluster's end does not leave the other streaming alone inside the window.
    The same two processes both ways, so their own speeds cancel: started side by side, two
    identical clusters here read 11.5-12.9 and 15.2-18.9 ms a token, and the node's co-running
    measurement (threads of one process, short passes) read 1.00-1.10 at 1 token between
    calibrations while served stages read 0.97-1.16, median 1.01.
    The stages' busy time is wall time: together it also holds the time the other cluster's
    processes (coordinator, load generator, network stack) took the core, which the shared-core
    pricing (--host-cores) charges apart. Their CPU seconds a row (`ratio_cpu`, from /proc) leave
    that out: 1.016-1.087 where busy read 1.047-1.155 in four pairs, and 0.97-1.05 against
    1.03-1.13 (medians of 12) in session 20's runs. Recorded beside `ratio`, which prices: priced
    on `ratio_cpu` instead, four session-20 runs read worse (docs/SCALE.md)."""
    ups = []
    try:
        for tag in ("a", "b"):
            ups.append(start_cluster(shoal, model, 1, 1, None, tmp, tag))
        for _, port in ups:
            bench(shoal, port, 1, 1, PROBE_WORDS, 8, seed=1)  # warm-up

        def window(which):
            """(busy, CPU) seconds a row of each cluster in `which` over the window."""
            threads = [threading.Thread(target=bench, args=(shoal, port, 6, 1, PROBE_WORDS,
                                                             OUTPUT)) for _, port in which]
            for t in threads:
                t.start()
            time.sleep(0.8)
            first = [stage_totals(port, None) + (node_cpu_s(up.pid),) for up, port in which]
            time.sleep(1.5)
            last = [stage_totals(port, None) + (node_cpu_s(up.pid),) for up, port in which]
            for t in threads:
                t.join()
            return [((b1 - b0) / (r1 - r0), (c1 - c0) / (r1 - r0))
                    for (b0, r0, c0), (b1, r1, c1) in zip(first, last) if r1 > r0]

        alone = window(ups[:1]) + window(ups[1:])
        together = window(ups)
        alone += window(ups[:1]) + window(ups[1:])
        full = len(together) == 2 and len(alone) == 4
        ratio = lambda i: (sum(x[i] for x in together) / 2) / (sum(x[i] for x in alone) / 4)
        return dict(alone=[x[0] for x in alone], together=[x[0] for x in together],
                    ratio=ratio(0) if full else None, alone_cpu=[x[1] for x in alone],
                    together_cpu=[x[1] for x in together], ratio_cpu=ratio(1) if full else None)
    finally:
        for up, _ in ups:
            stop_cluster(up)


def measure_node(shoal, model, path):
    """This machine as one 1-thread node sees it, measured once (~2.8 s)."""
    sh([shoal, "plan", "-m", model, "-d", "local", "-t", "1", "--save-device", path])
    return json.load(open(path))


def run_round(shoal, models, tmp, m, tasks, path):
    """One round's tasks (probes, a co-running pair, rows) in their order, into `m`; models:
    a row's model tag -> its file (None: the calibration model)."""
    model = models[None]
    for kind, task in tasks:
        if kind == "probe":
            k, stages, conc, n, _ = task[:5]
            tp = task[5] if len(task) > 5 else 1
            r = measure(shoal, model, stages, conc, n, None, tmp, words=PROBE_WORDS, tp=tp)
            m.probe.setdefault(k, []).append(r)
            coll = r.get("collective")
            print("  probe %s: %.2f ms per output token, %.2f ms busy%s" % (
                k, r["mean_e2el_ms"] / OUTPUT, per_token(r) * 1e3,
                ", collectives %.1f us a call (%d calls)" % (1e6 * coll[0] / coll[1], coll[1])
                if coll and coll[1] else ""), flush=True)
            continue
        if kind == "corun":
            m.corun.append(measure_corun(shoal, model, tmp))
            if m.corun[-1]["ratio"]:
                print("  served co-running: %.3f, by CPU %.3f (ms a row alone %s, "
                      "together %s)" % (
                          m.corun[-1]["ratio"], m.corun[-1]["ratio_cpu"],
                          ", ".join("%.2f" % (x * 1e3) for x in m.corun[-1]["alone"]),
                          ", ".join("%.2f" % (x * 1e3) for x in m.corun[-1]["together"])),
                      flush=True)
            m.nodes.append(measure_node(shoal, model, path))
            continue
        st, conc, n, link, tp, tag = norm(task)
        r = measure(shoal, models[tag], st, conc, n, NETNS if link else None, tmp, tp=tp)
        m.nodes.append(measure_node(shoal, model, path))
        print("  %s%d stages%s x %d in flight (%s): %.2f tok/s, TTFT %.0f ms, stages busy "
              "%.2f s (CPU %.2f s, coordinator %.2f s, cores idle %.0f%%); node: weight "
              "streaming %s GB/s (1, 2, 4, 8 tokens)" % (
                  tag + ": " if tag else "", st, " of %d members" % tp if tp > 1 else "", conc,
                  link or "loopback",
                  r["output_throughput"],
                  r["mean_ttft_ms"], r["stage_busy_s"], r["stage_cpu_s"],
                  r["coord_cpu_s"], 100 * idle_share(r), ", ".join(
                      "%.1f" % (x / 1e9) for x in m.nodes[-1].get("weight_bw_batch", []))),
              flush=True)
        m.meas.append((st, conc, n, link, tp, tag, r))


def measure_rounds(shoal, models, tmp, m, configs, have_ns, repeat, path):
    """The node once, then `repeat` rounds, each running the probes and every configuration
    once (the shaped ones where the namespace is up), into `m`."""
    model = models[None]
    tp_rows = any(norm(c)[4] > 1 for c in configs)
    probes = PROBES + (TP_PROBES if tp_rows else ())
    m.probe = {k[0]: [] for k in probes}
    m.nodes.append(measure_node(shoal, model, path))
    # Round-robin: each round runs the probes and every configuration once, so a
    # slow spell of this shared host (one configuration's 5 runs in a row read 46.7, 44.2,
    # 37.9, 33.1 and 35.9 tokens/s as its stages' busy time rose 35%) falls on every row
    # and probe alike rather than on one row, and a row's central value is the typical
    # moment.
    # Each round runs them in an order of its own (seeded, so every calibration draws the
    # same orders). Every run starts new stage processes, whose
    # memory the kernel hands out from what the runs before freed, and a stage process's
    # speed is a draw that stays with the process (identical clusters side by side read
    # 11.5-12.9 and 15.2-18.9 ms a token). In a fixed order every round, a configuration
    # followed the same runs each time, and its runs' speeds agreed with each other more
    # than with the other calibrations': the 1 x 1 row's stage read 21.2 and 23.6 ms an
    # output token (medians of 12) in two runs while the 1-stage probe read 19.1 and 17.3.
    order = random.Random(14)
    for rnd in range(max(1, repeat)):
        t0 = time.time()
        tasks = [("probe", p) for p in probes for _ in range(p[4])] + [("corun", None)]
        tasks += [("row", c) for c in configs if have_ns or not c[3]]
        order.shuffle(tasks)
        print("round %d" % (rnd + 1), flush=True)
        run_round(shoal, models, tmp, m, tasks, path)
        print("  (%.1f s)" % (time.time() - t0), flush=True)
    m.lat_ns, m.bw_ns = loopback_latency_s(NETNS) if have_ns else (m.lat, m.lo_bw)
    m.cpu_ns, m.ns_share = link_cpu_s_per_byte(NETNS) if have_ns else (m.lo_cpu, m.lo_share)
    print("1 Gbit/s link: one-way latency %.1f us, %.0f MB/s, %.2f ns of CPU per byte "
          "(%.2f of it in the sender's send)" % (m.lat_ns * 1e6, m.bw_ns / 1e6, m.cpu_ns * 1e9,
                                                 m.ns_share), flush=True)
    m.load = sh(["uptime"]).strip()
    print("load after measurements:", m.load, flush=True)
