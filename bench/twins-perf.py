#!/usr/bin/env python3
"""Where each tier's CPU goes against its plain twin's, paced: perf samples
of the real tiers and of the twins, each driven by the harness through the
front door (--caller-url) at RATE req/s with the 500 ms delay, the same
window of each run (see bench/README.md, "Ratios: the tool against its peers,
in one run"). Not CI; needs root and Debian's linux-perf.

    python3 bench/twins-perf.py [BIN_DIR]     # ARMS="grpc rest" RATE=1000 SECS=5

For each arm, the real tiers and the twins (huge pages off in both, as the
tiers run): perf record -e cpu-clock -F 999 -g of the caller and
the downstream for SECS seconds, 4 s into a 12 s run; then, per tier, the
samples of kernel and user space, and the symbols (own cost) where the real
tier spends more samples than its twin. Files: bench/profiles/paced-*.txt.
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ratios  # noqa: E402

ARMS = os.environ.get("ARMS", "grpc rest").split()
RATE = int(os.environ.get("RATE", "1000"))
SECS = int(os.environ.get("SECS", "5"))
OUT = "bench/profiles"


def profile(arm, kind, settings):
    tiers = ratios.Tiers(kind, arm, "500ms", settings)
    data = {}
    try:
        load = subprocess.Popen(
            [ratios.BIN + "/harness", "--caller-url", tiers.front, "--transport", arm, "--qps", str(RATE),
             "--duration", "10s", "--warmup", "2s", "--quiet", "--json", "--out", ratios.OUT],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ratios.STARTED.append(load)
        time.sleep(4)
        recs = []
        for tier, p in (("caller", tiers.caller), ("downstream", tiers.ds)):
            path = "/tmp/twins-perf-%s-%s-%s.data" % (arm, kind, tier)
            recs.append((tier, path, subprocess.Popen(
                ["perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "-g", "-p", str(p.pid), "-o", path,
                 "--", "sleep", str(SECS)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        for tier, path, r in recs:
            r.wait()
            data[tier] = path
        load.wait()
    finally:
        tiers.close()
    return data


def symbols(path):
    """{symbol: own samples}, and the kernel/user split."""
    out = subprocess.run(["perf", "report", "-i", path, "--no-children", "--sort", "symbol", "--stdio",
                          "-g", "none", "--percentage", "absolute", "-F", "sample,sym"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    syms, kernel, user = {}, 0, 0
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        # The symbol, without perf's trailing IPC columns ("-  -").
        n, where, name = int(parts[0]), parts[1], re.sub(r"(\s+-)+\s*$", "", parts[2]).strip()
        syms[name] = syms.get(name, 0) + n
        if where == "[k]":
            kernel += n
        else:
            user += n
    return syms, kernel, user


def main():
    ratios.BIN = os.path.realpath(sys.argv[1] if len(sys.argv) > 1 else "target/release")
    os.makedirs(OUT, exist_ok=True)
    for arm in ARMS:
        settings = ratios.tier_settings(arm)
        # The twin with huge pages off, as the tiers run (ratios.py's "plain-off").
        runs = {kind: profile(arm, kind, settings) for kind in ("real", "plain-off")}
        for tier in ("caller", "downstream"):
            (rs, rk, ru), (ps, pk, pu) = symbols(runs["real"][tier]), symbols(runs["plain-off"][tier])
            lines = ["# %s %s at %d req/s, 500 ms delay, perf -F 999 for %d s: real kernel %d user %d; "
                     "twin kernel %d user %d" % (arm, tier, RATE, SECS, rk, ru, pk, pu),
                     "# real  twin  more  symbol (own samples)"]
            for name in sorted(set(rs) | set(ps), key=lambda s: ps.get(s, 0) - rs.get(s, 0))[:40]:
                lines.append("%6d %5d %5d  %s" % (rs.get(name, 0), ps.get(name, 0),
                                                  rs.get(name, 0) - ps.get(name, 0), name[:140]))
            path = "%s/paced-%s-%s.txt" % (OUT, arm, tier)
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            print("\n".join(lines[:14]))
    ratios.stop_all()


if __name__ == "__main__":
    main()
