// Cascade attention's first half on CPU: every decode's query heads against the blocks they all share (the
// store's system prompt), as one small dense product per KV head, returning each row's output and
// log-sum-exp for paged_decode_attention_ to continue from (Hydragen, FlashInfer's cascade, vLLM v1).
//
// Per sequence, the decode kernel loads each key once for the kG query heads of its KV head; here a tile of
// kRows query rows (of any sequences) shares each load, so the product runs at the vector units' rate
// rather than at the rate of loads and bf16 widenings. Shared blocks are whole by construction
// (torch_backend._shared_prefix_blocks), so no slot is masked.
//
// Registered as torch.ops.shop_assistant.prefix_attention_; built with paged_decode.cpp by cpu_kernels.py.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <omp.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "vec.h"

namespace {

using namespace shop_assistant;

constexpr int kBS = 16;     // block size (tokens), one vector of scores
constexpr int kRows = 8;    // query rows per tile: independent sums enough to cover the FMA latency
constexpr int kCols = 32;   // V columns per pass of the weighted sum: kRows x 2 sums stay in registers

struct Layout {
  int64_t heads, kv_heads, group;
  int64_t q_row, q_head;             // strides of q
  int64_t k_block, k_head;           // strides of k_cache [blocks, kv_heads, head_dim, 16]
  int64_t v_block, v_token, v_head;  // strides of v_cache [blocks, 16, kv_heads, head_dim]
};

template <typename T>
constexpr bool bf16_dot() {
  return kBf16Dot && std::is_same_v<T, c10::BFloat16> && kLanes == 16;
}

// One tile: rows r of kv head kh are (decode r / group, query head kh * group + r % group). Rows past `count`
// repeat the last one (computed, never stored).
template <typename T, int kD>
void prefix_tile(const Layout& s, const T* q, const T* k_cache, const T* v_cache, const int64_t* rows,
                 const int32_t* blocks, int64_t num_blocks, int64_t kh, int64_t first, int64_t count, float scale,
                 T* out, float* lse) {
  static_assert(kBS % kLanes == 0 && kCols % kLanes == 0, "whole vectors");
  constexpr int kVecs = kBS / kLanes;
  const int64_t span = num_blocks * kBS;
  thread_local std::vector<float> scores_buf;
  thread_local std::vector<uint16_t> weights_buf;
  scores_buf.resize(kRows * span);
  float* scores = scores_buf.data();
  const T* qr[kRows];
  int64_t head[kRows], dest[kRows];
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = first + std::min<int64_t>(r, count - 1);
    const int64_t i = row / s.group;
    head[r] = kh * s.group + row % s.group;
    dest[r] = i * s.heads + head[r];
    qr[r] = q + rows[i] * s.q_row + head[r] * s.q_head;
  }

  // 1. Scores, a block's 16 keys against the tile's rows.
  if constexpr (bf16_dot<T>()) {
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
    uint32_t qp[kRows][kD / 2];
    for (int r = 0; r < kRows; ++r)
      for (int d = 0; d < kD; d += 2) qp[r][d / 2] = pair_bits(qr[r] + d);
    for (int64_t b = 0; b < num_blocks; ++b) {
      const T* kt = k_cache + static_cast<int64_t>(blocks[b]) * s.k_block + kh * s.k_head;
      VecF acc[kRows] = {};
      for (int d = 0; d < kD; d += 2) {
        const PairsBf16 k = pairs_of_rows(kt + d * kBS);
#pragma GCC unroll 8
        for (int r = 0; r < kRows; ++r) acc[r] = dot_pairs(acc[r], k, splat_pair(qp[r][d / 2]));
      }
      for (int r = 0; r < kRows; ++r) store_vec(scores + r * span + b * kBS, acc[r] * scale);
    }
#endif
  } else {
    float qf[kRows][kD];
    for (int r = 0; r < kRows; ++r)
      for (int d = 0; d < kD; ++d) qf[r][d] = to_float(qr[r][d]) * scale;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const T* kt = k_cache + static_cast<int64_t>(blocks[b]) * s.k_block + kh * s.k_head;
      for (int v = 0; v < kVecs; ++v) {
        VecF acc[kRows] = {};
        for (int d = 0; d < kD; ++d) {
          const VecF k = load_vec(kt + d * kBS + v * kLanes);
#pragma GCC unroll 8
          for (int r = 0; r < kRows; ++r) acc[r] += qf[r][d] * k;
        }
        for (int r = 0; r < kRows; ++r) store_vec(scores + r * span + b * kBS + v * kLanes, acc[r]);
      }
    }
  }

  // 2. Softmax of each row; its log-sum-exp is what the decode kernel merges with.
  float inv[kRows];
  for (int r = 0; r < kRows; ++r) {
    float* row = scores + r * span;
    VecF vmax = load_vec(row);
    for (int64_t t = kLanes; t < span; t += kLanes) vmax = max_vec(vmax, load_vec(row + t));
    const float mx = max_lanes(vmax);
    const VecF vmx = splat(mx);
    VecF vsum = {};
    for (int64_t t = 0; t < span; t += kLanes) {
      const VecF e = exp_vec(load_vec(row + t) - vmx);
      store_vec(row + t, e);
      vsum += e;
    }
    const float sum = sum_lanes(vsum);
    inv[r] = 1.f / sum;
    if (r < count) lse[dest[r]] = mx + std::log(sum);
  }

  // 3. Weighted sum of V rows, kCols columns at a time.
  constexpr int kCV = kCols / kLanes;
  uint16_t* weights = nullptr;
  if constexpr (bf16_dot<T>()) {
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
    weights_buf.resize(kRows * span);
    weights = weights_buf.data();
    for (int r = 0; r < kRows; ++r) store_bf16_row(weights + r * span, scores + r * span, span);
#endif
  }
  for (int c = 0; c < kD; c += kCols) {
    VecF acc[kRows][kCV] = {};
    for (int64_t b = 0; b < num_blocks; ++b) {
      const T* vb = v_cache + static_cast<int64_t>(blocks[b]) * s.v_block + kh * s.v_head + c;
      if constexpr (bf16_dot<T>()) {
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
        for (int t = 0; t < kBS; t += 2) {
          PairsBf16 vv[kCV];
          for (int j = 0; j < kCV; ++j)
            vv[j] = pairs_of_rows(vb + t * s.v_token + j * kLanes, vb + (t + 1) * s.v_token + j * kLanes);
#pragma GCC unroll 8
          for (int r = 0; r < kRows; ++r) {
            uint32_t pair;
            std::memcpy(&pair, weights + r * span + b * kBS + t, sizeof pair);
            const PairsBf16 p = splat_pair(pair);
            for (int j = 0; j < kCV; ++j) acc[r][j] = dot_pairs(acc[r][j], vv[j], p);
          }
        }
#endif
      } else {
        for (int t = 0; t < kBS; ++t) {
          VecF vv[kCV];
          for (int j = 0; j < kCV; ++j) vv[j] = load_vec(vb + t * s.v_token + j * kLanes);
#pragma GCC unroll 8
          for (int r = 0; r < kRows; ++r) {
            const float p = scores[r * span + b * kBS + t];
            for (int j = 0; j < kCV; ++j) acc[r][j] += p * vv[j];
          }
        }
      }
    }
    for (int r = 0; r < count && r < kRows; ++r) {
      T* o = out + dest[r] * kD + c;
      for (int j = 0; j < kCV; ++j) {
        alignas(64) float tmp[kLanes];
        store_vec(tmp, acc[r][j] * inv[r]);
        for (int i = 0; i < kLanes; ++i) o[j * kLanes + i] = static_cast<T>(tmp[i]);
      }
    }
  }
}

