#!/usr/bin/env python3
"""Checks a streaming arm's wire bytes per item against a packet capture.

Usage:
  stream_wire_check.py CAPTURE.pcap RUN_FOLDER FRONT_PORT SS_LOG [--json OUT]
  stream_wire_check.py --summary OUT.jsonl

CAPTURE.pcap is a classic pcap of loopback TCP taken while the run went
(tcpdump -w, any snaplen that keeps the TCP header and the first bytes of
payload: -s 128 does); RUN_FOLDER holds the arm's run.json (found below it);
FRONT_PORT is the run's --caller-port; SS_LOG is `ss -Htlnp` output taken
while the tiers were up, to tell each tier's listening ports apart (the pid
of each tier is in run.json).

For the measured round (one round, `--rounds 1`) and each hop:

* front: harness <-> caller, the caller's front port (FRONT_PORT); its
  counters are the caller's, read through the caller's admin /stats;
* internal: caller <-> downstream, the downstream listener the caller calls
  (run.json tiers.caller.settings.target); its counters are the downstream's,
  read through the downstream's admin /stats,

it sums the TCP payload the capture saw each way between the two /stats reads
that bound the round (retransmitted sequence ranges counted once), divides by
the items run.json divides by (stream.internal.items, the items the
downstream produced in the window; stream.front.items, the items the harness
received), and prints that next to run.json's *_wire_bytes_per_item.

Window alignment. run.json gives the window as started_seconds and
window_seconds from the run's origin (started_at is only to the second, too
coarse). The origin is "just before the first due request", so the first
payload byte sent to FRONT_PORT marks it, to a few ms. That predicts when the
round's two counter snapshots happened; each snapshot is a fresh connection
per tier carrying `GET /stats` to the tier's admin port, so each boundary is
snapped to the tier's own GET nearest the prediction (the offset is printed;
it should be a few ms). The counters are read by the tier between that GET's
arrival and its answer's first byte; bytes of the hop seen in that gap are
ambiguous and printed as "edge" bytes (the bound of any disagreement that
alignment can cause). The boundary used is the GET's arrival.

Per item (the capture must keep whole payloads: tcpdump -s 0): on the
front hop it reassembles each connection's answers, decodes their chunks,
and stamps each NDJSON item with the capture time of the packet that
carried its line's last byte, as the harness means to with its kernel
stamps. The round's streams are the run's last
requests.sent POSTs. Each item says when it was due and when it was
made (dueUnixNanos, producedUnixNanos), so the capture gives its delay (due
to arrival) and transit (made to arrival), whose p50/p99/p99.9 are printed
beside run.json's stream.item_delay and stream.item_transit (a build older
than those two meant produced-to-arrival by item_delay: it is then set
against the capture's transit).

Only the standard library is used. The pcap reading is bench/wire_check.py's
(`segments`: TCP flags, sequence numbers and the payload too).
"""
import bisect
import glob
import json
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire_check import segments  # noqa: E402

SYN, ACK = 0x02, 0x10


def new_bytes(state, key, seq, n):
    """Bytes of a segment beyond the highest sequence number seen on its flow."""
    end = (seq + n) & 0xFFFFFFFF
    hi = state.get(key)
    if hi is None:
        state[key] = end
        return n
    ahead = (end - hi) & 0xFFFFFFFF
    if ahead == 0 or ahead >= 1 << 31:
        return 0
    state[key] = end
    return min(ahead, n)


def reassemble(pkts, key, last_copy=False):
    """One direction of one connection: its bytes in order and, for each
    packet that brought new bytes, (end offset, capture time). With
    `last_copy`, bytes sent again take the time of their last copy: on
    loopback a copy is sent again when the first was dropped on its way in,
    and the one that got through is the receiver's."""
    data, ends, isn = bytearray(), [], None
    for t, sp, dp, fl, seq, n, pay in pkts:
        if (sp, dp) != key:
            continue
        if fl & SYN:
            isn = (seq + 1) & 0xFFFFFFFF
            continue
        if n <= 0 or isn is None:
            continue
        if len(pay) < n:
            sys.exit("the capture cut payloads short (take it with -s 0)")
        off = (seq - isn) & 0xFFFFFFFF
        if off > len(data):
            sys.exit("bytes missing from the capture on %s (dropped by the kernel?)" % (key,))
        if last_copy and off < len(data):
            # Every packet end this copy covers again now dates from it.
            upto = min(off + n, len(data))
            ends[:] = [(e, t if off < e <= upto else te) for e, te in ends]
        fresh = pay[len(data) - off:]
        if fresh:
            data += fresh
            ends.append((len(data), t))
    return bytes(data), ends


def time_of(ends, offset):
    """Capture time of the packet that brought byte `offset`."""
    i = bisect.bisect_right([e for e, _ in ends], offset)
    return ends[i][1]


