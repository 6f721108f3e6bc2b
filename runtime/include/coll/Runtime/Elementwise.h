//===- Elementwise.h - Element conversions and reduction kernels -*- C++ -*-===//
/// \file
/// The arithmetic of reductions, shared by the CPU executors, the reference
/// implementation and the CUDA kernels (host/device clean): storage and
/// compute types per DataType, fp16/bf16 conversions (round to nearest even),
/// the reduction operators, and loops that copy, reduce and scale ranges of
/// elements with a start and a stride, so that a GPU platform can spread a
/// range over the threads of a block and a CPU platform runs it in one.
///
/// Integer sums and products wrap around (two's complement), so that every
/// order of combining gives the same bits; fp16 and bf16 compute in float and
/// round once per operation.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_ELEMENTWISE_H
#define COLL_RUNTIME_ELEMENTWISE_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/HostDevice.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace coll {

//===----------------------------------------------------------------------===//
// Bit casts and 16-bit floats
//===----------------------------------------------------------------------===//

/// The bits of \p f.
COLL_HOST_DEVICE inline uint32_t floatToBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

/// The float whose bits are \p u.
COLL_HOST_DEVICE inline float bitsToFloat(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/// IEEE binary16 bits to float (exact). On a device, the hardware
/// conversion of cuda_fp16.h (the same value).
COLL_HOST_DEVICE inline float halfToFloat(uint16_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float.
    float v = float(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) // Infinity or NaN, payload kept.
    return bitsToFloat(sign | 0x7f800000u | (mant << 13));
  return bitsToFloat(sign | ((exp - 15 + 127) << 23) | (mant << 13));
#endif
}

/// Float to IEEE binary16 bits, rounding to nearest even; overflow gives
/// infinity, NaN stays NaN. On a device, cuda_fp16.h's round-to-nearest-even
/// conversion (the same bits, NaN payloads aside).
COLL_HOST_DEVICE inline uint16_t floatToHalf(float f) {
#ifdef __CUDA_ARCH__
  return __half_as_ushort(__float2half_rn(f));
#else
  uint32_t x = floatToBits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) // Infinity or NaN (quiet).
    return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) // 65520 and above round to infinity.
    return uint16_t(sign | 0x7c00u);
  if (abs < 0x38800000u) {
    // Below 2^-14: a subnormal half (unit 2^-24) or zero.
    uint32_t exp = abs >> 23;
    if (exp < 102) // Below 2^-25: rounds to zero.
      return uint16_t(sign);
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp; // 14 .. 24
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1)))
      ++q; // May carry into the smallest normal, which is the right encoding.
    return uint16_t(sign | q);
  }
  uint32_t h = ((((abs >> 23) - 127 + 15) << 10) | ((abs & 0x7fffffu) >> 13));
  uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
    ++h; // A carry into the exponent is the right rounding.
  return uint16_t(sign | h);
#endif
}

/// bfloat16 bits to float (exact).
COLL_HOST_DEVICE inline float bf16ToFloat(uint16_t b) {
  return bitsToFloat(uint32_t(b) << 16);
}

/// Float to bfloat16 bits, rounding to nearest even; NaN stays NaN. On a
/// device, cuda_bf16.h's conversion (the same bits, NaN payloads aside).
COLL_HOST_DEVICE inline uint16_t floatToBf16(float f) {
#ifdef __CUDA_ARCH__
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  uint32_t x = floatToBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((x >> 16) | 0x40u); // Quiet NaN.
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
#endif
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

/// Storage and compute types of a DataType (DataTypes.def).
template <DataType D> struct DataTypeTraits;
#define COLL_DATA_TYPE(Id, Name, StorageType, ComputeType)                                         \
  template <> struct DataTypeTraits<DataType::Id> {                                                \
    static constexpr DataType type = DataType::Id;                                                 \
    using Storage = StorageType;                                                                   \
    using Compute = ComputeType;                                                                   \
  };
#include "coll/Runtime/DataTypes.def"

/// An element in memory to the type reductions compute in.
template <DataType D>
COLL_HOST_DEVICE inline typename DataTypeTraits<D>::Compute
loadElement(typename DataTypeTraits<D>::Storage s) {
  if constexpr (D == DataType::Float16)
    return halfToFloat(s);
  else if constexpr (D == DataType::BFloat16)
    return bf16ToFloat(s);
  else
    return s;
}

/// A computed value to its form in memory (fp16/bf16: round to nearest even).
template <DataType D>
COLL_HOST_DEVICE inline typename DataTypeTraits<D>::Storage
storeElement(typename DataTypeTraits<D>::Compute c) {
  if constexpr (D == DataType::Float16)
    return floatToHalf(c);
  else if constexpr (D == DataType::BFloat16)
    return floatToBf16(c);
  else
    return c;
}

//===----------------------------------------------------------------------===//
// Operators
//===----------------------------------------------------------------------===//

/// `in (op) local`: the incoming value on the left. Avg combines as Sum.
template <RedOp Op, class T> COLL_HOST_DEVICE inline T combine(T in, T local) {
  if constexpr (std::is_integral_v<T> &&
                (Op == RedOp::Sum || Op == RedOp::Avg || Op == RedOp::Prod)) {
    // Unsigned arithmetic of at least 32 bits: wraps around without
    // undefined behaviour and without promotion to a signed int.
    using Wide = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;
    Wide a = Wide(in), b = Wide(local);
    return T(Op == RedOp::Prod ? a * b : a + b);
  } else if constexpr (Op == RedOp::Sum || Op == RedOp::Avg) {
    return in + local;
  } else if constexpr (Op == RedOp::Prod) {
    return in * local;
  } else if constexpr (Op == RedOp::Max) {
    return in < local ? local : in;
  } else {
    return local < in ? local : in;
  }
}

/// \p value divided by \p nranks: the last step of Avg. Integers truncate
/// toward zero.
template <class T> COLL_HOST_DEVICE inline T divideByRanks(T value, uint32_t nranks) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
    return T(int64_t(value) / int64_t(nranks));
  else if constexpr (std::is_integral_v<T>)
    return T(uint64_t(value) / uint64_t(nranks));
  else
    return value / T(nranks);
}

