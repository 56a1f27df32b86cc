// CANN's Matmul high-level API header; on the simulator, sim_matmul.h plus
// REGIST_MATMUL_OBJ, whose meaning depends on ASCENDC_CUBE_ONLY being defined before this
// header is included (asc-devkit's kfc_register_obj.h, MIX kernels on A2/A3):
//   with it: each object is initialised on the AIC (Init(tiling, pipe)); on an AIV the
//            macro returns from the calling function, as the vector binary's expansion does;
//   without: KFC. On the AIC the macro makes the core a server for its AIVs' Matmul calls
//            and then returns from the calling function (the server's objects are the
//            clients' counterparts: their tilings are checked when the clients register); on an AIV it opens a client
//            (until the calling function returns) whose objects' calls the server runs.
// Like CANN's, both forms contain `return`: use REGIST_MATMUL_OBJ in a void function.
#pragma once
#include "../sim_matmul.h"

#ifdef ASCENDC_CUBE_ONLY
#define REGIST_MATMUL_OBJ(tpipe, workspace, ...)                                  \
  if (!sim::IsAic()) return;                                                      \
  do {                                                                            \
    sim::CallScope regist_scope_("REGIST_MATMUL_OBJ");                            \
    sim::RegisterMatmulsBegin((workspace), false);                                \
    sim::RegisterMatmuls(sim::MatmulRoute::Direct, __VA_ARGS__);                  \
  } while (0)
#else
#define REGIST_MATMUL_OBJ(tpipe, workspace, ...)                                  \
  if (sim::IsAic()) {                                                             \
    {                                                                             \
      sim::CallScope regist_scope_("REGIST_MATMUL_OBJ");                          \
      sim::RegisterMatmulsBegin((workspace), true);                               \
      sim::KfcServe();                                                            \
    }                                                                             \
    return;                                                                       \
  }                                                                               \
  sim::KfcClient sim_kfc_client_;                                                 \
  do {                                                                            \
    sim::CallScope regist_scope_("REGIST_MATMUL_OBJ");                            \
    sim::RegisterMatmulsBegin((workspace), true);                                 \
    sim::RegisterMatmuls(sim::MatmulRoute::KfcClient, __VA_ARGS__);               \
  } while (0)
#endif
