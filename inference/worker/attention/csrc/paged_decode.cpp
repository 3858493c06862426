// Decode attention that reads the paged KV cache in place (the CPU twin of vLLM's paged_attention kernel).
// K blocks are stored transposed ([blocks, kv_heads, head_dim, block_size]), V blocks as tokens
// ([blocks, block_size, kv_heads, head_dim]); the cpu backend (cpu_backend.py) owns that layout.
//
// One query token per sequence. Each sequence walks its own block table block by block with an online
// softmax, so no K/V is ever copied into a padded buffer. When the decodes share leading blocks (the
// store's system prompt), the caller attends over those once for all of them and passes the result in
// (`prefix_out`, `prefix_lse`): the walk starts from that partial softmax at block `start_block`, which is
// the cascade-attention merge done for free.
//
// Registered as torch.ops.shop_assistant.paged_decode_attention_; built on first use by cpu_kernels.py.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <omp.h>
#include <torch/library.h>

#include "vec.h"

#include <algorithm>
#include <cmath>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

namespace {

using namespace shop_assistant;

struct Shape {
  int64_t heads, kv_heads, head_dim, block_size;
  int64_t q_row, q_head;                // strides of q (elements)
  int64_t o_row, o_head;                // strides of out
  int64_t k_block, k_head, k_dim;       // strides of k_cache [blocks, kv_heads, head_dim, block_size]
  int64_t v_block, v_token, v_head;     // strides of v_cache [blocks, block_size, kv_heads, head_dim]
};

// A sequence's softmax state before its first block: the scaled query in fp32 and, with a cascade prefix,
// the prefix's softmax as a running state (max = its log-sum-exp, sum = 1, accumulator = its output).
template <typename T>
void start_softmax(const Shape& s, int64_t D, const T* q, const T* prefix_out, const float* prefix_lse, float scale,
                   std::vector<float>& qf, std::vector<float>& acc, std::vector<float>& m, std::vector<float>& l) {
  const int64_t H = s.heads;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = 0; d < D; ++d) qf[h * D + d] = static_cast<float>(q[h * s.q_head + d]) * scale;
  if (prefix_out != nullptr) {
    for (int64_t h = 0; h < H; ++h) {
      m[h] = prefix_lse[h];
      l[h] = 1.f;
      for (int64_t d = 0; d < D; ++d) acc[h * D + d] = static_cast<float>(prefix_out[h * s.o_head + d]);
    }
  } else {
    std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
    std::fill(l.begin(), l.end(), 0.f);
    std::fill(acc.begin(), acc.end(), 0.f);
  }
}

