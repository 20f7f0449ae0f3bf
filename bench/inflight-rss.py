#!/usr/bin/env python3
"""Memory a request in flight holds, in each tier and its plain twin.

    python3 bench/inflight-rss.py BIN_DIR   (ARMS, RATE, ALTS; not CI)

For each arm, ALTS times (default 2), the real tiers (huge pages off, their
default) and the plain twins (off too), each driven as bench/ratios.py's row
3 drives them: the harness's open loop at RATE req/s (default 5000) against
a 500 ms delay, RATE ÷ 2 requests in flight. Each process's VmRSS is read
before the load and 4 s into the measured part (/proc/PID/status); the
difference ÷ the requests in flight is what one of them holds, with its
connection (one per request in flight on HTTP/1.1). The row's CPU µs a
request is printed beside it, from the same run.
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ratios  # noqa: E402  (reads BIN_DIR from sys.argv[1])

ARMS = os.environ.get("ARMS", "rest grpc").split()
RATE = int(os.environ.get("RATE", "5000"))
ALTS = int(os.environ.get("ALTS", "2"))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def one(kind, arm, settings):
    tiers = ratios.Tiers(kind, arm, "500ms", settings)
    try:
        pids = {"caller": tiers.caller.pid, "downstream": tiers.ds.pid}
        before = {k: rss_kib(p) for k, p in pids.items()}
        during = {}

        def read():
            time.sleep(ratios.WARM + 4)
            during.update({k: rss_kib(p) for k, p in pids.items()})

        t = threading.Thread(target=read)
        t.start()
        cpu, window, achieved, _ = ratios.harness_open(tiers.front, arm, RATE, pids)
        t.join()
    finally:
        tiers.close()
    inflight = RATE * 0.5
    return {k: ((during[k] - before[k]) * 1024 / inflight, cpu[k] / (RATE * window) * 1e6) for k in pids}, achieved


def main():
    print("| arm | tier | kind | bytes a request in flight | CPU µs/req | reached |")
    print("|---|---|---|---:|---:|---:|")
    for arm in ARMS:
        settings = ratios.tier_settings(arm)
        for _ in range(ALTS):
            for kind in ("real", "plain-off"):
                got, achieved = one(kind, arm, settings)
                for tier, (held, us) in got.items():
                    print("| %s | %s | %s | %.0f | %.1f | %.3f |" % (arm, tier, kind, held, us, achieved), flush=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        ratios.stop_all()
