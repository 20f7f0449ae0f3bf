#!/usr/bin/env python3
"""Issue 36's table: this tool's speed as ratios measured in one run.

    python3 bench/ratios.py BIN_DIR        (bench/run.sh calls it first)

Each ratio is ours ÷ a peer measured in the same invocation, interleaved: ALTS
alternations (default 3), the pair's order swapped every other one, so a drift
of the machine falls on both sides. Each row gives the median of the
alternations' ratios and their range, and beside it the machine's steal over
the row's measurements (/proc/stat's aggregate line, as run.json's
`steal_percent`): median and most. Each row also gives the sign test's
interval for the ratio's median (order statistics of the alternations, at
95% where ALTS allows it: 75% at the default 3, 94% at 5, 96% at 12) and is
met ("yes") only when that whole interval meets its target, missed ("no")
only when none of it does, and "undecided" otherwise: a difference the
instrument cannot resolve is not called either way.

  1. the generator at the caller's front door, closed loop, one thread:
     requests per second, ours ÷ wrk and ours ÷ oha, 2 and 64 connections;
     the ÷ oha row notes the tiers' CPU a request under wrk and the most a
     generator costing nothing could reach on this machine's cores;
  2. the generator open loop at 1,000 and 5,000 req/s against the same front
     door: its CPU per request ÷ oha's (`oha -q`, latency correction on),
     as it runs by default (sends within 1 ms of their due times, as oha's
     wait on tokio's 1 ms timer) and with `--send-precision 0s` (a wake-up
     at each due time); every row notes the harness's send lag p99, and the
     `0s` rows the floor under them: the CPU a due time of a process that
     does nothing but wake at each one on the harness's alarm
     (`downstream`'s example `sleep_floor`, measured in each alternation);
  3. each tier's CPU per request ÷ its plain twin's (`plain-caller`,
     `plain-downstream`), per arm, at 1,000 and 5,000 req/s (the harness
     driving, open loop, 500 ms delay) and at the busy end (wrk, closed loop,
     64 connections, no delay). Each side runs twice per alternation, with
     the same transparent-huge-page setting on both: off, as the tiers run
     by default (`service::huge_pages`), and in the machine's mode, as a
     plain service runs (the tiers at `--huge-pages machine`); so each row
     is the tiers' code against the twin's, the setting alike (TWINS=mixed
     adds the tiers' default against a plain service as it runs);
  4. each tier's instructions a call ÷ its plain twin's, per arm, paced
     (100 ms delay, 10 connections) and busy (no delay, 64 connections),
     counted by callgrind (bench/twins-profile.sh): repeatable where row 3's
     CPU is not;
  5. an A/A of row 3's instrument: the first arm's real tiers against
     themselves at the first rate, run after run as row 3 runs a pair; its
     range is what row 3 can show where there is no difference;
  6. the knee of the three tiers ÷ the knee of the plain twins, per arm, the
     same sweep by the same generator.

Rows 3 and 4 measure the REST arm once per JSON codec in CODECS (default
"serde_json sonic-rs simd-json"): the real tiers with the harness's
`--json-codec`, the twins with their own, so each codec's tiers keep a twin.

CPU is each process's own CPU-time clock (clock_getcpuclockid: every thread,
nanoseconds), read at the ends of a window inside the measured part of the
run (after the warm-up, a second short of the end); requests in the window
are the rate times its length in the open-loop rows (a row whose generator
fell short of its rate says so), wrk's own count in the closed-loop ones. The
real tiers are started by this script with the settings the harness gives
them (read from a short run's run.json), the twins with the same addresses
and delay; the front door and its generator are the same for both.

QUICK=1 shortens every measurement (a smoke test, not a result); TWINS
("off machine", or "mixed") picks row 3's huge-page settings; ROWS
("generator tiers instr aa knee"), ARMS ("grpc rest connect connect-pb grpc-web") and RATES ("1000 5000 busy")
pick parts; ALTS sets the alternations.
"""