// One sequence: its query heads against blocks [start_block, ceil(ctx / block_size)) of its table.
// kD, kBS: head_dim and block_size known at compile time (the loops unroll into vector FMAs), 0 if not.
//
// K is stored transposed per block (dimension-major, the block's tokens contiguous), so a head's scores for
// the block's tokens are head_dim vector FMAs with the query element broadcast: no horizontal sums. V is
// token-major: the weighted sum adds each token's row, scaled by its weight, to the accumulator.
template <typename T, int kD, int kBS>
void decode_one(const Shape& s, const T* q, const T* k_cache, const T* v_cache, const int32_t* table,
                int64_t ctx, int64_t start_block, const T* prefix_out, const float* prefix_lse, float scale,
                T* out) {
  const int64_t H = s.heads, G = s.heads / s.kv_heads;
  const int64_t D = kD > 0 ? kD : s.head_dim, bs = kBS > 0 ? kBS : s.block_size;
  std::vector<float> qf(H * D), acc(H * D), m(H), l(H), p(H * bs);
  start_softmax(s, D, q, prefix_out, prefix_lse, scale, qf, acc, m, l);
  const int64_t num_blocks = (ctx + bs - 1) / bs;
  for (int64_t b = start_block; b < num_blocks; ++b) {
    const int64_t n = std::min(bs, ctx - b * bs);  // the last block's slots past n hold stale values: unread
    const T* kb = k_cache + static_cast<int64_t>(table[b]) * s.k_block;
    const T* vb = v_cache + static_cast<int64_t>(table[b]) * s.v_block;
    for (int64_t h = 0; h < H; ++h) {
      const T* kt = kb + (h / G) * s.k_head;
      const float* qh = &qf[h * D];
      float* ph = &p[h * bs];
      // Four independent sums over the dimensions: one chain of dependent FMAs would wait on each one's
      // latency (measured: 3x slower).
      float s0[kBS > 0 ? kBS : 64] = {}, s1[kBS > 0 ? kBS : 64] = {}, s2[kBS > 0 ? kBS : 64] = {},
            s3[kBS > 0 ? kBS : 64] = {};
      for (int64_t d = 0; d + 3 < D; d += 4) {
        const T* r0 = kt + d * s.k_dim;
        const T* r1 = r0 + s.k_dim;
        const T* r2 = r1 + s.k_dim;
        const T* r3 = r2 + s.k_dim;
        const float q0 = qh[d], q1 = qh[d + 1], q2 = qh[d + 2], q3 = qh[d + 3];
#pragma omp simd
        for (int64_t t = 0; t < bs; ++t) {
          s0[t] += q0 * to_float(r0[t]);
          s1[t] += q1 * to_float(r1[t]);
          s2[t] += q2 * to_float(r2[t]);
          s3[t] += q3 * to_float(r3[t]);
        }
      }
      for (int64_t d = D & ~int64_t{3}; d < D; ++d) {
        const T* r0 = kt + d * s.k_dim;
#pragma omp simd
        for (int64_t t = 0; t < bs; ++t) s0[t] += qh[d] * to_float(r0[t]);
      }
#pragma omp simd
      for (int64_t t = 0; t < bs; ++t) ph[t] = (s0[t] + s1[t]) + (s2[t] + s3[t]);
      float block_max = ph[0];
      for (int64_t t = 1; t < n; ++t) block_max = std::max(block_max, ph[t]);
      const float new_max = std::max(m[h], block_max);
      const float correction = m[h] == -std::numeric_limits<float>::infinity() ? 0.f : fast_exp(m[h] - new_max);
      float sum = 0.f;
#pragma omp simd
      for (int64_t t = 0; t < bs; ++t) ph[t] = fast_exp(ph[t] - new_max);
      for (int64_t t = n; t < bs; ++t) ph[t] = 0.f;  // stale slots of the last block weigh nothing
#pragma omp simd reduction(+ : sum)
      for (int64_t t = 0; t < bs; ++t) sum += ph[t];
      l[h] = l[h] * correction + sum;
      m[h] = new_max;
      float* a = &acc[h * D];
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) a[d] *= correction;
    }
    for (int64_t t = 0; t < n; ++t)
      for (int64_t kh = 0, h = 0; kh < s.kv_heads; ++kh) {
        const T* vrow = vb + t * s.v_token + kh * s.v_head;
        for (int64_t g = 0; g < G; ++g, ++h) {
          const float w = p[h * bs + t];
          float* a = &acc[h * D];
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) a[d] += w * to_float(vrow[d]);
        }
      }
  }
  for (int64_t h = 0; h < H; ++h) {
    const float inv = 1.f / l[h];
    for (int64_t d = 0; d < D; ++d) out[h * s.o_head + d] = static_cast<T>(acc[h * D + d] * inv);
  }
}

// Columns of V per register tile in the weighted sum: kG tiles of kC floats plus the V row itself must fit
// in the register file (a few registers spare), as a divisor of head_dim.
template <int kD, int kG>
constexpr int v_tile() {
  for (int c = kD; c >= kLanes; c /= 2)
    if (kD % c == 0 && (kG + 1) * c <= (kRegisters - 4) * kLanes) return c;
  return kLanes;
}

// Scratch of one thread, reused across calls: a sequence's scores and its scaled query.
struct Scratch {
  std::vector<float> scores, qf, acc, m, l, prefix_weight;
  std::vector<uint32_t> q_pairs;     // bf16 dot path: the query's dimensions in pairs
  std::vector<uint16_t> weights;     // bf16 dot path: the softmax weights rounded to bf16
};

