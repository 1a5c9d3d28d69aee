// Fake quantization on CPU in one pass per group: scale from the group's finite values, round, dequantize.
//
// Every operation is the float32 (or, where the reference computes in float64, the float64) operation of
// qscaling.quant.reference, in the same order, so the bits are the reference's: built without FMA contraction
// or fast-math, IEEE arithmetic is the same on every CPU. -fno-trapping-math only lets the compiler turn the
// selects below into vector blends (no FP exception flags are read); it changes no value. Stochastic rounding and absmean scales are left to the
// other paths (qscaling.quant.cpu_kernel.supports).
#include <torch/extension.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>

namespace {

constexpr int kNearestEven = 0;
constexpr int kNearestAway = 1;
constexpr int kScaleFp32 = 0;
constexpr int kScalePow2 = 1;
constexpr int kScaleE8m0 = 2;
constexpr int kScaleE4m3 = 3;  // two levels: an E4M3 scale per group, one float32 scale per tensor (NVFP4)
constexpr float kE4m3Max = 448.0f;
constexpr int kE4m3MinNormalExponent = -6, kE4m3MantissaBits = 3;

struct Spec {
  bool is_fp;
  int rounding;
  // INT
  bool symmetric;
  bool mulinv;
  float divisor;  // amax / divisor (symmetric) or range / divisor (asymmetric)
  float q_min, q_max;
  // FP
  bool unscaled;
  int fp_scale;
  int exponent_bits, mantissa_bits, min_normal_exponent, max_exponent;
  float max_value;
  double overflow_value;
  float inside;  // FP: |x·S| below this rounds onto the format (max + half the top binade's ulp)
  // Two-level (e4m3) scales, from the tensor's amax (set_two_level): the block-scale multiplier G·(1/FP_max), 1/G
  // and the dequantizing tensor scale.
  float block_multiplier = 0.0f, global_decode = 0.0f, tensor_scale = 0.0f;
};

inline float as_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline uint32_t as_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// 2^exponent for exponent in -149..127, from its bit pattern (below -126 a float32 subnormal).
inline float power_of_two(int exponent) {
  return as_float(exponent >= -126 ? static_cast<uint32_t>(exponent + 127) << 23 : 1u << ((exponent + 149) & 31));
}

float fp_scale(float amax, const Spec& s) {
  if (s.unscaled || !(amax > 0.0f)) return 1.0f;
  if (s.fp_scale == kScaleE8m0) {
    int e;
    std::frexp(static_cast<double>(amax), &e);
    return power_of_two(std::clamp(s.max_exponent - (e - 1), -127, 127));
  }
  float quotient = std::min(s.max_value / amax, FLT_MAX);
  if (s.fp_scale == kScalePow2) {
    int e;
    std::frexp(static_cast<double>(quotient), &e);
    quotient = power_of_two(std::clamp(e - 1, -126, 127));
  }
  return quotient;
}

// qscaling.quant.fp_rounding.two_level_scales (TransformerEngine's NVFP4 reference, in its float32 operations and
// order): the global encode G = min(FP_max·448 / tensor_amax, FLT_MAX) and what the blocks need of it.
void set_two_level(Spec& s, float tensor_amax) {
  const float largest = s.max_value * kE4m3Max, inverse_max = 1.0f / s.max_value;
  const float global_encode = std::min(largest / tensor_amax, FLT_MAX);
  s.global_decode = 1.0f / global_encode;
  s.block_multiplier = global_encode * inverse_max;
  s.tensor_scale = tensor_amax / largest;
}

// A non-negative float32 value <= 448 rounded to E4M3, ties to even, subnormals included: value / ulp (a power of
// two read from the exponent field) is exact, and so are std::rint of it and the product.
inline float e4m3_nearest_even(float value) {
  int binade = static_cast<int>((as_bits(value) >> 23) & 0xFF) - 127;
  float ulp = power_of_two(std::max(binade, kE4m3MinNormalExponent) - kE4m3MantissaBits);
  return std::rint(value / ulp) * ulp;
}

// A group's E4M3 scale and the multiplier that encodes its values: min(1/(block·(1/G)), FLT_MAX), FLT_MAX for a
// scale of 0 (a group of zeros, or one too small beside the tensor's largest values).
inline void two_level_block(float amax, const Spec& s, float* encode, float* block) {
  *block = e4m3_nearest_even(std::min(amax * s.block_multiplier, kE4m3Max));
  *encode = std::min(1.0f / (*block * s.global_decode), FLT_MAX);
}

// Each loop below is element-wise with selects instead of branches, so the compiler vectorises it; std::rint is
// round-half-even under the default rounding mode (torch.round).

// fp_rounding.round_to_format of x·scale, then / scale, in float32 as qscaling.quant.fast computes it: the binade
// from the exponent field (a float32 subnormal lies below every format's smallest normal binade, E <= 8), and
// magnitude / ulp, its rounding and steps · ulp are exact. ±Inf overflows; NaN stays NaN.
//
// kSplit (nearest-even, E <= 7), as qscaling.quant.fast's _round_nearest_even_split: Veltkamp's split rounds a to
// M + 1 significant bits, ties to even, with no division (a capped at 2·max, so σ·a cannot overflow), and below
// the smallest normal binade (a + C) − C rounds to its fixed ulp. Exact without FMA contraction or reassociation.
// kTwoLevel: dequantized as (q·block)·tensor_scale (q·block is exact), else q / scale.
template <bool kAway, bool kMask, bool kSplit, bool kTwoLevel>
void fp_elements(const float* x, float* out, uint32_t* inside_flags, int64_t n, float scale, float block,
                 const Spec& s) {
  const float overflow = static_cast<float>(s.overflow_value), max_value = s.max_value, inside = s.inside;
  const int min_normal = s.min_normal_exponent, mantissa = s.mantissa_bits;
  const float split_cap = 2.0f * max_value, split_factor = power_of_two(23 - mantissa) + 1.0f;
  const float split_shift = power_of_two(min_normal - mantissa + 23), smallest_normal = power_of_two(min_normal);
  const float tensor_scale = s.tensor_scale;
  for (int64_t i = 0; i < n; ++i) {
    float scaled = x[i] * scale;
    float magnitude = std::fabs(scaled);
    int binade = static_cast<int>((as_bits(magnitude) >> 23) & 0xFF) - 127;
    binade = binade < min_normal ? min_normal : binade;
    float rounded;
    if constexpr (kSplit) {
      float capped = magnitude > split_cap ? split_cap : magnitude;  // NaN stays NaN
      float product = capped * split_factor;
      float normal = product + (capped - product);
      float subnormal = (capped + split_shift) - split_shift;
      rounded = capped < smallest_normal ? subnormal : normal;
    } else {
      float ulp = power_of_two(std::min(binade - mantissa, 127));
      float steps = magnitude / ulp;
      steps = kAway ? std::floor(steps + 0.5f) : std::rint(steps);
      rounded = steps * ulp;
      rounded = magnitude > FLT_MAX ? overflow : rounded;
    }
    rounded = rounded > max_value ? overflow : rounded;
    rounded = magnitude != magnitude ? magnitude : rounded;
    float quantized = std::copysign(rounded, scaled);
    out[i] = kTwoLevel ? (quantized * block) * tensor_scale : quantized / scale;
    if constexpr (kMask) inside_flags[i] = magnitude < inside;
  }
}

// (clamp(round(x/s) + z, q_min, q_max) - z)·s; a NaN code fails both comparisons and stays NaN.
template <bool kMulinv, bool kAway, bool kMask>
void int_elements(const float* x, float* out, uint32_t* inside, int64_t n, float scale, float zero_point,
                  const Spec& s) {
  const float reciprocal = 1.0f / scale, q_min = s.q_min, q_max = s.q_max;
  for (int64_t i = 0; i < n; ++i) {
    float scaled = kMulinv ? x[i] * reciprocal : x[i] / scale;
    float rounded;
    if constexpr (kAway) {  // the reference rounds the magnitude in float64, where |y| + 0.5 is exact
      double wide = scaled;
      rounded = static_cast<float>(std::copysign(std::floor(std::fabs(wide) + 0.5), wide));
    } else {
      rounded = std::rint(scaled);
    }
    float codes = rounded + zero_point;
    if constexpr (kMask) inside[i] = codes >= q_min && codes <= q_max;
    codes = codes < q_min ? q_min : codes;
    codes = codes > q_max ? q_max : codes;
    out[i] = (codes - zero_point) * scale;
  }
}

// A group's elements go in chunks. The clipped STE's mask is written as 32-bit flags beside the float32 results
// and converted to the mask's type (Flag: bool, or float 0/1, which multiplies a float gradient ~6x faster than a
// bool tensor does) after each chunk: a bool store in the same loop sets the vector length by its 1-byte elements
// (64 per AVX-512 vector), which left groups under 64 elements to scalar code (3.3 ns per element against 0.7
// unmasked on rows of 24). A single core's loads and stores stay ahead of the arithmetic only when their lines
// are asked for early: the hardware prefetcher alone left the FP loop at ~0.55x copy_'s bandwidth on 4096² (0.95x
// with this). Flag void: no mask.
constexpr int64_t kChunk = 256;          // elements per prefetch-and-compute step
constexpr int64_t kLine = 16;            // float32 per 64-byte cache line
constexpr int64_t kPrefetchAhead = 512;  // elements (2 KiB of float32)

template <typename Flag, typename Elements>
void in_chunks(const float* x, float* out, Flag* mask, int64_t n, Elements elements) {
  uint32_t inside[kChunk];
  for (int64_t start = 0; start < n; start += kChunk) {
    int64_t count = std::min(kChunk, n - start);
    for (int64_t line = start; line < start + count; line += kLine) {
      __builtin_prefetch(x + line + kPrefetchAhead, 0);
      __builtin_prefetch(out + line + kPrefetchAhead, 1);
    }
    elements(x + start, out + start, inside, count);
    if constexpr (!std::is_void_v<Flag>) {
      for (int64_t i = 0; i < count; ++i) mask[start + i] = static_cast<Flag>(inside[i] != 0);
    }
  }
}

template <bool kAway, typename Flag, bool kSplit, bool kTwoLevel>
void fp_group(const float* x, float* out, Flag* mask, int64_t n, float scale, float block, const Spec& s) {
  in_chunks(x, out, mask, n, [&](const float* xs, float* outs, uint32_t* inside, int64_t count) {
    fp_elements<kAway, !std::is_void_v<Flag>, kSplit, kTwoLevel>(xs, outs, inside, count, scale, block, s);
  });
}

// The rounding variant for the spec: nearest-away, the split (nearest-even, E <= 7) or the division.
template <typename Flag, bool kTwoLevel>
void fp_group_rounded(const float* x, float* out, Flag* mask, int64_t n, float scale, float block, const Spec& s) {
  if (s.rounding == kNearestAway) {
    fp_group<true, Flag, false, kTwoLevel>(x, out, mask, n, scale, block, s);
  } else if (s.exponent_bits <= 7) {
    fp_group<false, Flag, true, kTwoLevel>(x, out, mask, n, scale, block, s);
  } else {
    fp_group<false, Flag, false, kTwoLevel>(x, out, mask, n, scale, block, s);
  }
}

template <bool kMulinv, bool kAway, typename Flag>
void int_group(const float* x, float* out, Flag* mask, int64_t n, float scale, float zero_point, const Spec& s) {
  in_chunks(x, out, mask, n, [&](const float* xs, float* outs, uint32_t* inside, int64_t count) {
    int_elements<kMulinv, kAway, !std::is_void_v<Flag>>(xs, outs, inside, count, scale, zero_point, s);
  });
}

// One group of n elements; its scale (and zero point) from `amax`, `low`, `high`; `mask` (or null): where the
// clipped straight-through estimator passes the gradient — the code before clamping lies in the code range (INT),
// |x·S| rounds onto the format rather than past its maximum (FP); NaN passes nothing.
template <typename Flag>
void quantize_group(const float* x, float* out, Flag* mask, int64_t n, const Spec& s, float amax, float low,
                    float high) {
  bool away = s.rounding == kNearestAway;
  if (s.is_fp && s.fp_scale == kScaleE4m3) {
    float encode, block;
    two_level_block(amax, s, &encode, &block);
    fp_group_rounded<Flag, true>(x, out, mask, n, encode, block, s);
    return;
  }
  if (s.is_fp) {
    fp_group_rounded<Flag, false>(x, out, mask, n, fp_scale(amax, s), 0.0f, s);
    return;
  }
  float scale = std::max((s.symmetric ? amax : high - low) / s.divisor, FLT_MIN);
  float zero_point = 0.0f;
  if (!s.symmetric) zero_point = std::clamp(std::rint(-low / scale), 0.0f, s.q_max);
  if (s.mulinv) {
    away ? int_group<true, true, Flag>(x, out, mask, n, scale, zero_point, s)
         : int_group<true, false, Flag>(x, out, mask, n, scale, zero_point, s);
  } else {
    away ? int_group<false, true, Flag>(x, out, mask, n, scale, zero_point, s)
         : int_group<false, false, Flag>(x, out, mask, n, scale, zero_point, s);
  }
}

// The finite values' absolute maximum (0 where a group has none, as the reference's zeros): an unsigned maximum
// of |x|'s bit patterns, which order like the values, with ±Inf and NaN patterns (above FLT_MAX's) counted as 0.
// Kept out of line, so the vectoriser sees a plain unsigned max reduction returned, not a bit cast of it.
__attribute__((noinline)) uint32_t group_amax_bits(const float* x, int64_t n) {
  typedef uint32_t __attribute__((may_alias)) aliased_bits;
  const aliased_bits* bits = reinterpret_cast<const aliased_bits*>(x);
  uint32_t largest = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t magnitude = bits[i] & 0x7FFFFFFFu;
    uint32_t finite = magnitude & (0u - static_cast<uint32_t>(magnitude <= 0x7F7FFFFFu));
    largest = finite > largest ? finite : largest;
  }
  return largest;
}

