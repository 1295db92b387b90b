// A request as a client sends it: when, how long the prompt and the answer
// are, and what the prompt shares with other prompts (for prefix caching).
#ifndef SERVESIM_SIM_REQUEST_H_
#define SERVESIM_SIM_REQUEST_H_

#include <cstdint>
#include <vector>

namespace servesim {

// Simulated time: integer nanoseconds since the start of the run.
using TimeNs = int64_t;
using RequestId = int64_t;

constexpr TimeNs kNsPerUs = 1'000;
constexpr TimeNs kNsPerMs = 1'000'000;
// Latest arrival time the engine accepts (2^62 ns, ~146 years): far past
// any trace, and far enough from INT64_MAX that adding step and overhead
// times can never overflow.
constexpr TimeNs kMaxArrivalNs = TimeNs{1} << 62;
constexpr TimeNs kNsPerSec = 1'000'000'000;

struct RequestSpec {
  // Position in the source, 0-based; unique within a run.
  RequestId id = 0;
  // When the client intends to send it (open loop or trace replay). A
  // closed-loop client ignores it and sends as soon as a slot is free.
  TimeNs arrival_ns = 0;
  int32_t input_tokens = 0;
  // Tokens the server generates (ignore_eos semantics: exactly this many).
  int32_t output_tokens = 0;
  // Prompt content identity: one hash per `hash_block_tokens` tokens of the
  // prompt, left to right (Mooncake's hash_ids, 512-token blocks; or a
  // session's shared prefix). Equal leading hashes mean an equal prefix.
  // Tokens past the last hashed block are unique to this request. Empty:
  // the whole prompt is unique (never hits the prefix cache).
  std::vector<uint64_t> prefix_hashes;
  int32_t hash_block_tokens = 0;
  // Output tokens the prefix hashes describe as well: the hashes then cover
  // the prompt followed by the first `hashed_output_tokens` generated
  // tokens (at most ceil((input_tokens + hashed_output_tokens) /
  // hash_block_tokens) hashes), because a later prompt repeats that answer
  // (a chat's next turn). vLLM hashes generated tokens as their blocks
  // fill, so the next turn hits them. 0: the hashes cover the prompt alone
  // (every public trace format), and the answer's blocks are unique.
  // At most output_tokens.
  int32_t hashed_output_tokens = 0;
  // Multi-turn session this request belongs to, -1 if none.
  int64_t session_id = -1;
  // A request a `vllm bench serve` result recorded as streaming no token
  // (no error, 0 output tokens: prefilled, then ended at once). It is
  // replayed as load (output_tokens 1) and left out of every metric, as
  // calibrate replays such requests (ClientMethod.unmeasured); RunResult
  // counts it in `unmeasured`.
  bool unmeasured = false;
};

}  // namespace servesim

#endif  // SERVESIM_SIM_REQUEST_H_
