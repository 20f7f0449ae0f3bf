#!/usr/bin/env python3
"""The generators' own CPU a request, closed loop: the harness, wrk and oha.

    python3 bench/closed-loop-cpu.py BIN_DIR        (not CI)

bench/ratios.py's closed-loop rows compare requests per second; this says
what each generator spent to get them. One real gRPC caller in front of a
`--delay 0ms` downstream, as those rows run them; each generator closed loop
with one thread (`--load-threads 1`, `wrk -t1`, oha with
`TOKIO_WORKER_THREADS=1`) at 2 and 64 connections (CONNS), ALTS alternations
in a rotated order. CPU is the generator's own CPU-time clock over a window
inside its run (2 s after its start to 1 s before its end), requests the rate
it reports times the window, split into user and system time by the kernel's
ticks over the same window (/proc/PID/stat); the tiers' CPU a request is over
the whole run.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ratios as R  # noqa: E402  (BIN is read off this script's argv)

TICKS = os.sysconf("SC_CLK_TCK")
CONNS = [int(c) for c in os.environ.get("CONNS", "2 64").split()]
SECS = R.DUR + 1


def command(tool, front, conns):
    if tool == "harness":
        return [R.BIN + "/harness", "--caller-url", front, "--transport", "grpc", "--connections", str(conns),
                "--load-threads", "1", "--duration", "%ds" % R.DUR, "--warmup", "1s", "--quiet", "--json",
                "--out", R.OUT], None
    if tool == "wrk":
        return ["wrk", "-t", "1", "-c", str(conns), "-d", "%ds" % SECS, "-s", R.wrk_script(), front + "/v1/call"], None
    return R.oha_cmd(front, SECS, conns), R.ONE_THREAD


def rate(tool, out):
    if tool == "harness":
        return json.loads(out)["arms"][0]["rounds"][0]["throughput"]["ok_per_second"]
    if tool == "wrk":
        return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    return R.oha_rps(out)


def user_system_ticks(pid):
    """utime and stime of pid, in clock ticks (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def windowed_split(p, secs, before, after):
    """R.windowed for one process, with its user and system ticks over the
    same window: (CPU seconds, window seconds, output, (user, system))."""
    t0 = time.monotonic()
    time.sleep(before)
    a, ta, ua = R.cpu_seconds(p.pid), time.monotonic(), user_system_ticks(p.pid)
    time.sleep(max(0.0, t0 + secs - after - ta))
    b, ub = R.cpu_seconds(p.pid), user_system_ticks(p.pid)
    window = time.monotonic() - ta
    out = p.communicate()[0]
    return b - a, window, out, (ub[0] - ua[0], ub[1] - ua[1])


def main():
    settings = R.tier_settings("grpc")
    tiers = R.Tiers("real", "grpc", "0ms", settings)
    got = {}
    try:
        for conns in CONNS:
            for i in range(R.ALTS):
                tools = ["harness", "wrk", "oha"]
                for tool in tools[i % 3:] + tools[:i % 3]:
                    st = R.Steal()
                    cmd, env = command(tool, tiers.front, conns)
                    a = tiers.cpu()
                    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
                    R.STARTED.append(p)
                    cpu, window, out, ticks = windowed_split(p, SECS, before=2.0, after=1.0)
                    b = tiers.cpu()
                    rps = rate(tool, out)
                    mine = cpu / (rps * window) * 1e6
                    user, system = (t / TICKS / (rps * window) * 1e6 for t in ticks)
                    theirs = sum(b[k] - a[k] for k in b) / (rps * SECS) * 1e6
                    got.setdefault((conns, tool), []).append((rps, mine, theirs, st.percent(), user, system))
                    print("%d conns, %s: %.0f req/s, %.1f µs/req its own (user %.1f, system %.1f), tiers %.1f"
                          % (conns, tool, rps, mine, user, system, theirs), file=sys.stderr, flush=True)
    finally:
        tiers.close()
        R.stop_all()
    print("| generator | conns | req/s (median) | its CPU µs/req: median (range) | of it user / system | "
          "tiers' CPU µs/req | steal % (most) |")
    print("|---|---:|---:|---|---|---:|---:|")
    for (conns, tool), runs in sorted(got.items()):
        own = [r[1] for r in runs]
        print("| %s | %d | %s | %.1f (%.1f–%.1f) | %.1f / %.1f | %.1f | %.1f |" % (
            tool, conns, "{:,.0f}".format(statistics.median(r[0] for r in runs)), statistics.median(own), min(own),
            max(own), statistics.median(r[4] for r in runs), statistics.median(r[5] for r in runs),
            statistics.median(r[2] for r in runs), max(r[3] for r in runs)))


if __name__ == "__main__":
    main()
