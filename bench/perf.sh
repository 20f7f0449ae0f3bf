#!/usr/bin/env bash
# Where each tier's CPU goes at a fixed rate through the three tiers, sampled
# with `perf record -e cpu-clock -g` (hardware counters do not work on these
# machines; cpu-clock does); see bench/README.md. Not CI; needs root or
# kernel.perf_event_paranoid ≤ 1 to attach to running processes.
#
#   bash bench/perf.sh [HARNESS_BINARY] [LABEL]
#
# For each transport: one open-loop run of HARNESS_BINARY at QPS (default
# 5000) with the 500 ms delay and 10 items, as a team would run it; after
# WARM seconds, perf samples the harness, the caller and the downstream at
# once for SECS seconds. Each table is `perf report --no-children` of one
# process: its samples by own cost (symbol and binary), with the total
# samples, the CPU time they stand for and that time per request sent in the
# window (QPS × SECS; the run's achieved ratio is printed beside it).
# Output: bench/profiles/LABEL-<tier>-<transport>.txt (top TOP rows), or
# under PROFILES=dir (bench/run.sh section 7).
set -euo pipefail
cd "$(dirname "$0")/.."
H="$(realpath "${1:-target/release/harness}")"
LABEL="${2:-perf5k}"
QPS="${QPS:-5000}"
SECS="${SECS:-10}"
WARM="${WARM:-8}"
TOP="${TOP:-25}"
FREQ="${FREQ:-999}"
TRANSPORTS="${TRANSPORTS:-grpc rest}"
OUT="${PROFILES:-bench/profiles}"
TMP="$(mktemp -d)"
mkdir -p "$OUT"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT
# shellcheck source=bench/lib.sh
. bench/lib.sh
needs "linux-perf, python3" perf python3


for t in $TRANSPORTS; do
  # One round, long enough to hold the warm-up and the sampled window.
  "$H" --transport "$t" --qps "$QPS" --delay 500ms --items 10 --warmup "${WARM}s" \
    --duration "$((SECS + 4))s" --quiet --json --out "$TMP/runs" > "$TMP/run-$t.json" 2> "$TMP/run-$t.err" &
  hp=$!
  cp=$(tier_pid $hp caller); dp=$(tier_pid $hp downstream)
  sleep "$WARM"
  for x in harness:$hp caller:$cp downstream:$dp; do
    perf record -q -e cpu-clock -F "$FREQ" -g -p "${x#*:}" -o "$TMP/${x%%:*}.data" -- sleep "$SECS" > /dev/null 2>&1 &
  done
  wait $hp || { echo "the $t run failed:" >&2; tail -5 "$TMP/run-$t.err" >&2; exit 1; }
  wait
  ratio=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['arms'][0]['rounds'][0]; print('%.4f' % (r['throughput']['achieved_ratio'] or 0))" "$TMP/run-$t.json")
  for tier in harness caller downstream; do
    f="$OUT/$LABEL-$tier-$t.txt"
    perf report -i "$TMP/$tier.data" --no-children --sort symbol,dso -g none --stdio 2> /dev/null > "$TMP/$tier.rep" || true
    perf report -i "$TMP/$tier.data" --no-children --sort dso -g none -n --stdio 2> /dev/null > "$TMP/$tier.dso" || true
    # The exact count: the sum of the per-binary sample column.
    samples=$(awk '!/^#/ && $1 ~ /%$/ {n += $2} END {print n + 0}' "$TMP/$tier.dso")
    {
      echo "# $LABEL: $tier, $t, $QPS req/s offered (achieved ÷ offered $ratio over the run), 500 ms delay, 10 items, $(basename "$H")"
      python3 -c "
s, f, secs, qps = $samples, $FREQ, $SECS, $QPS
cpu = s / f
print('# %d samples at %d Hz in %d s: %.2f CPU s, %.1f µs per request sent (%d req/s × %d s)' % (s, f, secs, cpu, cpu / (qps * secs) * 1e6, qps, secs))"
      echo "# by binary (perf report --sort dso):"
      awk '!/^#/ && $1 ~ /%$/ && n++ < 6 {gsub(/   +/, "  "); sub(/ +$/, ""); print "#" $0}' "$TMP/$tier.dso"
      echo "# perf record -e cpu-clock -F $FREQ -g; perf report --no-children --sort symbol,dso (own cost):"
      # perf pads the symbol column to its widest name: runs of spaces become two.
      awk -v top="$TOP" '!/^#/ && $1 ~ /%$/ && n++ < top {gsub(/   +/, "  "); sub(/ +$/, ""); print}' "$TMP/$tier.rep"
    } > "$f"
    echo "$f: $(sed -n 2p "$f")"
  done
done
