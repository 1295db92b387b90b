// Chained prefix-block hashes: block i's hash depends on block i's content
// id and on every block before it, so equal hashes mean an equal prefix
// (as vLLM's prefix cache keys blocks).
#ifndef SERVESIM_TRACES_PREFIX_HASH_H_
#define SERVESIM_TRACES_PREFIX_HASH_H_

#include <cstdint>

#include "sim/base/hash.h"  // Mix64

namespace servesim {

// The parent of a prompt's first block.
constexpr uint64_t kPrefixHashRoot = 0x5E5E5E5E'A5A5A5A5ULL;

// Hash of a block whose content id is `block_id`, following `parent`.
inline uint64_t ChainHash(uint64_t parent, uint64_t block_id) {
  return Mix64(parent ^ (block_id * 0xD6E8FEB86659FD93ULL + 0x632BE59BD9B4E019ULL));
}

}  // namespace servesim

#endif  // SERVESIM_TRACES_PREFIX_HASH_H_
