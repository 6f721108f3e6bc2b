//===- HostKernels.cpp - Element kernels of the CPU executors -------------===//

#include "HostKernels.h"

#include "coll/Runtime/Elementwise.h"

namespace coll {
namespace detail {

namespace {
// Contiguous loops with the element count as their only bound, which the
// compiler vectorises (this file is built with -O3; docs/performance.md has
// the measurement). Each element is computed exactly as Elementwise.h's
// ranges do, so results are bit-identical to the reference's.
template <DataType D, RedOp Op>
void reduceKernel(void *dst, const void *in, const void *local, uint64_t n) {
  using S = typename DataTypeTraits<D>::Storage;
  S *d = static_cast<S *>(dst);
  const S *a = static_cast<const S *>(in);
  const S *b = static_cast<const S *>(local);
  for (uint64_t i = 0; i < n; ++i)
    d[i] = storeElement<D>(combine<Op>(loadElement<D>(a[i]), loadElement<D>(b[i])));
}
template <DataType D, RedOp Op>
void reduce2Kernel(void *dst0, void *dst1, const void *in, const void *local, uint64_t n) {
  using S = typename DataTypeTraits<D>::Storage;
  S *d0 = static_cast<S *>(dst0);
  S *d1 = static_cast<S *>(dst1);
  const S *a = static_cast<const S *>(in);
  const S *b = static_cast<const S *>(local);
  for (uint64_t i = 0; i < n; ++i) {
    S v = storeElement<D>(combine<Op>(loadElement<D>(a[i]), loadElement<D>(b[i])));
    d0[i] = v;
    d1[i] = v;
  }
}
template <DataType D> void divideKernel(void *p, uint64_t n, uint32_t nranks) {
  divideRange<D>(p, n, nranks);
}
} // namespace

bool selectHostKernels(DataType type, RedOp op, HostKernels &out) {
  return visitDataType(type,
                       [&](auto traits) {
                         constexpr DataType D = decltype(traits)::type;
                         out.elementSize = dataTypeSize(D);
                         out.divide = &divideKernel<D>;
                         visitRedOp(op, [&](auto tag) {
                           constexpr RedOp Op = decltype(tag)::op;
                           out.reduce = &reduceKernel<D, Op>;
                           out.reduce2 = &reduce2Kernel<D, Op>;
                         });
                       }) &&
         out.reduce != nullptr;
}

} // namespace detail
} // namespace coll
