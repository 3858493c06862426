// AMX-BF16 tiles on the bf16 panels of small_linear.cpp: the panels are already the B operand's layout.
//
// A bf16 panel is [K / 2, 16 pairs]: line kk (64 bytes) holds (W[j][2kk], W[j][2kk + 1]) for the panel's 16
// columns j. AMX's B tile is 16 rows of 64 bytes, row kk = those same 16 pairs (VNNI order), so 16 consecutive
// lines of a panel, read with a 64-byte stride, are one B tile: no second copy of the weights. The A tile is 16
// rows of x, 32 bf16 (64 bytes) of k each, read in place with the rows' stride; the C tile 16 rows x 16 fp32.
// One tdpbf16ps adds, per row m and column n, the 32 products of that k range (pairs in order, fp32 sums): each
// row's sums are the same whatever the other rows of the tile, so padded tiles keep batch invariance.
//
// The tile loop is a template over the tile operations (AmxTiles below runs the instructions) so that the
// indexing can be checked by a scalar stand-in on CPUs without AMX. Included by small_linear.cpp only where it
// builds the AVX512-BF16 panels (every CPU with AMX-BF16 has AVX512-BF16); the functions that execute tile
// instructions carry their own target attribute, so the extension builds and loads on CPUs without AMX.
#pragma once

#include <immintrin.h>

#include <cstdint>

#define SHOP_ASSISTANT_AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bf16")))

namespace shop_assistant::amx {

constexpr int kTileRows = 16;      // rows of A and C per tile (palette 1's most)
constexpr int kTileK = 32;         // bf16 of k per A row (64 bytes): 16 pairs, the B tile's 16 rows
constexpr int kTileCols = 16;      // fp32 columns of C: one panel
constexpr int kGroup = 4;          // panels (C tiles) sharing each A tile
constexpr int kA = 4, kB = 5;      // tiles of a whole 32-wide k step
constexpr int kATail = 6, kBTail = 7;  // the last K % 32 (even) of k: A narrower, B fewer rows

// ldtilecfg's 64-byte operand, palette 1: bytes 0-1 palette and start row, 16-47 the bytes per row of tiles
// 0-15 (16-bit each), 48-63 their rows. Tiles left at 0 x 0 are unconfigured (palette 1 has 8).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

// The tiles for a projection over K (even) inputs: C 0..3, A/B of the 32-wide steps, and the tail's A/B.
inline TileConfig tile_config(int64_t K) {
  TileConfig cfg;
  for (int c = 0; c < kGroup; ++c) {
    cfg.rows[c] = kTileRows;
    cfg.colsb[c] = kTileCols * 4;
  }
  cfg.rows[kA] = kTileRows;
  cfg.colsb[kA] = kTileK * 2;
  cfg.rows[kB] = kTileK / 2;
  cfg.colsb[kB] = kTileCols * 4;
  const int tail = static_cast<int>(K % kTileK);
  if (tail != 0) {
    cfg.rows[kATail] = kTileRows;
    cfg.colsb[kATail] = static_cast<uint16_t>(tail * 2);  // tail bf16 per row: colsb / 4 pairs ...
    cfg.rows[kBTail] = static_cast<uint8_t>(tail / 2);    // ... = B's rows, as tdpbf16ps requires
    cfg.colsb[kBTail] = kTileCols * 4;
  }
  return cfg;
}

// Bytes fetched ahead in each panel's stream, as the AVX512-BF16 panels do (8 KB: 8 k steps of 32).
constexpr int64_t kAheadBytes = 8192;

// One k step (A tile `a` already loaded) of G panels: panel g's B tile at w + g * panel, 64 bytes a row; the
// 16 lines 8 KB further on in each panel requested meanwhile (a decode step streams the weights from memory).
template <class Tiles, int a, int b, int G>
SHOP_ASSISTANT_AMX_TARGET inline void step_panels(const uint16_t* w, int64_t panel) {
  for (int g = 0; g < G; ++g)
    for (int line = 0; line < kTileK / 2; ++line)
      __builtin_prefetch(reinterpret_cast<const char*>(w + g * panel) + kAheadBytes + line * 64);
  Tiles::template load<b>(w, 64);
  Tiles::template dot<0, a, b>();
  if constexpr (G > 1) {
    Tiles::template load<b>(w + panel, 64);
    Tiles::template dot<1, a, b>();
  }
  if constexpr (G > 2) {
    Tiles::template load<b>(w + 2 * panel, 64);
    Tiles::template dot<2, a, b>();
  }
  if constexpr (G > 3) {
    Tiles::template load<b>(w + 3 * panel, 64);
    Tiles::template dot<3, a, b>();
  }
}

// c[g][m][n] = sum over k of x[m][k] * W[16 p + n][k] for 16 rows of x (`x`, `ldx` bf16 apart) and panels
// p = 0..G-1 from `w` (each K * 16 bf16), k in 32-wide steps in order, then the tail. The tile config must be
// loaded.
template <class Tiles, int G>
SHOP_ASSISTANT_AMX_TARGET inline void rows_times_group(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t K,
                                                       float* c) {
  static_assert(G >= 1 && G <= kGroup);
  const int64_t panel = K * kTileCols, whole = K - K % kTileK, stride = ldx * 2;
  Tiles::template zero<0>();
  if constexpr (G > 1) Tiles::template zero<1>();
  if constexpr (G > 2) Tiles::template zero<2>();
  if constexpr (G > 3) Tiles::template zero<3>();
  // k's pair k / 2 is line k / 2 of a panel, 32 bf16 a line: k * 16 bf16 in.
  for (int64_t k = 0; k < whole; k += kTileK) {
    Tiles::template load<kA>(x + k, stride);
    step_panels<Tiles, kA, kB, G>(w + k * kTileCols, panel);
  }
  if (whole < K) {
    Tiles::template load<kATail>(x + whole, stride);
    step_panels<Tiles, kATail, kBTail, G>(w + whole * kTileCols, panel);
  }
  constexpr int64_t kC = kTileRows * kTileCols;
  Tiles::template store<0>(c, kTileCols * 4);
  if constexpr (G > 1) Tiles::template store<1>(c + kC, kTileCols * 4);
  if constexpr (G > 2) Tiles::template store<2>(c + 2 * kC, kTileCols * 4);
  if constexpr (G > 3) Tiles::template store<3>(c + 3 * kC, kTileCols * 4);
}

// The instructions. Their intrinsics name tiles by literal numbers (pasted into the assembly), hence the
// switches, which fold away for a template argument.
struct AmxTiles {
  SHOP_ASSISTANT_AMX_TARGET static void configure(const TileConfig* cfg) {
    // GCC's tile intrinsics tell the compiler about no memory they read: stores before this point are done.
    __asm__ volatile("" ::: "memory");
    _tile_loadconfig(cfg);
  }
  SHOP_ASSISTANT_AMX_TARGET static void release() { _tile_release(); }

