#!/usr/bin/env python3
# Tiny OpenAI-style SSE server for cli_test.sh: streams max_tokens chunks, usage, [DONE].
# Usage: sse_server.py PORT_FILE  (binds 127.0.0.1 on an ephemeral port and writes it there)
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()  # HTTP/1.0: the body ends when the connection closes
        for _ in range(req["max_tokens"]):
            time.sleep(0.005)
            self.wfile.write(b'data: {"choices":[{"text":" x"}]}\n\n')
            self.wfile.flush()
        usage = {"prompt_tokens": len(req["prompt"].split()) + 1,
                 "completion_tokens": req["max_tokens"]}
        self.wfile.write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")

ThreadingHTTPServer.request_queue_size = 1024  # listen backlog: all clients at once
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1], "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
