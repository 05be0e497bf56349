# Link probe (run by host.loopback_latency_s, in a network namespace for the shaped link): prints
# the one-way TCP latency (s) and bandwidth (bytes/s) on 127.0.0.1 as a pipeline hop finds them.
import socket, threading, time
from link_sink import start_sink
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
port = srv.getsockname()[1]
def echo():
    c, _ = srv.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = c.recv(1)
        if not b: return
        c.sendall(b)
threading.Thread(target=echo, daemon=True).start()
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for _ in range(200): s.sendall(b"x"); s.recv(1)
# A pipeline hop reaches a receiver that has waited a whole stage step (~2-15 ms here), not
# one spinning in a ping-pong: each round trip follows 5 ms of idle, median of 200 (~1 s). On
# this VM an idle receiver answered ~2x slower than a busy one.
rtts = []
for _ in range(200):
    time.sleep(0.005)
    t = time.perf_counter(); s.sendall(b"x"); s.recv(1); rtts.append(time.perf_counter() - t)
lat = sorted(rtts)[len(rtts) // 2] / 2
# Bandwidth as a hop finds it: one 128 KiB message (a logits row of a 32k vocabulary) after
# 5 ms idle, acknowledged with 1 byte, median of 100: its time less the 1-byte round trip is
# what the bytes add. Through tc tbf at 1 Gbit/s this read ~2x the 1 ms the rate says (TCP's
# window and the shaper's bursts), which a 64 MiB stream at the line rate did not show.
big = 128 << 10
start_sink(srv, big)
s2 = socket.create_connection(("127.0.0.1", port))
s2.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buf = b"\0" * big
# Each big message is paired with a 1-byte round trip after the same idle, and the bandwidth
# comes from the median of the pairs' differences: medians taken apart read the latency 12-27
# us between runs, and once its double exceeded the big message's median the bytes took
# "no time" (1310 GB/s).
diffs = []
for i in range(110):
    time.sleep(0.005)
    t = time.perf_counter(); s.sendall(b"x"); s.recv(1); small = time.perf_counter() - t
    time.sleep(0.005)
    t = time.perf_counter(); s2.sendall(buf); s2.recv(1)
    diffs.append(time.perf_counter() - t - small)
d_big = sorted(diffs[10:])[len(diffs[10:]) // 2]
print(lat, big / max(d_big, 1e-6))
