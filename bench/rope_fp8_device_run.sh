#!/usr/bin/env bash
# One GPU run for the rope_fp8 kernel: the benchmark and the GPU tests (bit-exact, compile
# counts), each under its own timeout so that both report within one run. Results land in $OUT.
#   bash bench/rope_fp8_device_run.sh          # full: config sweep, then the main table with peers
#   MODE=sweep bash bench/rope_fp8_device_run.sh   # the config sweep only, no main table
#   MODE=table bash bench/rope_fp8_device_run.sh   # the main table and peers, default config only
#   MODE=pdl-grid VARIANTS=0,2,2p,3p TEST_L2=1 bash bench/rope_fp8_device_run.sh
#        # PDL variants with and without the L2 prefetch at every size; GPU tests with it on
# (on a GPU machine: $OUT is where results go; .whl holds the libcst wheel when pip has no network)
OUT=${OUT:-/tmp/rope_fp8_out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site \
  && python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1 \
  || export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv \
  | tee "$OUT/nvidia_smi.txt"
if [ "${MODE:-full}" = sweep ]; then
  BENCH_ARGS="--sweep-only"
elif [ "${MODE:-full}" = table ]; then
  BENCH_ARGS="--no-sweep"
elif [ "${MODE:-full}" = pdl-grid ]; then
  BENCH_ARGS="--pdl-grid --variants ${VARIANTS:-0,1,2,3}"
else
  BENCH_ARGS=""
fi
timeout "${BENCH_S:-200}" python3 bench/bench_rope_fp8.py --out "$OUT/rope_fp8_h200.json" \
  --budget-s 80 $BENCH_ARGS > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
# TEST_PDL=2: the GPU tests with the default config's pdl set to 2 in the test process (the
# wrapper, the twin's launcher and the compile count then launch with PDL).
timeout "${TESTS_S:-120}" python3 -c "import dataclasses, sys, pytest
from jitguard.kernels import rope_fp8
if '${TEST_PDL:-}': rope_fp8.CONFIG = dataclasses.replace(rope_fp8.CONFIG, pdl=int('${TEST_PDL:-0}'))
if '${TEST_L2:-}': rope_fp8.CONFIG = dataclasses.replace(rope_fp8.CONFIG, l2_prefetch=True)
print('default config in the tests:', rope_fp8.CONFIG)
sys.exit(pytest.main(['-q', '-m', 'gpu', '-p', 'no:cacheprovider', 'tests/test_kernels_rope_fp8.py',
                      '-s', '-k', 'not interpreter']))" > "$OUT/gpu_tests.log" 2>&1
echo "tests rc=$?"
grep -E "compiles over|passed|failed|error" "$OUT/gpu_tests.log" | tail -5
grep -E "^# |Error|error" "$OUT/bench.log" | cut -c1-160
sed -n '/^| kernel/,$p' "$OUT/bench.log"
case "${MODE:-full}" in pdl*) sed -n '/^| G x hpg/,$p' "$OUT/bench.log";; esac
true
