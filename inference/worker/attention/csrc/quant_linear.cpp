// Projections on quantized panels: w8a8 (symmetric 8-bit codes) and int4 (asymmetric), group-wise along K.
//
// A decode step on a real-size model reads every weight once per step, so its projections are bound by memory:
// the 1.5B model's bf16 weights are 3.1 GB a step. Kept as int8 they are half that, as int4 about a third (plus
// one scale, and for int4 one minimum, per group of `group` weights along K). Each group's sum is scaled once,
// at the group's end, never code by code:
//   int4: sum_k x_k w_k = s_g * a_g * sum_k xq_k q_k + m_g * sum_k x_k   (w = s_g q + m_g, q in 0..15)
//   w8a8: sum_k x_k w_k = s_g * a_g * sum_k xq_k q_k                 (w = s_g q, q in -127..127)
// Turning codes into bf16 in registers cost more instructions than the products: int4 nibbles on a 2-core Zen 4
// (21 tokens/s, compute bound), and a weight-only int8 kernel (5 conversions per 16 codes) ran the 1.5B model's
// decode no faster than bf16 on a 2-core AMX Xeon (7.4 against 7.7 tokens/s; as w8a8, 14.5). So x is quantized, per row
// and group, to int8 (xq = round(x / a_g), a_g = max |x| / 127; llama.cpp's Q8 activations) and the codes are
// multiplied with AVX512-VNNI (vpdpbusd: 64 unsigned-by-signed byte products a instruction, exact int32 sums).
// The minimum's term uses the sum of x itself. Measured: the 1.5B model's perplexity 26.24 with xq, 26.29 exact.
//
// Layouts (made by inference/worker/quantization.py; N outputs in panels of 16, as the bf16 panels):
//   int4: [N / 16, K / 8, 64] bytes: step k8 holds, for lane j, byte 4j + b = q[j][8k8 + b] | q[j][8k8 + 4 + b] << 4:
//         the low nibbles of lane j's 32 bits are its codes for k8 * 8 + 0..3, the high ones for + 4..7.
//   w8a8: [N / 16, K / 4, 64] bytes: step k4 holds, for lane j, bytes 4j + b = q[j][4k4 + b] + 128 (uint8).
//   scales (and int4's minimums): bf16 [N / 16, K / group, 16].
// Every row's result is one fixed sequence of operations whatever the number of rows (rows run in tiles of
// kQRows against each panel; x is quantized row by row), so the projections stay batch invariant. Needs
// AVX512-BW and AVX512-VNNI (the AVX-512 kernels) or AVX2 and FMA; elsewhere quant_linear_isa() is 0 and the
// weights stay as loaded.
//
// Registered as torch.ops.shop_assistant.quant_linear_int4_ / quant_linear_w8a8_.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <vector>

#include "vec.h"