// Tiles of kRows rows of one KV head, shared out over the threads (all tiles cost the same).
template <typename T>
void run_tiles(const Layout& s, int64_t D, const T* q, const T* k_cache, const T* v_cache, const int64_t* rows,
               const int32_t* blocks, int64_t num_blocks, int64_t per_head, float scale, T* out, float* lse) {
  const int64_t tiles = (per_head + kRows - 1) / kRows;
#pragma omp parallel for schedule(static) num_threads(at::get_num_threads())
  for (int64_t task = 0; task < s.kv_heads * tiles; ++task) {
    const int64_t kh = task / tiles, first = task % tiles * kRows;
    const int64_t count = std::min<int64_t>(kRows, per_head - first);
    if (D == 64)
      prefix_tile<T, 64>(s, q, k_cache, v_cache, rows, blocks, num_blocks, kh, first, count, scale, out, lse);
    else
      prefix_tile<T, 128>(s, q, k_cache, v_cache, rows, blocks, num_blocks, kh, first, count, scale, out, lse);
  }
}

void prefix_attention(at::Tensor out, at::Tensor lse, const at::Tensor& q, const at::Tensor& k_cache,
                      const at::Tensor& v_cache, const at::Tensor& rows, const at::Tensor& blocks, double scale) {
  TORCH_CHECK(q.dim() == 3 && k_cache.dim() == 4 && v_cache.dim() == 4, "q [T, H, D], caches 4-D");
  const int64_t H = q.size(1), D = q.size(2), KVH = v_cache.size(2), N = rows.size(0), P = blocks.size(0);
  TORCH_CHECK(H % KVH == 0 && (D == 64 || D == 128) && v_cache.size(1) == kBS && k_cache.size(3) == kBS &&
                  k_cache.size(2) == D && v_cache.size(3) == D,
              "head_dim 64 or 128 and 16-token blocks, K stored transposed");
  TORCH_CHECK(q.stride(2) == 1 && k_cache.stride(3) == 1 && k_cache.stride(2) == kBS && v_cache.stride(3) == 1,
              "contiguous heads and blocks");
  TORCH_CHECK(out.is_contiguous() && out.sizes() == at::IntArrayRef({N, H, D}) && out.scalar_type() == q.scalar_type());
  TORCH_CHECK(lse.is_contiguous() && lse.scalar_type() == at::kFloat && lse.numel() == N * H, "lse [N, H] float32");
  TORCH_CHECK(rows.scalar_type() == at::kLong && blocks.scalar_type() == at::kInt && rows.is_contiguous() &&
              blocks.is_contiguous() && P > 0);
  TORCH_CHECK(q.scalar_type() == k_cache.scalar_type() && q.scalar_type() == v_cache.scalar_type(), "one dtype");
  const Layout s{H, KVH, H / KVH, q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1),
                 v_cache.stride(0), v_cache.stride(1), v_cache.stride(2)};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, q.scalar_type(), "prefix_attention", [&] {
    run_tiles<scalar_t>(s, D, q.data_ptr<scalar_t>(), k_cache.data_ptr<scalar_t>(), v_cache.data_ptr<scalar_t>(),
                        rows.data_ptr<int64_t>(), blocks.data_ptr<int32_t>(), P, N * s.group,
                        static_cast<float>(scale), out.data_ptr<scalar_t>(), lse.data_ptr<float>());
  });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(shop_assistant, m) {
  m.def("prefix_attention_(Tensor(a!) out, Tensor(b!) lse, Tensor q, Tensor k_cache, Tensor v_cache, Tensor rows, "
        "Tensor blocks, float scale) -> ()");
}

TORCH_LIBRARY_IMPL(shop_assistant, CPU, m) { m.impl("prefix_attention_", &prefix_attention); }
