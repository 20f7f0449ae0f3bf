#!/usr/bin/env python3
"""Row 3's instrument on the same processes: where its spread comes from.

    python3 bench/same-tiers.py BIN_DIR   (ARM, RATE, RUNS, SETS; not CI)

Starts the real tiers SETS times (default 2) and drives each set RUNS times
(default 5) with the harness's open loop at RATE req/s (default 1000)
against a 500 ms delay, exactly as bench/ratios.py's row 3 measures one
side. Prints each run's CPU µs a request of the caller, the downstream and
the harness, and each tier's CPU ÷ the harness's. If runs on the same
processes spread as widely as runs on fresh ones, the spread is the
machine's over time, not the processes' start; the harness does the same
work in every run, so a tier ÷ harness that spreads less names how much of
the spread all three processes share.
"""

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ratios  # noqa: E402  (reads BIN_DIR from sys.argv[1])

ARM = os.environ.get("ARM", "grpc")
RATE = int(os.environ.get("RATE", "1000"))
RUNS = int(os.environ.get("RUNS", "5"))
SETS = int(os.environ.get("SETS", "2"))


def spread(xs):
    """The coefficient of variation, in %."""
    return 100 * statistics.stdev(xs) / statistics.mean(xs)


def main():
    settings = ratios.tier_settings(ARM)
    print("| set | run | caller µs/req | downstream µs/req | harness µs/req | caller ÷ harness | downstream ÷ harness |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    got = {k: [] for k in ("caller", "downstream", "harness", "c/h", "d/h")}
    for s in range(SETS):
        tiers = ratios.Tiers("real", ARM, "500ms", settings)
        try:
            for r in range(RUNS):
                pids = {"caller": tiers.caller.pid, "downstream": tiers.ds.pid}
                cpu, window, _, _ = ratios.harness_open(tiers.front, ARM, RATE, pids)
                us = {k: v / (RATE * window) * 1e6 for k, v in cpu.items()}
                row = dict(us, **{"c/h": cpu["caller"] / cpu["harness"], "d/h": cpu["downstream"] / cpu["harness"]})
                for k in got:
                    got[k].append(row[k])
                print("| %d | %d | %.1f | %.1f | %.1f | %.3f | %.3f |" % (
                    s, r, row["caller"], row["downstream"], row["harness"], row["c/h"], row["d/h"]), flush=True)
        finally:
            tiers.close()
    if len(got["caller"]) > 1:
        print("\ncoefficient of variation over all runs: " + ", ".join("%s %.1f%%" % (k, spread(v)) for k, v in got.items()))


if __name__ == "__main__":
    try:
        main()
    finally:
        ratios.stop_all()
