#!/usr/bin/env bash
# Checks the streaming arms' wire bytes per item (run.json
# rounds[0].stream.{front,internal}.*_wire_bytes_per_item) against a packet
# capture of the same run, on both hops and both directions:
#   front     harness <-> caller      (--caller-port, fixed here)
#   internal  caller  <-> downstream  (the port the caller calls)
# bench/stream_wire_check.py does the counting and explains the window
# alignment. Needs root (or CAP_NET_RAW) for tcpdump; installs it from
# Debian's packages if it is missing. Every run is bounded by `timeout`.
#
# Per item, it also sets run.json's per-item delay and transit (p50, p99,
# p99.9) against the capture's (the packet that completed each item). BUSY=N
# keeps N cores busy with a shell loop while it runs (a machine other work
# keeps busy: the case where one read took two items).
#
#   HARNESS=/tmp/h-rel/harness bash bench/stream-wire-check.sh
#   ARMS="grpc-stream rest-sse" DURATION=30s bash bench/stream-wire-check.sh
#   ARMS="grpc-stream rest-pages rest-ndjson rest-sse" DURATION=5s WARMUP=2s BUSY=1 \
#     bash bench/stream-wire-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ARMS=${ARMS:-"grpc-stream grpc-pages rest-pages rest-ndjson rest-sse"}
ITEMS=${ITEMS:-100}
INTERVAL=${INTERVAL:-10ms}
QPS=${QPS:-20}
DURATION=${DURATION:-15s}
WARMUP=${WARMUP:-3s}
LIMIT=${LIMIT:-180}  # seconds any one harness run may take
BUSY=${BUSY:-0}      # cores kept busy by a shell loop meanwhile

if ! command -v tcpdump >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tcpdump >/dev/null
fi
H="${HARNESS:-}"
if [ -z "$H" ]; then cargo build --release -q -p harness; H=./target/release/harness; fi

work=$(mktemp -d)
dump="" poll="" run="" busy=""
cleanup() {
  for p in $run $poll $busy; do kill "$p" 2>/dev/null || true; done
  [ -n "$dump" ] && kill -INT "$dump" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The tiers listen on ephemeral ports and so do their clients: capture only
# TCP between two ports of the local ephemeral range (the front port is taken
# from it too), which leaves out any other service on loopback.
read -r eph_lo eph_hi </proc/sys/net/ipv4/ip_local_port_range
filter="tcp and src portrange $eph_lo-$eph_hi and dst portrange $eph_lo-$eph_hi"

for _ in $(seq "$BUSY"); do
  ( while :; do :; done ) &
  busy="$busy $!"
done

for arm in $ARMS; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  cmd=("$H" --transport "$arm" --stream-items "$ITEMS" --stream-interval "$INTERVAL" --qps "$QPS"
       --duration "$DURATION" --warmup "$WARMUP" --rounds 1 --caller-port "$port" --out "$work/out-$arm" --quiet)
  tcpdump -i lo -s 0 -B 65536 --time-stamp-precision=nano -U -w "$work/$arm.pcap" "$filter" 2>"$work/$arm.tcpdump.log" &
  dump=$!
  for _ in $(seq 50); do grep -q "listening on" "$work/$arm.tcpdump.log" && break; sleep 0.1; done
  timeout --signal=INT --kill-after=15 "$LIMIT" "${cmd[@]}" >"$work/$arm.harness.log" 2>&1 &
  run=$!
  # The tiers' listening ports with their pids, to tell the admin ports apart.
  ( while kill -0 "$run" 2>/dev/null; do ss -Htlnp >>"$work/$arm.ss" 2>/dev/null || true; sleep 1; done ) &
  poll=$!
  rc=0; wait "$run" || rc=$?; run=""
  wait "$poll" || true; poll=""
  sleep 0.5
  kill -INT "$dump"; wait "$dump" || true; dump=""
  echo "### $arm: $ITEMS items per stream every $INTERVAL, $QPS streams/s, $DURATION (+$WARMUP warm-up)"
  echo
  echo "command: ${cmd[*]}"
  if [ "$rc" != 0 ]; then
    echo "harness exited with $rc:"; tail -20 "$work/$arm.harness.log"; echo; continue
  fi
  grep -E "dropped by (kernel|interface)" "$work/$arm.tcpdump.log" | sed 's/^/tcpdump: /' || true
  echo
  python3 bench/stream_wire_check.py "$work/$arm.pcap" "$work/out-$arm" "$port" "$work/$arm.ss" \
    --json "$work/summary.jsonl" || echo "(analysis failed for $arm)"
  rm -f "$work/$arm.pcap"
  echo
done

if [ -s "$work/summary.jsonl" ]; then
  echo "### Summary: run.json vs capture, wire bytes per item (diff = run.json − capture, % of capture), then per-item delay and transit p99 (BUSY=$BUSY)"
  echo
  python3 bench/stream_wire_check.py --summary "$work/summary.jsonl"
fi
