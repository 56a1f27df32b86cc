#!/usr/bin/env bash
# Builds the Ascend C kernels.
#
#   ASCEND_HOME_PATH set (CANN installed, e.g. `source /usr/local/Ascend/ascend-toolkit/set_env.sh`):
#     for each op, msopgen generates a custom-operator project from <op>/<op>.json for
#     Atlas A2 (ascend910b; add ai_core-ascend910_93 for A3), our op_host/ and op_kernel/
#     sources replace the generated ones (plus common/platform.h), and the project's own
#     build.sh makes the custom_opp_*.run package; install it with `./custom_opp_*.run`
#     and the aclnn two-phase API of each op is generated into the package.
#     This path has never been run: no machine this project is developed on has CANN.
#
#   otherwise: the simulator build — the same kernel sources compiled with g++ against
#     ascendc_kernels/sim (what `pip install .` builds as ascend_ops._ascendc_sim),
#     into build/libascendc_sim.so.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/build"
mkdir -p "$out"

if [[ -n "${ASCEND_HOME_PATH:-}" ]]; then
  for op in batch_norm_reduce_backward fused_linear_cross_entropy_loss_grad; do
    project="$out/cann/$op"
    rm -rf "$project"
    "$ASCEND_HOME_PATH/python/site-packages/bin/msopgen" gen -i "$here/$op/$op.json" \
      -c ai_core-ascend910b -lan cpp -out "$project"
    cp "$here/$op/op_host/"* "$project/op_host/"
    cp "$here/$op/op_kernel/"* "$project/op_kernel/"
    # The tilings include ../../common/platform.h, relative to <project>/op_host.
    mkdir -p "$out/cann/common" && cp "$here/common/platform.h" "$out/cann/common/"
    # msopgen names the host source op_host/<op>.cpp; ours is <op>_def.cpp.
    mv "$project/op_host/${op}_def.cpp" "$project/op_host/$op.cpp"
    (cd "$project" && bash build.sh)
    echo "package: $(ls "$project"/build_out/custom_opp_*.run)"
  done
else
  echo "ASCEND_HOME_PATH not set: building the kernels against the CPU simulator"
  sources=("$here"/sim/src/*.cpp "$here"/sim/host/*.cpp "$here"/sim/selftest/*.cpp "$here"/*/op_kernel/*.cpp)
  "${CXX:-g++}" -std=c++17 -O2 -pthread -shared -fPIC -I"$here/sim/include" "${sources[@]}" \
    -o "$out/libascendc_sim.so"
  echo "built $out/libascendc_sim.so"
fi
