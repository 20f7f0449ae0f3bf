"""User and system CPU a request of the REST caller at QPS (5,000) with a 500 ms delay, three ways,
alternated N times (3): as the harness runs it (`harness __tier caller`), as the `caller` binary
with the same flags, and its plain twin with huge pages off; /proc/PID/stat over 8 s of a 10 s run.

    N=3 python3 bench/rest-caller-split.py target/release

bench/README.md, issue 56, eighteenth pass. Not CI."""
import os, sys, time, subprocess, statistics
sys.argv = ["", sys.argv[1]]
HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE); os.chdir(os.path.dirname(HERE))
import ratios
B = ratios.BIN
def ut_st(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]), int(f[12])
settings = ratios.tier_settings("rest")
tick = os.sysconf("SC_CLK_TCK")
qps = int(os.environ.get("QPS", "5000"))
kinds = ["tier", "bin", "twin"]
res = {k: [] for k in kinds}
try:
    for i in range(int(os.environ.get("N", "3"))):
        order = kinds[i % 3:] + kinds[:i % 3]
        for kind in order:
            ds, ready = ratios.start([B + "/harness", "__tier", "downstream", *settings["downstream"], "--delay", "500ms"])
            down = "http://" + ready["listeners"]["rest"]
            if kind == "tier":
                cmd = [B + "/harness", "__tier", "caller", *settings["caller"]]; pre = None
            elif kind == "bin":
                cmd = [B + "/caller", *settings["caller"]]; pre = None
            else:
                cmd = [B + "/plain-caller"]; pre = ratios.huge_pages_off
            caller, ready = ratios.start([*cmd, "--transport", "rest", "--downstream-rest", down], preexec=pre)
            front = "http://" + ready["listeners"]["front"]
            print(kind, "huge pages disabled:", ratios.huge_pages_disabled(caller.pid), flush=True)
            try:
                p = subprocess.Popen([B + "/harness", "--caller-url", front, "--transport", "rest", "--qps", str(qps),
                    "--duration", "10s", "--warmup", "3s", "--quiet", "--json", "--out", ratios.OUT], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                time.sleep(4)
                a = ut_st(caller.pid); ta = time.monotonic()
                time.sleep(8)
                b = ut_st(caller.pid); w = time.monotonic() - ta
                p.communicate()
                u, s = [(y - x) / tick / (qps * w) * 1e6 for x, y in zip(a, b)]
                res[kind].append((u, s))
                print(kind, "user %.1f sys %.1f total %.1f µs/req" % (u, s, u + s), flush=True)
            finally:
                ratios.stop(caller); ratios.stop(ds)
finally:
    ratios.stop_all()
for k, v in res.items():
    print(k, "median user %.1f sys %.1f total %.1f" % (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v), statistics.median(x[0]+x[1] for x in v)))
