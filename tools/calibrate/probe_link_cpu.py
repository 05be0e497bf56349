# Link probe (run by host.link_cpu_s_per_byte): prints the CPU seconds this machine spends per byte
# sent over 127.0.0.1 between two ends, and the share of it the sender's thread spent in sendall.
import socket, time
from link_sink import start_sink
def busy():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (f[0] + f[1] + f[2] + f[5] + f[6]) / 100.0  # user nice system irq softirq, USER_HZ
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
big = 128 << 10
start_sink(srv, big)
s = socket.create_connection(srv.getsockname())
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buf = b"\0" * big
for _ in range(20): s.sendall(buf); s.recv(1)
b0 = busy(); t0 = time.perf_counter(); time.sleep(0.6)
idle = (busy() - b0) / (time.perf_counter() - t0)
b0 = busy(); t0 = time.perf_counter(); n = 0; own = 0.0
while time.perf_counter() - t0 < 0.6:
    c0 = time.thread_time(); s.sendall(buf); own += time.thread_time() - c0
    s.recv(1); n += 1
dt = time.perf_counter() - t0
total = max(0.0, busy() - b0 - idle * dt)
print(total / (n * big), min(1.0, own / total) if total > 0 else 1.0)
