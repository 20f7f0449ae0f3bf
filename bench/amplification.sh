#!/usr/bin/env bash
# Memory by work in flight (issue 32 item 8): a tier given many requests for
# the most records at once (h2load, every request on its own connection), and
# a 10-record request sent 0.3 s later. Prints what was answered, the tier's
# peak RSS (VmHWM) and how long the small request took. Loopback only; needs
# h2load (Debian's nghttp2-client). Not CI.
#
#   bash bench/amplification.sh           # the caller (--fanout 10, 40 requests), then the downstream (600)
#
# Knobs (environment): HARNESS (the binary; default: build and use the debug
# one, as README's figures were taken), DELAY (500ms).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
if [ -z "${HARNESS:-}" ]; then
  cargo build -q -p harness
  HARNESS="${CARGO_TARGET_DIR:-target}/debug/harness"
fi
H="$(realpath "$HARNESS")"
DELAY="${DELAY:-500ms}"
command -v h2load > /dev/null || { echo "needs h2load: apt-get install nghttp2-client" >&2; exit 2; }
TMP="$(mktemp -d)"
trap 'kill $(jobs -p) 2> /dev/null; wait 2> /dev/null; rm -rf "$TMP"' EXIT

# flood NAME URL N PID: N requests for 10,000 records at URL at once, a small one meanwhile.
flood() {
  echo '{"requestId":"amp","items":10000}' > "$TMP/body.json"
  ( sleep 0.3; curl -s -o /dev/null -w "%{http_code} in %{time_total} s" -H content-type:application/json \
      -d '{"requestId":"small","items":10}' "$2" > "$TMP/small" ) & local small=$!
  local codes
  codes=$(h2load --h1 -n "$3" -c "$3" -m 1 -d "$TMP/body.json" -H 'content-type: application/json' "$2" \
    | awk '/^status codes:/{print $3, "2xx,", $9, "5xx"}')
  wait "$small"
  echo "$1: $3 requests for 10,000 records: $codes · peak RSS $(awk '/VmHWM/{printf "%d MiB", $2/1024}' "/proc/$4/status") · 10-record request $(cat "$TMP/small")"
}

tier downstream "" downstream --delay "$DELAY"
DS="$READY"; DS_PID=$(field "$DS" "['pid']")
tier caller "" caller --transport grpc --downstream-grpc "http://$(field "$DS" "['listeners']['grpc']")" --fanout 10
flood "caller --fanout 10" "http://$(field "$READY" "['listeners']['front']")/v1/call" 40 "$(field "$READY" "['pid']")"
flood "downstream" "http://$(field "$DS" "['listeners']['rest']")/v1/fetch" 600 "$DS_PID"
