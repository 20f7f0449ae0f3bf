#!/usr/bin/env bash
# Checks the harness's front-hop figures against a packet capture of the same
# run: wire bytes per request each way, and the p50 of the wire time (first
# request byte to last answer byte, as loopback saw them) against the
# harness's service time and corrected latency. Needs root (or CAP_NET_RAW)
# for tcpdump; installs tcpdump from Debian's packages if it is missing.
#
#   bash bench/wire-check.sh                       # gRPC and REST, 100 req/s, 10 s
#   TRANSPORTS=rest QPS=500 DURATION=20s bash bench/wire-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

TRANSPORTS=${TRANSPORTS:-"grpc rest"}
QPS=${QPS:-100}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}

if ! command -v tcpdump >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tcpdump >/dev/null
fi
# HARNESS=path/to/harness measures that binary instead of building release.
# EXTRA="--proto … --call … --response-data …" adds flags (a contract whose
# answers vary in size: the round's own calls' mean is what both must show).
H="${HARNESS:-}"
if [ -z "$H" ]; then cargo build --release -q -p harness; H=./target/release/harness; fi
work=$(mktemp -d)
trap 'kill "${dump:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

for transport in $TRANSPORTS; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  tcpdump -i lo -s 128 -U -w "$work/$transport.pcap" "tcp port $port" 2>"$work/tcpdump.log" &
  dump=$!
  sleep 1
  "$H" --transport "$transport" --qps "$QPS" --duration "$DURATION" --warmup "$WARMUP" \
    --caller-port "$port" --out "$work/out-$transport" --quiet ${EXTRA:-}
  # tcpdump may lag behind the kernel on a busy machine: give it time to
  # write the round's last answers before it is stopped.
  sleep 2
  kill -INT "$dump"; wait "$dump" || true
  folder=$(ls -d "$work/out-$transport"/*/)
  echo "### $transport, $QPS req/s, $DURATION (front hop, port $port)"
  echo
  python3 bench/wire_check.py "$work/$transport.pcap" "$folder" "$port"
  echo
done
