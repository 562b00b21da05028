#!/usr/bin/env bash
# One device call for the rope_fp8 kernel: the benchmark (config sweep with the v2 kernel as A/B,
# then the main table) and the GPU tests (bit-exact, compile counts), each under its own timeout
# so that both report within one call. Results land in $OUT.
#   run with: bash bench/rope_fp8_device_run.sh   (on the device, $OUT set by the runner)
OUT=${OUT:-/tmp/rope_fp8_out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site \
  && python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1 \
  || export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv \
  | tee "$OUT/nvidia_smi.txt"
timeout "${BENCH_S:-125}" python3 bench/bench_rope_fp8.py --out "$OUT/rope_fp8_h200.json" \
  --budget-s 80 > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
timeout "${TESTS_S:-95}" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_rope_fp8.py \
  -s -k "not interpreter" > "$OUT/gpu_tests.log" 2>&1
echo "tests rc=$?"
grep -E "compiles over|passed|failed|error" "$OUT/gpu_tests.log" | tail -5
grep -E "^# |^sweep" "$OUT/bench.log" | cut -c1-150
sed -n '/^| kernel/,$p' "$OUT/bench.log"
