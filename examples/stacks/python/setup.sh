#!/bin/sh
# Makes .venv (beside this script) from the pinned requirements.txt on PyPI and
# generates the grpcio stubs of proto/ into gen/ with grpcio-tools.
# Run again at will: an existing .venv is reused.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
python=${PYTHON:-python3}
if [ ! -x "$here/.venv/bin/python" ]; then
    "$python" -m venv "$here/.venv"
fi
"$here/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
rm -rf "$here/gen.tmp"
mkdir -p "$here/gen.tmp"
"$here/.venv/bin/python" -m grpc_tools.protoc -I "$root/proto" \
    --python_out="$here/gen.tmp" --grpc_python_out="$here/gen.tmp" \
    "$root/proto/bench/v1/bench.proto"
touch "$here/gen.tmp/bench/__init__.py" "$here/gen.tmp/bench/v1/__init__.py"
rm -rf "$here/gen"
mv "$here/gen.tmp" "$here/gen"
echo "python stack ready: $here/.venv, stubs in $here/gen"
