//===- DataType.h - Element types and reduction operators -------*- C++ -*-===//
/// \file
/// The element types (DataTypes.def) and reduction operators a collective
/// runs with. Both are chosen at run time: a plan is the same for every type
/// and operator. Numbering follows NCCL's ncclDataType_t and ncclRedOp_t.
/// The enums and dataTypeSize() are host/device clean; names and parsing are
/// host functions (lib/DataType.cpp).
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_DATATYPE_H
#define COLL_RUNTIME_DATATYPE_H

#include "coll/Runtime/HostDevice.h"

#include <cstddef>
#include <cstdint>

namespace coll {

/// The type of one element, from DataTypes.def.
enum class DataType : uint8_t {
#define COLL_DATA_TYPE(Id, Name, Storage, Compute) Id,
#include "coll/Runtime/DataTypes.def"
};

/// Number of data types.
constexpr unsigned numDataTypes() {
  return 0
#define COLL_DATA_TYPE(Id, Name, Storage, Compute) +1
#include "coll/Runtime/DataTypes.def"
      ;
}

/// Bytes of one element of \p type; 0 for an invalid value.
COLL_HOST_DEVICE constexpr size_t dataTypeSize(DataType type) {
  switch (type) {
#define COLL_DATA_TYPE(Id, Name, Storage, Compute)                                                 \
  case DataType::Id:                                                                               \
    return sizeof(Storage);
#include "coll/Runtime/DataTypes.def"
  }
  return 0;
}

/// The reduction operator, from RedOps.def. Avg is Sum followed by a division by the number
/// of ranks once a rank's result is complete (integers divide truncating
/// toward zero).
enum class RedOp : uint8_t {
#define COLL_RED_OP(Id, Name) Id,
#include "coll/Runtime/RedOps.def"
};

/// Number of reduction operators.
constexpr unsigned numRedOps() {
  return 0
#define COLL_RED_OP(Id, Name) +1
#include "coll/Runtime/RedOps.def"
      ;
}

/// Whether \p type holds floating-point values.
COLL_HOST_DEVICE constexpr bool isFloatType(DataType type) {
  return type == DataType::Float16 || type == DataType::BFloat16 || type == DataType::Float32 ||
         type == DataType::Float64;
}

/// "fp32", "int8", ...; "?" for an invalid value.
const char *dataTypeName(DataType type);
/// "sum", "prod", "max", "min", "avg"; "?" for an invalid value.
const char *redOpName(RedOp op);
/// Parses a type name: the names of dataTypeName and the short forms
/// i8 u8 i32 u32 i64 u64 f16 half f32 float f64 double. False if unknown.
bool parseDataType(const char *text, DataType &out);
/// Parses an operator name of redOpName. False if unknown.
bool parseRedOp(const char *text, RedOp &out);

} // namespace coll

#endif // COLL_RUNTIME_DATATYPE_H