// The bf16 dot-product path (vdpbf16ps, see vec.h) of decode_grouped's scores and V sum: bf16 caches on a
// CPU with AVX512-BF16, 16-token blocks. As torch's flash attention does for bf16, the softmax weights are
// rounded to bf16 for the V sum (the sums of weights stay fp32).
template <typename T, int kBS>
constexpr bool use_bf16_dot() {
  return kBf16Dot && std::is_same_v<T, c10::BFloat16> && kBS == 16 && kLanes == 16;
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
// Scores of kG query heads (`q_pairs`: each head's dimensions as kD / 2 pairs of raw bf16) against one
// block's keys of one KV head (`kt`: [kD, 16], two dimensions' rows in each 64-byte line), times `scale`.
template <int kD, int kG>
inline void score_block_bf16(const c10::BFloat16* kt, const uint32_t* q_pairs, float scale, float* dst,
                             int64_t span) {
  constexpr int kP = 4;  // partial sums per head: the dot's latency hidden behind kG * kP chains
  VecF sc[kG][kP] = {};
  for (int d = 0; d < kD; d += 2 * kP) {
#pragma GCC unroll 8
    for (int u = 0; u < kP; ++u) {
      const PairsBf16 k = pairs_of_rows(kt + (d + 2 * u) * 16);
#pragma GCC unroll 8
      for (int g = 0; g < kG; ++g) sc[g][u] = dot_pairs(sc[g][u], k, splat_pair(q_pairs[g * kD / 2 + d / 2 + u]));
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < kG; ++g) store_vec(dst + g * span, ((sc[g][0] + sc[g][1]) + (sc[g][2] + sc[g][3])) * scale);
}
#endif
inline Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// The fast path of `decode_one`: head_dim kD, block_size kBS and kG query heads per KV head known at compile
// time. Three passes over the sequence's own blocks instead of one online softmax per block:
//  1. scores: the kG query heads of a KV head against a block's keys together, so each K row is loaded once
//     for all of them (grouped-query attention reads a KV head kG times otherwise), the sums in registers;
//  2. softmax over all of a head's scores at once, merged with the cascade prefix's log-sum-exp;
//  3. the weighted sum of V rows, the kG heads' output tiles in registers across every block.
// Per block, the online softmax's max, rescale and sums cost more than the block's arithmetic (16 tokens):
// measured 2.2x slower for the whole kernel on an AVX-512 Xeon. The scores take 4 bytes per token and head
// (36 KB for 1,000 tokens and 9 heads), which stay in the L1/L2 cache between the passes.
template <typename T, int kD, int kBS, int kG>
void decode_grouped(const Shape& s, const T* q, const T* k_cache, const T* v_cache, const int32_t* table,
                    int64_t ctx, int64_t start_block, const T* prefix_out, const float* prefix_lse, float scale,
                    T* out) {
  // Independent partial sums per head over the dimensions, enough for the FMA units' latency (about eight
  // chains in flight), as a power of two that divides kD.
  constexpr int kVecs = kBS / kLanes;
  constexpr int kWant = (2 * kRegisters / 4 + kG * kVecs - 1) / (kG * kVecs);
  constexpr int kP = kWant >= 4 ? 4 : (kWant >= 2 ? 2 : 1);
  constexpr int kC = v_tile<kD, kG>();
  static_assert(kBS % kLanes == 0 && kD % kP == 0 && kD % kC == 0, "tile sizes divide head_dim and the block");
  const int64_t H = s.heads, KVH = s.kv_heads;
  const int64_t num_blocks = (ctx + kBS - 1) / kBS, own = ctx - start_block * kBS;
  const int64_t span = std::max<int64_t>(num_blocks - start_block, 0) * kBS;  // a head's row of scores
  Scratch& w = scratch();
  if (static_cast<int64_t>(w.scores.size()) < H * span) w.scores.resize(H * span);
  w.qf.resize(H * kD), w.acc.resize(H * kD), w.m.resize(H), w.l.resize(H), w.prefix_weight.resize(H);
  float* scores = w.scores.data();
  const float* qf = w.qf.data();
  start_softmax(s, kD, q, prefix_out, prefix_lse, scale, w.qf, w.acc, w.m, w.l);
  constexpr int64_t kBlockLines = static_cast<int64_t>(kD) * kBS * sizeof(T) / 64;  // one KV head's K (or V)
  constexpr bool kDot = use_bf16_dot<T, kBS>();
  if constexpr (kDot) {  // the raw query, unscaled: bf16 already, and the scale applied to the sums
    w.q_pairs.resize(H * kD / 2);
    for (int64_t h = 0; h < H; ++h)
      for (int d = 0; d < kD; d += 2) w.q_pairs[(h * kD + d) / 2] = pair_bits(q + h * s.q_head + d);
    w.weights.resize(H * span);
  }

  // 1. Scores. The next block lives anywhere in the cache (that is the point of paging), so the hardware
  // prefetcher cannot guess it: while one block is scored, the next one's K is fetched a line at a time.
  for (int64_t b = start_block; b < num_blocks; ++b) {
    const T* kb = k_cache + static_cast<int64_t>(table[b]) * s.k_block;
    const char* next = b + 1 < num_blocks
                           ? reinterpret_cast<const char*>(k_cache + static_cast<int64_t>(table[b + 1]) * s.k_block)
                           : nullptr;
    float* sb = scores + (b - start_block) * kBS;
    for (int64_t kh = 0; kh < KVH; ++kh) {
      const T* kt = kb + kh * s.k_head;
      if constexpr (kDot) {
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
        if (next != nullptr)
          for (int64_t i = 0; i < kBlockLines; ++i)
            __builtin_prefetch(next + (kh * s.k_head * static_cast<int64_t>(sizeof(T))) + i * 64);
        score_block_bf16<kD, kG>(kt, w.q_pairs.data() + kh * kG * kD / 2, scale, sb + kh * kG * span, span);
#endif
        continue;
      }
      const float* qg = qf + kh * kG * kD;
      VecF sc[kG][kP][kVecs] = {};
      for (int d = 0; d < kD; d += kP) {
        // A few lines per step, between the products: a burst of prefetches stalls on the fill buffers.
        constexpr int64_t kPerStep = (kBlockLines + kD / kP - 1) / (kD / kP);
        if (next != nullptr)
          for (int64_t i = d / kP * kPerStep; i < std::min(kBlockLines, (d / kP + 1) * kPerStep); ++i)
            __builtin_prefetch(next + kh * s.k_head * static_cast<int64_t>(sizeof(T)) + i * 64);
#pragma GCC unroll 8
        for (int u = 0; u < kP; ++u) {
          const T* row = kt + (d + u) * s.k_dim;
#pragma GCC unroll 8
          for (int v = 0; v < kVecs; ++v) {
            const VecF k = load_vec(row + v * kLanes);
#pragma GCC unroll 8
            for (int g = 0; g < kG; ++g) sc[g][u][v] += qg[g * kD + d + u] * k;
          }
        }
      }
#pragma GCC unroll 8
      for (int g = 0; g < kG; ++g) {
        float* dst = sb + (kh * kG + g) * span;
#pragma GCC unroll 8
        for (int v = 0; v < kVecs; ++v) {
          VecF sum = sc[g][0][v];
          for (int u = 1; u < kP; ++u) sum += sc[g][u][v];
          store_vec(dst + v * kLanes, sum);
        }
      }
    }
  }

  // 2. Softmax per head, continuing from the prefix's state (m = its log-sum-exp, l = 1, acc = its output).
  // The scores become weights in place; the prefix's output is rescaled by the same new maximum.
  float* prefix_weight = w.prefix_weight.data();
  for (int64_t h = 0; h < H; ++h) {
    float* row = scores + h * span;
    // The last block's slots past the context were scored against stale keys: out of the max, weight 0.
    for (int64_t t = own; t < span; ++t) row[t] = -std::numeric_limits<float>::infinity();
    VecF vmax = splat(w.m[h]);
    for (int64_t t = 0; t < span; t += kLanes) vmax = max_vec(vmax, load_vec(row + t));
    const float mx = max_lanes(vmax);
    const VecF vmx = splat(mx);
    for (int64_t t = 0; t < span; t += kLanes) store_vec(row + t, exp_vec(load_vec(row + t) - vmx));
    for (int64_t t = own; t < span; ++t) row[t] = 0.f;
    VecF vsum = {};
    for (int64_t t = 0; t < span; t += kLanes) vsum += load_vec(row + t);
    prefix_weight[h] = w.l[h] == 0.f ? 0.f : fast_exp(w.m[h] - mx);
    w.l[h] = w.l[h] * prefix_weight[h] + sum_lanes(vsum);
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
    if constexpr (kDot) store_bf16_row(w.weights.data() + h * span, row, span);
#endif
  }

  // 3. Weighted sum of V, kC columns at a time; the next block's rows of this KV head fetched ahead.
  for (int64_t kh = 0; kh < KVH; ++kh) {
    for (int c = 0; c < kD; c += kC) {
      constexpr int kCV = kC / kLanes;
      VecF r[kG][kCV];
#pragma GCC unroll 8
      for (int g = 0; g < kG; ++g) {
        const float* a = &w.acc[(kh * kG + g) * kD + c];
        const VecF pw = splat(prefix_weight[kh * kG + g]);
#pragma GCC unroll 8
        for (int j = 0; j < kCV; ++j) r[g][j] = load_vec(a + j * kLanes) * pw;
      }
      for (int64_t b = start_block; b < num_blocks; ++b) {
        const T* vk = v_cache + static_cast<int64_t>(table[b]) * s.v_block + kh * s.v_head + c;
        if (b + 1 < num_blocks) {
          const char* nv = reinterpret_cast<const char*>(v_cache + static_cast<int64_t>(table[b + 1]) * s.v_block +
                                                          kh * s.v_head + c);
          for (int t = 0; t < kBS; ++t)
            for (int64_t i = 0; i < static_cast<int64_t>(kC * sizeof(T)); i += 64)
              __builtin_prefetch(nv + t * s.v_token * static_cast<int64_t>(sizeof(T)) + i);
        }
        const float* pb = scores + kh * kG * span + (b - start_block) * kBS;
        const int64_t n = std::min<int64_t>(kBS, ctx - b * kBS);  // slots past n hold stale values: never read
        if constexpr (kDot) {
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
          // Two tokens per step: their rows interleaved into pairs, dotted with their two weights.
          const uint16_t* wb = w.weights.data() + kh * kG * span + (b - start_block) * kBS;
          for (int64_t t = 0; t < n; t += 2) {
            const T* vr = vk + t * s.v_token;
            const T* vr2 = t + 1 < n ? vr + s.v_token : nullptr;  // an odd last token pairs with zeros
            PairsBf16 vv[kCV];
#pragma GCC unroll 8
            for (int j = 0; j < kCV; ++j) vv[j] = pairs_of_rows(vr + j * kLanes, vr2 ? vr2 + j * kLanes : nullptr);
#pragma GCC unroll 8
            for (int g = 0; g < kG; ++g) {
              uint32_t pair;
              std::memcpy(&pair, wb + g * span + t, sizeof pair);
              const PairsBf16 p = splat_pair(pair);
#pragma GCC unroll 8
              for (int j = 0; j < kCV; ++j) r[g][j] = dot_pairs(r[g][j], vv[j], p);
            }
          }
#endif
          continue;
        }
        for (int64_t t = 0; t < n; ++t) {
          const T* vr = vk + t * s.v_token;
          VecF vv[kCV];
#pragma GCC unroll 8
          for (int j = 0; j < kCV; ++j) vv[j] = load_vec(vr + j * kLanes);
#pragma GCC unroll 8
          for (int g = 0; g < kG; ++g) {
            const float p = pb[g * span + t];
#pragma GCC unroll 8
            for (int j = 0; j < kCV; ++j) r[g][j] += p * vv[j];
          }
        }
      }
#pragma GCC unroll 8
      for (int g = 0; g < kG; ++g) {
        const int64_t h = kh * kG + g;
        const float inv = 1.f / w.l[h];
#pragma GCC unroll 8
        for (int j = 0; j < kCV; ++j) {
          alignas(64) float o[kLanes];
          store_vec(o, r[g][j] * inv);
          for (int i = 0; i < kLanes; ++i) out[h * s.o_head + c + j * kLanes + i] = static_cast<T>(o[i]);
        }
      }
    }
  }
}

// Picks the compile-time variant for this model's shapes; false when there is none (the generic path runs).
template <typename T, int kD, int kBS>
bool decode_fast(const Shape& s, const T* q, const T* k_cache, const T* v_cache, const int32_t* table, int64_t ctx,
                 int64_t start_block, const T* prefix_out, const float* prefix_lse, float scale, T* out) {
  switch (s.heads / s.kv_heads) {
#define SHOP_ASSISTANT_GROUP(G)                                                                                \
  case G:                                                                                                      \
    decode_grouped<T, kD, kBS, G>(s, q, k_cache, v_cache, table, ctx, start_block, prefix_out, prefix_lse,    \
                                  scale, out);                                                                 \
    return true;
    SHOP_ASSISTANT_GROUP(1)
    SHOP_ASSISTANT_GROUP(2)
    SHOP_ASSISTANT_GROUP(3)
    SHOP_ASSISTANT_GROUP(4)
    SHOP_ASSISTANT_GROUP(6)
    SHOP_ASSISTANT_GROUP(7)
    SHOP_ASSISTANT_GROUP(8)
#undef SHOP_ASSISTANT_GROUP
    default:
      return false;
  }
}

// One query token: its heads against blocks [start_block, ceil(ctx / block_size)) of `table`, by the
// compile-time variant for this model's shapes where there is one. A query's result depends only on its own
// row of q, its table, `ctx` and the cascade prefix given: never on which other queries run in the same call
// or step, which is what makes a prefill chunk's tokens come out exactly as a decode of the same token would
// (paged_attention_ below).
template <typename T>
void attend_one(const Shape& s, const T* qi, const T* k_cache, const T* v_cache, const int32_t* ti, int64_t ctx,
                int64_t start_block, const T* pi, const float* li, float scale, T* oi) {
  if (s.head_dim == 64 && s.block_size == 16 && s.k_dim == 16 &&
      decode_fast<T, 64, 16>(s, qi, k_cache, v_cache, ti, ctx, start_block, pi, li, scale, oi)) {
  } else if (s.head_dim == 128 && s.block_size == 16 && s.k_dim == 16 &&
             decode_fast<T, 128, 16>(s, qi, k_cache, v_cache, ti, ctx, start_block, pi, li, scale, oi)) {
  } else if (s.head_dim == 64 && s.block_size == 16) {
    decode_one<T, 64, 16>(s, qi, k_cache, v_cache, ti, ctx, start_block, pi, li, scale, oi);
  } else if (s.head_dim == 128 && s.block_size == 16) {
    decode_one<T, 128, 16>(s, qi, k_cache, v_cache, ti, ctx, start_block, pi, li, scale, oi);
  } else {
    decode_one<T, 0, 0>(s, qi, k_cache, v_cache, ti, ctx, start_block, pi, li, scale, oi);
  }
}

// The sequences in `order`, one at a time per thread, pulled dynamically (their lengths differ widely).
template <typename T>
void run_all(const Shape& s, const std::vector<int64_t>& order, const T* q, const T* k_cache, const T* v_cache,
             const int64_t* row, const int32_t* tables, int64_t width, const int32_t* ctx, int64_t start_block,
             const T* prefix_out, int64_t p_row, const float* prefix_lse, float scale, T* out) {
  const int64_t N = static_cast<int64_t>(order.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(at::get_num_threads())
  for (int64_t j = 0; j < N; ++j) {
    const int64_t i = order[j];
    const T* pi = prefix_out != nullptr ? prefix_out + i * p_row : nullptr;
    const float* li = prefix_lse != nullptr ? prefix_lse + i * s.heads : nullptr;
    attend_one<T>(s, q + row[i] * s.q_row, k_cache, v_cache, tables + i * width, ctx[i], start_block, pi, li, scale,
                  out + row[i] * s.o_row);
  }
}

Shape shape_of(const at::Tensor& out, const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache) {
  TORCH_CHECK(q.dim() == 3 && out.dim() == 3 && k_cache.dim() == 4 && v_cache.dim() == 4,
              "q/out [T, H, D], k_cache [B, KVH, D, bs], v_cache [B, bs, KVH, D]");
  TORCH_CHECK(q.stride(2) == 1 && out.stride(2) == 1 && v_cache.stride(3) == 1 &&
                  (k_cache.stride(3) == 1 || k_cache.size(3) == 1),
              "head_dim (of q, out, V) and the block's tokens (of K) must be contiguous");
  TORCH_CHECK(q.scalar_type() == k_cache.scalar_type() && out.scalar_type() == q.scalar_type() &&
                  v_cache.scalar_type() == q.scalar_type(),
              "one dtype");
  const Shape s{q.size(1),         v_cache.size(2),   q.size(2),         v_cache.size(1),
                q.stride(0),       q.stride(1),       out.stride(0),     out.stride(1),
                k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                v_cache.stride(0), v_cache.stride(1), v_cache.stride(2)};
  TORCH_CHECK(s.heads % s.kv_heads == 0 && v_cache.size(3) == s.head_dim && k_cache.size(1) == s.kv_heads &&
                  k_cache.size(2) == s.head_dim && k_cache.size(3) == s.block_size,
              "head shapes disagree");
  TORCH_CHECK(s.block_size <= 64, "block_size up to 64");
  return s;
}

void paged_decode_attention(at::Tensor out, const at::Tensor& q, const at::Tensor& k_cache,
                            const at::Tensor& v_cache, const at::Tensor& rows, const at::Tensor& block_tables,
                            const at::Tensor& context_lens, int64_t start_block,
                            const std::optional<at::Tensor>& prefix_out,
                            const std::optional<at::Tensor>& prefix_lse, double scale) {
  const Shape s = shape_of(out, q, k_cache, v_cache);
  TORCH_CHECK(rows.scalar_type() == at::kLong && block_tables.scalar_type() == at::kInt &&
                  context_lens.scalar_type() == at::kInt,
              "rows int64, block_tables and context_lens int32");
  TORCH_CHECK(block_tables.is_contiguous() && rows.is_contiguous() && context_lens.is_contiguous());
  const int64_t N = rows.size(0);
  const bool has_prefix = prefix_out.has_value();
  if (has_prefix) {
    TORCH_CHECK(prefix_lse.has_value() && prefix_lse->scalar_type() == at::kFloat && prefix_lse->is_contiguous());
    TORCH_CHECK(prefix_out->stride(1) == out.stride(1) && prefix_out->stride(2) == 1, "prefix_out layout");
  }
  const int64_t* row = rows.data_ptr<int64_t>();
  const int32_t* tables = block_tables.data_ptr<int32_t>();
  const int32_t* ctx = context_lens.data_ptr<int32_t>();
  const int64_t width = block_tables.size(1);
  // Longest first: with dynamic scheduling that keeps both cores busy to the end of the step.
  std::vector<int64_t> order(N);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ctx[a] > ctx[b]; });
  const float* plp = has_prefix ? prefix_lse->data_ptr<float>() : nullptr;
  const int64_t p_row = has_prefix ? prefix_out->stride(0) : 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, q.scalar_type(), "paged_decode_attention", [&] {
    run_all<scalar_t>(s, order, q.data_ptr<scalar_t>(), k_cache.data_ptr<scalar_t>(), v_cache.data_ptr<scalar_t>(),
                      row, tables, width, ctx, start_block,
                      has_prefix ? prefix_out->data_ptr<scalar_t>() : nullptr, p_row, plp,
                      static_cast<float>(scale), out.data_ptr<scalar_t>());
  });
}

