// Projections on weight-only quantized panels: int8 (symmetric) and int4 (asymmetric), group-wise along K.
//
// A decode step on a real-size model reads every weight once per step, so its projections are bound by memory:
// the 1.5B model's bf16 weights are 3.1 GB a step. Kept as int8 they are half that, as int4 a quarter (plus one
// scale, and for int4 one minimum, per group of `group` weights along K). The weights are turned back into bf16
// in registers, exactly (every int8 and every 4-bit code is a bf16), and multiplied as the bf16 panels are
// (small_linear.cpp): exact products, fp32 sums. Each group's sum is scaled once at the group's end:
//   int8: sum_k x_k w_k = s_g * sum_k x_k q_k               (w = s_g q, q in -127..127)
//   int4: sum_k x_k w_k = s_g * sum_k x_k q_k + m_g * sum_k x_k   (w = s_g q + m_g, q in 0..15)
// so the codes are never scaled one by one. The sums over a group of x (int4's second term) are computed once
// per row and call, not once per output.
//
// Layouts (made by inference/worker/quantization.py; N outputs in panels of 16, as the bf16 panels):
//   int8: [N / 16, K / 2, 32] bytes: step kk holds, for lane j, (q[j][2kk], q[j][2kk + 1]) at bytes 2j, 2j + 1:
//         the bf16 panels' pair layout, so one conversion gives a dot-product operand.
//   int4: [N / 16, K / 4, 32] bytes: step k4 holds, for lane j, byte 2j + e = q[j][4k4 + e] | q[j][4k4 + 2 + e] << 4:
//         the low nibbles are the pairs (4k4, 4k4 + 1), the high nibbles the pairs (4k4 + 2, 4k4 + 3).
//   scales (and int4's minimums): bf16 [N / 16, K / group, 16].
// Every row's result is one fixed sequence of sums whatever the number of rows (rows run in tiles of kQRows
// against each panel), so the projections stay batch invariant. Needs AVX512-BF16 (and AVX512-BW); elsewhere
// quant_linear_ready() is false and the engine keeps bf16 or fp32 weights.
//
// Registered as torch.ops.shop_assistant.quant_linear_int8_ / quant_linear_int4_.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <vector>

#include "vec.h"

namespace {

using namespace shop_assistant;

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
constexpr bool kQuantReady = true;
// Rows per register tile: each row needs its running sum and its group's sum in registers.
constexpr int kQRows = 8;
constexpr int64_t kAhead = 16;  // steps fetched ahead in a panel's stream (512 bytes)

// The 16 int4 codes 0..15 as bf16 (the table vpermw looks the nibbles up in; the upper 16 entries unused).
inline __m512i int4_table() {
  return _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                          0x4170, 0x4160, 0x4150, 0x4140, 0x4130, 0x4120, 0x4110, 0x4100,  // 15..8
                          0x40E0, 0x40C0, 0x40A0, 0x4080, 0x4040, 0x4000, 0x3F80, 0x0000);  // 7..0
}

// One int8 step (32 bytes: 16 lanes' pairs) as 16 bf16 pairs; exact, every int8 is a bf16.
inline PairsBf16 int8_pairs(const int8_t* p) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));       // lanes 0..7
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));  // lanes 8..15
  const __m512 a = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo));
  const __m512 b = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
  return _mm512_cvtne2ps_pbh(b, a);  // the low half of the result from the second operand
}

template <int kM>
void rows_times_int8(const c10::BFloat16* x, int64_t ldx, const int8_t* q, const c10::BFloat16* scales,
                     const c10::BFloat16* bias, int64_t K, int64_t group, int64_t p0, int64_t p1,
                     c10::BFloat16* out, int64_t ldo) {
  const int64_t groups = K / group, steps = group / 2;
  for (int64_t p = p0; p < p1; ++p) {
    const int8_t* w = q + p * K * kLanes;
    const c10::BFloat16* s = scales + p * groups * kLanes;
    VecF acc[kM];
#pragma GCC unroll 8
    for (int m = 0; m < kM; ++m) acc[m] = VecF{};
    for (int64_t g = 0; g < groups; ++g) {
      VecF part[kM];
#pragma GCC unroll 8
      for (int m = 0; m < kM; ++m) part[m] = VecF{};
      for (int64_t kk = g * steps; kk < (g + 1) * steps; ++kk) {
        const int8_t* line = w + kk * 2 * kLanes;
        __builtin_prefetch(line + kAhead * 2 * kLanes);
        const PairsBf16 wk = int8_pairs(line);
#pragma GCC unroll 8
        for (int m = 0; m < kM; ++m) part[m] = dot_pairs(part[m], wk, splat_pair(pair_bits(x + m * ldx + 2 * kk)));
      }
      const VecF sg = load_vec(s + g * kLanes);
#pragma GCC unroll 8
      for (int m = 0; m < kM; ++m) acc[m] += sg * part[m];
    }
    const VecF b = bias != nullptr ? load_vec(bias + p * kLanes) : VecF{};
#pragma GCC unroll 8
    for (int m = 0; m < kM; ++m)
      store_bf16(reinterpret_cast<uint16_t*>(out + m * ldo + p * kLanes), bias != nullptr ? acc[m] + b : acc[m]);
  }
}

