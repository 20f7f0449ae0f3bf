#!/usr/bin/env python3
"""Compares the relay's count of the internal hop with a packet capture.

Usage: relay_check.py CAPTURE.pcap RUN_FOLDER

Between two foreign tiers the harness puts a pass-through relay on the
internal hop and reads its counters (`GET /stats` on the relay's admin
listener) at the round's first due time and at its end. The capture holds
those reads too, so the round's window is found in the capture itself:
from the answer to the first read (the round's first due time) to the
last (once the round's calls have drained). TCP payload on the
relay's listener (caller ↔ relay) and on the downstream's (relay ↔
downstream) inside that window is summed each way and printed beside
run.json's `bytes.relay`. Payload that moved while a read was being
answered could fall on either side of it: it is printed as the
uncertainty. One round (`--rounds 1`), one arm per folder. Only the
standard library is used.
"""
import json
import sys
from pathlib import Path

from wire_check import segments


def port(addr):
    return int(addr.rsplit(":", 1)[1])


def main():
    pcap, folder = sys.argv[1], Path(sys.argv[2])
    run = json.loads((folder / "run.json").read_text())
    link = run["tiers"]["link"]["settings"]
    relay = run["rounds"][0]["bytes"]["relay"]
    listen, upstream, stats = port(link["listen"]), port(link["upstream"]), port(link["stats"])
    segs = [s for s in segments(pcap, head=16) if s[5] > 0]
    # The reads of the relay's counters on its stats listener (run.json's
    # link settings name it; other runs' reads on loopback are not these):
    # a request, then its answer on the same connection.
    reads = []
    for t, sport, dport, _f, _seq, _n, head in segs:
        if dport == stats and head.startswith(b"GET /stats"):
            answer = next(s[0] for s in segs if s[0] >= t and s[1] == dport and s[2] == sport)
            reads.append((t, answer))
    if len(reads) < 2:
        sys.exit("fewer than two reads of the relay's counters in %s" % pcap)
    # The first read is at the round's first due time; the last once the
    # round's calls have drained (the answers of the round's last requests
    # count in it, as they do in run.json's response figures).
    (start_req, start_ans), (end_req, end_ans) = reads[0], reads[-1]

    def window(server):
        out = {"in": 0, "out": 0, "edge": 0}
        for t, sport, dport, _f, _seq, n, _h in segs:
            if server not in (sport, dport):
                continue
            if start_req <= t <= start_ans or end_req <= t <= end_ans:
                out["edge"] += n
            elif start_ans < t < end_req:
                out["in" if dport == server else "out"] += n
        return out

    print("| leg | direction | capture (B) | relay in run.json (B) | difference |")
    print("|---|---|---:|---:|---:|")
    for leg, server in [("caller → relay", listen), ("relay → downstream", upstream)]:
        w = window(server)
        for direction, cap, ours in [
            ("request", w["in"], relay["request_wire_bytes"]),
            ("response", w["out"], relay["response_wire_bytes"]),
        ]:
            diff = (ours - cap) / cap * 100 if cap else float("nan")
            print("| %s | %s | %d | %d | %+.4f%% |" % (leg, direction, cap, ours, diff))
        if w["edge"]:
            print("| %s | while a read was answered | %d | | |" % (leg, w["edge"]))
    print("\nWindow: %.4f s from the first read's answer to the last read (%d reads of the relay's counters)."
          % (end_req - start_ans, len(reads)))


if __name__ == "__main__":
    main()
