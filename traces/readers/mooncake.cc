// The mooncake reader: Mooncake traces (JSONL with hash_ids).
#include "traces/readers/readers.h"

namespace servesim::trace_internal {
namespace {

class MooncakeReader : public JsonlTraceReader {
 public:
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const ReaderOptions& opts) {
    std::unique_ptr<MooncakeReader> r(new MooncakeReader(opts));
    if (r->opts_.hash_block_tokens <= 0) r->opts_.hash_block_tokens = 512;
    RETURN_IF_ERROR(r->OpenLines());
    return std::unique_ptr<TraceReader>(std::move(r));
  }

 private:
  explicit MooncakeReader(const ReaderOptions& opts)
      : JsonlTraceReader(TraceFormat::kMooncake, opts, "timestamp") {}

  bool ParseRow(std::string_view line, RequestSpec& out, int64_t* abs_ns) override {
    if (!ParseJsonLine(line)) return false;
    if (!Time("timestamp", kNsPerMs, "ms", abs_ns) ||
        !Length("input_length", 1, &out.input_tokens) ||
        !Length("output_length", 1, &out.output_tokens)) {
      return false;
    }
    // servesim's own JSONL adds session_id and hash_block_tokens, and may
    // hash only a prefix of the prompt.
    int64_t block = opts_.hash_block_tokens;
    bool own_format = false;
    if (const FlatJsonField* b = parser_.Find("hash_block_tokens"); b != nullptr) {
      own_format = true;
      if (b->kind != FlatJsonField::Kind::kNumber || !ParseInt64(b->raw, &block) ||
          block < 1 || block > 1'000'000) {
        return Fail(SkipReason::kMalformed,
                    "field hash_block_tokens: expected an integer in 1..1000000");
      }
    }
    if (const FlatJsonField* s = parser_.Find("session_id"); s != nullptr) {
      if (s->kind != FlatJsonField::Kind::kNumber ||
          !ParseInt64(s->raw, &out.session_id) || out.session_id < -1) {
        return Fail(SkipReason::kMalformed,
                    "field session_id: expected an integer >= -1");
      }
    }
    const FlatJsonField* h = parser_.Find("hash_ids");
    if (h == nullptr) return true;
    if (h->kind != FlatJsonField::Kind::kNumberArray) {
      return Fail(SkipReason::kMalformed,
                  "field hash_ids: expected an array of integers");
    }
    // servesim's own JSONL may also hash the answer a session's next turn
    // repeats (RequestSpec::hashed_output_tokens).
    int64_t hashed_output = 0;
    if (const FlatJsonField* o = parser_.Find("hashed_output_tokens"); o != nullptr) {
      if (!own_format) {
        return Fail(
            SkipReason::kMalformed,
            "field hashed_output_tokens: given without hash_block_tokens (servesim's "
            "JSONL names the block size of hashes that cover an answer)");
      }
      if (o->kind != FlatJsonField::Kind::kNumber ||
          !ParseInt64(o->raw, &hashed_output) || hashed_output < 0 ||
          hashed_output > out.output_tokens) {
        return Fail(SkipReason::kMalformed,
                    absl::StrCat("field hashed_output_tokens: expected an integer in "
                                 "0..output_length (",
                                 out.output_tokens, ")"));
      }
    }
    const int64_t n = h->array_end - h->array_begin;
    const int64_t want = MaxPrefixHashes(out.input_tokens, hashed_output, block);
    if (own_format ? n > want : n != want) {
      if (own_format) {
        return Fail(
            SkipReason::kHashCount,
            HashCountMessage("field hash_ids", n, "input_length", out.input_tokens,
                             "hashed_output_tokens", hashed_output, block));
      }
      return Fail(SkipReason::kHashCount,
                  absl::StrCat("field hash_ids: has ", n, " entries but input_length ",
                               out.input_tokens, " needs ", want,
                               " (ceil(input_length / ", block, "))"));
    }
    if (!Hashes(*h, out)) return false;
    if (n > 0) {
      out.hash_block_tokens = static_cast<int32_t>(block);
      out.hashed_output_tokens = static_cast<int32_t>(hashed_output);
    }
    return true;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<TraceReader>> OpenMooncakeReader(
    const ReaderOptions& opts) {
  return MooncakeReader::Open(opts);
}

}  // namespace servesim::trace_internal
