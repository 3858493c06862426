// Helpers shared by the CPU kernels: exp for softmax and SiLU, element conversions, and explicit vectors.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace shop_assistant {

// exp's core for the softmax and SiLU, on a float or a vector of them: Cody-Waite range reduction and a
// degree-7 polynomial, within 2 ulp of expf. `x` is already clamped to the caller's range and `n` is
// round(x / ln 2), found by the 1.5 * 2^23 trick (std::floor keeps GCC from vectorising the loop). Returns
// exp(x) / 2^n; the caller scales by 2^n in its own type.
template <typename V>
inline V exp_reduced(V x, V n) {
  V r = x - n * 0.693145751953125f;    // ln 2, high part (n * hi is exact)
  r = r - n * 1.42860682030941723212e-6f;  // ln 2, low part
  V p = r * 1.98412698e-4f + 1.38888889e-3f;  // 1/7!, ...
  p = p * r + 8.33333333e-3f;
  p = p * r + 4.16666667e-2f;
  p = p * r + 1.66666667e-1f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  return p * r + 1.0f;
}

// exp for the softmax, written so that the compiler vectorises it inside `omp simd` loops (libm's expf is a
// scalar call per score). Below -87 it returns ~1e-38, not 0, which weighs nothing next to the running sum.
#pragma omp declare simd notinbranch
inline float fast_exp(float x) {
  x = std::max(x, -87.0f);
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  return exp_reduced(x, n) * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

// Element to float. bf16 by hand: c10's conversion goes through memcpy, which keeps the loops scalar.
inline float to_float(float x) { return x; }
inline float to_float(c10::BFloat16 x) { return std::bit_cast<float>(static_cast<uint32_t>(x.x) << 16); }
inline float to_float(c10::Half x) { return static_cast<float>(x); }

// Vector registers of this build: the tiles below are sized so their sums stay in registers. On x86 the
// build asks for vectors as wide as the CPU has (cpu_kernels.py): 512 bits with AVX-512, else 256 (GCC would
// otherwise use 256 on AVX-512 CPUs and 128 on some AVX2 ones).
#if defined(__AVX512F__)
constexpr int kLanes = 16, kRegisters = 32;
#elif defined(__AVX__)
constexpr int kLanes = 8, kRegisters = 16;
#else
constexpr int kLanes = 4, kRegisters = 16;
#endif

// Explicit vectors of kLanes floats (GCC/Clang vector extensions: no intrinsics, any architecture), so the
// register tiles below are what the compiler emits rather than what its auto-vectoriser happens to choose
// (which differed by 1.6x between vector widths, in opposite directions for fp32 and bf16).
typedef float VecF __attribute__((vector_size(kLanes * sizeof(float))));
typedef uint16_t VecU16 __attribute__((vector_size(kLanes * sizeof(uint16_t))));
typedef uint32_t VecU32 __attribute__((vector_size(kLanes * sizeof(uint32_t))));

inline VecF load_vec(const float* p) {
  VecF v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline VecF load_vec(const c10::BFloat16* p) {  // bf16 is the top half of an fp32: widen and shift
  VecU16 h;
  std::memcpy(&h, p, sizeof h);
  return reinterpret_cast<VecF>(__builtin_convertvector(h, VecU32) << 16);
}
template <typename T>
inline VecF load_vec(const T* p) {  // fp16, fp64: element by element
  VecF v;
  for (int i = 0; i < kLanes; ++i) v[i] = static_cast<float>(p[i]);
  return v;
}
typedef int32_t VecI32 __attribute__((vector_size(kLanes * sizeof(int32_t))));

// x in every lane (a per-lane loop compiles to one masked broadcast per lane; x * 1 folds to one broadcast).
inline VecF splat(float x) { return (VecF{} + 1.0f) * x; }
inline VecF max_vec(VecF a, VecF b) { return a > b ? a : b; }
inline float max_lanes(VecF v) {
  float m = v[0];
  for (int i = 1; i < kLanes; ++i) m = std::max(m, v[i]);
  return m;
}
inline float sum_lanes(VecF v) {
  float s = 0.f;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}
inline VecF min_vec(VecF a, VecF b) { return a < b ? a : b; }
// a * b + c rounded once, as one instruction wherever the CPU has one. Written out because -ffp-contract=fast
// lets the compiler fuse `c += a * b` in one instantiation of a kernel and not in another: on an AVX2 CPU
// (Zen 3) the 1-row and the 3-row tiles of the fp32 panels summed the same products differently, so a token's
// logits depended on the rows beside it (tests/inference/worker/test_model_runner.py, batch invariance).
inline VecF fma_vec(VecF a, VecF b, VecF c) {
#if defined(__AVX512F__)  // kLanes 16
  return reinterpret_cast<VecF>(_mm512_fmadd_ps(reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(b),
                                                reinterpret_cast<__m512>(c)));
#elif defined(__AVX__) && defined(__FMA__)  // kLanes 8
  return reinterpret_cast<VecF>(_mm256_fmadd_ps(reinterpret_cast<__m256>(a), reinterpret_cast<__m256>(b),
                                                reinterpret_cast<__m256>(c)));
#else
  VecF r;
  for (int i = 0; i < kLanes; ++i) r[i] = __builtin_fmaf(a[i], b[i], c[i]);
  return r;
#endif
}
// fast_exp on a vector; above 88.7 it returns about 3e38 (expf: infinity), so that 1 + exp(-x) in SiLU stays
// finite for very negative x.
inline VecF exp_vec(VecF x) {
  x = min_vec(max_vec(x, splat(-87.0f)), splat(88.7f));
  const VecF n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  return exp_reduced(x, n) * reinterpret_cast<VecF>((__builtin_convertvector(n, VecI32) + 127) << 23);
}
inline void store_vec(float* p, VecF v) { std::memcpy(p, &v, sizeof v); }

// A float vector stored as T, rounded to nearest even (bf16: as c10::BFloat16 rounds; no NaNs expected).
// fp32: nothing to round, but the value must exist as a float, as torch stores it: the barrier keeps the
// compiler from contracting a product and the sum it feeds into one FMA (one rounding fewer than torch).
template <typename V>
inline V materialize(V v) {
#if defined(__x86_64__)
  __asm__("" : "+v"(v));
#elif defined(__aarch64__)
  __asm__("" : "+w"(v));
#endif
  return v;
}
inline VecF round_vec(VecF v, float*) { return materialize(v); }
inline VecF round_vec(VecF v, c10::BFloat16*) {
  VecU32 u = reinterpret_cast<VecU32>(v);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  return reinterpret_cast<VecF>(u);
}
template <typename T>
inline VecF round_vec(VecF v, T*) {  // fp16: element by element
  for (int i = 0; i < kLanes; ++i) v[i] = static_cast<float>(static_cast<T>(v[i]));
  return v;
}
// v rounded to T, the same rounding (store after round_vec: the bf16 store then only drops the low half).
inline void store_as(float* p, VecF v) { store_vec(p, v); }
inline void store_as(c10::BFloat16* p, VecF v) {
  const VecU16 h = __builtin_convertvector(reinterpret_cast<VecU32>(round_vec(v, p)) >> 16, VecU16);
  std::memcpy(p, &h, sizeof h);
}
template <typename T>
inline void store_as(T* p, VecF v) {
  for (int i = 0; i < kLanes; ++i) p[i] = static_cast<T>(v[i]);
}

// bf16 dot products (AVX512-BF16: vdpbf16ps). One instruction multiplies 16 pairs of bf16 and adds both
// products to 16 fp32 sums, exactly (a bf16 product fits an fp32), replacing two widenings and two FMAs.
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
constexpr bool kBf16Dot = true;
typedef __m512bh PairsBf16;  // 16 pairs of bf16: lane i holds the pair (a_i, b_i)

// 16 pairs from 32 consecutive bf16 (a_0..a_15, b_0..b_15): lane i gets (a_i, b_i).
inline PairsBf16 pairs_of_rows(const c10::BFloat16* rows) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return reinterpret_cast<PairsBf16>(_mm512_permutexvar_epi16(idx, _mm512_loadu_si512(rows)));
}
// The same from two rows of 16 anywhere (b == nullptr: zeros).
inline PairsBf16 pairs_of_rows(const c10::BFloat16* a, const c10::BFloat16* b) {
  const __m512i idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                       37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i lo = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)));
  const __m512i hi = b == nullptr ? _mm512_setzero_si512()
                                  : _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
  return reinterpret_cast<PairsBf16>(_mm512_permutex2var_epi16(lo, idx, hi));
}
// Two adjacent bf16 (p[0], p[1]) as one pair's raw bits, the form splat_pair takes.
inline uint32_t pair_bits(const c10::BFloat16* p) {
  return static_cast<uint32_t>(p[0].x) | static_cast<uint32_t>(p[1].x) << 16;
}
// One pair (x, y), as raw bf16 bits, in every lane.
inline PairsBf16 splat_pair(uint32_t xy) { return reinterpret_cast<PairsBf16>(_mm512_set1_epi32(xy)); }
// acc + x_i * y_i + x'_i * y'_i in each lane.
inline VecF dot_pairs(VecF acc, PairsBf16 x, PairsBf16 y) {
  return reinterpret_cast<VecF>(_mm512_dpbf16_ps(reinterpret_cast<__m512>(acc), x, y));
}
// 16 floats to bf16, rounded to nearest even (as c10::BFloat16 rounds).
inline void store_bf16(uint16_t* p, VecF v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                      reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(reinterpret_cast<__m512>(v))));
}
// A row of n floats (n a multiple of 16) as bf16: the softmax weights for the V sum's dot products.
inline void store_bf16_row(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t t = 0; t < n; t += 16) store_bf16(dst + t, load_vec(src + t));
}
#else
constexpr bool kBf16Dot = false;
#endif

}  // namespace shop_assistant