  template <int t>
  SHOP_ASSISTANT_AMX_TARGET static inline void zero() {
    switch (t) {
      case 0: _tile_zero(0); break;
      case 1: _tile_zero(1); break;
      case 2: _tile_zero(2); break;
      case 3: _tile_zero(3); break;
    }
  }
  template <int t>
  SHOP_ASSISTANT_AMX_TARGET static inline void load(const uint16_t* p, int64_t stride) {
    switch (t) {
      case kA: _tile_loadd(4, p, stride); break;
      case kB: _tile_loadd(5, p, stride); break;
      case kATail: _tile_loadd(6, p, stride); break;
      case kBTail: _tile_loadd(7, p, stride); break;
    }
  }
  template <int t>
  SHOP_ASSISTANT_AMX_TARGET static inline void store(float* p, int64_t stride) {
    switch (t) {
      case 0: _tile_stored(0, p, stride); break;
      case 1: _tile_stored(1, p, stride); break;
      case 2: _tile_stored(2, p, stride); break;
      case 3: _tile_stored(3, p, stride); break;
    }
  }
  template <int c, int a, int b>
  SHOP_ASSISTANT_AMX_TARGET static inline void dot() {
    static_assert((a == kA && b == kB) || (a == kATail && b == kBTail));
    if constexpr (a == kA) {
      switch (c) {
        case 0: _tile_dpbf16ps(0, 4, 5); break;
        case 1: _tile_dpbf16ps(1, 4, 5); break;
        case 2: _tile_dpbf16ps(2, 4, 5); break;
        case 3: _tile_dpbf16ps(3, 4, 5); break;
      }
    } else {
      switch (c) {
        case 0: _tile_dpbf16ps(0, 6, 7); break;
        case 1: _tile_dpbf16ps(1, 6, 7); break;
        case 2: _tile_dpbf16ps(2, 6, 7); break;
        case 3: _tile_dpbf16ps(3, 6, 7); break;
      }
    }
  }
};

}  // namespace shop_assistant::amx
