#!/usr/bin/env bash
# The cuda backend on a real NVIDIA GPU, in one short run (issue 13): what
# a session runs on a lent GPU machine, whose device time is scarce.
#
#   scripts/gpu-check.sh OUTDIR [SECONDS_FOR_EACH_SWEEP]
#
# 1. versions (driver, CuPy, llvmlite, PyTorch) and the GPU's name;
# 2. tests/backends/test_cuda.py: every kernel of the file run on the GPU
#    beside the emulated launch and compared with the interpreter, plus the
#    training step, symbolic sizes and pools through backend="cuda";
# 3. tests/compile and the public programs with TRACEC_BACKEND=cuda: the
#    suites' compiled functions on the GPU;
# 4. tracec demo --backend cuda and benchmarks/gpu.py.
#
# Wheels the machine lacks (xdsl and its needs, platformdirs, graphviz,
# filecheck) may lie in ./.whl (carried with the call): they install into
# /tmp/site first.  Logs go to OUTDIR; a summary is printed last.
set -u
out=${1:-/tmp/gpu-check}
sweep=${2:-120}
mkdir -p "$out"
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export TRACEC_CACHE_DIR=/tmp/tracec-gpu-cache

{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
    python3 - <<'EOF'
import importlib, sys
print("python", sys.version.split()[0])
for name in ("numpy", "llvmlite", "xdsl", "cupy", "torch"):
    try:
        m = importlib.import_module(name)
        print(name, getattr(m, "__version__", "?"))
    except Exception as e:  # noqa: BLE001
        print(name, "missing:", e)
import tracec
from tracec.backends.cuda import runtime
print("tracec sees", tracec.cuda.gpu_count(), "GPU(s); PTX for", runtime.device_arch())
EOF
} 2>&1 | tee "$out/versions.log"

echo "== tests/backends/test_cuda*.py on the GPU"
timeout 150 python3 -m pytest -q -p no:cacheprovider -rs -n 4 tests/backends/test_cuda.py \
    tests/backends/test_cuda_math.py > "$out/test_cuda.log" 2>&1
grep -E "^(FAILED|ERROR)" "$out/test_cuda.log" | cut -c1-200 | head -20
tail -1 "$out/test_cuda.log"

# The suites with every compiled function on the GPU (the cpu backend's
# fast-path tests are about its native runner); workers that crash are
# listed as such.
sweep_run() {
    name=$1; shift
    echo "== $name with TRACEC_BACKEND=cuda (${sweep}s at most)"
    TRACEC_BACKEND=cuda timeout "$sweep" python3 -X faulthandler -m pytest -q \
        -p no:cacheprovider -n 12 "$@" > "$out/$name.log" 2>&1
    grep -E "^(FAILED|ERROR)" "$out/$name.log" | cut -c1-160 | head -30
    tail -1 "$out/$name.log"
}
sweep_run compile_cuda tests/compile --ignore tests/compile/test_fast_run.py
sweep_run programs_cuda tests/test_public_programs*.py

echo "== tracec demo --backend cuda (the README's main job, compiled for the GPU)"
timeout 120 python3 -m tracec.cli demo --backend cuda 2>&1 | tee "$out/demo.log" | tail -6

echo "== benchmarks/gpu.py"
timeout 150 python3 benchmarks/gpu.py --repeat 20 2>&1 | tee "$out/bench.log"