//===----------------------------------------------------------------------===//
// Range kernels
//
// Each handles elements begin, begin + stride, ... below n. Destinations may
// be the same memory as a source (dst == local for `re`), never a partial
// overlap.
//===----------------------------------------------------------------------===//

/// dst[i] = in[i] (op) local[i].
template <DataType D, RedOp Op>
COLL_HOST_DEVICE inline void reduceRange(void *dst, const void *in, const void *local, uint64_t n,
                                         uint64_t begin = 0, uint64_t stride = 1) {
  using S = typename DataTypeTraits<D>::Storage;
  S *d = static_cast<S *>(dst);
  const S *a = static_cast<const S *>(in);
  const S *b = static_cast<const S *>(local);
  for (uint64_t i = begin; i < n; i += stride)
    d[i] = storeElement<D>(combine<Op>(loadElement<D>(a[i]), loadElement<D>(b[i])));
}

/// dst0[i] = dst1[i] = in[i] (op) local[i]: a fused step writes its result
/// locally and into the next connection's slot in one pass.
template <DataType D, RedOp Op>
COLL_HOST_DEVICE inline void reduce2Range(void *dst0, void *dst1, const void *in, const void *local,
                                          uint64_t n, uint64_t begin = 0, uint64_t stride = 1) {
  using S = typename DataTypeTraits<D>::Storage;
  S *d0 = static_cast<S *>(dst0);
  S *d1 = static_cast<S *>(dst1);
  const S *a = static_cast<const S *>(in);
  const S *b = static_cast<const S *>(local);
  for (uint64_t i = begin; i < n; i += stride) {
    S v = storeElement<D>(combine<Op>(loadElement<D>(a[i]), loadElement<D>(b[i])));
    d0[i] = v;
    d1[i] = v;
  }
}

/// p[i] = p[i] / nranks: Avg's final scaling.
template <DataType D>
COLL_HOST_DEVICE inline void divideRange(void *p, uint64_t n, uint32_t nranks, uint64_t begin = 0,
                                         uint64_t stride = 1) {
  using S = typename DataTypeTraits<D>::Storage;
  S *d = static_cast<S *>(p);
  for (uint64_t i = begin; i < n; i += stride)
    d[i] = storeElement<D>(divideByRanks(loadElement<D>(d[i]), nranks));
}

//===----------------------------------------------------------------------===//
// Run-time dispatch (host only)
//===----------------------------------------------------------------------===//

/// Calls f(DataTypeTraits<type>{}); false (and no call) for an invalid type.
template <class F> bool visitDataType(DataType type, F &&f) {
  switch (type) {
#define COLL_DATA_TYPE(Id, Name, Storage, Compute)                                                 \
  case DataType::Id:                                                                               \
    f(DataTypeTraits<DataType::Id>{});                                                             \
    return true;
#include "coll/Runtime/DataTypes.def"
  }
  return false;
}

/// The operator \p op as a type, for dispatch.
template <RedOp Op> struct RedOpTag { static constexpr RedOp op = Op; };

/// Calls f(RedOpTag<op>{}); false (and no call) for an invalid operator.
template <class F> bool visitRedOp(RedOp op, F &&f) {
  switch (op) {
  case RedOp::Sum:
    f(RedOpTag<RedOp::Sum>{});
    return true;
  case RedOp::Prod:
    f(RedOpTag<RedOp::Prod>{});
    return true;
  case RedOp::Max:
    f(RedOpTag<RedOp::Max>{});
    return true;
  case RedOp::Min:
    f(RedOpTag<RedOp::Min>{});
    return true;
  case RedOp::Avg:
    f(RedOpTag<RedOp::Avg>{});
    return true;
  }
  return false;
}

} // namespace coll

#endif // COLL_RUNTIME_ELEMENTWISE_H