// The finite values' minimum and maximum, each clamped to include 0, in kLanes independent lanes so the loop
// vectorises (min and max of finite floats do not depend on the order).
constexpr int kLanes = 8;

void group_low_high(const float* x, int64_t n, float* low, float* high) {
  float lo[kLanes] = {}, hi[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      float v = std::fabs(x[i + j]) <= FLT_MAX ? x[i + j] : 0.0f;
      lo[j] = v < lo[j] ? v : lo[j];
      hi[j] = v > hi[j] ? v : hi[j];
    }
  }
  for (; i < n; ++i) {
    float v = std::fabs(x[i]) <= FLT_MAX ? x[i] : 0.0f;
    lo[0] = v < lo[0] ? v : lo[0];
    hi[0] = v > hi[0] ? v : hi[0];
  }
  for (int j = 1; j < kLanes; ++j) {
    lo[0] = lo[j] < lo[0] ? lo[j] : lo[0];
    hi[0] = hi[j] > hi[0] ? hi[j] : hi[0];
  }
  *low = lo[0];
  *high = hi[0];
}

// What a group's scale is made from: amax, or (asymmetric INT) its low and high.
void group_range(const float* x, int64_t n, const Spec& s, float* amax, float* low, float* high) {
  *amax = *low = *high = 0.0f;
  if (!s.is_fp && !s.symmetric) {
    group_low_high(x, n, low, high);
  } else {
    *amax = as_float(group_amax_bits(x, n));
  }
}

