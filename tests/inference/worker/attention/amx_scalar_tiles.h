// A scalar stand-in for the AMX tile instructions that csrc/amx_tiles.h's loop uses (AmxTiles' interface), as
// the SDM's pseudocode describes them: 8 tiles of up to 16 rows x 64 bytes per thread, shaped by the loaded
// config; tileloadd reads each configured row from base + row * stride (the rest of the tile is garbage here,
// so reading it shows); tdpbf16ps adds each pair of products in k order to the fp32 sums, checking that the
// operands' shapes fit. For tests only (amx_tiles_emulation.cpp, and small_linear.cpp built with it by
// test_small_linear_amx.py), on CPUs without AMX.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "amx_tiles.h"

namespace shop_assistant::amx {

struct ScalarTiles {
  static inline thread_local TileConfig loaded;
  static inline thread_local bool configured = false;
  static inline thread_local uint8_t tiles[8][16][64];

  static void require(bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "scalar tiles: %s\n", what);
      std::abort();
    }
  }
  static float widen(uint16_t h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static void configure(const TileConfig* cfg) {
    require(cfg->palette == 1 && cfg->start_row == 0, "palette 1, start row 0");
    for (int t = 0; t < 16; ++t)
      require(cfg->rows[t] <= 16 && cfg->colsb[t] <= 64 && (t < 8 || cfg->rows[t] == 0), "tile shape");
    loaded = *cfg;
    configured = true;
  }
  static void release() { configured = false; }
  template <int t>
  static void zero() {
    require(configured && loaded.rows[t] > 0, "tilezero: tile not configured");
    std::memset(tiles[t], 0, sizeof tiles[t]);
  }
  template <int t>
  static void load(const uint16_t* p, int64_t stride) {
    require(configured && loaded.rows[t] > 0 && loaded.colsb[t] > 0, "tileloadd: tile not configured");
    std::memset(tiles[t], 0xFF, sizeof tiles[t]);
    for (int r = 0; r < loaded.rows[t]; ++r)
      std::memcpy(tiles[t][r], reinterpret_cast<const char*>(p) + r * stride, loaded.colsb[t]);
  }
  template <int t>
  static void store(float* p, int64_t stride) {
    require(configured, "tilestored: no config");
    for (int r = 0; r < loaded.rows[t]; ++r)
      std::memcpy(reinterpret_cast<char*>(p) + r * stride, tiles[t][r], loaded.colsb[t]);
  }
  template <int c, int a, int b>
  static void dot() {
    require(configured && loaded.colsb[a] / 4 == loaded.rows[b], "tdpbf16ps: A's pairs != B's rows");
    require(loaded.rows[a] == loaded.rows[c] && loaded.colsb[b] == loaded.colsb[c], "tdpbf16ps: C's shape");
    for (int m = 0; m < loaded.rows[c]; ++m)
      for (int k = 0; k < loaded.colsb[a] / 4; ++k)
        for (int n = 0; n < loaded.colsb[c] / 4; ++n) {
          float acc;
          std::memcpy(&acc, tiles[c][m] + 4 * n, 4);
          const auto* A = reinterpret_cast<const uint16_t*>(tiles[a][m]);
          const auto* B = reinterpret_cast<const uint16_t*>(tiles[b][k]);
          acc += widen(A[2 * k]) * widen(B[2 * n]);
          acc += widen(A[2 * k + 1]) * widen(B[2 * n + 1]);
          std::memcpy(tiles[c][m] + 4 * n, &acc, 4);
        }
  }
};

}  // namespace shop_assistant::amx