import ctypes
import json
import math
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release"
QUICK = bool(os.environ.get("QUICK"))
ALTS = int(os.environ.get("ALTS", "3"))
DUR = 4 if QUICK else 10  # measured seconds of an open-loop or closed-loop run
WARM = 2 if QUICK else 3  # warm-up seconds before it
SWEEP = "1000,2000,4000,6000,8000,10000,12000,14000"
SWEEP_DUR, SWEEP_WARM = (3, 2) if QUICK else (6, 3)
ARMS = os.environ.get("ARMS", "grpc rest connect connect-pb grpc-web").split()
CODECS = os.environ.get("CODECS", "serde_json sonic-rs simd-json").split()


def codecs_of(arm):
    """The JSON codecs an arm is measured with: the JSON-bodied arms' (REST,
    Connect) each, the protobuf arms' none but the default."""
    return CODECS if arm in ("rest", "connect") else ["serde_json"]


def listener_of(arm):
    """The downstream listener an arm calls: gRPC's, or the REST listener,
    where Connect and gRPC-Web are served too."""
    return "grpc" if arm in ("grpc", "grpc-json") else "rest"


def label(arm, codec):
    return arm if codec == "serde_json" else "%s (%s)" % (arm, codec)
RATES = [r if r == "busy" else int(r) for r in os.environ.get("RATES", "1000 5000 busy").split()]
TWINS = os.environ.get("TWINS", "off machine").split()
OUT = tempfile.mkdtemp(prefix="ratios-")
STARTED = []  # every process this script started, stopped on any exit

# ---------------------------------------------------------------- machine


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


LIBC = ctypes.CDLL(None, use_errno=True)


def cpu_seconds(pid):
    """The process's CPU time (every thread, dead ones included), in seconds."""
    clock = ctypes.c_int()
    err = LIBC.clock_getcpuclockid(pid, ctypes.byref(clock))
    if err:
        raise OSError(err, "clock_getcpuclockid(%d)" % pid)
    ts = Timespec()
    if LIBC.clock_gettime(clock.value, ctypes.byref(ts)):
        raise OSError(ctypes.get_errno(), "clock_gettime(pid %d)" % pid)
    return ts.tv_sec + ts.tv_nsec / 1e9


def machine_ticks():
    """(steal, total) from /proc/stat's aggregate line, as measure/steal.rs."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[7], sum(v[:8])


class Steal:
    """The machine's steal over a stretch of time, in % of its ticks."""

    def __init__(self):
        self.start = machine_ticks()

    def percent(self):
        s, t = machine_ticks()
        dt = t - self.start[1]
        return 100.0 * (s - self.start[0]) / dt if dt > 0 else float("nan")


# -------------------------------------------------------------- processes


def huge_pages_off():
    """In a child before it runs its program: transparent huge pages off,
    as every tier turns them off for itself (PR_SET_THP_DISABLE)."""
    if LIBC.prctl(41, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_THP_DISABLE)")


def huge_pages_disabled(pid):
    """The kernel's word on a process's huge pages: True if off for it."""
    with open("/proc/%d/status" % pid) as f:
        line = next((l for l in f if l.startswith("THP_enabled:")), None)
    return None if line is None else line.split()[1] == "0"


def start(cmd, ready=True, env=None, preexec=None):
    """Starts cmd; with ready, waits for its JSON ready line and returns it too."""
    p = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE if ready else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        preexec_fn=preexec,
    )
    STARTED.append(p)
    if not ready:
        return p, None
    r, _, _ = select.select([p.stdout], [], [], 15)
    line = p.stdout.readline() if r else ""
    if not line:
        stop(p)
        raise RuntimeError("%s printed no ready line" % " ".join(cmd))
    return p, json.loads(line)


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def stop_all(*_):
    for p in STARTED:
        stop(p)
    subprocess.run(["rm", "-rf", OUT])


