#!/usr/bin/env python3
"""Issue 33's representative-work check: what the own-contract path costs
each tier against the built-in path, for the same calls, in one run.

    python3 bench/contract-overhead.py [BIN_DIR]     (default target/release)

The built-in path is `--items 10` (generated prost types in every tier).
The own-contract path is the same contract given as a team's own
(`--proto proto/bench/v1/bench.proto --call bench.v1.Downstream/Fetch`),
its data the built-in path's own calls (`cargo run --release -p contract
--example builtin_data`: the requests the harness makes and the answers the
built-in downstream gives them), so both paths carry the same protobuf
message bytes (the JSON arm's differ: the built-in REST API writes ids as
numbers, the proto3 JSON mapping writes 64-bit ids as strings; the bytes
columns show it).

Per arm, ALTS alternations (default 3) of one harness run per path, the
pair's order swapped every other one, at RATE req/s (default 1000), 20 ms
delay, 10 s measured after 3 s of warm-up, one round each. Each row: the
tier's CPU µs per request on both paths (medians of the alternations), the
ratio own ÷ built-in (median and range), the internal hop's message bytes
per request on both, and the machine's steal over the row (median, most).
The target: own ÷ built-in ≤ 1.10 per tier; where it is over, the row is
the measured overhead the report states.

QUICK=1 shortens every run (a smoke test, not a result).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release"
QUICK = bool(os.environ.get("QUICK"))
ALTS = int(os.environ.get("ALTS", "3"))
RATE = int(os.environ.get("RATE", "1000"))
ARMS = os.environ.get("ARMS", "grpc rest").split()
DUR, WARM = ("3s", "1s") if QUICK else ("10s", "3s")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = tempfile.mkdtemp(prefix="contract-overhead-")


def data():
    """The built-in path's calls as data files: enough distinct requests that
    the own path's ids have the digits most of the built-in run's have."""
    folder = os.path.join(OUT, "data")
    subprocess.run(
        ["cargo", "run", "-q", "--release", "-p", "contract", "--example", "builtin_data", "--", folder, "10", "64"],
        cwd=ROOT,
        check=True,
    )
    return os.path.join(folder, "requests.jsonl"), os.path.join(folder, "answers.jsonl")


def run(arm, path, files, k):
    out = os.path.join(OUT, f"{arm}-{path}-{k}")
    cmd = [
        os.path.join(BIN, "harness"), "--transport", arm, "--qps", str(RATE), "--duration", DUR,
        "--warmup", WARM, "--rounds", "1", "--delay", "20ms", "--quiet", "--out", out,
    ]
    if path == "own":
        cmd += ["--proto", os.path.join(ROOT, "proto/bench/v1/bench.proto"), "--call", "bench.v1.Downstream/Fetch",
                "--request-data", files[0], "--response-data", files[1]]
    subprocess.run(cmd, cwd=ROOT, check=True)
    (folder,) = [os.path.join(out, d) for d in os.listdir(out)]
    with open(os.path.join(folder, "run.json")) as f:
        r = json.load(f)["rounds"][0]
    assert r["requests"]["ok"] == r["requests"]["sent"], f"{arm} {path}: {r['requests']}"
    hop = r["bytes"]["internal"]
    return {
        "caller": r["resources"]["caller"]["cpu_us_per_request"],
        "downstream": r["resources"]["downstream"]["cpu_us_per_request"],
        "bytes": (hop["request_message_bytes_per_request"], hop["response_message_bytes_per_request"]),
        "steal": r.get("steal_percent"),
    }


def main():
    files = data()
    print(f"| tier, arm ({RATE} req/s, 20 ms delay) | built-in µs/req | own contract µs/req | own ÷ built-in, median (range) "
          "| ≤ 1.10 | message bytes per request (→ / ←), built-in; own | steal %, median, most |")
    print("|---|---:|---:|---|---|---|---|")
    for arm in ARMS:
        got = {"built-in": [], "own": []}
        for k in range(ALTS):
            order = ["built-in", "own"] if k % 2 == 0 else ["own", "built-in"]
            for path in order:
                got[path].append(run(arm, path, files, k))
        steal = [g["steal"] for p in got.values() for g in p if g["steal"] is not None]
        steal_text = f"{statistics.median(steal):.1f}, {max(steal):.1f}" if steal else "not measured"
        for tier in ["caller", "downstream"]:
            ratios = [o[tier] / b[tier] for b, o in zip(got["built-in"], got["own"])]
            b = statistics.median(g[tier] for g in got["built-in"])
            o = statistics.median(g[tier] for g in got["own"])
            r = statistics.median(ratios)
            bytes_text = "; ".join(
                f"{got[p][0]['bytes'][0]:.0f} / {got[p][0]['bytes'][1]:.0f}" for p in ["built-in", "own"]
            )
            print(f"| {tier}, {arm} | {b:.1f} | {o:.1f} | {r:.3f} ({min(ratios):.3f}–{max(ratios):.3f}) "
                  f"| {'yes' if r <= 1.10 else '**no**'} | {bytes_text} | {steal_text} |")
    print(f"\nrun folders kept in {OUT}")


if __name__ == "__main__":
    main()
