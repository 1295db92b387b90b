// The binary trace's fingerprint of its records (TraceHeader.
// records_checksum): every field of every RequestRecord, in file order,
// folded with the project's mixer (sim/base/hash.h HashCombine), so it is
// the same on every machine and build. The writer folds what it writes, the
// reader what it parses; a flipped bit that still parses changes a value
// and so the fingerprint.
#ifndef SERVESIM_TRACES_RECORD_CHECKSUM_H_
#define SERVESIM_TRACES_RECORD_CHECKSUM_H_

#include <cstdint>

#include "proto/trace.pb.h"
#include "sim/base/hash.h"

namespace servesim {

// The fingerprint of no records.
inline constexpr uint64_t kRecordChecksumSeed = 0x7365727665736d31ULL;  // "servesm1"

inline uint64_t FoldRecordChecksum(uint64_t acc, const proto::RequestRecord& r) {
  acc = HashCombine(acc, static_cast<uint64_t>(r.arrival_delta_ns()));
  acc = HashCombine(acc, static_cast<uint64_t>(static_cast<int64_t>(r.input_tokens())));
  acc = HashCombine(acc, static_cast<uint64_t>(static_cast<int64_t>(r.output_tokens())));
  acc = HashCombine(acc,
                    static_cast<uint64_t>(static_cast<int64_t>(r.hash_block_tokens())));
  acc = HashCombine(
      acc, static_cast<uint64_t>(static_cast<int64_t>(r.hashed_output_tokens())));
  acc = HashCombine(acc, static_cast<uint64_t>(r.session_plus_one()));
  acc = HashCombine(acc, static_cast<uint64_t>(r.prefix_hashes_size()));
  for (const uint64_t h : r.prefix_hashes()) acc = HashCombine(acc, h);
  return acc;
}

}  // namespace servesim

#endif  // SERVESIM_TRACES_RECORD_CHECKSUM_H_
