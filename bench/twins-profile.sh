#!/usr/bin/env bash
# Instructions per request of each tier and of its plain twin, with callgrind
# (repeatable on a shared machine); see bench/README.md, "Ratios: the tool
# against its peers, in one run". Not CI.
#
#   bash bench/twins-profile.sh [BIN_DIR] [LABEL]
#
# For each arm and tier, twice: the tier as the harness runs it (`harness
# __tier ROLE` with the flags bench/ratios.py reads off a harness run), then
# its plain twin (`plain-caller`, `plain-downstream`); the measured one under
# callgrind, the other tier native, both driven by wrk through the front door
# (one thread, CONNS connections, POST /v1/call, 10 items, --delay DELAY,
# 0ms unless set: DELAY=5ms CONNS=16 measures the service-time wait too).
# Instrumentation is on for exactly one wrk run of SECS seconds after a WARM
# one: instructions per request = the window's ÷ wrk's count (the runtime's
# idle work between the toggles and the run included).
# ARMS=rest, TIERS=downstream, KINDS=plain narrow it; KEEP=dir keeps each raw
# callgrind profile there (LABEL-tier-kind-arm.cg); CACHE=1 simulates caches. DOWNSTREAM=path runs that
# `downstream` binary (the same flags as `harness __tier downstream`, e.g. an
# older build's) as the real downstream.
# TOOL=stat runs every process natively and counts the window with `perf
# stat` instead (task-clock, page faults, context switches, system calls:
# what callgrind does not see); the table then gives CPU µs per request.
# TOOL=perf samples the window natively with `perf record -e cpu-clock` and
# keeps `perf report --no-children` by own cost (dso, symbol), TOP rows,
# with sample counts; CALLS=1 records call chains (DWARF) and KEEP=dir keeps
# each perf.data there (LABEL-tier-kind-arm.perf.data).
# TOOL=trace counts each system call by name a request (`perf trace -s`).
# LOAD=open (the perf tools only) drives the harness's open loop at QPS
# instead of wrk (see below). A twin runs with huge pages off, as the tiers
# do, unless TWIN_HUGE=machine.
# Output: bench/profiles/LABEL-twin-<tier>-<kind>-<arm>.txt, a table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$(realpath "${1:-target/release}")"
LABEL="${2:-now}"
SECS="${SECS:-10}"
WARM="${WARM:-3}"
TOP="${TOP:-30}"
CONNS="${CONNS:-2}"
DELAY="${DELAY:-0ms}"
OUT="${OUT:-bench/profiles}"
TMP="$(mktemp -d)"
mkdir -p "$OUT"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
# shellcheck source=bench/lib.sh
. bench/lib.sh
needs "valgrind, wrk, python3" valgrind callgrind_control callgrind_annotate wrk python3
TOOL="${TOOL:-callgrind}"
CG="valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$TMP/cg.out"
# CACHE=1 adds callgrind's cache simulation (its own caches, not this
# machine's): with KEEP=dir, `python3 bench/cg_misses.py` reads the misses
# per answer by function, the tier against its twin.
[ -n "${CACHE:-}" ] && CG="${CG/--tool=callgrind/--tool=callgrind --cache-sim=yes}"
[ "$TOOL" != callgrind ] && CG=""
STAT_EVENTS=task-clock,page-faults,context-switches,raw_syscalls:sys_enter
printf 'wrk.method="POST"\nwrk.body=[[{"requestId":"p","items":10}]]\nwrk.headers["Content-Type"]="application/json"\n' > "$TMP/post.lua"

# The flags the harness gives each tier, as bench/ratios.py reads them.
settings() { # arm → JSON {caller: [...], downstream: [...]}
  python3 -c "
import sys; sys.argv=['', '$BIN']; sys.path.insert(0, 'bench')
import json, ratios
try:
    print(json.dumps(ratios.tier_settings('$1')))
finally:
    ratios.stop_all()"
}

flags() { python3 -c "import json,sys; print(' '.join(json.loads(sys.argv[1])['$2']))" "$1"; }
wrk_count() { wrk -t1 -c"$CONNS" -d"$1s" --timeout 30s -s "$TMP/post.lua" "$2/v1/call" | awk '/requests in/{print $1}'; }

# LOAD=open drives the front door with the harness's open loop at QPS
# req/s (default 5000), as bench/ratios.py's row 3 does, instead of wrk: the
# perf tools' window is then SECS seconds inside the run (1 s after the
# warm-up, 1 s before the end), and its requests the rate × the window.
LOAD="${LOAD:-wrk}"
QPS="${QPS:-5000}"
if [ "$LOAD" = open ]; then
  LOADING="harness open loop at $QPS req/s"
  WINDOW="the window is ${SECS} s inside the run; requests = the rate × the window"
