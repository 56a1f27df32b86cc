#!/usr/bin/env bash
# Memory safety of the CPU kernels and the simulator: builds ascend_ops._C and
# ascend_ops._ascendc_sim with AddressSanitizer and UndefinedBehaviorSanitizer
# (ASCEND_OPS_SANITIZE=1, setup.py) into a build directory of their own, then runs the kernel
# tests and the simulator, golden, fuzz and validation tests on that build. Python itself is
# not instrumented, so libasan (and libstdc++, which must come after it) are preloaded;
# leak detection is off (Python and torch keep memory until exit by design) and so are the
# tests that measure peak memory (ASan's shadow memory and quarantine are part of the
# process), and the engine-choice test that times the engines. Any ASan or UBSan report
# ends that test process with an error: the run passes only with none.
#
#   scripts/sanitize_kernel_tests.sh                 # every test file below
#   scripts/sanitize_kernel_tests.sh tests/test_cpu_gemm.py -x     # other pytest arguments
#
# Needs GCC's libasan and libubsan (Debian: libasan8, libubsan1, shipped with gcc-12).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
build=${ASCEND_OPS_SANITIZE_BUILD:-build-sanitize}

ASCEND_OPS_SANITIZE=1 "$python" setup.py -q build --build-base "$build" > "$build.log" 2>&1 || {
  tail -40 "$build.log"; exit 1; }
lib=$(ls -d "$build"/lib.*)

libasan=$(${CXX:-g++} -print-file-name=libasan.so)
libstdcxx=$(${CXX:-g++} -print-file-name=libstdc++.so)
export LD_PRELOAD="$libasan $libstdcxx"
# Reports go to files as well as stderr: pytest captures a test's stderr, and a report that
# ends the process would be lost with the capture.
reports="$PWD/$build/reports"
rm -rf "$reports" && mkdir -p "$reports"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_odr_violation=0:log_path=$reports/asan
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan
export PYTHONPATH="$PWD/$lib${PYTHONPATH:+:$PYTHONPATH}"

# Left out: the tests that measure peak resident memory (ASan's shadow memory counts there).
excluded="never_holds_bt_by_v or stays_within_budget or stays_within_half_the_logits"
excluded+=" or no_mkl_buffers_resident or keeps_the_bf16_gradient_within_the_budget"
excluded+=" or keeps_no_logits_for_the_backward"
# And the one test that times the engines for real (the choice under a background load):
# instrumented engines run at other relative speeds (fp32_out: mkl 0.195 against onednn 0.174
# TFLOP/s sanitized), so near-ties flip; it runs in the normal suite.
excluded+=" or same_from_a_quiet_and_a_loaded_start"

if [ $# -eq 0 ]; then
  set -- tests/test_cpu_gemm.py tests/test_gemm_operands.py tests/test_fused_linear_cross_entropy_loss_grad.py \
    tests/test_forward_ops.py tests/test_grad_cache.py tests/test_linear_cross_entropy.py \
    tests/test_batch_norm_reduce_backward.py tests/test_batch_norm_sync_kernels.py \
    tests/test_ascendc_sim.py tests/test_cann_golden.py tests/test_fuzz.py tests/test_validation.py
fi
"$python" - <<'PY'
import ascend_ops, ascend_ops._C as C
print("sanitized build:", C.__file__)
PY
status=0
"$python" -m pytest -p no:cacheprovider -k "not ($excluded)" "$@" || status=$?
if compgen -G "$reports/*" > /dev/null; then
  echo "sanitizer reports (in $reports):"
  head -40 "$reports"/*
  exit 1
fi
exit $status
