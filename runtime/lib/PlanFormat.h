//===- PlanFormat.h - The plan file format ----------------------*- C++ -*-===//
/// \file
/// The numbers of the plan file format (docs/plan-format.md) and the small
/// helpers the writer, reader, verifier and printer share. Private to the
/// runtime library.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_PLANFORMAT_H
#define COLL_RUNTIME_LIB_PLANFORMAT_H

#include "Text.h"
#include "coll/Runtime/PlanIO.h"

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

namespace coll {
namespace planformat {

//===----------------------------------------------------------------------===//
// Format constants (docs/plan-format.md)
//===----------------------------------------------------------------------===//

constexpr uint8_t planMagic[8] = {'C', 'O', 'L', 'L', 'P', 'L', 'A', 'N'};
constexpr uint32_t formatVersion = 1;
constexpr uint32_t headerBytes = 32;     ///< magic, version, header size, body size, checksum
constexpr uint32_t infoFixedBytes = 32;  ///< Plan info up to and including the name length.
constexpr uint32_t tableEntryBytes = 16; ///< Offset u64, size u64.
constexpr uint32_t rankHeaderBytes = 8;  ///< scratchChunks, threadblock count.
constexpr uint32_t tbHeaderBytes = 20;   ///< Peers, channel, step count, dependency count.
constexpr uint32_t stepBytes = 24;
constexpr uint32_t depBytes = 8;
constexpr uint8_t inplaceFlag = 0x1;  ///< Instructions address one aliased buffer.
constexpr uint8_t contractFlag = 0x2; ///< A contract section follows the rank sections.
constexpr uint8_t knownFlags = inplaceFlag | contractFlag;
constexpr uint32_t contractHeaderBytes = 8; ///< Term count, operand count.

// Header field positions.
constexpr size_t versionPos = 8;
constexpr size_t headerSizePos = 12;
constexpr size_t bodySizePos = 16;
constexpr size_t checksumPos = 24;

constexpr uint64_t fnvOffsetBasis = 0xcbf29ce484222325ull;
constexpr uint64_t fnvPrime = 0x100000001b3ull;

//===----------------------------------------------------------------------===//
// Small helpers
//===----------------------------------------------------------------------===//

using detail::cat;

/// A failed Status whose message is the concatenation of \p args.
template <typename... Args> Status fail(const Args &...args) {
  return Status::error(cat(args...));
}

/// "1 chunk", "4 chunks"; "1 entry", "3 entries".
inline std::string plural(uint64_t n, const char *noun, const char *nouns = nullptr) {
  if (n == 1)
    return cat(n, ' ', noun);
  return nouns ? cat(n, ' ', nouns) : cat(n, ' ', noun, 's');
}

/// Whether a value read from a file names a known enumerator.
inline bool isValidOpcode(Opcode op) {
  return static_cast<unsigned>(op) < numOpcodes();
}
inline bool isValidProtocol(ProtocolKind kind) {
  return static_cast<unsigned>(kind) <= static_cast<unsigned>(ProtocolKind::LL128);
}

/// The bytes of the plan file at \p path, checked against
/// PlanLimits::maxFileBytes before they are read.
Result<std::vector<uint8_t>> readPlanBytes(const std::string &path);

/// The checksum a plan's header stores (0 when the header is cut short).
uint64_t storedChecksum(const uint8_t *data, size_t size);

/// Checks the plan info on its own; the reader calls it before it sizes
/// anything by nranks (defined in PlanVerifier.cpp).
Status checkInfo(const PlanInfo &info);

/// Bytes of the contract section of \p contract.
inline uint64_t contractSectionBytes(const PlanContract &contract) {
  return contractHeaderBytes + 4ull * contract.numTerms() + 8ull * contract.operands.size() +
         4ull * contract.outputs.size();
}

} // namespace planformat
} // namespace coll

#endif // COLL_RUNTIME_LIB_PLANFORMAT_H
