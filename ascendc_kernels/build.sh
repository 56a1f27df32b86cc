#!/usr/bin/env bash
# Builds the Ascend C kernels.
#
#   ASCEND_HOME_PATH set (CANN >= 9.0.0 installed, see docs/npu.md, e.g.
#   `source /usr/local/Ascend/ascend-toolkit/set_env.sh`): ONE msopgen custom-operator
#     project from ascend_ops.json holding both ops (AscendOpsFusedLinearCrossEntropyLossGrad,
#     AscendOpsBatchNormReduceBackward), vendor name `ascend_ops`, compute units
#     ascend910b (Atlas A2) and ascend910_93 (Atlas A3). Our op_host/ and op_kernel/
#     sources replace the generated ones under msopgen's names (ascend_ops_<op>.cpp), the
#     project's own build.sh makes build/cann/ascend_ops/build_out/custom_opp_*.run.
#     Install:  ./custom_opp_<os>_<arch>.run --install-path=<dir>
#       -> <dir>/vendors/ascend_ops/ (op_api/lib/libcust_opapi.so, bin/set_env.bash)
#     then `source <dir>/vendors/ascend_ops/bin/set_env.bash` and use impl="npu_custom".
#     This path has never been run: no machine this project is developed on has CANN.
#
#   --layout DIR: only the sources the CANN path puts into the project, laid out under
#     DIR exactly as there (DIR/ascend_ops/op_host, DIR/ascend_ops/op_kernel, DIR/common),
#     without msopgen and its generated files; scripts/check_op_package.sh compiles that
#     tree against the real AscendC headers (CI).
#
#   otherwise: the simulator build — the same kernel sources compiled with g++ against
#     ascendc_kernels/sim (what `pip install .` builds as ascend_ops._ascendc_sim),
#     into build/libascendc_sim.so.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/build"
vendor=ascend_ops
compute_units="ascend910b;ascend910_93"
ops=(batch_norm_reduce_backward fused_linear_cross_entropy_loss_grad)

# Copies our sources into the project $1/$vendor under msopgen's names: each op's kernel and
# op_host/*_def.cpp, and every file of this tree they include, found by package_sources.py
# from the includes themselves (a kernel's new header is copied without a change here). Relative
# includes find the same files there: <op>/X lands in $1/$vendor/X, common/ in $1/common.
lay_out() {
  local parent="$1" source destination
  while IFS=$'\t' read -r source destination; do
    mkdir -p "$(dirname "$parent/$destination")"
    cp "$here/$source" "$parent/$destination"
  done < <(python3 "$here/package_sources.py" "$vendor" "${ops[@]}")
}

if [[ "${1:-}" == "--layout" ]]; then
  [[ -n "${2:-}" ]] || { echo "usage: build.sh --layout DIR" >&2; exit 2; }
  mkdir -p "$2/$vendor/op_host" "$2/$vendor/op_kernel"
  lay_out "$2"
  exit 0
fi
mkdir -p "$out"

if [[ -n "${ASCEND_HOME_PATH:-}" ]]; then
  project="$out/cann/$vendor"
  rm -rf "$project"
  "$ASCEND_HOME_PATH/python/site-packages/bin/msopgen" gen -i "$here/ascend_ops.json" \
    -c ai_core-ascend910b -lan cpp -out "$project"
  # msopgen writes one compute unit and the default vendor name into CMakePresets.json:
  # one package for A2 and A3, installed under vendors/ascend_ops (not "customize", so it
  # never overwrites another package's libcust_opapi.so).
  python3 - "$project/CMakePresets.json" "$vendor" "$compute_units" <<'PY'
import json, sys
path, vendor, units = sys.argv[1:]
presets = json.load(open(path))
variables = presets["configurePresets"][0]["cacheVariables"]
variables["vendor_name"]["value"] = vendor
variables["ASCEND_COMPUTE_UNIT"]["value"] = units
json.dump(presets, open(path, "w"), indent=4)
PY
  for op in "${ops[@]}"; do
    generated="ascend_ops_$op"  # msopgen's file and kernel names: the op type in snake case
    rm -f "$project/op_host/$generated"*.h "$project/op_host/$generated.cpp" "$project/op_kernel/$generated.cpp"
  done
  lay_out "$out/cann"
  (cd "$project" && bash build.sh)
  echo "package: $(ls "$project"/build_out/custom_opp_*.run)"
else
  echo "ASCEND_HOME_PATH not set: building the kernels against the CPU simulator"
  sources=("$here"/sim/src/*.cpp "$here"/sim/host/*.cpp "$here"/sim/selftest/*.cpp "$here"/*/op_kernel/*.cpp)
  "${CXX:-g++}" -std=c++17 -O2 -pthread -shared -fPIC -I"$here/sim/include" "${sources[@]}" \
    -o "$out/libascendc_sim.so"
  echo "built $out/libascendc_sim.so"
fi
