// Which per-architecture builds of the CPU kernels this library holds (as in PyTorch's
// aten/src/ATen/native/cpu: the build chooses which code exists, the run dispatches). setup.py compiles the x86 sources (the AVX2 and
// AVX512 kernels and their drivers, X86_ONLY_SOURCES there) only when the compiler targets
// x86-64, and then defines ASCEND_OPS_X86_KERNELS=1. Every portable file that names an
// x86 kernel does so under `#if ASCEND_OPS_X86_KERNELS`, so a build for another CPU
// (aarch64: an Atlas host's Kunpeng 920) compiles, references and reaches none of them:
// there the portable loops and the engines torch ships run.
#pragma once

#ifndef ASCEND_OPS_X86_KERNELS
#define ASCEND_OPS_X86_KERNELS 0
#endif

#if ASCEND_OPS_X86_KERNELS && !defined(__x86_64__)
#error "ASCEND_OPS_X86_KERNELS=1 for a compiler that does not target x86-64 (setup.py, target_arch)"
#endif
