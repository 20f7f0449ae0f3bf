#!/usr/bin/env bash
# Builds the tiers' image `grpc-vs-rest:local` from `scratch`: the release
# binaries (harness, downstream, caller) and the shared libraries `ldd` lists
# for them, copied into a build context at their own paths. Nothing is
# pulled, so it builds on a machine with no container registry.
#   deploy/build-image.sh [TAG]
#   PROFILE=dev deploy/build-image.sh   # the dev profile's (optimised) binaries, target/debug
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:-grpc-vs-rest:local}"
profile="${PROFILE:-release}"
cargo build --profile "$profile" -p harness -p downstream -p caller
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
for bin in harness downstream caller; do
  # Without debug info (the line tables backtraces and perf use on a
  # workstation): a third of the size; symbols stay, so a profile inside
  # the container still names functions.
  if command -v strip >/dev/null 2>&1; then
    strip --strip-debug -o "$context/$bin" "target/$dir/$bin"
  else
    cp "target/$dir/$bin" "$context/"
  fi
  # Libraries by absolute path (`libc.so.6 => /lib/...`) and the loader.
  for lib in $(ldd "target/$dir/$bin" | grep -o '/[^ ]*' || true); do
    mkdir -p "$context$(dirname "$lib")"
    cp -L "$lib" "$context$lib"
  done
done
cp deploy/Dockerfile "$context/"
# The classic builder needs no BuildKit plug-in; a scratch image pulls nothing.
DOCKER_BUILDKIT=0 docker build --label grpc-vs-rest=1 -t "$tag" "$context"
echo "built $tag"
