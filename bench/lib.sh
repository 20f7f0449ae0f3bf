# Shell helpers the bench scripts source (not run on its own).

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
