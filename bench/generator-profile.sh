#!/usr/bin/env bash
# Instructions per request of the generator (the harness's load loop), open
# loop, with callgrind: repeatable on a shared machine. Not CI.
#
#   QPS=300 SECS=5 bash bench/generator-profile.sh [BIN_DIR] [LABEL]
#
# The harness runs under callgrind against the plain twins (`plain-caller`
# in front of `plain-downstream`, 10 ms delay, gRPC), driving them as a
# remote caller (`--caller-url`: under valgrind it cannot start its own
# tiers). Instrumentation is on for SECS seconds after WARM seconds of load;
# per request = the window's instructions ÷ (QPS × SECS). The rate is low
# because the harness under callgrind runs about 50 times slower; what a
# request costs in user space does not depend on the rate, except for the
# wake-ups, which are one per due time here as at 1,000 req/s.
# CONNS=N runs it closed loop on N connections instead (`--connections N
# --load-threads 1`, against the same twins at no delay): requests in the
# window are then the calls of the end-to-end check the profile counts
# (`payload::validate::verify_call_json`, once per answer).
# Output: bench/profiles/LABEL-generator.txt (the top functions, own cost).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$(realpath "${1:-target/release}")"
LABEL="${2:-now}"
QPS="${QPS:-300}"; SECS="${SECS:-5}"; WARM="${WARM:-4}"; TOP="${TOP:-40}"
TMP="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT
# shellcheck source=bench/lib.sh
. bench/lib.sh
needs "valgrind, python3" valgrind callgrind_control callgrind_annotate python3
CONNS="${CONNS:-}"
DELAY=10ms; LOAD=(--qps "$QPS"); [ -n "$CONNS" ] && { DELAY=0ms; LOAD=(--connections "$CONNS" --load-threads 1); }
started ds "" "$BIN/plain-downstream" --delay "$DELAY"
started caller "" "$BIN/plain-caller" --transport grpc --downstream-grpc "http://$(field "$READY" "['listeners']['grpc']")"
front="http://$(field "$READY" "['listeners']['front']")"
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$TMP/cg.out" \
  "$BIN/harness" --caller-url "$front" --transport grpc "${LOAD[@]}" --delay "$DELAY" \
  --warmup "${WARM}s" --duration "$((SECS + 6))s" --quiet --json --out "$TMP/runs" > "$TMP/run.json" 2> "$TMP/run.err" &
vg=$!
sleep $((WARM + 3))
callgrind_control -i on "$vg" > /dev/null 2>&1
sleep "$SECS"
callgrind_control -i off "$vg" > /dev/null 2>&1
wait "$vg" || { echo "the harness failed: $(grep -v '^==' "$TMP/run.err" | tail -3)" >&2; exit 1; }
callgrind_annotate --threshold=100 "$TMP"/cg.out* > "$TMP/ann.txt" 2>/dev/null
total=$(awk '/PROGRAM TOTALS/{gsub(",", "", $1); print $1; exit}' "$TMP/ann.txt")
n=$((QPS * SECS))
if [ -n "$CONNS" ]; then
  # The check's calls in the window, from the raw profile's call counts.
  n=$(python3 - "$TMP"/cg.out* <<'PY'
import re, sys
names, cur, n = {}, None, 0
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(2):
                names[m.group(1)] = m.group(2)
            cur = names.get(m.group(1)) if line.startswith("cfn=") else None
        elif line.startswith("calls=") and cur and cur.endswith("payload::validate::verify_call_json"):
            n += int(line[6:].split()[0])
print(max(n, 1))
PY
)
fi
mkdir -p bench/profiles
f="bench/profiles/$LABEL-generator.txt"
{
  how="open loop at $QPS req/s"; [ -n "$CONNS" ] && how="closed loop on $CONNS connections, one thread"
  echo "# $LABEL: the generator, $how through the plain twins (gRPC, $DELAY), ${SECS}s window"
  echo "# requests in the window: $n; instructions: $total; per request: $((total / n))"
  awk -v n=$((TOP + 2)) '/file:function/{on=1} on && n-- > 0' "$TMP/ann.txt"
} > "$f"
sed -n 2p "$f"
