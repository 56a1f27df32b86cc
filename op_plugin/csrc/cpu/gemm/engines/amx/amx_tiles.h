// The AMX tile configuration both AMX files load (amx_kernels.cpp, amx_peak_loops.cpp): eight
// tiles of 16 rows x 64 bytes. Include only from files compiled for AMX-TILE; the function is
// static, so no file compiled for another instruction set shares its code.
#pragma once

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

namespace ascend_ops {
namespace cpu {

// Intel SDM, LDTILECFG: palette 1, per-tile bytes per row and rows.
struct alignas(64) AmxTileConfig {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t bytes_per_row[16];
  uint8_t rows[16];
};

static inline void configure_full_tiles() {
  AmxTileConfig config;
  memset(&config, 0, sizeof(config));
  config.palette = 1;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

}  // namespace cpu
}  // namespace ascend_ops
