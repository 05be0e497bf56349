#!/usr/bin/env python3
"""Streams 4 completions at once through a router (2 greedy, 2 seeded; prompts sharing their
first bytes, so they go to one replica), writing each text and a progress count of chunks.

  router_stream_client.py PORT OUT_PREFIX PROGRESS_FILE MAX_TOKENS
"""
import json
import sys
import threading
import urllib.request

port, out, progress, max_tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
chunks = [0]
lock = threading.Lock()


def run(i):
    body = {"prompt": "Shared prefix: story number %d" % i, "max_tokens": max_tokens,
            "temperature": 0 if i < 2 else 0.9, "seed": i, "ignore_eos": True, "stream": True}
    req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port,
                                 json.dumps(body).encode(), {"Content-Type": "application/json"})
    text, done = "", False
    try:
        for line in urllib.request.urlopen(req, timeout=60):
            line = line.decode().strip()
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                j = json.loads(line[6:])
                if "error" in j:
                    text += "<error %s>" % j["error"].get("message")
                for c in j.get("choices", []):
                    text += c.get("text", "")
                    if "token_ids" in c:
                        text += "<token_ids leaked>"
                with lock:
                    chunks[0] += 1
                    open(progress, "w").write(str(chunks[0]))
    except Exception as e:  # noqa: BLE001 - recorded in the text, compared by the test
        text += "<%s>" % e
    open("%s%d" % (out, i), "w").write(text + ("" if done else "<no [DONE]>"))


threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
