// Projections of a few rows (a decode step's tail: a handful of sequences) on weights packed in panels.
//
// With 1-16 rows a projection reads each weight once for a few multiply-adds, so it is bound by how fast the
// weights stream from memory: oneDNN reached 29 GB/s there in fp32 on a 2-core EPYC, of the 52 the cores can
// read. Here the weight [N, K] is packed as N / kLanes panels, each one contiguous run that the hardware
// prefetcher follows (and software prefetch runs 8 KB ahead of); every 64-byte line feeds one vector
// multiply-add per row, the rows' sums stay in registers for the whole K, and the threads take whole panels.
// fp32: sums over k in order, one per output. bf16 (with AVX512-BF16): pairs along k in one dot-product
// instruction, fp32 sums, the output rounded once. bf16 with AMX-BF16 (amx_tiles.h): the same panels as B
// tiles, 16 rows x 32 k x 16 columns a tile instruction, fp32 sums, the output rounded once in the same way.
//
// Registered as torch.ops.shop_assistant.small_linear_ and small_linear_amx_; built with the other kernels by
// cpu_kernels.py, which chooses between the bf16 paths once (small_linear_amx_ready).

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "vec.h"

// AMX next to the AVX512-BF16 panels (whose layout it reads), on Linux (which hands out the tile state on
// request), with a compiler that has the intrinsics.
#if defined(__x86_64__) && defined(__linux__) && defined(__AVX512BF16__) && defined(__AVX512BW__) && \
    (__has_include(<amxbf16intrin.h>) || __has_include(<amxintrin.h>))
#define SHOP_ASSISTANT_AMX 1
#include <sys/syscall.h>
#include <unistd.h>

#include "amx_tiles.h"
#else
#define SHOP_ASSISTANT_AMX 0
#endif

