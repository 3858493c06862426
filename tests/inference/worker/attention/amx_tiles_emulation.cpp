// The AMX tile loop of csrc/amx_tiles.h run on a scalar stand-in for the tile instructions (amx_scalar_tiles.h),
// against an in-order fp32 sum and a double reference, on any x86 CPU with AVX-512: checks the tile config, the
// B tile's reading of the bf16 panels and the K tail without AMX hardware. Built and run by
// test_small_linear_amx.py; exit status = failures (a misuse of the tiles aborts).
#include "amx_scalar_tiles.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using namespace shop_assistant::amx;

namespace {

using Tiles = ScalarTiles;

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

template <int G>
void run(const uint16_t* x, int64_t ldx, const uint16_t* packed, int64_t K, float* c) {
  rows_times_group<Tiles, G>(x, ldx, packed, K, c);
}

}  // namespace

int main() {
  if (offsetof(TileConfig, colsb) != 16 || offsetof(TileConfig, rows) != 48) return 100;  // palette 1's layout
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  int failures = 0;
  for (int K : {576, 1536, 192, 38, 2, 30, 34, 62, 64}) {
    for (int G = 1; G <= kGroup; ++G) {
      const int ldx = K + 6, N = G * 16;
      std::vector<uint16_t> x(16 * ldx), W(N * K), packed(N * K);
      for (auto& v : x) v = to_bf16(normal(gen));
      for (auto& v : W) v = to_bf16(normal(gen));
      // cpu_kernels.pack_panels' bf16 layout: [N / 16, K / 2, 32], line kk = (W[j][2kk], W[j][2kk + 1]), j < 16.
      for (int p = 0; p < G; ++p)
        for (int kk = 0; kk < K / 2; ++kk)
          for (int j = 0; j < 16; ++j)
            for (int t = 0; t < 2; ++t)
              packed[(p * (K / 2) + kk) * 32 + j * 2 + t] = W[(p * 16 + j) * K + 2 * kk + t];
      const TileConfig cfg = tile_config(K);
      Tiles::configure(&cfg);
      std::vector<float> c(kGroup * 256, NAN);
      void (*kernels[])(const uint16_t*, int64_t, const uint16_t*, int64_t, float*) = {run<1>, run<2>, run<3>, run<4>};
      kernels[G - 1](x.data(), ldx, packed.data(), K, c.data());
      double worst = 0;
      int differ = 0;
      for (int g = 0; g < G; ++g)
        for (int m = 0; m < 16; ++m)
          for (int n = 0; n < 16; ++n) {
            const uint16_t* xr = x.data() + m * ldx;
            const uint16_t* wr = W.data() + (g * 16 + n) * K;
            float ordered = 0;  // the pairs in k order, as the tiles add them
            double exact = 0;
            for (int k = 0; k < K; k += 2) {
              ordered += Tiles::widen(xr[k]) * Tiles::widen(wr[k]);
              ordered += Tiles::widen(xr[k + 1]) * Tiles::widen(wr[k + 1]);
              exact += double(Tiles::widen(xr[k])) * Tiles::widen(wr[k]) + double(Tiles::widen(xr[k + 1])) * Tiles::widen(wr[k + 1]);
            }
            const float got = c[g * 256 + m * 16 + n];
            worst = std::max(worst, std::fabs(got - exact) / (1 + std::fabs(exact)));
            differ += got != ordered;
          }
      const bool ok = worst < 1e-4 && differ == 0;
      failures += !ok;
      std::printf("K=%d panels=%d: worst relative error %.1e, %d outputs off the in-order sum: %s\n", K, G, worst,
                  differ, ok ? "ok" : "FAIL");
    }
  }
  return failures;
}
