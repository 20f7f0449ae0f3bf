#!/usr/bin/env python3
"""Two builds of the harness, closed loop, against the same tiers: B ÷ A.

    python3 bench/closed-loop-ab.py A_BIN_DIR B_BIN_DIR        (not CI)

One pair of real gRPC tiers (B's, `--delay 0ms`, started as the harness
starts them) is driven by A's harness, then B's, closed loop with one thread
(`--connections N --load-threads 1`), ALTS alternations (default 7), the
pair's order swapped every other one, each run DUR seconds after a 1 s
warm-up. Prints each build's answers a second in each alternation and the
ratios B ÷ A with their median, per connection count (CONNS, default
"2 64"), and the machine's steal over each count's runs.

The closed-loop rows of bench/ratios.py compare the harness with wrk and oha;
this says what a change of the harness itself moved, on the same tiers in the
same minutes, where runs on a shared VM move by 10-20% between minutes.
"""

import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
A, B = (os.path.abspath(p) for p in sys.argv[1:3])
sys.argv = [sys.argv[0], B]  # ratios reads its BIN (the tiers') off argv
sys.path.insert(0, HERE)
import ratios as R  # noqa: E402

CONNS = [int(c) for c in os.environ.get("CONNS", "2 64").split()]
ALTS = int(os.environ.get("ALTS", "7"))
DUR = int(os.environ.get("DUR", "6"))


def rate(bin_dir, front, conns):
    out = subprocess.run(
        [bin_dir + "/harness", "--caller-url", front, "--transport", "grpc", "--connections", str(conns),
         "--load-threads", "1", "--duration", "%ds" % DUR, "--warmup", "1s", "--quiet", "--json", "--out", R.OUT],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True)
    return json.loads(out.stdout)["arms"][0]["rounds"][0]["throughput"]["ok_per_second"]


def main():
    tiers = R.Tiers("real", "grpc", "0ms", R.tier_settings("grpc"))
    try:
        for conns in CONNS:
            got, steal = {A: [], B: []}, R.Steal()
            for first, second in alternations():
                for b in (first, second):
                    got[b].append(rate(b, tiers.front, conns))
            ratios = [b / a for a, b in zip(got[A], got[B])]
            print("%d conns: A %s; B %s; B ÷ A %s, median %.3f (steal %.1f%%)" % (
                conns, " ".join("%.0f" % x for x in got[A]), " ".join("%.0f" % x for x in got[B]),
                " ".join("%.3f" % r for r in ratios), statistics.median(ratios), steal.percent()), flush=True)
    finally:
        tiers.close()


def alternations():
    return [(A, B) if i % 2 == 0 else (B, A) for i in range(ALTS)]


if __name__ == "__main__":
    main()