def answers(data):
    """Each HTTP/1.1 answer's NDJSON lines as (offset of the line's last
    byte, line), chunked bodies decoded; an answer with a length has none."""
    pos, out = 0, []
    while pos < len(data):
        head_end = data.find(b"\r\n\r\n", pos)
        if head_end < 0:
            break
        head = data[pos:head_end].decode("latin-1").lower()
        pos = head_end + 4
        lines, line, line_offsets = [], bytearray(), []
        m = re.search(r"content-length:\s*(\d+)", head)
        if m:
            pos += int(m.group(1))
            out.append(lines)
            continue
        while True:
            le = data.find(b"\r\n", pos)
            if le < 0:
                return out
            size = int(data[pos:le].split(b";")[0], 16)
            pos = le + 2
            if size == 0:
                pos = data.find(b"\r\n", pos) + 2
                break
            for i in range(pos, pos + size):
                b = data[i]
                if b == 0x0A:
                    lines.append((i, bytes(line)))
                    line = bytearray()
                else:
                    line.append(b)
            pos += size + 2
        out.append(lines)
    return out


def wire_items(pkts, front_port, sent, last_copy=False):
    """(delay µs or None, transit µs, lateness µs or None) of every item of
    the round's streams, stamped at the packet that completed it. The round
    is the run's last segment (`--rounds 1`): its streams are the last
    `sent` POSTs (a boundary read can come after the round's first POST on
    a busy machine, so their times cannot tell)."""
    keys = {(sp, dp) for t, sp, dp, fl, seq, n, pay in pkts if dp == front_port and fl & SYN}
    streams = []
    for c2s in keys:
        req, req_ends = reassemble(pkts, c2s)
        resp, resp_ends = reassemble(pkts, (c2s[1], c2s[0]), last_copy)
        posts = [time_of(req_ends, m.start()) for m in re.finditer(rb"POST ", req)]
        streams += [(t, lines, resp_ends) for t, lines in zip(posts, answers(resp))]
    streams.sort(key=lambda s: s[0])
    items = []
    for _, lines, resp_ends in streams[len(streams) - sent:]:
        if True:
            for offset, line in lines:
                item = json.loads(line)
                if "error" in item:
                    continue
                arrived_ns = time_of(resp_ends, offset) * 1e9
                made = int(item["producedUnixNanos"])
                due = int(item.get("dueUnixNanos", 0))
                items.append(((arrived_ns - due) / 1e3 if due else None, (arrived_ns - made) / 1e3,
                              (made - due) / 1e3 if due else None))
    return items