// `sumx` [rows, groups]: each row's sum of x over each group (int4's minimum term).
template <int kM>
void rows_times_int4(const c10::BFloat16* x, int64_t ldx, const float* sumx, const uint8_t* q,
                     const c10::BFloat16* scales, const c10::BFloat16* mins, const c10::BFloat16* bias, int64_t K,
                     int64_t group, int64_t p0, int64_t p1, c10::BFloat16* out, int64_t ldo) {
  const int64_t groups = K / group, steps = group / 4;
  const __m512i table = int4_table();
  const __m512i low4 = _mm512_set1_epi16(0x000F);
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* w = q + p * K * kLanes / 2;
    const c10::BFloat16* s = scales + p * groups * kLanes;
    const c10::BFloat16* mn = mins + p * groups * kLanes;
    VecF acc[kM];
#pragma GCC unroll 8
    for (int m = 0; m < kM; ++m) acc[m] = VecF{};
    for (int64_t g = 0; g < groups; ++g) {
      VecF part[kM];
#pragma GCC unroll 8
      for (int m = 0; m < kM; ++m) part[m] = VecF{};
      for (int64_t k4 = g * steps; k4 < (g + 1) * steps; ++k4) {
        const uint8_t* line = w + k4 * 2 * kLanes;
        __builtin_prefetch(line + kAhead * 2 * kLanes);
        const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(line)));
        const PairsBf16 lo = reinterpret_cast<PairsBf16>(_mm512_permutexvar_epi16(_mm512_and_si512(bytes, low4), table));
        const PairsBf16 hi = reinterpret_cast<PairsBf16>(_mm512_permutexvar_epi16(_mm512_srli_epi16(bytes, 4), table));
#pragma GCC unroll 8
        for (int m = 0; m < kM; ++m) {
          const c10::BFloat16* xm = x + m * ldx + 4 * k4;
          part[m] = dot_pairs(part[m], lo, splat_pair(pair_bits(xm)));
          part[m] = dot_pairs(part[m], hi, splat_pair(pair_bits(xm + 2)));
        }
      }
      const VecF sg = load_vec(s + g * kLanes), mg = load_vec(mn + g * kLanes);
#pragma GCC unroll 8
      for (int m = 0; m < kM; ++m) acc[m] += sg * part[m] + mg * sumx[m * groups + g];
    }
    const VecF b = bias != nullptr ? load_vec(bias + p * kLanes) : VecF{};
#pragma GCC unroll 8
    for (int m = 0; m < kM; ++m)
      store_bf16(reinterpret_cast<uint16_t*>(out + m * ldo + p * kLanes), bias != nullptr ? acc[m] + b : acc[m]);
  }
}

// The kernel for M (1..kQRows) rows, M known at compile time. `sumx` is nullptr for int8.
template <int kM>
void dispatch(int64_t M, bool int4, const c10::BFloat16* x, int64_t ldx, const float* sumx, const void* q,
              const c10::BFloat16* scales, const c10::BFloat16* mins, const c10::BFloat16* bias, int64_t K,
              int64_t group, int64_t p0, int64_t p1, c10::BFloat16* out, int64_t ldo) {
  if constexpr (kM == 0) {
    return;
  } else {
    if (M != kM) return dispatch<kM - 1>(M, int4, x, ldx, sumx, q, scales, mins, bias, K, group, p0, p1, out, ldo);
    if (int4)
      rows_times_int4<kM>(x, ldx, sumx, static_cast<const uint8_t*>(q), scales, mins, bias, K, group, p0, p1, out,
                          ldo);
    else
      rows_times_int8<kM>(x, ldx, static_cast<const int8_t*>(q), scales, bias, K, group, p0, p1, out, ldo);
  }
}

