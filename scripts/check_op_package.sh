#!/usr/bin/env bash
# scripts/check_op_package.sh [--tree DIR]
#
# Compiles the op package as the device build would see it: the sources that
# ascendc_kernels/build.sh copies into the msopgen project, laid out by build.sh itself
# (`build.sh --layout`: the same copies into the same places, without msopgen), each op
# compiled from that tree alone:
#   kernel side  <tree>/ascend_ops/op_kernel/ascend_ops_<op>.cpp with ascendc-check --strict
#                (g++ against asc-devkit's real AscendC headers in CANN's CPU-debug mode for
#                A2/A3; deprecated APIs fail);
#   host side    <tree>/ascend_ops/op_host/ascend_ops_<op>.cpp (OpDef, InferShape, TilingFunc)
#                with g++ against asc-devkit's host tiling headers (tiling/tiling_api.h's
#                Matmul part, platform_ascendc.h) and our stand-in for CANN's
#                register/op_def_registry.h (ascendc_kernels/cann_host/include; CANN's own is
#                not published with asc-devkit).
# A file a kernel or tiling includes that build.sh did not copy fails here as "No such file".
# --tree DIR compiles an already laid-out DIR instead (tests/test_ascendc_package.py removes
# one copied file from a layout and expects the failure). The tools come from
# ../shared/tools beside the clone, or $ASCEND_OPS_SHARED_TOOLS. Exit 0 only if every file
# of both sides compiles.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
tools="${ASCEND_OPS_SHARED_TOOLS:-$repo/../shared/tools}"
for tool in "$tools/ascendc-check/ascendc-check" "$tools/cann-matmul-tiling/build.sh"; do
  [[ -x "$tool" ]] || { echo "check_op_package.sh: no $tool (../shared beside the clone, or ASCEND_OPS_SHARED_TOOLS)" >&2; exit 2; }
done

scratch="$(mktemp -d /tmp/ascend_ops_package.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
if [[ "${1:-}" == "--tree" ]]; then
  tree="${2:?usage: check_op_package.sh [--tree DIR]}"
else
  tree="$scratch/tree"
  "$repo/ascendc_kernels/build.sh" --layout "$tree"
fi
# The stand-in headers are copied away from the source tree: from an -I folder inside
# ascendc_kernels/, a relative include such as ../../common/platform.h would find the
# tree's file and hide one that build.sh failed to copy.
standin="$scratch/standin/cann/include"
mkdir -p "$standin" && cp -r "$repo/ascendc_kernels/cann_host/include/." "$standin/"
tree="$(cd "$tree" && pwd)"
rc=0

echo "kernel side ($tree/*/op_kernel):"
"$tools/ascendc-check/ascendc-check" --strict "$tree" || rc=1

# The host tiling library's include flags (its build is content-cached: a few seconds when
# pip install has built it into build/cann-matmul-tiling already).
host_build="${CANN_MATMUL_TILING_BUILD:-$repo/build/cann-matmul-tiling}"
"$tools/cann-matmul-tiling/build.sh" "$host_build"
read -r -a cflags < "$host_build/cflags"
echo "host side ($tree/*/op_host):"
shopt -s nullglob
hosts=("$tree"/*/op_host/*.cpp)
[[ ${#hosts[@]} -gt 0 ]] || { echo "FAIL no $tree/*/op_host/*.cpp"; exit 1; }
for src in "${hosts[@]}"; do
  if err=$(g++ -fsyntax-only -x c++ "${cflags[@]}" -I"$standin" "$src" 2>&1); then
    echo "OK   $src"
  else
    echo "FAIL $src"; echo "$err" | grep -E "error" | head -20; rc=1
  fi
done
exit $rc