namespace {

using namespace shop_assistant;

// One register of sums per row, with room left for the weight vector and the broadcasts.
constexpr int64_t kMaxRows = kRegisters / 2;
// Lines fetched ahead in a panel's stream (8 KB): the hardware prefetcher alone ran 30 GB/s here, 40 with it.
constexpr int64_t kAhead = 128;

// kM rows against panels [p0, p1): acc[m] += x[m][k] * panel[k] over k, the next lines fetched ahead; the
// bias (if any) added to the finished sum.
template <int kM>
void rows_times_panels(const float* x, int64_t ldx, const float* packed, const float* bias, int64_t K, int64_t p0,
                       int64_t p1, float* out, int64_t ldo) {
  for (int64_t p = p0; p < p1; ++p) {
    const float* w = packed + p * K * kLanes;
    VecF acc[kM];
#pragma GCC unroll 16
    for (int m = 0; m < kM; ++m) acc[m] = VecF{};
    for (int64_t k = 0; k < K; ++k) {
      const VecF wk = load_vec(w + k * kLanes);
      __builtin_prefetch(w + (k + kAhead) * kLanes);
#pragma GCC unroll 16
      for (int m = 0; m < kM; ++m) acc[m] = fma_vec(splat(x[m * ldx + k]), wk, acc[m]);
    }
    const VecF b = bias != nullptr ? load_vec(bias + p * kLanes) : VecF{};
#pragma GCC unroll 16
    for (int m = 0; m < kM; ++m) store_vec(out + m * ldo + p * kLanes, bias != nullptr ? acc[m] + b : acc[m]);
  }
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
// bf16: a panel is [K / 2, kLanes pairs]: lane j of step kk holds (W[j][2kk], W[j][2kk + 1]), so one 64-byte
// line is one dot-product operand and each row's (x[2kk], x[2kk + 1]) one broadcast pair. Products are exact,
// sums fp32 (as oneDNN's bf16 products), the bias (if any) added to the fp32 sum, the output rounded to bf16
// once (as oneDNN does with a bias).
template <int kM>
void rows_times_panels_bf16(const c10::BFloat16* x, int64_t ldx, const c10::BFloat16* packed,
                            const c10::BFloat16* bias, int64_t K, int64_t p0, int64_t p1, c10::BFloat16* out,
                            int64_t ldo) {
  const int64_t K2 = K / 2;
  for (int64_t p = p0; p < p1; ++p) {
    const c10::BFloat16* w = packed + p * K * kLanes;
    VecF acc[kM];
#pragma GCC unroll 16
    for (int m = 0; m < kM; ++m) acc[m] = VecF{};
    for (int64_t kk = 0; kk < K2; ++kk) {
      const c10::BFloat16* line = w + kk * 2 * kLanes;
      const PairsBf16 wk = reinterpret_cast<PairsBf16>(_mm512_loadu_si512(line));
      __builtin_prefetch(line + kAhead * 2 * kLanes);
#pragma GCC unroll 16
      for (int m = 0; m < kM; ++m) acc[m] = dot_pairs(acc[m], wk, splat_pair(pair_bits(x + m * ldx + 2 * kk)));
    }
    const VecF b = bias != nullptr ? load_vec(bias + p * kLanes) : VecF{};
#pragma GCC unroll 16
    for (int m = 0; m < kM; ++m)
      store_bf16(reinterpret_cast<uint16_t*>(out + m * ldo + p * kLanes), bias != nullptr ? acc[m] + b : acc[m]);
  }
}
#endif

// The kernel for M rows, M known at compile time (the sums' registers unrolled).
template <typename T, int kM>
void dispatch_rows(int64_t M, const T* x, int64_t ldx, const T* packed, const T* bias, int64_t K, int64_t p0,
                   int64_t p1, T* out, int64_t ldo) {
  if constexpr (kM == 0) {
    return;
  } else {
    if (M == kM) {
      if constexpr (std::is_same_v<T, float>) {
        rows_times_panels<kM>(x, ldx, packed, bias, K, p0, p1, out, ldo);
      } else {
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
        rows_times_panels_bf16<kM>(x, ldx, packed, bias, K, p0, p1, out, ldo);
#endif
      }
      return;
    }
    dispatch_rows<T, kM - 1>(M, x, ldx, packed, bias, K, p0, p1, out, ldo);
  }
}

template <typename T>
void run_panels(const at::Tensor& x, const at::Tensor& packed, const T* bp, at::Tensor& out) {
  const int64_t M = x.size(0), K = x.size(1), ldx = x.stride(0), ldo = out.stride(0);
  const T* xp = x.data_ptr<T>();
  const T* wp = packed.data_ptr<T>();
  T* op = out.data_ptr<T>();
  if (M <= kMaxRows) {
    // A few panels per task: K * 64 bytes each in fp32 with AVX-512 (36-98 KB at SmolLM2's shapes).
    at::parallel_for(0, packed.size(0), 4, [&](int64_t p0, int64_t p1) {
      dispatch_rows<T, kMaxRows>(M, xp, ldx, wp, bp, K, p0, p1, op, ldo);
    });
    return;
  }
  // More rows (a prefill chunk): each panel, while it sits in the core's cache, against every tile of kMaxRows
  // rows. Every output is still the one sum over k in order that a single row gets (the tiles only decide
  // which sums share a weight load), so a row's result does not depend on how many rows came with it.
  at::parallel_for(0, packed.size(0), 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t m0 = 0; m0 < M; m0 += kMaxRows)
        dispatch_rows<T, kMaxRows>(std::min(kMaxRows, M - m0), xp + m0 * ldx, ldx, wp, bp, K, p, p + 1,
                                   op + m0 * ldo, ldo);
  });
}

#if SHOP_ASSISTANT_AMX
// Linux hands a process the AMX tile state (8 KB per thread's saved context) only on request; until then the
// first tile instruction faults. Asked once per process; refused on CPUs or kernels without AMX.
bool request_amx() {
  static const bool granted = [] {
    constexpr long kReqXcompPerm = 0x1023, kGetXcompPerm = 0x1022;  // ARCH_REQ_XCOMP_PERM, ARCH_GET_...
    constexpr int kXtiledata = 18;                                   // XFEATURE_XTILEDATA
    if (syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) != 0) return false;
    unsigned long permitted = 0;
    return syscall(SYS_arch_prctl, kGetXcompPerm, &permitted) == 0 && (permitted >> kXtiledata & 1) != 0;
  }();
  return granted;
}