namespace {

using namespace shop_assistant;

constexpr int64_t kPanel = 16;  // outputs per panel, whatever the vector width (quantization.LANES)

// Calls kernel.template operator()<M>() for M in 1..kQRows (the row count known at compile time: the sums'
// registers unrolled).
template <int kM, typename F>
void with_rows(int64_t M, F&& kernel) {
  if constexpr (kM > 0) {
    if (M == kM) return kernel.template operator()<kM>();
    with_rows<kM - 1>(M, kernel);
  }
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define SHOP_ASSISTANT_QUANT 2  // AVX-512: the w8a8 and int4 kernels
static_assert(kLanes == kPanel);
// Rows per register tile: each row's group sum in a register (its running sum is in memory, see add_group).
constexpr int kQRows = 16;
constexpr int64_t kAhead = 16;  // steps fetched ahead in a panel's stream (512 bytes)

// A group's sums scaled into the row's running sums, kept in memory (`acc`, one row's 16 floats): touched once a
// group, so the registers hold the group's sums of up to 16 rows. Explicit FMAs, so that every kernel rounds the
// same way (a row's result must not depend on which kernel its step's row count chose).
inline void add_group(float* acc, VecF sg, VecF part) {
  store_vec(acc, reinterpret_cast<VecF>(_mm512_fmadd_ps(reinterpret_cast<__m512>(sg), reinterpret_cast<__m512>(part),
                                                        reinterpret_cast<__m512>(load_vec(acc)))));
}
inline void add_group(float* acc, VecF sg, VecF part, VecF mg, float sumx) {
  const __m512 t = _mm512_fmadd_ps(reinterpret_cast<__m512>(sg), reinterpret_cast<__m512>(part),
                                   reinterpret_cast<__m512>(load_vec(acc)));
  store_vec(acc, reinterpret_cast<VecF>(_mm512_fmadd_ps(reinterpret_cast<__m512>(mg), _mm512_set1_ps(sumx), t)));
}
// The finished sums (plus the bias, if any, in fp32) rounded to bf16 once.
template <int kM>
inline void store_rows(const float* acc, const c10::BFloat16* bias, c10::BFloat16* out, int64_t ldo) {
  const VecF b = bias != nullptr ? load_vec(bias) : VecF{};
  for (int m = 0; m < kM; ++m) {
    const VecF a = load_vec(acc + m * kLanes);
    store_bf16(reinterpret_cast<uint16_t*>(out + m * ldo), bias != nullptr ? a + b : a);
  }
}

// int4: `xq` [rows, K] the rows quantized per group, `xs` [rows, groups] their scales (a_g), `sumx` [rows,
// groups] the sums of x itself (the minimum's term).
template <int kM>
void rows_times_int4(const int8_t* xq, int64_t K, const float* xs, const float* sumx, const uint8_t* q,
                     const c10::BFloat16* scales, const c10::BFloat16* mins, const c10::BFloat16* bias,
                     int64_t group, int64_t p, c10::BFloat16* out, int64_t ldo) {
  const int64_t groups = K / group, steps = group / 8;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const uint8_t* w = q + p * K * kLanes / 2;
  const c10::BFloat16* s = scales + p * groups * kLanes;
  const c10::BFloat16* mn = mins + p * groups * kLanes;
  alignas(64) float acc[kM * kLanes] = {};
  for (int64_t g = 0; g < groups; ++g) {
    __m512i part[kM];
#pragma GCC unroll 16
    for (int m = 0; m < kM; ++m) part[m] = _mm512_setzero_si512();
    for (int64_t k8 = g * steps; k8 < (g + 1) * steps; ++k8) {
      const uint8_t* line = w + k8 * 4 * kLanes;
      __builtin_prefetch(line + kAhead * 4 * kLanes);
      const __m512i bytes = _mm512_loadu_si512(line);
      const __m512i lo = _mm512_and_si512(bytes, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4);
#pragma GCC unroll 16
      for (int m = 0; m < kM; ++m) {
        int32_t x0, x1;  // the row's 4 + 4 int8 values of this step, broadcast to every lane
        std::memcpy(&x0, xq + m * K + 8 * k8, 4);
        std::memcpy(&x1, xq + m * K + 8 * k8 + 4, 4);
        part[m] = _mm512_dpbusd_epi32(part[m], lo, _mm512_set1_epi32(x0));
        part[m] = _mm512_dpbusd_epi32(part[m], hi, _mm512_set1_epi32(x1));
      }
    }
    const VecF sg = load_vec(s + g * kLanes), mg = load_vec(mn + g * kLanes);
    for (int m = 0; m < kM; ++m) {
      const VecF sums = reinterpret_cast<VecF>(_mm512_cvtepi32_ps(part[m]));
      add_group(acc + m * kLanes, sg * xs[m * groups + g], sums, mg, sumx[m * groups + g]);
    }
  }
  store_rows<kM>(acc, bias != nullptr ? bias + p * kLanes : nullptr, out, ldo);
}

// w8a8: the int8 codes stored offset by 128 (u = q + 128, unsigned: vpdpbusd's first operand) against the
// row's int8 steps (xq, signed), 4 inputs a lane a step: sum_k xq_k q_k = sum_k xq_k u_k - 128 sum_k xq_k, exact in
// int32, so a group's sum is the symmetric product of the two int8 vectors. One instruction per 4 inputs and row:
// the int8 mode, and the tensors that the int4 mode keeps at 8 bits (docs/quantization.md).
// `sumxq` [rows, groups]: the sums of xq (the offset's term).
template <int kM>
void rows_times_w8a8(const int8_t* xq, int64_t K, const float* xs, const int32_t* sumxq, const uint8_t* q,
                     const c10::BFloat16* scales, const c10::BFloat16* bias, int64_t group, int64_t p,
                     c10::BFloat16* out, int64_t ldo) {
  const int64_t groups = K / group, steps = group / 4;
  const uint8_t* w = q + p * K * kLanes;
  const c10::BFloat16* s = scales + p * groups * kLanes;
  alignas(64) float acc[kM * kLanes] = {};
  for (int64_t g = 0; g < groups; ++g) {
    __m512i part[kM];
#pragma GCC unroll 16
    for (int m = 0; m < kM; ++m) part[m] = _mm512_setzero_si512();
    for (int64_t k4 = g * steps; k4 < (g + 1) * steps; ++k4) {
      const uint8_t* line = w + k4 * 4 * kLanes;
      __builtin_prefetch(line + kAhead * 4 * kLanes);
      const __m512i bytes = _mm512_loadu_si512(line);
#pragma GCC unroll 16
      for (int m = 0; m < kM; ++m) {
        int32_t x4;  // the row's 4 int8 values of this step, broadcast to every lane
        std::memcpy(&x4, xq + m * K + 4 * k4, 4);
        part[m] = _mm512_dpbusd_epi32(part[m], bytes, _mm512_set1_epi32(x4));
      }
    }
    const VecF sg = load_vec(s + g * kLanes);
    for (int m = 0; m < kM; ++m) {
      const __m512i exact = _mm512_sub_epi32(part[m], _mm512_set1_epi32(128 * sumxq[m * groups + g]));
      add_group(acc + m * kLanes, sg * xs[m * groups + g], reinterpret_cast<VecF>(_mm512_cvtepi32_ps(exact)));
    }
  }
  store_rows<kM>(acc, bias != nullptr ? bias + p * kLanes : nullptr, out, ldo);
}

#elif defined(__AVX2__) && defined(__FMA__)
#define SHOP_ASSISTANT_QUANT 1  // AVX2: the w8a8 and int4 kernels
// AVX2 has no byte dot product accumulating into int32 (vpdpbusd): vpmaddubsw multiplies unsigned by signed bytes
// into int16 pair sums (saturating) and vpmaddwd with ones adds the pairs into int32, 4 bytes a lane as vpdpbusd
// does. A panel's 16 outputs are two 8-lane halves; 4 rows a tile keep their 8 half-sums in the 16 registers.
constexpr int kQRows = 4;
constexpr int64_t kAhead = 16;

struct Sums16 {  // one row's int32 sums of a panel's 16 outputs
  __m256i lo, hi;
};

inline __m256i pairs_to_int32(__m256i pairs16) { return _mm256_madd_epi16(pairs16, _mm256_set1_epi16(1)); }

// A group's sums (as floats) scaled into the row's running sums acc[16]: acc + sg * part (+ mg * sumx), FMAs.
inline void add_group16(float* acc, const c10::BFloat16* sg, float a, const Sums16& part,
                        const c10::BFloat16* mg = nullptr, float sumx = 0.f) {
  for (int h = 0; h < 2; ++h) {
    const __m128i s16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sg + 8 * h));
    const __m256 s = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(s16), 16)),
                                   _mm256_set1_ps(a));
    __m256 t = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(h == 0 ? part.lo : part.hi), _mm256_loadu_ps(acc + 8 * h));
    if (mg != nullptr) {
      const __m128i m16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(mg + 8 * h));
      const __m256 m = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(m16), 16));
      t = _mm256_fmadd_ps(m, _mm256_set1_ps(sumx), t);
    }
    _mm256_storeu_ps(acc + 8 * h, t);
  }
}