void run(at::Tensor& out, const at::Tensor& x, const at::Tensor& q, const at::Tensor& scales,
         const std::optional<at::Tensor>& mins, const std::optional<at::Tensor>& bias, int64_t group) {
  const bool int4 = mins.has_value();
  const int64_t M = x.size(0), K = x.size(1), ldx = x.stride(0), ldo = out.stride(0), panels = q.size(0);
  const int64_t groups = K / group;
  const c10::BFloat16* xp = x.data_ptr<c10::BFloat16>();
  // int4's per-row group sums of x, in fp32, in order (one sequence per row whatever the rows beside it).
  std::vector<float> sumx(int4 ? M * groups : 0);
  for (int64_t m = 0; int4 && m < M; ++m)
    for (int64_t g = 0; g < groups; ++g) {
      float t = 0.f;
      for (int64_t k = g * group; k < (g + 1) * group; ++k) t += to_float(xp[m * ldx + k]);
      sumx[m * groups + g] = t;
    }
  const void* qp = q.data_ptr();
  const c10::BFloat16* sp = scales.data_ptr<c10::BFloat16>();
  const c10::BFloat16* mp = int4 ? mins->data_ptr<c10::BFloat16>() : nullptr;
  const c10::BFloat16* bp = bias.has_value() ? bias->data_ptr<c10::BFloat16>() : nullptr;
  c10::BFloat16* op = out.data_ptr<c10::BFloat16>();
  // Each panel, while it sits in the core's cache, against every tile of kQRows rows (a decode step is one tile).
  at::parallel_for(0, panels, M <= kQRows ? 4 : 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t m0 = 0; m0 < M; m0 += kQRows) {
        const int64_t rows = std::min<int64_t>(kQRows, M - m0);
        dispatch<kQRows>(rows, int4, xp + m0 * ldx, ldx, int4 ? sumx.data() + m0 * groups : nullptr, qp, sp, mp, bp,
                         K, group, p, p + 1, op + m0 * ldo, ldo);
      }
  });
}
#else
constexpr bool kQuantReady = false;
#endif

void check(const at::Tensor& out, const at::Tensor& x, const at::Tensor& q, const at::Tensor& scales,
           const std::optional<at::Tensor>& mins, const std::optional<at::Tensor>& bias, int64_t group, int64_t per_step) {
  TORCH_CHECK(kQuantReady, "quantized panels need AVX512-BF16 (quant_linear_ready() is false)");
  TORCH_CHECK(x.scalar_type() == at::kBFloat16 && out.scalar_type() == at::kBFloat16, "x and out: bfloat16");
  TORCH_CHECK(x.dim() == 2 && x.stride(1) == 1 && out.dim() == 2 && out.stride(1) == 1, "x, out: [rows, features]");
  const int64_t M = x.size(0), K = x.size(1), panels = q.size(0);
  TORCH_CHECK(group > 0 && group % per_step == 0 && K % group == 0, "group: a multiple of the step dividing K");
  TORCH_CHECK(q.dim() == 3 && q.size(1) * per_step == K && q.size(2) == 2 * kLanes && q.is_contiguous(),
              "q: the layout of quantization.pack_int8 / pack_int4, contiguous");
  TORCH_CHECK(out.size(0) == M && out.size(1) == panels * kLanes, "shapes disagree");
  for (const auto* t : {&scales, mins.has_value() ? &*mins : nullptr}) {
    if (t == nullptr) continue;
    TORCH_CHECK(t->scalar_type() == at::kBFloat16 && t->is_contiguous() && t->dim() == 3 && t->size(0) == panels &&
                    t->size(1) == K / group && t->size(2) == kLanes,
                "scales/mins: bfloat16 [panels, K / group, 16], contiguous");
  }
  if (bias.has_value())
    TORCH_CHECK(bias->scalar_type() == at::kBFloat16 && bias->is_contiguous() && bias->numel() == panels * kLanes,
                "bias: one per output, contiguous, bfloat16");
}

void quant_linear_int8(at::Tensor out, const at::Tensor& x, const at::Tensor& q, const at::Tensor& scales,
                       const std::optional<at::Tensor>& bias, int64_t group) {
  check(out, x, q, scales, std::nullopt, bias, group, 2);
  TORCH_CHECK(q.scalar_type() == at::kChar, "int8 codes: torch.int8");
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
  run(out, x, q, scales, std::nullopt, bias, group);
#endif
}

void quant_linear_int4(at::Tensor out, const at::Tensor& x, const at::Tensor& q, const at::Tensor& scales,
                       const at::Tensor& mins, const std::optional<at::Tensor>& bias, int64_t group) {
  check(out, x, q, scales, mins, bias, group, 4);
  TORCH_CHECK(q.scalar_type() == at::kByte, "int4 codes: two to a torch.uint8");
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
  run(out, x, q, scales, mins, bias, group);
#endif
}

bool quant_linear_ready() { return kQuantReady; }

}  // namespace

TORCH_LIBRARY_FRAGMENT(shop_assistant, m) {
  m.def("quant_linear_int8_(Tensor(a!) out, Tensor x, Tensor q, Tensor scales, Tensor? bias, int group) -> ()");
  m.def("quant_linear_int4_(Tensor(a!) out, Tensor x, Tensor q, Tensor scales, Tensor mins, Tensor? bias, "
        "int group) -> ()");
  m.def("quant_linear_ready() -> bool", &quant_linear_ready);
}

TORCH_LIBRARY_IMPL(shop_assistant, CPU, m) {
  m.impl("quant_linear_int8_", &quant_linear_int8);
  m.impl("quant_linear_int4_", &quant_linear_int4);
}
