#!/usr/bin/env python3
"""Compares a run's front-hop figures with a packet capture of the same run.

Usage: wire_check.py CAPTURE.pcap RUN_FOLDER FRONT_PORT

Reads the classic pcap format tcpdump writes (-w, Ethernet or Linux "cooked"
or loopback link types), splits the caller's front-door traffic into HTTP/1.1
exchanges per connection (a request is a run of client→server payload, its
answer the run of server→client payload that follows), keeps the round's
exchanges (those after the quiet gap in which the warm-up drained), and
prints, next to what run.json says for that round:

* wire bytes per request each way (TCP payload, as the caller's counting
  socket sees it);
* p50 of the wire time: first request byte out to last answer byte in, as
  the loopback interface saw them, against the harness's service time p50
  (actual send to the answer's last byte) and corrected p50.

Only the standard library is used.
"""
import json
import struct
import sys
from pathlib import Path


def segments(path, head=16):
    """(t, sport, dport, flags, seq, payload_len, payload_head) per TCP packet
    of a classic pcap file (Ethernet, Linux cooked v1/v2 or BSD loopback);
    the head is the payload's first `head` bytes (None: all captured)."""
    data = Path(path).read_bytes()
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        endian = "<"
    else:
        endian = ">"
        magic = struct.unpack(">I", data[:4])[0]
    nano = magic == 0xA1B23C4D
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    skip = {1: 14, 113: 16, 276: 20, 0: 4}.get(linktype, 0)
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(endian + "IIII", data[off : off + 16])
        off += 16
        frame = data[off : off + incl]
        off += incl
        t = sec + frac / (1e9 if nano else 1e6)
        ip = frame[skip:]
        if len(ip) < 20:
            continue
        version = ip[0] >> 4
        if version == 4:
            ihl = (ip[0] & 0x0F) * 4
            if ip[9] != 6:
                continue
            tcp = ip[ihl:]
            seg_len = struct.unpack(">H", ip[2:4])[0] - ihl
        elif version == 6:
            if ip[6] != 6:
                continue
            tcp = ip[40:]
            seg_len = struct.unpack(">H", ip[4:6])[0]
        else:
            continue
        if len(tcp) < 20:
            continue
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        doff = (tcp[12] >> 4) * 4
        yield t, sport, dport, tcp[13], seq, seg_len - doff, tcp[doff:] if head is None else tcp[doff : doff + head]


def packets(path):
    """(t, sport, dport, payload_len) per TCP packet."""
    for t, sport, dport, _flags, _seq, n, _head in segments(path):
        yield t, sport, dport, n


def exchanges(pcap, port):
    """(request start, answer end, request bytes, answer bytes) per exchange."""
    conns = {}
    done = []
    for t, sport, dport, n in packets(pcap):
        if n <= 0:
            continue
        to_server = dport == port
        key = sport if to_server else dport
        c = conns.setdefault(key, {"state": None})
        if to_server:
            if c["state"] != "req":
                if c["state"] == "resp":
                    done.append((c["t0"], c["t1"], c["req"], c["resp"]))
                c.update(state="req", t0=t, req=0, resp=0, t1=None)
            c["req"] += n
        else:
            if c["state"] is None:
                continue
            c["state"] = "resp"
            c["resp"] += n
            c["t1"] = t
    for c in conns.values():
        if c["state"] == "resp":
            done.append((c["t0"], c["t1"], c["req"], c["resp"]))
    return sorted(done)


def p50(values):
    v = sorted(values)
    return v[(len(v) - 1) // 2] if v else float("nan")


def main():
    pcap, folder, port = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    run = json.loads((folder / "run.json").read_text())
    rnd = run["rounds"][0]
    all_ex = exchanges(pcap, port)
    if not all_ex:
        sys.exit("no exchange on port %d in %s" % (port, pcap))
    # The round is found in the capture itself: it starts once the warm-up's
    # calls have all ended, so its first request follows the longest quiet
    # gap between two requests (at least one service time, where requests
    # at the rate are an interval apart); every exchange after it is the
    # round's. With run.json's per_request_basis "own_calls" its bytes per
    # request cover exactly those calls.
    gaps = [(b[0] - a[0], i + 1) for i, (a, b) in enumerate(zip(all_ex, all_ex[1:]))]
    first = max(gaps)[1] if gaps else 0
    inside = all_ex[first:]
    n = len(inside)
    req_b = sum(e[2] for e in inside) / n
    resp_b = sum(e[3] for e in inside) / n
    wire_p50_ms = p50([(e[1] - e[0]) * 1e3 for e in inside])
    front = rnd["bytes"]["front"]
    lat = rnd["latency"]
    rows = [
        ("exchanges of the round (after the warm-up's drain)", n, rnd["requests"]["ok"], None),
        ("wire bytes per request, harness → caller", req_b, front["request_wire_bytes_per_request"], "rel"),
        ("wire bytes per request, caller → harness", resp_b, front["response_wire_bytes_per_request"], "rel"),
        ("p50 wire time vs service time (ms)", wire_p50_ms, lat["service"]["p50_ms"], "abs"),
        ("p50 wire time vs corrected latency (ms)", wire_p50_ms, lat["corrected"]["p50_ms"], "abs"),
    ]
    print("| figure | capture | run.json | difference |")
    print("|---|---:|---:|---:|")
    for label, cap, ours, kind in rows:
        if kind == "rel":
            diff = "%+.3f%%" % ((ours - cap) / cap * 100)
        elif kind == "abs":
            diff = "%+.3f ms" % (ours - cap)
        else:
            diff = "%+d" % (ours - cap)
        fmt = (lambda v: "%.3f" % v) if isinstance(cap, float) else str
        print("| %s | %s | %s | %s |" % (label, fmt(cap), fmt(ours), diff))
    stamped = lat.get("kernel_stamped")
    if stamped is not None:
        print("\nAnswers whose end is the kernel's receive stamp (SO_TIMESTAMPNS): %d of %d."
              % (stamped, rnd["requests"]["ok"]))
    inst = run.get("instrument") or {}
    floor = inst.get("client_floor")
    if floor:
        print("\nThe harness's own measured client floor (run.json instrument): p50 %.3f ms, p99 %.3f ms."
              % (floor["p50_ms"], floor["p99_ms"]))


if __name__ == "__main__":
    main()
