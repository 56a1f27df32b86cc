// The Python view of builtin_limits.h, defined on both ascend_ops._C (every build: the
// docs' tests, scripts/parity.py, ascend_ops.npu_limits) and ascend_ops._npu.
#pragma once

#include "builtin_limits.h"

#include <torch/csrc/utils/pybind.h>

namespace ascend_ops::npu {

inline void def_builtin_limits(pybind11::module& m) {
  namespace py = pybind11;
  m.def("cann_builtin_limits", [] {
    const BuiltinLimits& l = builtin_limits();
    py::dict d;
    d["ub_bytes"] = l.ub_bytes;
    d["flce_grad_max_hidden"] = l.flce_grad_max_hidden;
    d["flce_grad_high_perf_min_vocab"] = l.flce_grad_high_perf_min_vocab;
    d["flce_grad_high_perf_max_vocab"] = l.flce_grad_high_perf_max_vocab;
    d["flce_grad_high_perf_max_rows"] = l.flce_grad_high_perf_max_rows;
    d["online_max_sum_max_hidden"] = l.online_max_sum_max_hidden;
    d["online_max_sum_min_vocab"] = l.online_max_sum_min_vocab;
    return d;
  }, "The shape limits of CANN's built-in aclnn ops, derived from CANN's host code "
     "(op_plugin/csrc/npu/builtin_limits.cpp).");
  m.def("builtin_flce_grad_refusal", &builtin_flce_grad_refusal, py::arg("bt"), py::arg("h"),
        py::arg("v"), py::arg("high_performance"),
        "Why CANN's built-in FLCE backward refuses this shape, or None when it takes it.");
  m.def("check_builtin_flce_grad_limits", &check_builtin_flce_grad_limits, py::arg("bt"),
        py::arg("h"), py::arg("v"), py::arg("high_performance"),
        "Raise NotImplementedError when CANN's built-in FLCE backward cannot take this shape.");
  m.def("check_builtin_online_max_sum_limits", &check_builtin_online_max_sum_limits,
        py::arg("h"), py::arg("v"),
        "Raise NotImplementedError when CANN's built-in online max-sum cannot take this shape.");
}

}  // namespace ascend_ops::npu