template <typename Flag>
Flag* at_offset(Flag* mask, int64_t offset) {
  if constexpr (std::is_void_v<Flag>) {
    return nullptr;
  } else {
    return mask + offset;
  }
}

// Every group of the tensor, split over torch's threads: whole groups per thread, or (group_size 0) one range
// merged from the threads' partial ranges, so the split changes no bit.
// The finite values' absolute maximum over the whole tensor, merged from the threads' parts (order-free).
float tensor_amax(const float* in, int64_t numel) {
  float amax = 0.0f;
  std::mutex merge;
  at::parallel_for(0, numel, 1 << 16, [&](int64_t begin, int64_t end) {
    float part = as_float(group_amax_bits(in + begin, end - begin));
    std::lock_guard<std::mutex> lock(merge);
    amax = part > amax ? part : amax;
  });
  return amax;
}

template <typename Flag>
void quantize_tensor(const float* in, float* result, Flag* mask, int64_t numel, int64_t row_length,
                     int64_t group_size, const Spec& spec) {
  Spec s = spec;
  if (s.is_fp && s.fp_scale == kScaleE4m3) set_two_level(s, tensor_amax(in, numel));
  if (group_size == 0) {
    float amax = 0.0f, low = 0.0f, high = 0.0f;
    std::mutex merge;
    at::parallel_for(0, numel, 1 << 16, [&](int64_t begin, int64_t end) {
      float a, lo, hi;
      group_range(in + begin, end - begin, s, &a, &lo, &hi);
      std::lock_guard<std::mutex> lock(merge);
      amax = a > amax ? a : amax;
      low = lo < low ? lo : low;
      high = hi > high ? hi : high;
    });
    at::parallel_for(0, numel, 1 << 16, [&](int64_t begin, int64_t end) {
      quantize_group(in + begin, result + begin, at_offset(mask, begin), end - begin, s, amax, low, high);
    });
    return;
  }
  int64_t rows = numel / row_length;
  int64_t groups_per_row = (row_length + group_size - 1) / group_size;
  int64_t grain = std::max<int64_t>(1, (1 << 14) / group_size);
  at::parallel_for(0, rows * groups_per_row, grain, [&](int64_t begin, int64_t end) {
    // Row and column advance by counting: a 64-bit division per group cost more than a group of 24 elements.
    int64_t row = begin / groups_per_row, column = begin % groups_per_row;
    for (int64_t g = begin; g < end; ++g) {
      int64_t start = column * group_size, offset = row * row_length + start;
      int64_t n = std::min(group_size, row_length - start);
      float amax, low, high;
      group_range(in + offset, n, s, &amax, &low, &high);
      quantize_group(in + offset, result + offset, at_offset(mask, offset), n, s, amax, low, high);
      if (++column == groups_per_row) {
        column = 0;
        ++row;
      }
    }
  });
}

}  // namespace

