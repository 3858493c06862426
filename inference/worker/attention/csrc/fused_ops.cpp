// The decoder layer's elementwise steps, each fused into one pass over its rows: residual add + RMSNorm,
// rotary embedding, SiLU(gate) * up, and the KV cache write. In torch each is 3 to 9 ops, and at decode sizes
// (tens of rows) their cost is the ops' dispatch and threading, not arithmetic: about a fifth of a 48-sequence
// bf16 decode step before (docs/benchmark.md).
//
// Each op rounds where the torch ops it replaces round (every intermediate that torch stores in the model
// dtype is rounded to that dtype here too, and in fp32 a product that torch stores is not fused into the
// sum that follows it: round_vec), so that the model computes what transformers' reference does.
//
// Registered as torch.ops.shop_assistant.*; built with paged_decode.cpp by cpu_kernels.py.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "vec.h"

namespace {

using namespace shop_assistant;

// Rows per task: a decode step's few dozen rows of a norm or RoPE run on the calling thread (a parallel
// region costs more than they do); SiLU (an exp and a division per element) is worth splitting sooner.
constexpr int64_t kGrain = 64, kSiluGrain = 16;

inline float to_f(float x) { return x; }
inline float to_f(c10::BFloat16 x) { return to_float(x); }
inline float to_f(c10::Half x) { return static_cast<float>(x); }
template <typename T>
inline float rounded(float x) {
  return to_f(static_cast<T>(x));
}
template <>
inline float rounded<float>(float x) {
  return materialize(x);  // as round_vec: no FMA across a value torch stores
}

// residual = x + residual (rounded to T); out = weight * T(residual * rsqrt(mean(residual^2) + eps)), the
// sum of squares in fp32: transformers' LlamaRMSNorm after the decoder layer's residual add. Vectorised; the
// hidden size is a multiple of kLanes in every model this serves (a tail runs element by element).
template <typename T>
void rms_norm_rows(T* out, const T* x, T* residual, const T* weight, int64_t rows, int64_t n, int64_t x_row,
                   int64_t r_row, int64_t o_row, float eps) {
  const int64_t body = n / kLanes * kLanes;
  at::parallel_for(0, rows, kGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> r(n);
    for (int64_t i = begin; i < end; ++i) {
      const T* xi = x + i * x_row;
      T* ri = residual != nullptr ? residual + i * r_row : nullptr;
      VecF squares = {};
      for (int64_t j = 0; j < body; j += kLanes) {
        VecF v = load_vec(xi + j);
        if (ri != nullptr) {
          v = round_vec(v + load_vec(ri + j), ri);
          store_as(ri + j, v);
        }
        store_vec(&r[j], v);
        squares += v * v;
      }
      float sum = sum_lanes(squares);
      for (int64_t j = body; j < n; ++j) {
        float v = to_f(xi[j]);
        if (ri != nullptr) {
          v = rounded<T>(v + to_f(ri[j]));
          ri[j] = static_cast<T>(v);
        }
        r[j] = v;
        sum += v * v;
      }
      const float inv = 1.f / std::sqrt(sum / static_cast<float>(n) + eps);
      T* oi = out + i * o_row;
      for (int64_t j = 0; j < body; j += kLanes)
        store_as(oi + j, load_vec(weight + j) * round_vec(load_vec(&r[j]) * inv, oi));
      for (int64_t j = body; j < n; ++j) oi[j] = static_cast<T>(to_f(weight[j]) * rounded<T>(r[j] * inv));
    }
  });
}

// out = T(T(silu(gate)) * up) over the halves of gate_up [rows, 2n], vectorised (n is a multiple of kLanes
// for every model this serves; a tail runs element by element).
template <typename T>
void silu_mul_rows(T* out, const T* gate_up, int64_t rows, int64_t n, int64_t g_row, int64_t o_row) {
  at::parallel_for(0, rows, kSiluGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T* g = gate_up + i * g_row;
      const T* u = g + n;
      T* o = out + i * o_row;
      int64_t j = 0;
      for (; j + kLanes <= n; j += kLanes) {
        const VecF gv = load_vec(g + j);
        const VecF s = round_vec(gv / (1.0f + exp_vec(-gv)), o);
        store_as(o + j, s * load_vec(u + j));
      }
      for (; j < n; ++j) {
        const float gv = to_f(g[j]);
        o[j] = static_cast<T>(rounded<T>(gv / (1.0f + std::exp(-gv))) * to_f(u[j]));
      }
    }
  });
}

