# Shell helpers the bench scripts source (not run on its own).

# needs PACKAGES CMD…: exits 2 naming the first CMD not on PATH and the
# Debian PACKAGES that bring them.
needs() {
  local pkgs="$1" c; shift
  for c in "$@"; do
    command -v "$c" >/dev/null || { echo "needs $c (Debian packages $pkgs)" >&2; exit 2; }
  done
}

# tier_pid PARENT ROLE: the pid of `harness __tier ROLE` under the harness
# process PARENT, once it has started (up to 10 s); exits the script if none.
tier_pid() {
  for _ in $(seq 100); do
    local p
    p=$(pgrep -P "$1" -f -- "__tier $2" | head -1 || true)
    [ -n "$p" ] && { echo "$p"; return; }
    sleep 0.1
  done
  echo "no $2 under $1" >&2; exit 1
}

# started NAME PREFIX CMD…: starts CMD in the background, under PREFIX if
# one is given (valgrind), its output in $TMP/NAME.out; waits (up to 60 s)
# for its ready line (a JSON object) and sets READY to it; exits the script,
# with CMD's last error lines, if none comes.
started() {
  local name="$1" prefix="$2"; shift 2
  $prefix "$@" > "$TMP/$name.out" 2> "$TMP/$name.err" &
  for _ in $(seq 600); do grep -q '{' "$TMP/$name.out" 2>/dev/null && break; sleep 0.1; done
  READY="$(grep -m1 '{' "$TMP/$name.out")" || { echo "$name did not start: $(tail -3 "$TMP/$name.err")" >&2; exit 1; }
}

# tier NAME PREFIX ROLE ARGS…: `started NAME PREFIX $H __tier ROLE ARGS…`.
tier() {
  local name="$1" prefix="$2"; shift 2
  started "$name" "$prefix" "$H" __tier "$@"
}

# field JSON PATH: the value at PATH (a Python subscript, e.g. "['pid']") of JSON.
field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(d$2)" "$1"; }

# served TRANSPORT: the ok requests the downstream whose admin listener is
# $DS_ADMIN has answered on TRANSPORT's listener.
served() {
  curl -s --retry 5 --retry-all-errors "http://$DS_ADMIN/stats" \
    | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['listeners']['$1']['requests'].get('ok',0))"
}
