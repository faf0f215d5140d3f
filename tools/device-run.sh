#!/usr/bin/env bash
# Measure on a lent CUDA machine, in one short run: every framework there that has the device (torch, JAX),
# only what the committed shards lack (never-measured cells, cells recorded as not measured), in parallel
# lanes within a deadline; shards, journals and logs come back in one archive. See README.md, "CUDA".
#
#   bash tools/device-run.sh prepare          # here: the pure-Python wheels the device machine lacks -> .device/
#   OUT=<folder> DEADLINE=480 bash tools/device-run.sh run     # there, from the project root
#   PYTHON=.nox/tests/bin/python bash tools/device-run.sh take <folder>/kc-cuda.tgz   # here: merged into references/observations/
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  prepare)  # the machine ships torch and JAX with CUDA, not these; its Python is 3.12 (DEVICE_PYTHON to change)
    mkdir -p .device/wheels
    grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo /.device/ >> .git/info/exclude
    python3 -m pip download --quiet --only-binary=:all: --no-deps --python-version "${DEVICE_PYTHON:-3.12}" \
      --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
      --implementation cp -d .device/wheels msgspec orjson fastjsonschema platformdirs
    ls .device/wheels ;;
  run)
    OUT=${OUT:-/tmp/kc-out}; mkdir -p "$OUT"
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/kc-site .device/wheels/*.whl \
      || echo "wheel install failed (continuing with what the machine has)"
    export PYTHONPATH=/tmp/kc-site:$PWD/src PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false \
      KINKCHECK_PROBE_MEMORY_GIB=${KINKCHECK_PROBE_MEMORY_GIB:-100}
    { nvidia-smi -L || true; nproc; python3 -V; python3 -m kinkcheck --version; } > "$OUT/machine.txt" 2>&1
    cat "$OUT/machine.txt"
    python3 -m kinkcheck.lanes --device cuda --out-dir references/observations --deadline "${DEADLINE:-480}" \
      --archive "$OUT/kc-cuda.tgz" ;;
  take)  # merged into the shards there are (never a smaller shard over a larger one), with a Python that has
          # kinkcheck's dependencies: PYTHON=.nox/tests/bin/python
    [ -n "${2:-}" ] || { echo "usage: bash tools/device-run.sh take ARCHIVE (the kc-cuda.tgz the run wrote)" >&2; exit 2; }
    exec "${PYTHON:-python3}" tools/import_device_shards.py "$2" ;;
  *) echo "usage: bash tools/device-run.sh prepare | run | take ARCHIVE" >&2; exit 2 ;;
esac