// x [rows, heads, dim] in place (any row and head strides): the rotate-half rotary embedding with this row's
// cos and sin ([rows, dim / 2], already in T as transformers casts them), each product rounded to T.
template <typename T>
void rope_rows(T* x, const T* cos, const T* sin, int64_t rows, int64_t heads, int64_t dim, int64_t x_row,
               int64_t x_head, int64_t c_row) {
  const int64_t half = dim / 2;
  at::parallel_for(0, rows, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T* c = cos + i * c_row;
      const T* s = sin + i * c_row;
      for (int64_t h = 0; h < heads; ++h) {
        T* x1 = x + i * x_row + h * x_head;
        T* x2 = x1 + half;
        int64_t j = 0;
        for (; j + kLanes <= half; j += kLanes) {
          const VecF a = load_vec(x1 + j), b = load_vec(x2 + j), cj = load_vec(c + j), sj = load_vec(s + j);
          store_as(x1 + j, round_vec(a * cj, x1) - round_vec(b * sj, x1));
          store_as(x2 + j, round_vec(b * cj, x1) + round_vec(a * sj, x1));
        }
        for (; j < half; ++j) {
          const float a = to_f(x1[j]), b = to_f(x2[j]), cj = to_f(c[j]), sj = to_f(s[j]);
          x1[j] = static_cast<T>(rounded<T>(a * cj) - rounded<T>(b * sj));
          x2[j] = static_cast<T>(rounded<T>(b * cj) + rounded<T>(a * sj));
        }
      }
    }
  });
}

void rms_norm(at::Tensor out, const at::Tensor& x, const std::optional<at::Tensor>& residual,
              const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.dim() == 2 && out.sizes() == x.sizes() && weight.dim() == 1 && weight.size(0) == x.size(1),
              "x and out [rows, hidden], weight [hidden]");
  TORCH_CHECK(x.stride(1) == 1 && out.stride(1) == 1 && weight.is_contiguous(), "rows must be contiguous");
  TORCH_CHECK(out.scalar_type() == x.scalar_type() && weight.scalar_type() == x.scalar_type(), "one dtype");
  if (residual.has_value())
    TORCH_CHECK(residual->sizes() == x.sizes() && residual->stride(1) == 1 &&
                    residual->scalar_type() == x.scalar_type(),
                "residual like x");
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rms_norm", [&] {
    rms_norm_rows<scalar_t>(out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                            residual.has_value() ? residual->data_ptr<scalar_t>() : nullptr,
                            weight.data_ptr<scalar_t>(), x.size(0), x.size(1), x.stride(0),
                            residual.has_value() ? residual->stride(0) : 0, out.stride(0), static_cast<float>(eps));
  });
}

void silu_and_mul(at::Tensor out, const at::Tensor& gate_up) {
  TORCH_CHECK(gate_up.dim() == 2 && out.dim() == 2 && gate_up.size(0) == out.size(0) &&
                  gate_up.size(1) == 2 * out.size(1),
              "gate_up [rows, 2n], out [rows, n]");
  TORCH_CHECK(gate_up.stride(1) == 1 && out.stride(1) == 1 && gate_up.scalar_type() == out.scalar_type());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, out.scalar_type(), "silu_and_mul", [&] {
    silu_mul_rows<scalar_t>(out.data_ptr<scalar_t>(), gate_up.data_ptr<scalar_t>(), out.size(0), out.size(1),
                            gate_up.stride(0), out.stride(0));
  });
}

void rotary_embedding(at::Tensor x, const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK(x.dim() == 3 && x.stride(2) == 1 && x.size(2) % 2 == 0, "x [rows, heads, dim], dim contiguous");
  TORCH_CHECK(cos.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(0) == x.size(0) &&
                  cos.size(1) == x.size(2) / 2 && cos.stride(1) == 1 && sin.strides() == cos.strides(),
              "cos and sin [rows, dim / 2]");
  TORCH_CHECK(cos.scalar_type() == x.scalar_type() && sin.scalar_type() == x.scalar_type(), "one dtype");
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rotary_embedding", [&] {
    rope_rows<scalar_t>(x.data_ptr<scalar_t>(), cos.data_ptr<scalar_t>(), sin.data_ptr<scalar_t>(), x.size(0),
                        x.size(1), x.size(2), x.stride(0), x.stride(1), cos.stride(0));
  });
}