// The finished sums (plus the bias, in fp32) rounded to bf16 once (round to nearest even, as c10::BFloat16 does).
template <int kM>
inline void store_rows16(const float* acc, const c10::BFloat16* bias, c10::BFloat16* out, int64_t ldo) {
  for (int m = 0; m < kM; ++m)
    for (int j = 0; j < kPanel; ++j)
      out[m * ldo + j] = c10::BFloat16(acc[m * kPanel + j] + (bias != nullptr ? to_float(bias[j]) : 0.f));
}

template <int kM>
void rows_times_int4(const int8_t* xq, int64_t K, const float* xs, const float* sumx, const uint8_t* q,
                     const c10::BFloat16* scales, const c10::BFloat16* mins, const c10::BFloat16* bias,
                     int64_t group, int64_t p, c10::BFloat16* out, int64_t ldo) {
  const int64_t groups = K / group, steps = group / 8;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const uint8_t* w = q + p * K * kPanel / 2;
  const c10::BFloat16* s = scales + p * groups * kPanel;
  const c10::BFloat16* mn = mins + p * groups * kPanel;
  alignas(64) float acc[kM * kPanel] = {};
  for (int64_t g = 0; g < groups; ++g) {
    Sums16 part[kM];
#pragma GCC unroll 4
    for (int m = 0; m < kM; ++m) part[m] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t k8 = g * steps; k8 < (g + 1) * steps; ++k8) {
      const uint8_t* line = w + k8 * 4 * kPanel;
      __builtin_prefetch(line + kAhead * 4 * kPanel);
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line));       // lanes 0..7
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line + 32));  // lanes 8..15
      const __m256i alo = _mm256_and_si256(a, low4), ahi = _mm256_and_si256(_mm256_srli_epi16(a, 4), low4);
      const __m256i blo = _mm256_and_si256(b, low4), bhi = _mm256_and_si256(_mm256_srli_epi16(b, 4), low4);
