#!/usr/bin/env bash
# Does the caller run more instructions per request when each request
# arrives alone than when it is busy? callgrind counts them (repeatable on a
# shared machine); see bench/README.md, "Alone or busy". Not CI.
#
#   bash bench/rhythm.sh [HARNESS_BINARY]
#
# For each transport, two runs of the caller under callgrind, the
# downstream and the load native:
#   busy   downstream --delay 0ms, the harness's closed loop at the front
#          door on 16 connections (callgrind makes the caller the bottleneck:
#          it never waits);
#   alone  downstream --delay 500ms, the harness's open loop at QPS (default
#          40) req/s: the caller, even under callgrind, is idle most of the
#          time, so each request's events find it parked.
# Both send the harness's own requests, so the payload work is the same.
# Instrumentation is on for SECS seconds (default 20 busy, 30 alone) after
# WARM (8). Requests = the calls of `FetchResponse::serialize` in the
# window (one per front answer), from callgrind's own counts, with the
# downstream's /stats count over the window beside it (read once
# `callgrind_control` has returned, the two agree); where the symbol is not
# found it falls back to /stats and says so. Prints a Markdown table:
# requests, instructions, instructions per request, and the epoll_wait
# calls per request (the runtime's wake-ups).
set -euo pipefail
cd "$(dirname "$0")/.."
H="$(realpath "${1:-target/release/harness}")"
QPS="${QPS:-40}"
WARM="${WARM:-8}"
TMP="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT
# shellcheck source=bench/lib.sh
. bench/lib.sh
needs "valgrind, curl, python3" valgrind callgrind_control curl python3


echo "| transport | rhythm | requests in the window | counted by | downstream's /stats count | instructions | instructions per request | epoll_wait per request |"
echo "|---|---|---:|---|---:|---:|---:|---:|"
for t in ${TRANSPORTS:-grpc rest}; do
  for rhythm in busy alone; do
    if [ $rhythm = busy ]; then delay=0ms; secs="${SECS:-20}"; load=(--connections 16)
    else delay=500ms; secs="${SECS:-30}"; load=(--qps "$QPS"); fi
    rm -f "$TMP"/cg.out*
    tier ds "" downstream --delay $delay
    DS="$READY"; DS_ADMIN=$(field "$DS" "['listeners']['admin']")
    tier caller "valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$TMP/cg.out" caller --transport "$t" \
      --downstream-grpc "http://$(field "$DS" "['listeners']['grpc']")" --downstream-rest "http://$(field "$DS" "['listeners']['rest']")"
    pid=$(field "$READY" "['pid']"); front=$(field "$READY" "['listeners']['front']")
    "$H" --caller-url "http://$front" --transport "$t" "${load[@]}" --items 10 --duration "$((secs + WARM + 30))s" \
      --warmup 0s --quiet --out "$TMP/runs" > /dev/null 2> "$TMP/load.err" &
    sleep "$WARM"
    # Read once callgrind_control has returned: valgrind has acted on it then
    # (see bench/profile.sh).
    callgrind_control -i on "$pid" > /dev/null 2>&1; n0=$(served "$t")
    sleep "$secs"
    callgrind_control -i off "$pid" > /dev/null 2>&1; n1=$(served "$t")
    kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true
    python3 - "$t" "$rhythm" "$((n1 - n0))" "$TMP" <<'PY'
import glob, re, sys
sys.path.insert(0, "bench")
from cg_misses import expand
t, rhythm, stats, tmp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
names, calls, total = {}, {}, 0
def name(s):
    return expand(names, s)
for path in glob.glob(tmp + "/cg.out*"):
    names.clear()
    callee = None
    for line in open(path, errors="replace"):
        if line.startswith("cfn="):
            callee = name(line[4:].strip())
        elif line.startswith("fn="):
            name(line[3:].strip())
        elif line.startswith("calls=") and callee:
            calls[callee] = calls.get(callee, 0) + int(line[6:].split()[0])
            callee = None
        elif line.startswith("totals:"):
            total += int(line.split()[1])
per_request = sum(v for k, v in calls.items() if re.search(r"Serialize for payload::model::FetchResponse>::serialize$", k))
requests, by = (per_request, "callgrind's calls") if per_request else (stats, "downstream /stats")
epoll = sum(v for k, v in calls.items() if k == "epoll_wait")
r = max(requests, 1)
print("| %s | %s | %d | %s | %d | %d | %d | %.2f |" % (t, rhythm, requests, by, stats, total, total // r, epoll / r))
PY
  done
done
echo
echo "Instructions are the caller's own (user space, callgrind); the kernel's are not in them."