// x, out: contiguous float32 [rows, row_length]; mask: an empty tensor, or a contiguous bool or float32 tensor of
// x's size that receives the clipped STE's mask (float: 1 where it passes, 0 where not). group_size: elements per
// group along a row (the last group of a row may be shorter); 0: one group for the whole tensor.
void fake_quantize(torch::Tensor x, torch::Tensor out, torch::Tensor mask, int64_t row_length, int64_t group_size,
                   bool is_fp, int64_t rounding, bool symmetric, bool mulinv, double divisor, double q_min,
                   double q_max, bool unscaled, int64_t fp_scale_kind, int64_t exponent_bits, int64_t mantissa_bits,
                   int64_t min_normal_exponent, int64_t max_exponent, double max_value, double overflow_value,
                   double inside) {
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.scalar_type() == at::kFloat &&
              out.scalar_type() == at::kFloat && x.numel() == out.numel() && x.device().is_cpu(),
              "fake_quantize: x and out must be contiguous float32 CPU tensors of one size");
  TORCH_CHECK(!mask.numel() || (mask.is_contiguous() && mask.numel() == x.numel() &&
                                (mask.scalar_type() == at::kBool || mask.scalar_type() == at::kFloat)),
              "fake_quantize: mask must be a contiguous bool or float32 tensor of x's size");
  Spec s{is_fp,
         static_cast<int>(rounding),
         symmetric,
         mulinv,
         static_cast<float>(divisor),
         static_cast<float>(q_min),
         static_cast<float>(q_max),
         unscaled,
         static_cast<int>(fp_scale_kind),
         static_cast<int>(exponent_bits),
         static_cast<int>(mantissa_bits),
         static_cast<int>(min_normal_exponent),
         static_cast<int>(max_exponent),
         static_cast<float>(max_value),
         overflow_value,
         static_cast<float>(inside)};
  const float* in = x.data_ptr<float>();
  float* result = out.data_ptr<float>();
  int64_t numel = x.numel();
  if (numel == 0) return;
  if (!mask.numel()) {
    quantize_tensor<void>(in, result, nullptr, numel, row_length, group_size, s);
  } else if (mask.scalar_type() == at::kBool) {
    quantize_tensor(in, result, mask.data_ptr<bool>(), numel, row_length, group_size, s);
  } else {
    quantize_tensor(in, result, mask.data_ptr<float>(), numel, row_length, group_size, s);
  }
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("fake_quantize", &fake_quantize, "fake quantization, one pass per group"); }