#pragma GCC unroll 4
      for (int m = 0; m < kM; ++m) {
        int32_t x0, x1;
        std::memcpy(&x0, xq + m * K + 8 * k8, 4);
        std::memcpy(&x1, xq + m * K + 8 * k8 + 4, 4);
        const __m256i v0 = _mm256_set1_epi32(x0), v1 = _mm256_set1_epi32(x1);
        // Codes 0..15 times |x| <= 127: a pair sum is at most 3810, two of them fit int16 before widening.
        part[m].lo = _mm256_add_epi32(part[m].lo, pairs_to_int32(_mm256_add_epi16(_mm256_maddubs_epi16(alo, v0),
                                                                                   _mm256_maddubs_epi16(ahi, v1))));
        part[m].hi = _mm256_add_epi32(part[m].hi, pairs_to_int32(_mm256_add_epi16(_mm256_maddubs_epi16(blo, v0),
                                                                                   _mm256_maddubs_epi16(bhi, v1))));
      }
    }
    for (int m = 0; m < kM; ++m)
      add_group16(acc + m * kPanel, s + g * kPanel, xs[m * groups + g], part[m], mn + g * kPanel, sumx[m * groups + g]);
  }
  store_rows16<kM>(acc, bias != nullptr ? bias + p * kPanel : nullptr, out, ldo);
}

// w8a8: the stored codes (q + 128) back to signed by flipping the top bit; vpmaddubsw's unsigned operand is |x|,
// the codes take x's sign (vpsignb), so a pair sum is at most 2 * 127 * 127 and never saturates. The offset's
// term is therefore not needed here (sumxq unused).
template <int kM>
void rows_times_w8a8(const int8_t* xq, int64_t K, const float* xs, const int32_t* /*sumxq*/, const uint8_t* q,
                     const c10::BFloat16* scales, const c10::BFloat16* bias, int64_t group, int64_t p,
                     c10::BFloat16* out, int64_t ldo) {
  const int64_t groups = K / group, steps = group / 4;
  const __m256i top = _mm256_set1_epi8(static_cast<char>(0x80));
  const uint8_t* w = q + p * K * kPanel;
  const c10::BFloat16* s = scales + p * groups * kPanel;
  alignas(64) float acc[kM * kPanel] = {};
  for (int64_t g = 0; g < groups; ++g) {
    Sums16 part[kM];
#pragma GCC unroll 4
    for (int m = 0; m < kM; ++m) part[m] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t k4 = g * steps; k4 < (g + 1) * steps; ++k4) {
      const uint8_t* line = w + k4 * 4 * kPanel;
      __builtin_prefetch(line + kAhead * 4 * kPanel);
      const __m256i a = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(line)), top);
      const __m256i b = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(line + 32)), top);
#pragma GCC unroll 4
      for (int m = 0; m < kM; ++m) {
        int32_t x4;
        std::memcpy(&x4, xq + m * K + 4 * k4, 4);
        const __m256i v = _mm256_set1_epi32(x4), av = _mm256_abs_epi8(v);
        part[m].lo = _mm256_add_epi32(part[m].lo, pairs_to_int32(_mm256_maddubs_epi16(av, _mm256_sign_epi8(a, v))));
        part[m].hi = _mm256_add_epi32(part[m].hi, pairs_to_int32(_mm256_maddubs_epi16(av, _mm256_sign_epi8(b, v))));
      }
    }
    for (int m = 0; m < kM; ++m) add_group16(acc + m * kPanel, s + g * kPanel, xs[m * groups + g], part[m]);
  }
  store_rows16<kM>(acc, bias != nullptr ? bias + p * kPanel : nullptr, out, ldo);
}
#else
#define SHOP_ASSISTANT_QUANT 0
#endif

