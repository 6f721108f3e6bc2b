//===- HostKernels.cpp - Element kernels of the CPU executors -------------===//

#include "HostKernels.h"

#include "coll/Runtime/Elementwise.h"

namespace coll {
namespace detail {

namespace {
template <DataType D, RedOp Op>
void reduceKernel(void *dst, const void *in, const void *local, uint64_t n) {
  reduceRange<D, Op>(dst, in, local, n);
}
template <DataType D, RedOp Op>
void reduce2Kernel(void *dst0, void *dst1, const void *in, const void *local, uint64_t n) {
  reduce2Range<D, Op>(dst0, dst1, in, local, n);
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