// This step's keys and values into their slots: V as [blocks, block_size, kv_heads, dim], K the same or, with
// `k_transposed`, as [blocks, kv_heads, dim, block_size]. A negative slot is padding and is skipped.
void store_kv(const at::Tensor& k, const at::Tensor& v, at::Tensor k_cache, at::Tensor v_cache,
              const at::Tensor& slots, bool k_transposed) {
  TORCH_CHECK(k.dim() == 3 && v.sizes() == k.sizes() && k.stride(2) == 1 && v.stride(2) == 1, "k, v [T, kv_heads, dim]");
  TORCH_CHECK(v_cache.dim() == 4 && v_cache.is_contiguous() && k_cache.is_contiguous(), "contiguous caches");
  TORCH_CHECK(slots.scalar_type() == at::kLong && slots.is_contiguous() && slots.size(0) == k.size(0));
  TORCH_CHECK(k.scalar_type() == k_cache.scalar_type() && v.scalar_type() == v_cache.scalar_type());
  const int64_t rows = k.size(0), heads = k.size(1), dim = k.size(2), bs = v_cache.size(1);
  TORCH_CHECK(v_cache.size(2) == heads && v_cache.size(3) == dim, "v_cache [blocks, block_size, kv_heads, dim]");
  TORCH_CHECK(k_transposed ? (k_cache.size(1) == heads && k_cache.size(2) == dim && k_cache.size(3) == bs)
                           : k_cache.sizes() == v_cache.sizes(),
              "k_cache layout");
  const int64_t* slot = slots.data_ptr<int64_t>();
  const int64_t num_slots = v_cache.size(0) * bs;
  for (int64_t i = 0; i < rows; ++i) TORCH_CHECK(slot[i] < num_slots, "slot ", slot[i], " outside the cache");
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, k.scalar_type(), "store_kv", [&] {
    const scalar_t *kp = k.data_ptr<scalar_t>(), *vp = v.data_ptr<scalar_t>();
    scalar_t *kc = k_cache.data_ptr<scalar_t>(), *vc = v_cache.data_ptr<scalar_t>();
    for (int64_t i = 0; i < rows; ++i) {
      if (slot[i] < 0) continue;
      const int64_t block = slot[i] / bs, offset = slot[i] % bs;
      for (int64_t h = 0; h < heads; ++h) {
        const scalar_t* ki = kp + i * k.stride(0) + h * k.stride(1);
        const scalar_t* vi = vp + i * v.stride(0) + h * v.stride(1);
        std::memcpy(vc + ((block * bs + offset) * heads + h) * dim, vi, dim * sizeof(scalar_t));
        if (k_transposed) {
          scalar_t* dst = kc + ((block * heads + h) * dim) * bs + offset;
          for (int64_t d = 0; d < dim; ++d) dst[d * bs] = ki[d];
        } else {
          std::memcpy(kc + ((block * bs + offset) * heads + h) * dim, ki, dim * sizeof(scalar_t));
        }
      }
    }
  });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(shop_assistant, m) {
  m.def("rms_norm_(Tensor(a!) out, Tensor x, Tensor(b!)? residual, Tensor weight, float eps) -> ()");
  m.def("silu_and_mul_(Tensor(a!) out, Tensor gate_up) -> ()");
  m.def("rotary_embedding_(Tensor(a!) x, Tensor cos, Tensor sin) -> ()");
  m.def("store_kv_(Tensor k, Tensor v, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor slots, bool k_transposed) -> ()");
}

TORCH_LIBRARY_IMPL(shop_assistant, CPU, m) {
  m.impl("rms_norm_", &rms_norm);
  m.impl("silu_and_mul_", &silu_and_mul);
  m.impl("rotary_embedding_", &rotary_embedding);
  m.impl("store_kv_", &store_kv);
}
