#!/usr/bin/env bash
# Context switches and CPU per request of each process (harness, caller,
# downstream) from /proc, during an open-loop run through three tiers; the
# figures in bench/README.md's `--load-threads` table. Not CI.
#
#   T=grpc Q=5000 EXTRA="--load-threads 2" bash bench/switches.sh [HARNESS_BINARY]
#
# After a 5 s start, an 8 s window: voluntary + involuntary switches of every
# thread, and user + system CPU ticks, divided by the requests due in it.
set -euo pipefail
cd "$(dirname "$0")/.."
H="${1:-target/release/harness}"
T="${T:-grpc}"; Q="${Q:-5000}"
# shellcheck disable=SC2086
"$H" --transport "$T" --qps "$Q" --duration 14s --warmup 3s --quiet --out "$(mktemp -d)" ${EXTRA:-} > /dev/null 2>&1 &
hp=$!
trap 'kill $hp 2>/dev/null || true' EXIT
sleep 5
cp=$(pgrep -P $hp -f "__tier caller"); dp=$(pgrep -P $hp -f "__tier downstream")
sw() { cat /proc/"$1"/task/*/status | awk '/ctxt_switches/{s+=$2} END{print s}'; }
cpu() { awk '{print $14+$15}' /proc/"$1"/stat; }
a1=$(sw $hp); b1=$(sw "$cp"); c1=$(sw "$dp"); x1=$(cpu $hp); y1=$(cpu "$cp"); z1=$(cpu "$dp")
sleep 8
a2=$(sw $hp); b2=$(sw "$cp"); c2=$(sw "$dp"); x2=$(cpu $hp); y2=$(cpu "$cp"); z2=$(cpu "$dp")
n=$((Q * 8)); tick=$(getconf CLK_TCK)
python3 -c "print('switches/req harness %.2f caller %.2f downstream %.2f | cpu us/req %.0f %.0f %.0f' % (($a2-$a1)/$n, ($b2-$b1)/$n, ($c2-$c1)/$n, ($x2-$x1)/$tick*1e6/$n, ($y2-$y1)/$tick*1e6/$n, ($z2-$z1)/$tick*1e6/$n))"
wait $hp || true
