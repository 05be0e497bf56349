#!/usr/bin/env python3
"""Regenerates the frame corpus of net_test (malformed/ must be rejected, valid/ must decode).

malformed/EXPECTED lists "file<TAB>substring of the decoder's error" for each malformed file.
Layout: docs/ARCHITECTURE.md, "net". Run from this folder: python3 make_corpus.py
"""
import os
import struct

MAGIC = 0x464E4853
TYPES = {"hello": 0x01, "challenge": 0x02, "proof": 0x03, "auth_ok": 0x04, "heartbeat": 0x10,
         "goodbye": 0x11, "control": 0x12, "activations": 0x40, "step_command": 0x41,
         "step_result": 0x42}
DATA = {0x40, 0x41, 0x42}


def frame(t, payload=b"", flags=0, tag=(0, 0, 0), version=3, magic=MAGIC, length=None):
    h = struct.pack("<IBBHI", magic, version, t, flags, len(payload) if length is None else length)
    if t in DATA:
        h += struct.pack("<QIQ", *tag)
    return h + payload


malformed = {
    "bad_magic.bin": (b"XXXX" + frame(0x10)[4:], "bad magic"),
    "magic_big_endian.bin": (frame(0x10, magic=0x5348_4E46), "bad magic"),
    "bad_version.bin": (frame(0x10, version=1), "unsupported protocol version 1"),
    "version_zero.bin": (frame(0x10, version=0), "unsupported protocol version 0"),
    # A version-2 peer (unsealed frames after the handshake) is refused at its first frame.
    "old_version_2.bin": (frame(0x01, b"\0" * 32, version=2), "unsupported protocol version 2"),
    "unknown_type.bin": (frame(0x10)[:5] + b"\x7f" + frame(0x10)[6:], "unknown message type 0x7f"),
    "type_zero.bin": (frame(0x10)[:5] + b"\x00" + frame(0x10)[6:], "unknown message type 0x00"),
    "oversized_length.bin": (frame(0x40, length=0xFFFFFFFF), "exceeds the limit"),
    "oversized_by_one.bin": (frame(0x10, length=(256 << 20) + 1), "exceeds the limit"),
    "truncated_header.bin": (frame(0x10)[:7], "truncated header"),
    "truncated_data_header.bin": (frame(0x40, b"abc", tag=(1, 2, 3))[:20], "truncated header"),
    "truncated_payload.bin": (frame(0x10, b"0123456789")[:15], "truncated heartbeat frame"),
    "truncated_activations.bin": (frame(0x40, b"\x01" * 64, tag=(7, 1, 9))[:-1],
                                  "truncated activations frame"),
    "valid_then_bad_magic.bin": (frame(0x10) + b"\xde\xad\xbe\xef" + frame(0x10)[4:],
                                 "stream offset 12: bad magic"),
    "http_request.bin": (b"GET / HTTP/1.1\r\nHost: node\r\n\r\n", "bad magic"),
    "tls_client_hello.bin": (bytes.fromhex("160301020001000200") + b"\x03\x03" + b"\0" * 32,
                             "bad magic"),
}

valid = {
    "heartbeat.bin": frame(0x10),
    "every_type.bin": b"".join(frame(t, bytes(range(i * 3)), flags=i, tag=(i, i + 1, i + 2))
                               for i, t in enumerate(sorted(TYPES.values()))),
    "activations.bin": frame(0x40, struct.pack("<4f", 1.0, -2.5, 0.0, 3.25), tag=(42, 3, 17)),
}

os.makedirs("malformed", exist_ok=True)
os.makedirs("valid", exist_ok=True)
with open("malformed/EXPECTED", "w") as manifest:
    for name, (data, expected) in sorted(malformed.items()):
        open(os.path.join("malformed", name), "wb").write(data)
        manifest.write(f"{name}\t{expected}\n")
for name, data in sorted(valid.items()):
    open(os.path.join("valid", name), "wb").write(data)
