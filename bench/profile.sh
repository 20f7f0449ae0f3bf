#!/usr/bin/env bash
# Instructions per request of each tier, with callgrind (repeatable on a
# shared machine, unlike wall-clock figures); see bench/README.md. Not CI.
#
#   bash bench/profile.sh [HARNESS_BINARY] [LABEL]
#
# For each transport, three runs; in each, one process runs under callgrind
# and the others natively, all as tiers of HARNESS_BINARY (`harness __tier`):
#   caller      the caller, driven by wrk (2 connections, POST /v1/call, 10 items);
#   downstream  the downstream (--delay 0ms), behind a caller driven by wrk;
#   harness     the generator in throughput mode straight to the downstream
#               (--target downstream, 2 connections);
#   front       the generator in throughput mode through its front-hop client
#               to a caller (--caller-url, 2 connections), caller and
#               downstream native.
# MEASURE="caller harness" runs only those; TRANSPORTS=rest only that transport.
# Instrumentation is switched on after a warm-up and off after SECS seconds;
# the requests in that window are the downstream's own count (/stats), so
# instructions per request = the window's instructions ÷ those requests.
# Each table is callgrind_annotate's top functions by own cost.
# Output: bench/profiles/LABEL-<tier>-<transport>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
H="$(realpath "${1:-target/release/harness}")"
LABEL="${2:-now}"
SECS="${SECS:-20}"
WARM="${WARM:-5}"
TOP="${TOP:-30}"
MEASURE="${MEASURE:-caller downstream harness front}"
OUT=bench/profiles
TMP="$(mktemp -d)"
mkdir -p "$OUT"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
# shellcheck source=bench/lib.sh
. bench/lib.sh
needs "valgrind, wrk, python3" valgrind callgrind_control wrk python3
CG="valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$TMP/cg.out"

# tier, field and served.

for t in ${TRANSPORTS:-grpc rest}; do
  for measured in $MEASURE; do
    rm -f "$TMP"/cg.out*
    tier ds "$([ $measured = downstream ] && echo "$CG" || true)" downstream --delay 0ms
    DS_ADMIN=$(field "$READY" "['listeners']['admin']"); URL="http://$(field "$READY" "['listeners']['$t']")"
    pid=$(field "$READY" "['pid']")
    if [ $measured = harness ]; then
      $CG "$H" --target downstream --downstream-url "$URL" --transport $t --connections 2 \
        --duration "$((SECS + WARM + 30))s" --warmup 0s --quiet --out "$TMP/runs" > /dev/null 2>&1 &
      sleep 2; pid=$(pgrep -n -f "valgrind.*--downstream-url $URL" || pgrep -n -f -- "--downstream-url $URL")
    else
      tier caller "$([ $measured = caller ] && echo "$CG" || true)" caller --transport $t \
        --downstream-grpc "http://$(field "$(grep -m1 '{' "$TMP/ds.out")" "['listeners']['grpc']")" \
        --downstream-rest "http://$(field "$(grep -m1 '{' "$TMP/ds.out")" "['listeners']['rest']")"
      [ $measured = caller ] && pid=$(field "$READY" "['pid']")
      FRONT="http://$(field "$READY" "['listeners']['front']")"
    fi
    if [ $measured = front ]; then
      $CG "$H" --caller-url "$FRONT" --transport $t --connections 2 \
        --duration "$((SECS + WARM + 30))s" --warmup 0s --quiet --out "$TMP/runs" > /dev/null 2>&1 &
      sleep 2; pid=$(pgrep -n -f "valgrind.*--caller-url $FRONT" || pgrep -n -f -- "--caller-url $FRONT")
    elif [ $measured != harness ]; then
      printf 'wrk.method="POST"\nwrk.body=[[{"requestId":"p","items":10}]]\nwrk.headers["Content-Type"]="application/json"\n' > "$TMP/post.lua"
      wrk -t1 -c2 -d"$((SECS + WARM + 30))s" -s "$TMP/post.lua" "http://$(field "$READY" "['listeners']['front']")/v1/call" > /dev/null &
    fi
    sleep "$WARM"
    # callgrind_control returns once valgrind has acted on the command (about
    # 0.25 s later): the count read after it starts where the instructions do.
    # Read before it, it took in ~4% more requests than were measured when busy.
    callgrind_control -i on "$pid" > /dev/null 2>&1; n0=$(served $t)
    sleep "$SECS"
    callgrind_control -i off "$pid" > /dev/null 2>&1; n1=$(served $t)
    kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true
    n=$((n1 - n0)); f="$OUT/$LABEL-$measured-$t.txt"
    callgrind_annotate --threshold=100 "$TMP"/cg.out* > "$TMP/ann.txt" 2>/dev/null || true
    total=$(awk '/PROGRAM TOTALS/{gsub(",", "", $1); print $1; exit}' "$TMP/ann.txt")
    {
      echo "# $LABEL: $measured, $t, ${SECS}s window, $(basename "$H")"
      echo "# requests in the window: $n; instructions: ${total:-0}; per request: $(( ${total:-0} / (n > 0 ? n : 1) ))"
      awk -v n=$((TOP + 2)) '/file:function/{on=1} on && n-- > 0' "$TMP/ann.txt"
    } > "$f"
    echo "$f: $(sed -n 2p "$f")"
  done
done