// The C tiles of G panels (c[g][m][n], fp32) for the first `rows` rows: the bias (if any) added to the fp32 sum,
// rounded to bf16 once, as rows_times_panels_bf16 finishes.
void finish_group(const float* c, int G, int64_t rows, const c10::BFloat16* bias, c10::BFloat16* out, int64_t ldo) {
  for (int g = 0; g < G; ++g) {
    const VecF b = bias != nullptr ? load_vec(bias + g * kLanes) : VecF{};
    for (int64_t m = 0; m < rows; ++m) {
      const VecF acc = load_vec(c + (g * amx::kTileRows + m) * amx::kTileCols);
      store_bf16(reinterpret_cast<uint16_t*>(out + m * ldo + g * kLanes), bias != nullptr ? acc + b : acc);
    }
  }
}

// Panel groups [g0, g1) against every tile of 16 rows: whole tiles read from x in place, the last rows (if
// fewer than 16) from `padded` (16 rows of K, zeros below them). Runs on one thread, its tile config loaded here.
SHOP_ASSISTANT_AMX_TARGET void groups_times_rows(const amx::TileConfig& cfg, const uint16_t* x, int64_t ldx,
                                                 const uint16_t* padded, int64_t M, const uint16_t* packed,
                                                 int64_t K, int64_t panels, const c10::BFloat16* bias,
                                                 c10::BFloat16* out, int64_t ldo, int64_t g0, int64_t g1) {
  alignas(64) float c[amx::kGroup * amx::kTileRows * amx::kTileCols];
  amx::AmxTiles::configure(&cfg);
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t p = g * amx::kGroup;
    const int G = static_cast<int>(std::min<int64_t>(amx::kGroup, panels - p));
    const uint16_t* w = packed + p * K * kLanes;
    for (int64_t m0 = 0; m0 < M; m0 += amx::kTileRows) {
      const int64_t rows = std::min<int64_t>(amx::kTileRows, M - m0);
      const uint16_t* a = rows == amx::kTileRows ? x + m0 * ldx : padded;
      const int64_t lda = rows == amx::kTileRows ? ldx : K;
      switch (G) {
        case 1: amx::rows_times_group<amx::AmxTiles, 1>(a, lda, w, K, c); break;
        case 2: amx::rows_times_group<amx::AmxTiles, 2>(a, lda, w, K, c); break;
        case 3: amx::rows_times_group<amx::AmxTiles, 3>(a, lda, w, K, c); break;
        default: amx::rows_times_group<amx::AmxTiles, 4>(a, lda, w, K, c); break;
      }
      finish_group(c, G, rows, bias == nullptr ? nullptr : bias + p * kLanes, out + m0 * ldo + p * kLanes, ldo);
    }
  }
  amx::AmxTiles::release();
}

void run_amx(const at::Tensor& x, const at::Tensor& packed, const c10::BFloat16* bias, at::Tensor& out) {
  const int64_t M = x.size(0), K = x.size(1), ldx = x.stride(0), ldo = out.stride(0), panels = packed.size(0);
  const auto* xp = reinterpret_cast<const uint16_t*>(x.data_ptr<c10::BFloat16>());
  // Every row goes through a tile of 16 (one instruction sequence whatever the row count): the last rows,
  // if fewer, copied into a tile of their own below which zero rows are computed and dropped (a tile's rows do
  // not mix). The buffer is kept per calling thread: a decode step makes 121 calls.
  thread_local std::vector<uint16_t> padded;
  const int64_t whole = M - M % amx::kTileRows;
  if (M > whole) {
    if (static_cast<int64_t>(padded.size()) < amx::kTileRows * K) padded.resize(amx::kTileRows * K);
    for (int64_t m = whole; m < M; ++m) std::copy_n(xp + m * ldx, K, padded.data() + (m - whole) * K);
    std::fill_n(padded.data() + (M - whole) * K, (whole + amx::kTileRows - M) * K, 0);
  }
  const amx::TileConfig cfg = amx::tile_config(K);
  const auto* wp = reinterpret_cast<const uint16_t*>(packed.data_ptr<c10::BFloat16>());
  c10::BFloat16* op = out.data_ptr<c10::BFloat16>();
  const int64_t groups = (panels + amx::kGroup - 1) / amx::kGroup;
  // The pointer, not the name: inside the task `padded` would be the worker thread's own (empty) buffer.
  const uint16_t* last = padded.data();
  at::parallel_for(0, groups, 1, [&](int64_t g0, int64_t g1) {
    groups_times_rows(cfg, xp, ldx, last, M, wp, K, panels, bias, op, ldo, g0, g1);
  });
}
#else
bool request_amx() { return false; }
#endif

