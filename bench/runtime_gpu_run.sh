#!/usr/bin/env bash
# The runtime watcher on a GPU machine (an H200): its GPU tests, its CPU tests on that machine's
# Triton (a version CI does not run), and jitguard's own cost per compile event on that host.
# Results land in $OUT. Run from the repository root (or a copy of it):
#   bash bench/runtime_gpu_run.sh               # SKIP_BENCH=1: the tests only
OUT=${OUT:-/tmp/runtime_gpu_out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1 \
  || export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export TRITON_DEFAULT_FP_FUSION=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
  nproc
  date -u +%Y-%m-%dT%H:%MZ
} > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"
# the runtime test files (tests/test_fix_from_trace.py needs libcst, which that machine's image lacks)
files=$(grep -l 'pytest.mark.runtime' tests/test_*.py | grep -v test_fix_from_trace)
{ echo "# python3 -m pytest -m gpu tests/test_runtime_gpu.py; $(tr '\n' ' ' < "$OUT/device.txt")"
  timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_runtime_gpu.py -rs 2>&1; } \
  | tee "$OUT/gpu_tests_runtime.txt"
{ echo "# python3 -m pytest -m runtime (the CPU tests, stand-in driver, on that machine's Triton); $(tr '\n' ' ' < "$OUT/device.txt")"
  timeout 240 python3 -m pytest -q -p no:cacheprovider -m "runtime and not gpu" $files -rfs --tb=line 2>&1 | tail -60; } \
  | tee "$OUT/runtime_tests_gpu_host_triton.txt"
[ "${SKIP_BENCH:-0}" = 1 ] || timeout 150 python3 bench/bench_event_cost.py --variants 60 --repeats 5 --out "$OUT" \
  --label "on an H200 machine's host (16 cores, idle): Triton's real JIT path through the stand-in sm_90 driver" \
  2>&1 | grep -v -i warn | tee "$OUT/event_cost_log.txt"
