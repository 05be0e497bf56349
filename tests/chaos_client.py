#!/usr/bin/env python3
"""Streams completion requests at a shoal server and records every SSE chunk with its arrival
time (chaos_test.sh). Usage: chaos_client.py PORT OUT.json N_REQUESTS MAX_TOKENS [STARTED_FILE]
Writes {"requests": [{"chunks": [...texts...], "times": [...], "finish": ..., "error": ...}]}.
Half the requests are greedy, half seeded sampling. STARTED_FILE is created once every request
has received 3 chunks (so a fault lands mid-stream)."""
import http.client, json, sys, threading, time

port, out, n, max_tokens = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
started = sys.argv[5] if len(sys.argv) > 5 else None
results = [None] * n
progress = [0] * n
lock = threading.Lock()


def run(i):
    r = {"chunks": [], "times": [], "finish": None, "error": None}
    body = {"prompt": f"Story number {i} begins", "max_tokens": max_tokens, "stream": True,
            "ignore_eos": True, "temperature": 0 if i % 2 == 0 else 0.8, "seed": 100 + i}
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = c.getresponse()
        if resp.status != 200:
            r["error"] = f"HTTP {resp.status}: {resp.read()[:200]!r}"
        else:
            done = False
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    break
                ev = json.loads(line[6:])
                if "error" in ev:
                    r["error"] = str(ev["error"])
                    break
                ch = ev["choices"][0]
                r["chunks"].append(ch.get("text", ""))
                r["times"].append(time.time())
                if ch.get("finish_reason"):
                    r["finish"] = ch["finish_reason"]
                with lock:
                    progress[i] += 1
            if not done and r["error"] is None:
                r["error"] = "stream ended without [DONE]"
    except Exception as e:  # a broken stream is a failed trial, reported, not a crash
        r["error"] = f"{type(e).__name__}: {e}"
    results[i] = r


threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
if started:
    t_end = time.time() + 60
    while time.time() < t_end:
        with lock:
            if all(p >= 3 for p in progress) or all(r is not None for r in results):
                break
        time.sleep(0.005)
    open(started, "w").write(str(time.time()))
for t in threads:
    t.join()
json.dump({"requests": results}, open(out, "w"))
