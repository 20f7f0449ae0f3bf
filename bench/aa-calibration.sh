#!/usr/bin/env bash
# How often does the comparison call a difference that is not there? RUNS
# (default 10) short A/A runs (`--transport grpc,grpc`: one transport as two
# counterbalanced arms, every round on tier processes of its own), each
# judged by `harness compare`; prints, per row type, how many judged rows
# were called different out of how many. Loopback only. See bench/README.md,
# "A/A calibration". Not CI.
#
#   bash bench/aa-calibration.sh              # run and judge
#   JUDGE="DIR [DIR…]" bash bench/aa-calibration.sh   # judge earlier runs again, pooled
#
# Knobs (environment): RUNS, TRANSPORT (grpc,grpc), QPS (200), DELAY (20ms),
# ROUNDS (3), DURATION (4s), WARMUP (2s), OUT (results/aa-calibration-<UTC>),
# HARNESS (the binary; default: build and use the release one).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-10}"
TRANSPORT="${TRANSPORT:-grpc,grpc}"
QPS="${QPS:-200}"
DELAY="${DELAY:-20ms}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-4s}"
WARMUP="${WARMUP:-2s}"
if [ -z "${HARNESS:-}" ]; then
  cargo build --release -q -p harness
  HARNESS="${CARGO_TARGET_DIR:-target}/release/harness"
fi
H="$(realpath "$HARNESS")"

if [ -n "${JUDGE:-}" ]; then
  OUT="$JUDGE"
else
  OUT="${OUT:-results/aa-calibration-$(date -u +%Y%m%dT%H%M%SZ)}"
  mkdir -p "$OUT"
  for i in $(seq "$RUNS"); do
    echo "A/A run $i of $RUNS: $TRANSPORT, $QPS req/s, $ROUNDS rounds of $DURATION" >&2
    "$H" --transport "$TRANSPORT" --qps "$QPS" --delay "$DELAY" --rounds "$ROUNDS" \
      --duration "$DURATION" --warmup "$WARMUP" --quiet --out "$OUT/run-$i"
  done
fi

# Every run folder's comparison, judged by this binary.
TABLES="$(mktemp)"
trap 'rm -f "$TABLES"' EXIT
# shellcheck disable=SC2086 # OUT may name several folders
for dir in $(find $OUT -mindepth 1 -maxdepth 1 -type d -name 'run-*' | sort -V); do
  folder="$(find "$dir" -mindepth 1 -maxdepth 1 -type d | head -1)"
  echo "== $dir" >> "$TABLES"
  "$H" compare "$folder" >> "$TABLES"
done

echo "A/A calibration: $(grep -c '^== ' "$TABLES") runs in $OUT, judged by $("$H" --version)"
python3 - "$TABLES" <<'EOF'
import re, sys

# Rows with no better side are never called (informational), so they are left out.
NEITHER = re.compile(r"^(target rate|send rate|requests sent|harness |internal hop connections|front hop )")
KINDS = [
    ("latency percentiles", re.compile(r"(latency|service time|downstream hop|caller overhead|send lag) p\d")),
    ("latency min/mean/max", re.compile(r"^latency (min|mean|max) ")),
    ("throughput", re.compile(r"^(throughput|achieved)")),
    ("errors", re.compile(r"^(errors|dropped)")),
    ("CPU", re.compile(r" CPU ")),
    ("memory", re.compile(r" memory ")),
    ("bytes", re.compile(r" bytes ")),
]
tally, runs_calling = {}, {}
run, runs = "", 0
for line in open(sys.argv[1]):
    if line.startswith("== "):
        run, runs = line[3:].strip(), runs + 1
        continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != 5 or not line.startswith("| ") or cells[0] == "metric" or NEITHER.match(cells[0]):
        continue
    verdict = cells[4]
    called = verdict.endswith(" better")
    if not called and verdict != "no detectable difference":
        continue
    kind = next((k for k, rx in KINDS if rx.search(cells[0])), "other")
    judged_n, called_n = tally.get(kind, (0, 0))
    tally[kind] = (judged_n + 1, called_n + called)
    if called:
        runs_calling.setdefault(kind, set()).add(run)
        print(f"  {run}: called {cells[0]}: {cells[3]} ({verdict})")
print("\n| row type | rows called | rows judged | share | runs with a call |")
print("|---|---:|---:|---:|---:|")
total = [0, 0]
for kind, _ in KINDS + [("other", None)]:
    if kind in tally:
        j, c = tally[kind]
        total = [total[0] + j, total[1] + c]
        print(f"| {kind} | {c} | {j} | {c / j * 100:.1f}% | {len(runs_calling.get(kind, ()))} of {runs} |")
if total[0]:
    print(f"| all | {total[1]} | {total[0]} | {total[1] / total[0] * 100:.1f}% | |")
EOF
