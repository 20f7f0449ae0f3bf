#!/usr/bin/env bash
# System calls, context switches and CPU per request of each process
# (harness, caller, downstream), counted by `perf stat` on the kernel's
# tracepoints during an open-loop run through three tiers: the figures of
# bench/README.md's "System calls per request" table. Not CI; needs root
# (tracepoints) and perf (Debian's linux-perf).
#
#   T=rest Q=5000 S=8 bash bench/syscalls.sh [HARNESS_BINARY]
#
# After a warm-up of 6 s, an S-second window on each process at once; every
# count is divided by the requests due in the window (Q × S). The counts are
# exact (tracepoints, not sampling); what varies from run to run is how many
# wake-ups the load takes, not what one request asks of the kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
H="$(realpath "${1:-target/release/harness}")"
T="${T:-grpc}"; Q="${Q:-5000}"; S="${S:-8}"
command -v perf >/dev/null || { echo "needs perf (Debian package linux-perf)" >&2; exit 2; }
TMP="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT
"$H" --transport "$T" --qps "$Q" --delay 500ms --items 10 --warmup 6s --duration "$((S + 4))s" --quiet --json \
  --out "$TMP/runs" > "$TMP/run.json" 2> "$TMP/run.err" &
hp=$!
# shellcheck source=bench/lib.sh
. bench/lib.sh
cp=$(tier_pid "$hp" caller); dp=$(tier_pid "$hp" downstream)
sleep 6
EVENTS=task-clock,context-switches,raw_syscalls:sys_enter
for c in epoll_wait recvfrom recvmsg read writev write futex timerfd_settime; do EVENTS="$EVENTS,syscalls:sys_enter_$c"; done
for x in harness:$hp caller:$cp downstream:$dp; do
  perf stat -x, -e "$EVENTS" -p "${x#*:}" -o "$TMP/${x%%:*}.stat" -- sleep "$S" &
done
wait $hp || { echo "the run failed:" >&2; tail -5 "$TMP/run.err" >&2; exit 1; }
wait
ratio=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['arms'][0]['rounds'][0]; print('%.4f' % (r['throughput']['achieved_ratio'] or 0))" "$TMP/run.json")
echo "# $T, $Q req/s, ${S} s window after 6 s, 500 ms delay, 10 items (achieved ÷ offered $ratio over the round); per request due"
python3 - "$TMP" "$Q" "$S" <<'EOF'
import sys
tmp, q, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = q * s
rows = {}
for tier in ("harness", "caller", "downstream"):
    for line in open(f"{tmp}/{tier}.stat"):
        f = line.strip().split(",")
        if len(f) < 3 or not f[0].replace(".", "").isdigit():
            continue
        name = f[2].replace("syscalls:sys_enter_", "").replace("raw_syscalls:sys_enter", "all syscalls")
        value = float(f[0]) * (1000.0 if name == "task-clock" else 1.0)  # task-clock in ms → µs
        rows.setdefault(name, {})[tier] = value / n
print("| per request | harness | caller | downstream |")
print("|---|---:|---:|---:|")
for name, by in rows.items():
    label = "CPU µs (task-clock)" if name == "task-clock" else name
    fmt = "%.1f" if name == "task-clock" else "%.2f"
    print("| %s | %s |" % (label, " | ".join(fmt % by.get(t, float("nan")) for t in ("harness", "caller", "downstream"))))
EOF