#if SHOP_ASSISTANT_QUANT
// Each row of x, per group: the int8 values (xq), their scale (max |x| / 127) and the sum of x itself. Row by
// row, in one fixed order (a row's values do not depend on the rows beside it).
void quantize_rows(const at::Tensor& x, int64_t group, int8_t* xq, float* xs, float* sumx, int32_t* sumxq = nullptr) {
  const int64_t M = x.size(0), K = x.size(1), ldx = x.stride(0), groups = K / group;
  const c10::BFloat16* xp = x.data_ptr<c10::BFloat16>();
  at::parallel_for(0, M, 8, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t g = 0; g < groups; ++g) {
        const c10::BFloat16* v = xp + m * ldx + g * group;
        float most = 0.f, sum = 0.f;
        for (int64_t k = 0; k < group; ++k) {
          most = std::max(most, std::abs(to_float(v[k])));
          sum += to_float(v[k]);
        }
        const float scale = most / 127.f, inverse = most > 0.f ? 127.f / most : 0.f;
        int32_t codes = 0;
        for (int64_t k = 0; k < group; ++k) {
          xq[m * K + g * group + k] = static_cast<int8_t>(std::nearbyint(to_float(v[k]) * inverse));
          codes += xq[m * K + g * group + k];
        }
        if (sumxq != nullptr) sumxq[m * groups + g] = codes;
        xs[m * groups + g] = scale;
        sumx[m * groups + g] = sum;
      }
  });
}

void run_int4(at::Tensor& out, const at::Tensor& x, const at::Tensor& q, const at::Tensor& scales,
              const at::Tensor& mins, const std::optional<at::Tensor>& bias, int64_t group) {
  const int64_t M = x.size(0), K = x.size(1), ldo = out.stride(0), panels = q.size(0), groups = K / group;
  std::vector<int8_t> xq(M * K);
  std::vector<float> xs(M * groups), sumx(M * groups);
  quantize_rows(x, group, xq.data(), xs.data(), sumx.data());
  const uint8_t* qp = q.data_ptr<uint8_t>();
  const c10::BFloat16* sp = scales.data_ptr<c10::BFloat16>();
  const c10::BFloat16* mp = mins.data_ptr<c10::BFloat16>();
  const c10::BFloat16* bp = bias.has_value() ? bias->data_ptr<c10::BFloat16>() : nullptr;
  c10::BFloat16* op = out.data_ptr<c10::BFloat16>();
  // Each panel, while it sits in the core's cache, against every tile of rows (a decode step is one tile).
  at::parallel_for(0, panels, M <= kQRows ? 4 : 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t m0 = 0; m0 < M; m0 += kQRows)
        with_rows<kQRows>(std::min<int64_t>(kQRows, M - m0), [&]<int kM>() {
          rows_times_int4<kM>(xq.data() + m0 * K, K, xs.data() + m0 * groups, sumx.data() + m0 * groups, qp, sp,
                              mp, bp, group, p, op + m0 * ldo + p * kPanel, ldo);
        });
  });
}

void run_w8a8(at::Tensor& out, const at::Tensor& x, const at::Tensor& q, const at::Tensor& scales,
              const std::optional<at::Tensor>& bias, int64_t group) {
  const int64_t M = x.size(0), K = x.size(1), ldo = out.stride(0), panels = q.size(0), groups = K / group;
  std::vector<int8_t> xq(M * K);
  std::vector<float> xs(M * groups), sumx(M * groups);
  std::vector<int32_t> sumxq(M * groups);
  quantize_rows(x, group, xq.data(), xs.data(), sumx.data(), sumxq.data());
  const uint8_t* qp = q.data_ptr<uint8_t>();
  const c10::BFloat16* sp = scales.data_ptr<c10::BFloat16>();
  const c10::BFloat16* bp = bias.has_value() ? bias->data_ptr<c10::BFloat16>() : nullptr;
  c10::BFloat16* op = out.data_ptr<c10::BFloat16>();
  at::parallel_for(0, panels, M <= kQRows ? 4 : 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t m0 = 0; m0 < M; m0 += kQRows)
        with_rows<kQRows>(std::min<int64_t>(kQRows, M - m0), [&]<int kM>() {
          rows_times_w8a8<kM>(xq.data() + m0 * K, K, xs.data() + m0 * groups, sumxq.data() + m0 * groups, qp, sp, bp,
                              group, p, op + m0 * ldo + p * kPanel, ldo);
        });
  });
}
#endif

