"""The harness open loop of two builds, alternated N times (4), against the same real gRPC tiers
of build A (0 ms delay), at QPS (5,000) with the default send precision, as bench/ratios.py's
generator CPU row runs it: harness CPU µs a request and the send lag p99 of each run.

    N=6 python3 bench/lag-ab.py OLD_BIN_DIR target/release

bench/README.md, issue 56, eighteenth pass. Not CI."""
import os, statistics, sys
sys.argv = ["", sys.argv[1], *sys.argv[2:]]
HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE)
os.chdir(os.path.dirname(HERE))
import ratios
A, B = sys.argv[1], sys.argv[2]
alts = int(os.environ.get("N", "4"))
qps = int(os.environ.get("QPS", "5000"))
settings = ratios.tier_settings("grpc")
tiers = ratios.Tiers("real", "grpc", "0ms", settings)
res = {A: [], B: []}
try:
    for i in range(alts):
        order = (A, B) if i % 2 == 0 else (B, A)
        for b in order:
            ratios.BIN = b
            st = ratios.Steal()
            cpu, window, achieved, lag = ratios.harness_open(tiers.front, "grpc", qps, {})
            us = cpu["harness"] / (qps * window) * 1e6
            res[b].append((us, lag, achieved, st.percent()))
            print("%s: %.1f µs/req, send lag p99 %.3f ms, achieved %.3f, steal %.1f" % (b, us, lag or -1, achieved, st.percent()), flush=True)
finally:
    tiers.close()
    ratios.stop_all()
for b, rs in res.items():
    print(b, "median µs/req %.1f, lag p99 median %.3f most %.3f" % (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs), max(r[1] for r in rs)))
