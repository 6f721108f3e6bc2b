//===- DataType.cpp - Names of data types and operators -------------------===//

#include "coll/Runtime/DataType.h"

#include <cstring>

namespace coll {

const char *dataTypeName(DataType type) {
  switch (type) {
#define COLL_DATA_TYPE(Id, Name, Storage, Compute)                                                 \
  case DataType::Id:                                                                               \
    return Name;
#include "coll/Runtime/DataTypes.def"
  }
  return "?";
}

const char *redOpName(RedOp op) {
  switch (op) {
#define COLL_RED_OP(Id, Name)                                                                      \
  case RedOp::Id:                                                                                  \
    return Name;
#include "coll/Runtime/RedOps.def"
  }
  return "?";
}

bool parseDataType(const char *text, DataType &out) {
  struct Alias {
    const char *name;
    DataType type;
  };
  static const Alias aliases[] = {
      {"i8", DataType::Int8},          {"u8", DataType::Uint8},     {"i32", DataType::Int32},
      {"u32", DataType::Uint32},       {"i64", DataType::Int64},    {"u64", DataType::Uint64},
      {"f16", DataType::Float16},      {"half", DataType::Float16}, {"f32", DataType::Float32},
      {"float", DataType::Float32},    {"f64", DataType::Float64},  {"double", DataType::Float64},
      {"bfloat16", DataType::BFloat16}};
  for (unsigned i = 0; i < numDataTypes(); ++i)
    if (std::strcmp(text, dataTypeName(DataType(i))) == 0) {
      out = DataType(i);
      return true;
    }
  for (const Alias &a : aliases)
    if (std::strcmp(text, a.name) == 0) {
      out = a.type;
      return true;
    }
  return false;
}

bool parseRedOp(const char *text, RedOp &out) {
  for (unsigned i = 0; i < numRedOps(); ++i)
    if (std::strcmp(text, redOpName(RedOp(i))) == 0) {
      out = RedOp(i);
      return true;
    }
  return false;
}

} // namespace coll
