#!/usr/bin/env bash
# Checks the pass-through relay's count of the internal hop between two
# foreign tiers against a packet capture of the same run: the TCP payload
# each way on both legs (caller → relay, relay → downstream) inside the
# round's window, which the capture finds from the harness's own reads of
# the relay's counters. Needs root (or CAP_NET_RAW) for tcpdump; installs
# tcpdump from Debian's packages if it is missing.
#
#   bash bench/relay-check.sh             # our tiers given as commands, gRPC and REST
#   PYTHON=1 bash bench/relay-check.sh    # the Python stack (examples/stacks/python)
#   TRANSPORTS=rest QPS=200 DURATION=20s bash bench/relay-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

TRANSPORTS=${TRANSPORTS:-"grpc rest"}
QPS=${QPS:-50}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
DELAY=${DELAY:-500ms}

if ! command -v tcpdump >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tcpdump >/dev/null
fi
H="${HARNESS:-}"
if [ -z "$H" ]; then cargo build --release -q -p harness; H=./target/release/harness; fi
if [ -n "${PYTHON:-}" ]; then
  sh examples/stacks/python/setup.sh >/dev/null
  DOWNSTREAM='python3 examples/stacks/python/downstream.py --grpc {grpc_addr} --rest {rest_addr} --delay-ms {delay_ms}'
  CALLER='python3 examples/stacks/python/caller.py --listen {listen} --transport {transport} --downstream-grpc {downstream_grpc} --downstream-rest {downstream_rest}'
else
  DOWNSTREAM="$H __tier downstream --grpc-addr {grpc_addr} --rest-addr {rest_addr} --delay {delay_ms}ms"
  CALLER="$H __tier caller --listen {listen} --transport {transport} --downstream-grpc {downstream_grpc} --downstream-rest {downstream_rest}"
fi
work=$(mktemp -d)
trap 'kill "${dump:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

for transport in $TRANSPORTS; do
  tcpdump -i lo -s 128 -U -w "$work/$transport.pcap" tcp 2>"$work/tcpdump.log" &
  dump=$!
  sleep 1
  "$H" --transport "$transport" --qps "$QPS" --duration "$DURATION" --warmup "$WARMUP" --rounds 1 \
    --delay "$DELAY" --downstream-cmd "$DOWNSTREAM" --caller-cmd "$CALLER" --out "$work/out-$transport" --quiet
  sleep 2
  kill -INT "$dump"; wait "$dump" || true
  folder=$(ls -d "$work/out-$transport"/*/)
  echo "### $transport, $QPS req/s, $DURATION, both tiers foreign${PYTHON:+ (Python)}"
  echo
  (cd bench && python3 relay_check.py "$work/$transport.pcap" "$folder")
  echo
done
