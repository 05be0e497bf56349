# The receiving end of both link probes (probe_loopback.py, probe_link_cpu.py): takes one
# connection on a listening socket and answers every `size`-byte message with one byte.
import socket
import threading


def start_sink(srv, size):
    def sink():
        c, _ = srv.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            got = 0
            while got < size:
                b = c.recv(size - got)
                if not b:
                    return
                got += len(b)
            c.sendall(b"k")

    threading.Thread(target=sink, daemon=True).start()