def quantile(values, q):
    """The value at quantile q as HdrHistogram reads it: the smallest with
    at least q of the values at or below it."""
    v = sorted(values)
    if not v:
        return None
    return v[max(0, min(len(v) - 1, int(-(-q * len(v) // 1)) - 1))]


def per_item(pkts, front_port, sent, stream):
    """The capture's per-item delay and transit beside run.json's."""
    old = "item_transit" not in stream
    rows = {}
    for copy in (False, True):
        got = wire_items(pkts, front_port, sent, last_copy=copy)
        delay = [max(d, 0) for d, _, _ in got if d is not None]
        transit = [max(t, 0) for _, t, _ in got]
        rows.update(rows_of(stream, old, delay, transit, " (last copy)" if copy else ""))
    # Where no byte was sent twice, the two readings are one.
    if all(rows[k]["wire_ms"] == rows[k + " (last copy)"]["wire_ms"] for k in ("delay", "transit")):
        del rows["delay (last copy)"], rows["transit (last copy)"]
    return rows


def rows_of(stream, old, delay, transit, suffix):
    rows = {}
    for name, wire, ours in (("delay", delay, None if old else stream.get("item_delay")),
                             ("transit", transit, stream.get("item_delay") if old else stream.get("item_transit"))):
        name += suffix
        rows[name] = {
            "wire_count": len(wire),
            "run_count": (ours or {}).get("count"),
            "wire_ms": {q: (quantile(wire, x) or 0) / 1e3 for q, x in (("p50", .5), ("p99", .99), ("p999", .999))}
            if wire else None,
            "run_ms": {q: ours.get(q + "_ms") for q in ("p50", "p99", "p999")} if ours else None,
        }
    return rows


def listening_ports(ss_log):
    """pid -> set of listening ports, from `ss -Htlnp` output."""
    ports = defaultdict(set)
    with open(ss_log) as f:
        for line in f:
            m = re.search(r":(\d+)\s+\S+:\S+\s+users:\(\((.*)\)\)", line)
            if not m:
                continue
            for pid in re.findall(r"pid=(\d+)", m.group(2)):
                ports[int(pid)].add(int(m.group(1)))
    return ports


def find_run(folder):
    hits = sorted(glob.glob(os.path.join(folder, "**", "run.json"), recursive=True))
    if len(hits) != 1:
        sys.exit("expected one run.json under %s, found %d" % (folder, len(hits)))
    with open(hits[0]) as f:
        return json.load(f), hits[0]


def analyse(pcap, folder, front_port, ss_log):
    run, run_path = find_run(folder)
    if len(run["rounds"]) != 1:
        sys.exit("one measured round expected (--rounds 1), found %d" % len(run["rounds"]))
    rnd = run["rounds"][0]
    tiers = run["tiers"]
    target = tiers["caller"]["settings"].get("target") or ""
    m = re.search(r":(\d+)/?$", target)
    if not m:
        sys.exit("no downstream port in tiers.caller.settings.target (%r)" % target)
    internal_port = int(m.group(1))

    pkts = list(segments(pcap, head=None))
    # Requests to the admin ports: the first payload of each connection.
    first_payload = {}  # (client port, server port) -> (t, head)
    answer = {}  # (client port, server port) -> t of the server's first payload
    for t, sp, dp, fl, seq, n, head in pkts:
        if n > 0 and (sp, dp) not in first_payload and (dp, sp) not in first_payload:
            first_payload[(sp, dp)] = (t, head)
        elif n > 0 and (dp, sp) in first_payload and (dp, sp) not in answer:
            answer[(dp, sp)] = t
    stats_ports = {dp for (sp, dp), (t, head) in first_payload.items() if head.startswith(b"GET /stats")}

    by_pid = listening_ports(ss_log)
    admin = {}
    for tier in ("caller", "downstream"):
        pid = tiers[tier].get("pid")
        mine = by_pid.get(pid, set()) & stats_ports
        if len(mine) != 1:
            sys.exit("cannot tell %s's admin port: pid %s listens on %s, /stats went to %s"
                     % (tier, pid, sorted(by_pid.get(pid, [])), sorted(stats_ports)))
        admin[tier] = mine.pop()
    if internal_port not in by_pid.get(tiers["downstream"].get("pid"), set()):
        print("note: the caller's target port %d is not among the downstream's listening ports %s"
              % (internal_port, sorted(by_pid.get(tiers["downstream"].get("pid"), []))))

    front_reqs = [t for t, sp, dp, fl, seq, n, head in pkts if dp == front_port and n > 0]
    if not front_reqs:
        sys.exit("no traffic to the front port %d" % front_port)
    origin = front_reqs[0]
    lo_pred = origin + rnd["started_seconds"]
    hi_pred = lo_pred + rnd["window_seconds"]

    def reads(port):
        return sorted((t, answer.get(k, t)) for k, (t, head) in first_payload.items()
                      if k[1] == port and head.startswith(b"GET /stats"))

    def snap(port, predicted):
        got = min(reads(port), key=lambda r: abs(r[0] - predicted))
        return got  # (GET arrival, answer's first byte)

    hops = {"front": (front_port, "caller"), "internal": (internal_port, "downstream")}
    out = {"arm": run["config"]["transport"], "run_json": run_path, "hops": {}}
    for hop, (port, tier) in hops.items():
        a = admin[tier]
        (b0, b0_end), (b1, b1_end) = snap(a, lo_pred), snap(a, hi_pred)
        seqs = {}
        got = {"request": 0, "response": 0}
        edge = {"request": 0, "response": 0}
        retrans = 0
        conns = set()
        for t, sp, dp, fl, seq, n, head in pkts:
            if port not in (sp, dp):
                continue
            if fl & SYN:
                seqs[(sp, dp)] = (seq + 1) & 0xFFFFFFFF
                if dp == port and not fl & ACK and b0 <= t < b1:
                    conns.add(sp)
                continue
            if n <= 0:
                continue
            fresh = new_bytes(seqs, (sp, dp), seq, n)
            retrans += n - fresh
            way = "request" if dp == port else "response"
            if b0 <= t < b1:
                got[way] += fresh
            if b0 <= t <= b0_end or b1 <= t <= b1_end:
                edge[way] += fresh
        st = rnd["stream"][hop]
        tot = rnd["bytes"][hop]
        items = st["items"]
        out["hops"][hop] = {
            "port": port,
            "admin_port": a,
            "items": items,
            "start_offset_ms": (b0 - lo_pred) * 1e3,
            "end_offset_ms": (b1 - hi_pred) * 1e3,
            "read_gap_ms": [(b0_end - b0) * 1e3, (b1_end - b1) * 1e3],
            "window_s": b1 - b0,
            "connections_opened": [len(conns), tot.get("connections_opened")],
            "retransmitted_bytes": retrans,
            "rows": {},
        }
        for way in ("request", "response"):
            ours = st.get(way + "_wire_bytes_per_item")
            total = tot.get(way + "_wire_bytes")
            out["hops"][hop]["rows"][way] = {
                "run_per_item": ours,
                "cap_per_item": got[way] / items if items else None,
                "run_total": total,
                "cap_total": got[way],
                "edge_bytes": edge[way],
            }
    out["window"] = {"json_s": rnd["window_seconds"], "started_seconds": rnd["started_seconds"]}
    out["items"] = per_item(pkts, front_port, rnd["requests"]["sent"], rnd["stream"])
    return out


def pct(a, b):
    if a is None or b in (None, 0):
        return float("nan")
    return (a - b) / b * 100


DIRS = {("front", "request"): "harness → caller", ("front", "response"): "caller → harness",
        ("internal", "request"): "caller → downstream", ("internal", "response"): "downstream → caller"}


def print_detail(o):
    print("run.json: %s" % o["run_json"])
    print("window (run.json): %.6f s from %.6f s after the origin" % (o["window"]["json_s"], o["window"]["started_seconds"]))
    for hop, h in o["hops"].items():
        print("%s hop: port %d, counters read on admin port %d; boundaries snapped %+.2f ms / %+.2f ms "
              "from prediction, GET→answer %.2f / %.2f ms; capture window %.6f s; connections opened "
              "capture %d / run.json %s; retransmitted bytes %d"
              % (hop, h["port"], h["admin_port"], h["start_offset_ms"], h["end_offset_ms"],
                 h["read_gap_ms"][0], h["read_gap_ms"][1], h["window_s"], h["connections_opened"][0],
                 h["connections_opened"][1], h["retransmitted_bytes"]))
    print()
    print("| hop | direction | items | run.json B/item | capture B/item | diff | run.json total | capture total | edge bytes |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for hop, h in o["hops"].items():
        for way, r in h["rows"].items():
            print("| %s | %s | %d | %.4f | %.4f | %+.3f%% | %s | %d | %d |"
                  % (hop, DIRS[(hop, way)], h["items"], r["run_per_item"], r["cap_per_item"],
                     pct(r["run_per_item"], r["cap_per_item"]), r["run_total"], r["cap_total"], r["edge_bytes"]))


def print_items(o):
    """Per-item delay and transit, run.json against the capture."""
    print()
    print("| per item | items run.json / capture | p50 run.json / capture | p99 run.json / capture | p99 diff | "
          "p99.9 run.json / capture |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in o.get("items", {}).items():
        run, wire = r["run_ms"] or {}, r["wire_ms"] or {}

        def pair(q):
            a, b = run.get(q), wire.get(q)
            return "%s / %s" % ("-" if a is None else "%.3f" % a, "-" if b is None else "%.3f" % b)

        d = run.get("p99") - wire.get("p99") if run.get("p99") is not None and wire.get("p99") is not None else None
        print("| %s | %s / %d | %s | %s | %s | %s |" % (name, r["run_count"], r["wire_count"], pair("p50"), pair("p99"),
                                                    "-" if d is None else "%+.3f ms" % d, pair("p999")))


def print_summary(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    print("| arm | hop | direction | run.json B/item | capture B/item | diff | within 0.5% |")
    print("|---|---|---|---:|---:|---:|---|")
    for o in rows:
        for hop, h in o["hops"].items():
            for way, r in h["rows"].items():
                d = pct(r["run_per_item"], r["cap_per_item"])
                print("| %s | %s | %s | %.3f | %.3f | %+.3f%% | %s |"
                      % (o["arm"], hop, DIRS[(hop, way)], r["run_per_item"], r["cap_per_item"], d,
                         "yes" if abs(d) <= 0.5 else "**no**"))


def print_items_summary(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    print("| arm | per item | p99 run.json (ms) | p99 capture (ms) | diff (ms) | within 0.2 ms |")
    print("|---|---|---:|---:|---:|---|")
    for o in rows:
        for name, r in o.get("items", {}).items():
            a, b = (r["run_ms"] or {}).get("p99"), (r["wire_ms"] or {}).get("p99")
            if a is None or b is None:
                print("| %s | %s | %s | %s | - | - |" % (o["arm"], name, a, b))
                continue
            print("| %s | %s | %.3f | %.3f | %+.3f | %s |"
                  % (o["arm"], name, a, b, a - b, "yes" if abs(a - b) <= 0.2 else "**no**"))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--summary":
        print_summary(sys.argv[2])
        print()
        print_items_summary(sys.argv[2])
        return
    if len(sys.argv) not in (5, 7):
        sys.exit(__doc__)
    o = analyse(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
    print_detail(o)
    print_items(o)
    if len(sys.argv) == 7 and sys.argv[5] == "--json":
        with open(sys.argv[6], "a") as f:
            f.write(json.dumps(o) + "\n")


if __name__ == "__main__":
    main()
