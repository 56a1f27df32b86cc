// Not CANN's header: CANN installs asc-devkit's include/adv_api/tiling_api.h as
// tiling/tiling_api.h, an umbrella over every advanced API's tiling. Our TilingFuncs use
// only the Matmul part of it, so on the host (cann_host/) this stand-in includes just that
// header of asc-devkit (the rest needs CANN's graph headers, which are not here).
#pragma once
#include "matmul/bmm_tiling.h"  // matmul_tiling::MultiCoreMatmulTiling (and matmul_tiling.h)