def harness(*args):
    """Runs the harness to its end; returns its --json summary."""
    out = subprocess.run(
        [BIN + "/harness", *args, "--quiet", "--json", "--out", OUT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError("harness %s exited %d: %s" % (" ".join(args), out.returncode, out.stderr[-400:]))
    return json.loads(out.stdout)


# Where the tiers listen, and what this script sets itself.
SET_HERE = {"--grpc-addr", "--rest-addr", "--admin-addr", "--listen", "--downstream-grpc", "--downstream-rest",
            "--transport", "--delay"}


def without(args, flags):
    """args less each of flags and its value."""
    kept, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in flags:
            skip = True
        else:
            kept.append(a)
    return kept


def tier_settings(arm, codec="serde_json"):
    """The arguments the harness starts each tier of arm with (on codec),
    less its addresses: read off the command lines of a short run's tiers."""
    p = subprocess.Popen(
        [BIN + "/harness", "--transport", arm, "--qps", "10", "--duration", "3s", "--warmup", "1s",
         "--delay", "1ms", "--json-codec", codec, "--quiet", "--out", OUT],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    STARTED.append(p)
    found = {}
    deadline = time.monotonic() + 10
    while len(found) < 2 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
        for task in os.listdir("/proc"):
            try:
                with open("/proc/%s/stat" % task) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != p.pid:
                    continue
                with open("/proc/%s/cmdline" % task, "rb") as f:
                    argv = [a.decode() for a in f.read().split(b"\0")[:-1]]
            except (OSError, ValueError, IndexError):
                continue
            if "__tier" in argv:
                found[argv[argv.index("__tier") + 1]] = without(argv[argv.index("__tier") + 2:], SET_HERE)
    p.wait()
    if set(found) != {"caller", "downstream"}:
        raise RuntimeError("could not read the %s tiers' command lines off a harness run" % arm)
    return found


class Tiers:
    """A downstream and a caller for arm: the real tiers (kind 'real'), run
    as the harness runs them (`harness __tier ROLE` with its flags), or the
    plain twins: 'plain' in the machine's huge-page mode, 'plain-off' with
    huge pages off, as the tiers turn them off for themselves; 'real-huge'
    is the real tiers at `--huge-pages machine`."""

    def __init__(self, kind, arm, delay, settings, codec="serde_json"):
        real = kind in ("real", "real-huge")
        # The tiers inherit this script's setting and set their own
        # (`--huge-pages`); a twin is set from outside.
        preexec = huge_pages_off if kind == "plain-off" else None
        huge = ["--huge-pages", "machine"] if kind == "real-huge" else []
        # The real tiers' codec is in their settings (the harness's flags); the twins are told.
        twin = [] if codec == "serde_json" else ["--json-codec", codec]
        ds = [BIN + "/harness", "__tier", "downstream", *settings["downstream"], *huge] if real else [BIN + "/plain-downstream", *twin]
        self.ds, ready = start([*ds, "--delay", delay], preexec=preexec)
        down = "http://" + ready["listeners"][listener_of(arm)]
        caller = [BIN + "/harness", "__tier", "caller", *settings["caller"], *huge] if real else [BIN + "/plain-caller", *twin]
        self.caller, ready = start([*caller, "--transport", arm, "--downstream-" + listener_of(arm), down], preexec=preexec)
        self.front = "http://" + ready["listeners"]["front"]
        # What each process got, as its kernel says: the tiers off unless
        # told otherwise, a twin as asked; a run where that does not hold
        # measures nothing. A kernel without the line (before Linux 5.0)
        # cannot be asked.
        want = {"real": True, "plain-off": True, "real-huge": False, "plain": False}[kind]
        for p in (self.ds, self.caller):
            got = huge_pages_disabled(p.pid)
            if got is not None and got is not want:
                raise RuntimeError("%s (%s): huge pages %s" % (kind, p.args[0], "off" if got else "on"))

    def cpu(self):
        return {"caller": cpu_seconds(self.caller.pid), "downstream": cpu_seconds(self.ds.pid)}

    def close(self):
        stop(self.caller)
        stop(self.ds)


# ---------------------------------------------------------------- drivers

BODY = '{"requestId":"bench","items":10}'


def wrk_script():
    path = os.path.join(OUT, "call.lua")
    with open(path, "w") as f:
        f.write('wrk.method = "POST"\nwrk.body = \'%s\'\nwrk.headers["Content-Type"] = "application/json"\n' % BODY)
    return path


def wrk(front, conns, secs):
    """wrk -t1 closed loop at front's /v1/call: (requests, requests per second)."""
    p = subprocess.Popen(
        ["wrk", "-t", "1", "-c", str(conns), "-d", "%ds" % secs, "-s", wrk_script(), front + "/v1/call"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    STARTED.append(p)
    text = p.communicate()[0]
    n = int(re.search(r"(\d+) requests in", text).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if bad:
        raise RuntimeError("wrk saw %s failed answers" % bad.group(1))
    return n, float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1))


def oha_cmd(front, secs, conns, qps=None):
    cmd = ["oha", "--no-tui", "--output-format", "json", "-z", "%ds" % secs, "-c", str(conns),
           "-m", "POST", "-T", "application/json", "-d", BODY]
    if qps:
        cmd += ["-q", str(qps), "--latency-correction"]
    return cmd + [front + "/v1/call"]


def oha_rps(text):
    d = json.loads(text)
    codes = d.get("statusCodeDistribution", {})
    if set(codes) - {"200"}:
        raise RuntimeError("oha saw answers %s" % codes)
    return d["summary"]["requestsPerSec"]


# One thread for oha too: its runtime is tokio's, which reads this.
ONE_THREAD = dict(os.environ, TOKIO_WORKER_THREADS="1")


def windowed(p, secs, pids, before=WARM + 1.0, after=1.0):
    """CPU seconds of pids over [before, secs - after] of p's run, then waits for p."""
    t0 = time.monotonic()
    time.sleep(before)
    a = {k: cpu_seconds(v) for k, v in pids.items()}
    ta = time.monotonic()
    time.sleep(max(0.0, t0 + secs - after - ta))
    b = {k: cpu_seconds(v) for k, v in pids.items()}
    window = time.monotonic() - ta
    out = p.communicate()[0]
    return {k: b[k] - a[k] for k in pids}, window, out


def harness_open(front, arm, qps, extra_pids, flags=()):
    """The harness open loop at qps: CPU seconds of it and extra_pids over a window, and the window."""
    p = subprocess.Popen(
        [BIN + "/harness", "--caller-url", front, "--transport", arm, "--qps", str(qps),
         "--duration", "%ds" % DUR, "--warmup", "%ds" % WARM, "--quiet", "--json", "--out", OUT, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    STARTED.append(p)
    pids = dict(extra_pids, harness=p.pid)
    cpu, window, out = windowed(p, WARM + DUR, pids)
    r = json.loads(out)["arms"][0]["rounds"][0]
    return cpu, window, r["throughput"]["achieved_ratio"] or 0.0, (r["latency"].get("send_lag") or {}).get("p99_ms")


# ------------------------------------------------------------------ table

ROWS = []


def row(label, setting, target, unit, pairs, steals, note=""):
    """One row: pairs holds (ours, theirs) of each alternation, in unit.
    Its table line goes to stderr at once, so a run cut short keeps it."""
    pairs = [(a, b) for a, b in pairs if b]
    ROWS.append((label, setting, target, unit, pairs, steals, note))
    ratios = [a / b for a, b in pairs]
    med = statistics.median(ratios) if ratios else float("nan")
    print("  %s, %s: %s (median %.3f)%s" % (label, setting, " ".join("%.3f" % r for r in ratios), med,
                                            " — " + note if note else ""), file=sys.stderr)
    print("  " + table_line(ROWS[-1]), file=sys.stderr, flush=True)


def met(target, value):
    op, bound = target.split()
    return value >= float(bound) if op == "≥" else value <= float(bound)


def median_interval(ratios, want=0.95):
    """The sign test's interval for the median of the ratio's distribution:
    the k-th smallest to the k-th largest of n alternations, with the
    largest k whose confidence, 1 − 2·P(Binomial(n, ½) < k), is at least
    want; the whole range (k = 1) when n is too small for want, 75% at 3
    alternations, 94% at 5, 96% for the 3rd to the 10th of 12."""
    xs, n = sorted(ratios), len(ratios)
    below = lambda k: sum(math.comb(n, i) for i in range(k)) / 2.0 ** n
    k = 1
    while k + 1 <= n // 2 and 1 - 2 * below(k + 1) >= want:
        k += 1
    return xs[k - 1], xs[n - k], 1 - 2 * below(k)


def verdict(target, ratios):
    """"yes" when the median's interval meets the target, "**no**" when it
    misses it whole, else "undecided" with what the median says: a
    difference the instrument cannot resolve is not called either way."""
    lo, hi, _ = median_interval(ratios)
    if met(target, lo) and met(target, hi):
        return "yes"
    if not met(target, lo) and not met(target, hi):
        return "**no**"
    return "undecided (median %s)" % ("meets it" if met(target, statistics.median(ratios)) else "misses it")


def table_line(r):
    label, setting, target, unit, pairs, steals, note = r
    if not pairs:
        return "| %s | %s | not measured | | | | | %s | | |" % (label, setting, target)
    ratios = [a / b for a, b in pairs]
    med = statistics.median(ratios)
    fmt = "%.1f " + unit if unit.startswith("µs") else "{:,.0f} " + unit
    show = lambda v: (fmt % v) if "%" in fmt else fmt.format(v)
    s = [x for x in steals if x == x]
    st = "%.1f, %.1f" % (statistics.median(s), max(s)) if s else "not read"
    lo, hi, conf = median_interval(ratios)
    return "| %s | %s | %s | %s | %.3f | %.3f–%.3f | %.3f–%.3f (%.0f%%) | %s | %s%s | %s |" % (
        label, setting, show(statistics.median(a for a, _ in pairs)),
        show(statistics.median(b for _, b in pairs)), med, min(ratios), max(ratios), lo, hi, 100 * conf, target,
        verdict(target, ratios), " (" + note + ")" if note else "", st)


def print_table():
    print("| ratio | setting | ours (median) | theirs (median) | ratio: median | range | the median's interval "
          "(confidence) | target | met (by the interval) | steal % (median, most) |")
    print("|---|---|---:|---:|---:|---|---|---|---|---|")
    for r in ROWS:
        print(table_line(r))


def alternate(a, b):
    """The pair's order for each alternation: a first, then b first, …"""
    return [(a, b) if i % 2 == 0 else (b, a) for i in range(ALTS)]


# ------------------------------------------------------------------- rows


def generator_rows(settings):
    tiers = Tiers("real", "grpc", "0ms", settings[("grpc", "serde_json")])
    try:
        for conns in (2, 64):
            vs_wrk, vs_oha, steals, tier_us, service_ms = [], [], [], [], []
            for i in range(ALTS):
                order = ["harness", "wrk", "oha"]
                order = order[i % 3:] + order[:i % 3]
                got = {}
                for tool in order:
                    st = Steal()
                    if tool == "harness":
                        d = harness("--caller-url", tiers.front, "--transport", "grpc", "--connections", str(conns),
                                    "--load-threads", "1", "--duration", "%ds" % DUR, "--warmup", "1s")
                        r = d["arms"][0]["rounds"][0]
                        got[tool] = r["throughput"]["ok_per_second"]
                        # Its send to the answer's last byte (the kernel's stamp).
                        service = (r["latency"].get("service") or {}).get("mean_ms")
                        if service:
                            service_ms.append(service)
                    elif tool == "wrk":
                        # The tiers' CPU a request under the cheapest peer:
                        # what no generator can take off them.
                        before = tiers.cpu()
                        n, got[tool] = wrk(tiers.front, conns, DUR)
                        after = tiers.cpu()
                        tier_us.append(sum(after[k] - before[k] for k in after) / max(n, 1) * 1e6)
                    else:
                        out = subprocess.run(oha_cmd(tiers.front, DUR, conns), stdout=subprocess.PIPE,
                                             stderr=subprocess.DEVNULL, text=True, env=ONE_THREAD, check=True)
                        got[tool] = oha_rps(out.stdout)
                    steals.append(st.percent())
                vs_wrk.append((got["harness"], got["wrk"]))
                vs_oha.append((got["harness"], got["oha"]))
            setting = "front door, closed loop, 1 thread, %d conns" % conns
            # A generator costing nothing would leave the machine's cores to
            # the tiers: at most cores ÷ their CPU a request (an estimate:
            # measured under wrk, whose own CPU is then the tiers' to take).
            us = statistics.median(tier_us)
            ceiling = os.cpu_count() * 1e6 / us
            oha_med = statistics.median(b for _, b in vs_oha)
            note = ("the tiers took %.1f µs of CPU a request under wrk: a generator costing nothing would reach "
                    "at most %s cores ÷ that = %s req/s, %.2f× oha's" % (us, os.cpu_count(), "{:,.0f}".format(ceiling),
                                                                       ceiling / oha_med))
            if service_ms and conns <= os.cpu_count():
                # Fewer connections than cores leave the machine part idle:
                # each connection waits on its exchange, and a generator
                # sending the next request the moment an answer arrived
                # would lose only its turn-around, reaching at most conns ÷
                # the exchange's own time. (An estimate: the exchange was
                # timed beside the harness's own CPU use. With more
                # connections the exchange is mostly queueing, which a
                # cheaper generator shortens, so only the cores bound holds.)
                most = conns / (statistics.median(service_ms) / 1e3)
                note += ("; the exchange itself (the harness's send to the answer's last byte) took %.1f µs on "
                         "average: a generator with no turn-around would reach about %s connections ÷ that = "
                         "%s req/s, %.2f× oha's" % (statistics.median(service_ms) * 1e3, conns,
                                                    "{:,.0f}".format(most), most / oha_med))
            row("generator ÷ wrk, requests/s", setting, "≥ 1.0", "req/s", vs_wrk, steals)
            row("generator ÷ oha, requests/s", setting, "≥ 1.2", "req/s", vs_oha, steals, note)
        # The harness as it runs by default (sends within 1 ms of their due
        # times, as oha's wait on tokio's 1 ms timer), then woken at each due
        # time (`--send-precision 0s`).
        for qps, precision in ((1000, None), (5000, None), (1000, "0s"), (5000, "0s")):
            pairs, steals, short, floors, lags = [], [], [], [], []
            flags = ("--send-precision", precision) if precision else ()
            for first, second in alternate("harness", "oha"):
                per = {}
                if precision == "0s":
                    floors.append(sleep_floor(qps))
                for tool in (first, second):
                    st = Steal()
                    if tool == "harness":
                        cpu, window, achieved, lag = harness_open(tiers.front, "grpc", qps, {}, flags)
                        if achieved < 0.99:
                            short.append("harness reached %.3f of the rate" % achieved)
                        if lag is not None:
                            lags.append(lag)
                    else:
                        p = subprocess.Popen(oha_cmd(tiers.front, WARM + DUR, 64, qps), stdout=subprocess.PIPE,
                                             stderr=subprocess.DEVNULL, text=True, env=ONE_THREAD)
                        STARTED.append(p)
                        cpu, window, out = windowed(p, WARM + DUR, {"harness": p.pid})
                        rps = oha_rps(out)
                        if rps < 0.99 * qps:
                            short.append("oha reached %.0f req/s" % rps)
                    per[tool] = cpu["harness"] / (qps * window) * 1e6
                    steals.append(st.percent())
                pairs.append((per["harness"], per["oha"]))
            setting = "open loop, %d req/s" % qps
            setting += ", --send-precision %s" % precision if precision else " (sends within 1ms, the default)"
            notes = list(short)
            if lags:
                notes.append("the harness's send lag p99: %.3f ms (median; most %.3f)"
                             % (statistics.median(lags), max(lags)))
            if floors and None not in floors:
                floor = statistics.median(floors)
                notes.append("a process doing nothing but wake at each due time (the harness's alarm, one worker: "
                             "examples/sleep_floor) took %.1f µs of CPU a due time, %.2f× oha's whole request"
                             % (floor, floor / statistics.median(b for _, b in pairs)))
            elif floors:
                notes.append("the floor was not measured: build `--example sleep_floor` (bench/run.sh does)")
            row("harness CPU/req ÷ oha's", setting, "≤ 1.0", "µs/req", pairs, steals, "; ".join(notes))
    finally:
        tiers.close()


def sleep_floor(qps):
    """CPU µs a due time of a process that only wakes at each due time of qps
    on the harness's alarm (`downstream`'s example `sleep_floor`), over a
    window as the open-loop rows measure; None where it is not built."""
    exe = BIN + "/examples/sleep_floor"
    if not os.path.exists(exe):
        return None
    p = subprocess.Popen([exe, str(qps), str(WARM + DUR)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    STARTED.append(p)
    cpu, window, _ = windowed(p, WARM + DUR, {"floor": p.pid})
    return cpu["floor"] / (qps * window) * 1e6


# Paced (the service-time wait in every call) and busy, as bench/README.md's
# callgrind tables: (name, delay, wrk connections, measured seconds).
INSTR_SETTINGS = [("paced", "100ms", 10, 8), ("busy", "0ms", 64, 6)]


def instr_rows():
    """Each tier's instructions a call ÷ its plain twin's, per arm, paced and
    busy, counted by callgrind (`bench/twins-profile.sh`): the same count
    for the same binary and load whatever else the machine is doing, so a
    difference of a few percent shows where the native CPU rows cannot."""
    for name, delay, conns, secs in INSTR_SETTINGS:
        st = Steal()
        env = dict(os.environ, ARMS=" ".join(ARMS), DELAY=delay, CONNS=str(conns), SECS=str(3 if QUICK else secs),
                   OUT=os.path.join(OUT, "instr"), TOOL="callgrind")
        p = subprocess.Popen(["bash", os.path.join(os.path.dirname(os.path.abspath(__file__)), "twins-profile.sh"),
                              BIN, "ratios-" + name], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env=env)
        STARTED.append(p)
        out = p.communicate()[0]
        steal = st.percent()
        got = {}
        for line in out.splitlines():
            m = re.match(r"\| ([\w-]+) \| (caller|downstream) \| ([\d,]+) \| ([\d,]+) \|", line)
            if m:
                got[(m.group(1), m.group(2))] = (int(m.group(3).replace(",", "")), int(m.group(4).replace(",", "")))
        for arm in ARMS:
            for tier in ("caller", "downstream"):
                pair = got.get((arm, tier))
                setting = "%s, %s (wrk, %d conns, %s delay), callgrind" % (arm, name, conns, delay)
                row("%s instructions/call ÷ plain twin's" % tier, setting, "≤ 1.05", "instr/call",
                    [pair] if pair else [], [steal])


def tiers_per_request(kind, arm, codec, rate, settings, short):
    """One run of kind's tiers at rate ("busy": wrk, 64 connections, no
    delay): each tier's CPU µs a request, and the machine's steal."""
    st = Steal()
    tiers = Tiers(kind, arm, "0ms" if rate == "busy" else "500ms", settings[(arm, codec)], codec)
    try:
        pids = {"caller": tiers.caller.pid, "downstream": tiers.ds.pid}
        if rate == "busy":
            # wrk counts its requests over the whole run: the window is the run.
            wrk(tiers.front, 64, 2)  # warm-up
            a = tiers.cpu()
            n, _ = wrk(tiers.front, 64, DUR)
            b = tiers.cpu()
            per = {t: (b[t] - a[t]) / n * 1e6 for t in pids}
        else:
            cpu, window, achieved, _ = harness_open(tiers.front, arm, rate, pids)
            if achieved < 0.99:
                short.append("%s reached %.3f of the rate" % (kind, achieved))
            per = {t: cpu[t] / (rate * window) * 1e6 for t in pids}
    finally:
        tiers.close()
    return per, st.percent()


# TWINS' pairs: (the real tiers' kind, the twins' kind, the row's name).
# Each pair runs both sides with the same huge-page setting; "mixed" sets
# the tiers' default (off) against a plain service in the machine's mode,
# the setting's cost and the code's together.
TWIN_KINDS = {
    "off": ("real", "plain-off", "plain twin's, huge pages off in both (the tiers' default)"),
    "machine": ("real-huge", "plain", "plain twin's, the machine's huge pages in both (--huge-pages machine)"),
    "mixed": ("real", "plain", "plain twin's in the machine's huge-page mode, the tiers' off"),
}


def tier_rows(settings):
    twins = [TWIN_KINDS[t] for t in TWINS]
    kinds = list(dict.fromkeys(k for real, twin, _ in twins for k in (real, twin)))
    for arm, codec in [(a, c) for a in ARMS for c in codecs_of(a)]:
        for rate in RATES:
            pairs = {(t, n): [] for t in ("caller", "downstream") for _, _, n in twins}
            steals, short = [], []
            for i in range(ALTS):
                per = {}
                # Each kind first in turn: a drift of the machine falls on all.
                for kind in kinds[i % len(kinds):] + kinds[:i % len(kinds)]:
                    per[kind], steal = tiers_per_request(kind, arm, codec, rate, settings, short)
                    steals.append(steal)
                for real, twin, n in twins:
                    for t in ("caller", "downstream"):
                        pairs[(t, n)].append((per[real][t], per[twin][t]))
            setting = "%s, %s" % (label(arm, codec), "busy (wrk, 64 conns, no delay)" if rate == "busy" else "%d req/s" % rate)
            for t in ("caller", "downstream"):
                for _, _, n in twins:
                    row("%s CPU/req ÷ %s" % (t, n), setting, "≤ 1.05", "µs/req", pairs[(t, n)], steals,
                        "; ".join(short))


def aa_rows(settings):
    """The tier rows' instrument against itself: the same real tiers run
    twice, measured as a tier row measures a pair. Its range is what the
    instrument shows where there is no difference to find."""
    arm, rate = ARMS[0], int(next((r for r in RATES if r != "busy"), "1000"))
    codec = codecs_of(arm)[0]
    pairs = {"caller": [], "downstream": []}
    steals, short = [], []
    for _ in range(ALTS):
        runs = []
        for _ in range(2):
            per, steal = tiers_per_request("real", arm, codec, rate, settings, short)
            runs.append(per)
            steals.append(steal)
        for t in pairs:
            pairs[t].append((runs[0][t], runs[1][t]))
    note = "; ".join(["the same tiers twice: no difference to find, so the range is the instrument's own", *short])
    for t in ("caller", "downstream"):
        row("%s CPU/req ÷ the same tiers' (A/A)" % t, "%s, %d req/s, a run ÷ the next" % (label(arm, codec), rate),
            "≤ 1.05", "µs/req", pairs[t], steals, note)


def knee_rows(settings):
    for arm, codec in [(a, c) for a in ARMS for c in codecs_of(a)]:
        pairs, steals = [], []
        for first, second in alternate("real", "plain"):
            got = {}
            for kind in (first, second):
                st = Steal()
                tiers = Tiers(kind, arm, "500ms", settings[(arm, codec)], codec)
                try:
                    d = harness("--caller-url", tiers.front, "--transport", arm, "--qps", SWEEP,
                                "--duration", "%ds" % SWEEP_DUR, "--warmup", "%ds" % SWEEP_WARM)
                    got[kind] = d["capacity"]["arms"][0]["knee_qps"] or 0
                finally:
                    tiers.close()
                steals.append(st.percent())
            pairs.append((got["real"], got["plain"]))
        note = "knees (req/s): tiers %s, twins %s" % (
            "/".join("%.0f" % a for a, _ in pairs), "/".join("%.0f" % b for _, b in pairs))
        row("three-tier knee ÷ plain twins'", "%s, sweep %s" % (label(arm, codec), SWEEP), "≥ 0.9", "req/s", pairs, steals, note)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        # gRPC's for the generator rows, and every arm the other rows measure.
        arms = dict.fromkeys(["grpc", *ARMS])
        settings = {(arm, c): tier_settings(arm, c) for arm in arms for c in codecs_of(arm)}
        said = {label(*k): v for k, v in settings.items()}
        print("tiers' settings from the harness: %s" % json.dumps(said), file=sys.stderr)
        sections = os.environ.get("ROWS", "generator tiers instr aa knee").split()
        if "generator" in sections:
            generator_rows(settings)
        if "tiers" in sections:
            tier_rows(settings)
        if "instr" in sections:
            instr_rows()
        if "aa" in sections:
            aa_rows(settings)
        if "knee" in sections:
            knee_rows(settings)
    finally:
        stop_all()
        # However the run ends (done, SIGTERM, Ctrl-C, a row that failed),
        # the rows measured so far are printed: they were after the
        # `finally` once, and a SIGTERM lost an hour and a half of rows.
        print_table()


if __name__ == "__main__":
    main()