// The checks both entry points make: dtypes, layouts and shapes as pack_panels makes them.
void check_arguments(const at::Tensor& out, const at::Tensor& x, const at::Tensor& packed,
                     const std::optional<at::Tensor>& bias) {
  const auto dtype = x.scalar_type();
  TORCH_CHECK(packed.scalar_type() == dtype && out.scalar_type() == dtype, "x, packed and out: one dtype");
  TORCH_CHECK(dtype == at::kFloat || (dtype == at::kBFloat16 && kBf16Dot), "float32, or bfloat16 with AVX512-BF16");
  TORCH_CHECK(x.dim() == 2 && x.stride(1) == 1 && out.dim() == 2 && out.stride(1) == 1, "x, out: [rows, features]");
  // fp32 panels are [N / lanes, K, lanes]; bf16 ones [N / lanes, K / 2, 2 * lanes] (pairs along K).
  const int64_t per_step = dtype == at::kFloat ? kLanes : 2 * kLanes;
  TORCH_CHECK(packed.dim() == 3 && packed.size(2) == per_step && packed.is_contiguous(),
              "packed: the layout of cpu_kernels.pack_panels, contiguous");
  const int64_t M = x.size(0), K = x.size(1), panels = packed.size(0);
  TORCH_CHECK(packed.size(1) * per_step == K * kLanes && out.size(0) == M && out.size(1) == panels * kLanes,
              "shapes disagree");
  if (bias.has_value())
    TORCH_CHECK(bias->scalar_type() == dtype && bias->is_contiguous() && bias->numel() == panels * kLanes,
                "bias: one per output, contiguous, the dtype of x");
}

void small_linear(at::Tensor out, const at::Tensor& x, const at::Tensor& packed, const std::optional<at::Tensor>& bias) {
  check_arguments(out, x, packed, bias);
  if (x.scalar_type() == at::kFloat) {
    run_panels<float>(x, packed, bias.has_value() ? bias->data_ptr<float>() : nullptr, out);
  } else {
    run_panels<c10::BFloat16>(x, packed, bias.has_value() ? bias->data_ptr<c10::BFloat16>() : nullptr, out);
  }
}

// The bf16 panels on AMX tiles (same arguments and results' rounding as small_linear_ in bf16).
void small_linear_amx(at::Tensor out, const at::Tensor& x, const at::Tensor& packed,
                      const std::optional<at::Tensor>& bias) {
  check_arguments(out, x, packed, bias);
  TORCH_CHECK(x.scalar_type() == at::kBFloat16, "the AMX path is bfloat16 only");
  TORCH_CHECK(request_amx(), "AMX-BF16 is not available here (small_linear_amx_ready() is false)");
#if SHOP_ASSISTANT_AMX
  run_amx(x, packed, bias.has_value() ? bias->data_ptr<c10::BFloat16>() : nullptr, out);
#endif
}

// (panel width, rows per register tile (the most that stream the weights once), 1 if bf16 panels run here): what `pack_panels` and the caller need to know.
std::vector<int64_t> small_linear_shape() { return {kLanes, kMaxRows, kBf16Dot ? 1 : 0}; }

// Whether small_linear_amx_ runs here: built with AMX, and Linux granted this process the tile state (asked
// on the first call; the caller asks only where the CPU's flags list amx_bf16 and amx_tile).
bool small_linear_amx_ready() { return request_amx(); }

}  // namespace

TORCH_LIBRARY_FRAGMENT(shop_assistant, m) {
  m.def("small_linear_(Tensor(a!) out, Tensor x, Tensor packed, Tensor? bias) -> ()");
  m.def("small_linear_amx_(Tensor(a!) out, Tensor x, Tensor packed, Tensor? bias) -> ()");
  m.def("small_linear_shape() -> int[]", &small_linear_shape);
  m.def("small_linear_amx_ready() -> bool", &small_linear_amx_ready);
}

TORCH_LIBRARY_IMPL(shop_assistant, CPU, m) {
  m.impl("small_linear_", &small_linear);
  m.impl("small_linear_amx_", &small_linear_amx);
}