// Query tokens in `order`, one at a time per thread, pulled dynamically: token t is row rows[t] of q and out,
// of sequence seqs[t], and sees the first lens[t] tokens of that sequence's blocks.
template <typename T>
void run_queries(const Shape& s, const std::vector<int64_t>& order, const T* q, const T* k_cache, const T* v_cache,
                 const int64_t* rows, const int64_t* seqs, const int64_t* lens, const int32_t* tables, int64_t width,
                 float scale, T* out) {
  const int64_t N = static_cast<int64_t>(order.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(at::get_num_threads())
  for (int64_t j = 0; j < N; ++j) {
    const int64_t t = order[j];
    attend_one<T>(s, q + rows[t] * s.q_row, k_cache, v_cache, tables + seqs[t] * width, lens[t], 0, nullptr, nullptr,
                  scale, out + rows[t] * s.o_row);
  }
}

// Every query token of a step, prefill chunks and decodes alike: sequence i owns rows
// query_start_loc[i]..query_start_loc[i + 1] of q, its last positions, and its query j (of L) sees the first
// context_lens[i] - L + j + 1 tokens of its blocks. Each query is the decode walk above with that context (a
// causal mask by construction: its walk stops at its own position), reading K/V back from the paged cache
// block by block from position 0. So a token's attention is the same sums in the same order whether its
// context was computed in this chunk, in an earlier chunk or taken from the prefix cache, and whether the token
// is a prefill chunk's or a decode's: the engine's answer does not depend on how its prompt was split or
// cached, or on the batch around it (vLLM's batch invariance, for attention). The queries share nothing, so
// the work is (tokens x context) like any causal attention, without a padded or gathered copy of K/V.
// `only` (int64): run these sequences' queries and leave the other rows of `out` alone (None: all of them).
void paged_attention(at::Tensor out, const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                     const at::Tensor& query_start_loc, const at::Tensor& block_tables,
                     const at::Tensor& context_lens, const std::optional<at::Tensor>& only, double scale) {
  const Shape s = shape_of(out, q, k_cache, v_cache);
  TORCH_CHECK(query_start_loc.scalar_type() == at::kInt && block_tables.scalar_type() == at::kInt &&
                  context_lens.scalar_type() == at::kInt,
              "query_start_loc, block_tables and context_lens int32");
  TORCH_CHECK(block_tables.is_contiguous() && query_start_loc.is_contiguous() && context_lens.is_contiguous());
  const int64_t S = context_lens.size(0);
  TORCH_CHECK(query_start_loc.size(0) == S + 1 && block_tables.size(0) == S, "one row per sequence");
  const int32_t* qsl = query_start_loc.data_ptr<int32_t>();
  const int32_t* ctx = context_lens.data_ptr<int32_t>();
  const int32_t* tables = block_tables.data_ptr<int32_t>();
  const int64_t width = block_tables.size(1);
  std::vector<int64_t> chosen;
  if (only.has_value()) {
    TORCH_CHECK(only->scalar_type() == at::kLong && only->is_contiguous(), "only: int64 sequence indices");
    const int64_t* o = only->data_ptr<int64_t>();
    chosen.assign(o, o + only->numel());
  } else {
    chosen.resize(S);
    std::iota(chosen.begin(), chosen.end(), 0);
  }
  std::vector<int64_t> rows, seqs, lens;
  rows.reserve(qsl[S]), seqs.reserve(qsl[S]), lens.reserve(qsl[S]);
  for (const int64_t i : chosen) {
    TORCH_CHECK(i >= 0 && i < S, "sequence index out of range");
    const int64_t L = qsl[i + 1] - qsl[i];
    TORCH_CHECK(L >= 0 && ctx[i] >= L && qsl[i + 1] <= q.size(0), "a sequence's queries are its last tokens");
    TORCH_CHECK(L == 0 || (ctx[i] + s.block_size - 1) / s.block_size <= width, "block table too narrow");
    for (int64_t j = 0; j < L; ++j) rows.push_back(qsl[i] + j), seqs.push_back(i), lens.push_back(ctx[i] - L + j + 1);
  }
  // Longest first, pulled dynamically: both cores busy to the end of the step.
  std::vector<int64_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lens[a] > lens[b]; });
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, q.scalar_type(), "paged_attention", [&] {
    run_queries<scalar_t>(s, order, q.data_ptr<scalar_t>(), k_cache.data_ptr<scalar_t>(), v_cache.data_ptr<scalar_t>(),
                          rows.data(), seqs.data(), lens.data(), tables, width, static_cast<float>(scale),
                          out.data_ptr<scalar_t>());
  });
}

}  // namespace

TORCH_LIBRARY(shop_assistant, m) {
  m.def(
      "paged_decode_attention_(Tensor(a!) out, Tensor q, Tensor k_cache, Tensor v_cache, Tensor rows, "
      "Tensor block_tables, Tensor context_lens, int start_block, Tensor? prefix_out, Tensor? prefix_lse, "
      "float scale) -> ()");
  m.def(
      "paged_attention_(Tensor(a!) out, Tensor q, Tensor k_cache, Tensor v_cache, Tensor query_start_loc, "
      "Tensor block_tables, Tensor context_lens, Tensor? only, float scale) -> ()");
}

TORCH_LIBRARY_IMPL(shop_assistant, CPU, m) {
  m.impl("paged_decode_attention_", &paged_decode_attention);
  m.impl("paged_attention_", &paged_attention);
}