void check(const at::Tensor& out, const at::Tensor& x, const at::Tensor& q, const at::Tensor& scales,
           const std::optional<at::Tensor>& mins, const std::optional<at::Tensor>& bias, int64_t group, int64_t per_step) {
  TORCH_CHECK(SHOP_ASSISTANT_QUANT > 0, "quantized panels need AVX2 and FMA (quant_linear_isa() is 0)");
  TORCH_CHECK(x.scalar_type() == at::kBFloat16 && out.scalar_type() == at::kBFloat16, "x and out: bfloat16");
  TORCH_CHECK(x.dim() == 2 && x.stride(1) == 1 && out.dim() == 2 && out.stride(1) == 1, "x, out: [rows, features]");
  const int64_t M = x.size(0), K = x.size(1), panels = q.size(0);
  TORCH_CHECK(group > 0 && group % per_step == 0 && K % group == 0, "group: a multiple of the step dividing K");
  // A step is per_step inputs of 16 lanes: 64 bytes of w8a8 (4 inputs) or of int4 (8 inputs, 4 bits each).
  TORCH_CHECK(q.dim() == 3 && q.size(1) * per_step == K && q.size(2) == 4 * kPanel && q.is_contiguous(),
              "q: the layout of quantization's _pack_w8a8 / _pack_int4, contiguous");
  TORCH_CHECK(out.size(0) == M && out.size(1) == panels * kPanel, "shapes disagree");
  for (const auto* t : {&scales, mins.has_value() ? &*mins : nullptr}) {
    if (t == nullptr) continue;
    TORCH_CHECK(t->scalar_type() == at::kBFloat16 && t->is_contiguous() && t->dim() == 3 && t->size(0) == panels &&
                    t->size(1) == K / group && t->size(2) == kPanel,
                "scales/mins: bfloat16 [panels, K / group, 16], contiguous");
  }
  if (bias.has_value())
    TORCH_CHECK(bias->scalar_type() == at::kBFloat16 && bias->is_contiguous() && bias->numel() == panels * kPanel,
                "bias: one per output, contiguous, bfloat16");
}

void quant_linear_int4(at::Tensor out, const at::Tensor& x, const at::Tensor& q, const at::Tensor& scales,
                       const at::Tensor& mins, const std::optional<at::Tensor>& bias, int64_t group) {
  check(out, x, q, scales, mins, bias, group, 8);
  TORCH_CHECK(q.scalar_type() == at::kByte, "int4 codes: two to a torch.uint8");
#if SHOP_ASSISTANT_QUANT
  run_int4(out, x, q, scales, mins, bias, group);
#endif
}

void quant_linear_w8a8(at::Tensor out, const at::Tensor& x, const at::Tensor& q, const at::Tensor& scales,
                       const std::optional<at::Tensor>& bias, int64_t group) {
  check(out, x, q, scales, std::nullopt, bias, group, 4);
  TORCH_CHECK(q.scalar_type() == at::kByte, "w8a8 codes: torch.uint8, offset by 128");
#if SHOP_ASSISTANT_QUANT
  run_w8a8(out, x, q, scales, bias, group);
#endif
}

// 2: AVX-512 (VNNI byte products), 1: AVX2 (vpmaddubsw pairs), 0: none.
int64_t quant_linear_isa() { return SHOP_ASSISTANT_QUANT; }

}  // namespace

TORCH_LIBRARY_FRAGMENT(shop_assistant, m) {
  m.def("quant_linear_int4_(Tensor(a!) out, Tensor x, Tensor q, Tensor scales, Tensor mins, Tensor? bias, "
        "int group) -> ()");
  m.def("quant_linear_w8a8_(Tensor(a!) out, Tensor x, Tensor q, Tensor scales, Tensor? bias, int group) -> ()");
  m.def("quant_linear_isa() -> int", &quant_linear_isa);
}

TORCH_LIBRARY_IMPL(shop_assistant, CPU, m) {
  m.impl("quant_linear_int4_", &quant_linear_int4);
  m.impl("quant_linear_w8a8_", &quant_linear_w8a8);
}
