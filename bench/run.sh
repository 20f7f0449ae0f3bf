#!/usr/bin/env bash
# Benchmark of the harness itself; see bench/README.md. Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK="${QUICK:-}"
if [ -n "$QUICK" ]; then D=3s; W=1s; SWEEP_D=3s; SWEEP_W=2s; CMP_D=3; else D=10s; W=3s; SWEEP_D=10s; SWEEP_W=5s; CMP_D=10; fi
CONNS="${CONNS:-2}"
OUT="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT

need() {
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "installing $2 from Debian's packages..." >&2
    if [ "$(id -u)" = 0 ]; then apt-get update -qq >/dev/null && apt-get install -y -qq "$2" >/dev/null
    else sudo apt-get update -qq >/dev/null && sudo apt-get install -y -qq "$2" >/dev/null; fi
  fi
}
need wrk wrk
need h2load nghttp2-client
need python3 python3

cargo build --release -q -p harness -p downstream
H=target/release/harness
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
REPORT="results/bench-$STAMP.md"
mkdir -p results

json() { python3 -c "import json,sys; d=json.load(sys.stdin); $1"; }

{
echo "# grpc-vs-rest: benchmark of the harness ($STAMP)"
echo
echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB"
echo "- kernel: $(uname -r); $(rustc --version)"
echo "- wrk: $(wrk --version 2>&1 | head -1)"
echo "- h2load: $(h2load --version 2>&1 | head -1)"
echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$( [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && echo ' (uncommitted changes)')"
echo "- steps: ${D} rounds after ${W} warm-up (sweep: ${SWEEP_D} after ${SWEEP_W}); comparison runs ${CMP_D}s with ${CONNS} connections"
echo

echo "## 1. Schedule accuracy (open loop, straight to the downstream over gRPC, 10 ms delay)"
echo
echo "| offered (req/s) | achieved ÷ offered | send lag p50 (ms) | send lag p99 (ms) | errors | dropped |"
echo "|---:|---:|---:|---:|---:|---:|"
for q in 100 1000 5000 10000; do
  $H --target downstream --transport grpc --qps "$q" --delay 10ms --duration "$D" --warmup "$W" --quiet --json --out "$OUT" \
    | json "r=d['arms'][0]['rounds'][0]; l=r['latency']['send_lag'] or {}; e=r['requests']['errors']
print('| %d | %.4f | %.3f | %.3f | %d | %d |' % ($q, r['throughput']['achieved_ratio'] or 0, l.get('p50_ms', float('nan')), l.get('p99_ms', float('nan')), sum(v for k,v in e.items() if k!='dropped'), e.get('dropped',0)))"
done
echo
echo "Targets: send lag p99 ≤ 1 ms at 5,000 req/s."
echo

echo "## 2. Knee per transport (three tiers, 500 ms delay)"
echo
$H --transport both --qps 1000..16000x2 --duration "$SWEEP_D" --warmup "$SWEEP_W" --quiet --json --out "$OUT" > "$OUT/sweep.json"
json "
c=d['capacity']
for a in c['arms']:
    print('- **%s**: knee %s%s' % (a['transport'], ('%.0f req/s' % a['knee_qps']) if a['knee_qps'] else 'none', (' — ' + a['stopped_early']) if a['stopped_early'] else ''))
print()
print('| transport | offered | achieved (ok/s) | p50 (ms) | p99 (ms) | errors | dropped | sustained |')
print('|---|---:|---:|---:|---:|---:|---:|---|')
for a in c['arms']:
    for s in a['steps']:
        f=lambda v: 'n/a' if v is None else '%.1f' % v
        print('| %s | %.0f | %s | %s | %s | %d | %d | %s |' % (a['transport'], s['offered_qps'], f(s['achieved_ok_per_second']), f(s['p50_ms']), f(s['p99_ms']), s['errors'], s['dropped'], 'yes' if s['sustained'] else 'no: ' + ', '.join(s['shortfalls'])))
" < "$OUT/sweep.json"
echo
echo "Targets: knee ≥ 5,000 req/s per transport (stretch 10,000); at 100 req/s achieved ≥ 99.5% and p99 ≤ 505 ms (see the README's 100 req/s runs)."
echo

echo "## 3. Cost per request (from the sweep's steps)"
echo
json "
c=d['capacity']
print('| transport | offered | caller CPU (µs/req) | downstream CPU (µs/req) | harness CPU (µs/req) | caller RSS per 1,000 in flight (MiB) | downstream RSS per 1,000 in flight (MiB) |')
print('|---|---:|---:|---:|---:|---:|---:|')
for a in c['arms']:
    for s in a['steps']:
        k=s['offered_qps']*0.5/1000.0
        f=lambda v: 'n/a' if v is None else '%.0f' % v
        g=lambda v: 'n/a' if v is None else '%.2f' % (v/k)
        print('| %s | %.0f | %s | %s | %s | %s | %s |' % (a['transport'], s['offered_qps'], f(s['cpu_us_per_request'].get('caller')), f(s['cpu_us_per_request'].get('downstream')), f(s['cpu_us_per_request'].get('harness')), g(s['rss_mib'].get('caller')), g(s['rss_mib'].get('downstream'))))
" < "$OUT/sweep.json"
echo
echo "In flight = offered × 0.5 s; RSS is the round mean, including the process's fixed base."
echo

echo "## 4. The generator against wrk and h2load (same downstream, same run, ${CONNS} connections)"
echo
target/release/downstream --delay 0ms > "$OUT/ds.ready" 2>/dev/null &
for _ in $(seq 50); do [ -s "$OUT/ds.ready" ] && break; sleep 0.1; done
REST=$(json "print(d['listeners']['rest'])" < "$OUT/ds.ready")
GRPC=$(json "print(d['listeners']['grpc'])" < "$OUT/ds.ready")
cat > "$OUT/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"requestId":"wrk","items":10}'
wrk.headers["Content-Type"] = "application/json"
LUA
python3 -c "
import struct,sys
rid=b'h2load'
msg=b'\x0a'+bytes([len(rid)])+rid+b'\x10\x0a'
sys.stdout.buffer.write(b'\x00'+struct.pack('>I',len(msg))+msg)" > "$OUT/grpc.bin"

WRK=$(wrk -t "$CONNS" -c "$CONNS" -d "${CMP_D}s" -s "$OUT/post.lua" "http://$REST/v1/fetch" | awk '/Requests\/sec/{print $2}')
OURS_REST=$($H --target downstream --downstream-url "http://$REST" --transport rest --connections "$CONNS" --duration "${CMP_D}s" --warmup 1s --quiet --json --out "$OUT" | json "print(d['arms'][0]['rounds'][0]['throughput']['ok_per_second'])")
H2=$(h2load -c "$CONNS" -m 1 -D "$CMP_D" -d "$OUT/grpc.bin" -H 'content-type: application/grpc' -H 'te: trailers' "http://$GRPC/bench.v1.Downstream/Fetch" | awk '/^finished in/{print $4}')
OURS_GRPC=$($H --target downstream --downstream-url "http://$GRPC" --transport grpc --grpc-connections "$CONNS" --connections "$CONNS" --duration "${CMP_D}s" --warmup 1s --quiet --json --out "$OUT" | json "print(d['arms'][0]['rounds'][0]['throughput']['ok_per_second'])")
echo "| endpoint | tool | requests/s | ours ÷ theirs |"
echo "|---|---|---:|---:|"
python3 -c "
ours_rest, wrk, ours_grpc, h2 = float('$OURS_REST'), float('$WRK'), float('$OURS_GRPC'), float('$H2')
print('| REST (HTTP/1.1 JSON) | wrk | %.0f | |' % wrk)
print('| REST (HTTP/1.1 JSON) | harness throughput mode | %.0f | %.3f |' % (ours_rest, ours_rest/wrk))
print('| gRPC (h2c protobuf) | h2load | %.0f | |' % h2)
print('| gRPC (h2c protobuf) | harness throughput mode | %.0f | %.3f |' % (ours_grpc, ours_grpc/h2))"
echo
echo "Target: ours ≥ 90% of theirs. Both sides share the machine with the downstream under test."
} | tee "$REPORT"
echo "written to $REPORT" >&2
