// The bailian reader: Bailian (Alibaba) traces (JSONL with chat ids).
#include "traces/readers/readers.h"

namespace servesim::trace_internal {
namespace {

class BailianReader : public JsonlTraceReader {
 public:
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const ReaderOptions& opts) {
    std::unique_ptr<BailianReader> r(new BailianReader(opts));
    if (r->opts_.hash_block_tokens <= 0) r->opts_.hash_block_tokens = 16;
    RETURN_IF_ERROR(r->OpenLines());
    return std::unique_ptr<TraceReader>(std::move(r));
  }

 private:
  // Chat ids remembered to find a turn's session (its root chat): bounds
  // memory on week-long traces; a parent older than this many chats
  // starts a new session named after the parent.
  static constexpr size_t kMaxRememberedChats = 1 << 20;

  explicit BailianReader(const ReaderOptions& opts)
      : JsonlTraceReader(TraceFormat::kBailian, opts, "timestamp") {}

  bool ParseRow(std::string_view line, RequestSpec& out, int64_t* abs_ns) override {
    if (!ParseJsonLine(line)) return false;
    const FlatJsonField* chat = Required("chat_id", FlatJsonField::Kind::kNumber);
    if (chat == nullptr) return false;
    const FlatJsonField* parent =
        Required("parent_chat_id", FlatJsonField::Kind::kNumber);
    if (parent == nullptr) return false;
    int64_t chat_id = 0, parent_id = 0;
    if (!ParseInt64(chat->raw, &chat_id) || chat_id < 0) {
      return Fail(SkipReason::kMalformed, "field chat_id: expected an integer >= 0");
    }
    if (!ParseInt64(parent->raw, &parent_id) || parent_id < -1) {
      return Fail(SkipReason::kMalformed,
                  "field parent_chat_id: expected an integer >= -1");
    }
    // Two chats of one id were merged into one session; a chat that is its
    // own parent is no conversation.
    if (parent_id == chat_id) {
      return Fail(
          SkipReason::kMalformed,
          absl::StrCat("field parent_chat_id: ", parent_id, " is the chat's own id"));
    }
    if (session_of_chat_.count(chat_id) > 0) {
      return Fail(
          SkipReason::kMalformed,
          absl::StrCat("field chat_id: ", chat_id,
                       " repeats an earlier chat's id (each chat is one request)"));
    }
    if (!Time("timestamp", kNsPerSec, "s", abs_ns) ||
        !Length("input_length", 1, &out.input_tokens) ||
        !Length("output_length", 1, &out.output_tokens)) {
      return false;
    }
    if (const FlatJsonField* h = parser_.Find("hash_ids"); h != nullptr) {
      if (h->kind != FlatJsonField::Kind::kNumberArray) {
        return Fail(SkipReason::kMalformed,
                    "field hash_ids: expected an array of integers");
      }
      const int64_t block = opts_.hash_block_tokens;
      const int64_t n = h->array_end - h->array_begin;
      const int64_t max_blocks = (out.input_tokens + block - 1) / block;
      if (n > max_blocks) {
        return Fail(SkipReason::kHashCount,
                    absl::StrCat("field hash_ids: has ", n, " entries but input_length ",
                                 out.input_tokens, " allows at most ", max_blocks,
                                 " (ceil(input_length / ", block, "))"));
      }
      if (!Hashes(*h, out)) return false;
      if (n > 0) out.hash_block_tokens = static_cast<int32_t>(block);
    }
    int64_t session = chat_id;
    if (parent_id >= 0) {
      auto it = session_of_chat_.find(parent_id);
      session = it != session_of_chat_.end() ? it->second : parent_id;
    }
    out.session_id = session;
    if (session_of_chat_.emplace(chat_id, session).second) {
      order_.push_back(chat_id);
      if (order_.size() > kMaxRememberedChats) {
        session_of_chat_.erase(order_.front());
        order_.pop_front();
      }
    }
    return true;
  }

  std::unordered_map<int64_t, int64_t> session_of_chat_;  // lookups only
  std::deque<int64_t> order_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TraceReader>> OpenBailianReader(
    const ReaderOptions& opts) {
  return BailianReader::Open(opts);
}

}  // namespace servesim::trace_internal