else
  LOADING="wrk -c$CONNS for ${SECS}s"
  WINDOW="the window is 1 s longer than wrk's run: its connecting and closing included"
fi

# window CMD…: drives the front door at $front and runs CMD (a perf command
# ending in `-p PID`) over the measured window; sets n to its requests, then
# stops every job (the tiers).
window() {
  if [ "$LOAD" = open ]; then
    "$BIN/harness" --caller-url "$front" --transport "$arm" --qps "$QPS" --duration "$((SECS + 2))s" \
      --warmup "${WARM}s" --quiet --json --out "$TMP/run" > "$TMP/open.json" 2> "$TMP/open.err" &
    local hp=$!
    sleep "$((WARM + 1))"
    # The window is the workload perf runs once it is counting (its own
    # start and its report's writing left out).
    "$@" -- sh -c "date +%s%N > $TMP/t0; sleep $SECS; date +%s%N > $TMP/t1" > /dev/null 2>&1 || true
    wait "$hp" || { echo "the harness failed: $(tail -3 "$TMP/open.err")" >&2; exit 1; }
    n=$(python3 -c "print(round($QPS * ($(cat "$TMP/t1") - $(cat "$TMP/t0")) / 1e9))")
    local got
    got=$(field "$(cat "$TMP/open.json")" "['arms'][0]['rounds'][0]['throughput']['achieved_ratio']")
    python3 -c "import sys; sys.exit(0 if $got >= 0.99 else 1)" || echo "$tier ($kind): the harness reached $got of $QPS req/s" >&2
  else
    "$@" -- sleep "$((SECS + 1))" > /dev/null 2>&1 &
    local spid=$!
    n=$(wrk_count "$SECS" "$front")
    wait $spid || true
  fi
  kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true
}

# The tiers turn transparent huge pages off for themselves; a twin gets the
# same (PR_SET_THP_DISABLE before it runs) unless TWIN_HUGE=machine.
printf 'import ctypes, os, sys\nif ctypes.CDLL(None).prctl(41, 1, 0, 0, 0) != 0: sys.exit("prctl failed")\nos.execvp(sys.argv[1], sys.argv[1:])\n' > "$TMP/nothp.py"
NOTHP="python3 $TMP/nothp.py"; [ "${TWIN_HUGE:-off}" = machine ] && NOTHP=""

unit="instructions/request"; [ "$TOOL" = stat ] && unit="CPU µs/request"
echo "| arm | tier | as the harness runs it ($unit) | plain twin | ratio |"
echo "|---|---|---:|---:|---:|"
for arm in ${ARMS:-grpc rest}; do
  S="$(settings "$arm")"
  for tier in ${TIERS:-downstream caller}; do
    declare -A per=()
    for kind in ${KINDS:-real plain}; do
      rm -f "$TMP"/cg.out*
      cgd=""; cgc=""; [ "$tier" = downstream ] && cgd="$CG"; [ "$tier" = caller ] && cgc="$CG"
      if [ "$kind" = real ]; then
        if [ -n "${DOWNSTREAM:-}" ]; then
          # shellcheck disable=SC2046
          started ds "$cgd" "$DOWNSTREAM" $(flags "$S" downstream) --delay "$DELAY"
        else
          # shellcheck disable=SC2046
          started ds "$cgd" "$BIN/harness" __tier downstream $(flags "$S" downstream) --delay "$DELAY"
        fi
      else
        started ds "$NOTHP $cgd" "$BIN/plain-downstream" --delay "$DELAY"
      fi
      # Connect and gRPC-Web are served on the REST listener.
      lis=rest; [ "$arm" = grpc ] && lis=grpc
      dpid=$(field "$READY" "['pid']"); down="http://$(field "$READY" "['listeners']['$lis']")"
      if [ "$kind" = real ]; then
        # shellcheck disable=SC2046
        started caller "$cgc" "$BIN/harness" __tier caller $(flags "$S" caller) --transport "$arm" "--downstream-$lis" "$down"
      else
        started caller "$NOTHP $cgc" "$BIN/plain-caller" --transport "$arm" "--downstream-$lis" "$down"
      fi
      cpid=$(field "$READY" "['pid']"); front="http://$(field "$READY" "['listeners']['front']")"
      pid=$dpid; [ "$tier" = caller ] && pid=$cpid
      [ "$LOAD" = open ] || wrk_count "$WARM" "$front" > /dev/null
      f="$OUT/$LABEL-twin-$tier-$kind-$arm.txt"
      if [ "$TOOL" = perf ]; then
        window perf record -q -e cpu-clock -F 2000 ${CALLS:+--call-graph dwarf,16384} -p "$pid" -o "$TMP/perf.data"
        {
          echo "# $LABEL: $tier ($kind), $arm, $LOADING, delay $DELAY: perf cpu-clock samples, own cost"
          echo "# requests in the window: $n ($WINDOW)"
          perf report -n -g none -i "$TMP/perf.data" --no-children --sort dso,sym --stdio 2> /dev/null | grep -v '^#' | grep -v '^$' | sed -n "1,${TOP}p"
        } > "$f"
        # CALLS=1 records call chains; KEEP=dir keeps perf.data for `perf report -G`.
        if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; cp "$TMP/perf.data" "$KEEP/$LABEL-$tier-$kind-$arm.perf.data"; fi
        echo "$f: $(sed -n 2p "$f")" >&2
        continue
      fi
      if [ "$TOOL" = trace ]; then
        # System calls by name a request (`perf trace -s`), TOP of them.
        window perf trace -s -o "$TMP/trace.txt" -p "$pid"
        f="$OUT/$LABEL-trace-$tier-$kind-$arm.txt"
        {
          echo "# $LABEL: $tier ($kind), $arm, $LOADING, delay $DELAY: system calls a request (perf trace -s)"
          echo "# requests in the window: $n ($WINDOW)"
          grep -E '^ +[a-z_0-9]+ +[0-9]+' "$TMP/trace.txt" \
            | awk -v n="$n" '{c[$1] += $2} END {for (k in c) printf "%s %.3f\n", k, c[k] / n}' | sort -k2 -nr | sed -n "1,${TOP}p"
        } > "$f"
        echo "$f" >&2
        continue
      fi
      if [ "$TOOL" = stat ]; then
        window perf stat -x, -e "$STAT_EVENTS" -o "$TMP/stat.txt" -p "$pid"
        per[$kind]=$(python3 - "$TMP/stat.txt" "$n" "$f" "$LABEL: $tier ($kind), $arm, $LOADING, delay $DELAY" "$WINDOW" <<'PY'
import sys
path, n, out, title, window = sys.argv[1], max(int(sys.argv[2]), 1), sys.argv[3], sys.argv[4], sys.argv[5]
rows = {}
for line in open(path):
    f = line.strip().split(",")
    if len(f) > 2 and f[0] and f[0][0].isdigit():
        rows[f[2]] = float(f[0])
with open(out, "w") as o:
    o.write(f"# {title}\n# requests in the window: {n} ({window})\n")
    for k, v in rows.items():
        o.write(f"{k}: {v:.0f} total, {v / n:.3f} per request\n")
print(int(rows.get("task-clock", 0) * 1000 / n))  # task-clock is in ms: ns per request
PY
)
        echo "$f: $(sed -n 3,6p "$f" | tr '\n' ';')" >&2
        continue
      fi
      callgrind_control -i on "$pid" > /dev/null 2>&1
      n=$(wrk_count "$SECS" "$front")
      callgrind_control -i off "$pid" > /dev/null 2>&1
      kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true
      callgrind_annotate --threshold=100 "$TMP"/cg.out* > "$TMP/ann.txt" 2>/dev/null || true
      # KEEP=dir keeps the raw profile, for callgrind_annotate --inclusive=yes or --tree=caller.
      if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; cat "$TMP"/cg.out* > "$KEEP/$LABEL-$tier-$kind-$arm.cg"; fi
      total=$(awk '/PROGRAM TOTALS/{gsub(",", "", $1); print $1; exit}' "$TMP/ann.txt")
      per[$kind]=$(( ${total:-0} / (n > 0 ? n : 1) ))
      {
        echo "# $LABEL: $tier ($kind), $arm, wrk -c$CONNS for ${SECS}s, delay $DELAY, $(basename "$BIN")"
        echo "# requests in the window: $n; instructions: ${total:-0}; per request: ${per[$kind]}"
        awk -v n=$((TOP + 2)) '/file:function/{on=1} on && n-- > 0' "$TMP/ann.txt"
      } > "$f"
      echo "$f: $(sed -n 2p "$f")" >&2
    done
    if [ -n "${per[real]:-}" ] && [ -n "${per[plain]:-}" ]; then
      python3 -c "print('| $arm | $tier | {:,} | {:,} | {:.3f} |'.format(${per[real]}, ${per[plain]}, ${per[real]} / ${per[plain]}))"
    fi
    unset per
  done
done
