// The binary reader: servesim binary traces (proto/trace.proto).
#include <algorithm>
#include <limits>
#include <optional>

#include "absl/strings/str_format.h"
#include "traces/readers/readers.h"
#include "traces/record_checksum.h"

namespace servesim::trace_internal {
namespace {

// ---------------------------------------------------------------- binary

class BinaryReader : public TraceReader {
 public:
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const ReaderOptions& opts) {
    RETURN_IF_ERROR(CheckRegularFile(opts.path));
    std::unique_ptr<BinaryReader> r(new BinaryReader());
    r->opts_ = opts;
    r->fd_ = ::open(opts.path.c_str(), O_RDONLY);
    if (r->fd_ < 0) {
      return absl::NotFoundError(
          absl::StrCat(opts.path, ": cannot open: ", std::strerror(errno)));
    }
    r->stream_ = std::make_unique<google::protobuf::io::FileInputStream>(r->fd_, 1 << 18);
    bool clean_eof = false;
    proto::TraceHeader header;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(
            &header, r->stream_.get(), &clean_eof)) {
      return absl::InvalidArgumentError(absl::StrCat(
          opts.path, ": record 0 (header): ",
          clean_eof ? "empty file"
                    : "not a servesim binary trace header (truncated or corrupt)"));
    }
    if (header.magic() != kBinaryMagic) {
      return absl::InvalidArgumentError(
          absl::StrCat(opts.path, ": record 0 (header): magic \"",
                       header.magic().substr(0, 40), "\" is not \"", kBinaryMagic, "\""));
    }
    if (header.version() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(opts.path, ": header: version ",
                                                     header.version(), " (allowed: 1)"));
    }
    if (header.hash_block_tokens() < 0 || header.hash_block_tokens() > 1'000'000) {
      return absl::InvalidArgumentError(
          absl::StrCat(opts.path, ": header: hash_block_tokens ",
                       header.hash_block_tokens(), " is outside 0..1000000"));
    }
    r->block_ = header.hash_block_tokens();
    if (header.has_records_checksum() &&
        header.records_checksum() != kUnknownNumRequests) {
      r->expected_checksum_ = header.records_checksum();
    }
    if (header.has_num_requests() && header.num_requests() != kUnknownNumRequests) {
      r->expected_records_ = static_cast<int64_t>(
          std::min<uint64_t>(header.num_requests(), std::numeric_limits<int64_t>::max()));
    }
    // Writers pad the source line with spaces (room to rewrite it).
    r->source_ = std::string(absl::StripTrailingAsciiWhitespace(header.source()));
    return std::unique_ptr<TraceReader>(std::move(r));
  }

  ~BinaryReader() override {
    stream_.reset();
    if (fd_ >= 0) ::close(fd_);
  }

  absl::StatusOr<bool> Next(RequestSpec& out) override {
    if (!final_status_.ok()) return final_status_;
    if (done_) return false;
    while (true) {
      bool clean_eof = false;
      const int64_t record = stats_.rows + 1;
      rec_.Clear();  // the delimited parser merges into the message
      if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&rec_, stream_.get(),
                                                                    &clean_eof)) {
        if (clean_eof) {
          if (stats_.rows == 0)
            return Stop(record, "no request records after the header");
          // A file cut at a record boundary read as a shorter trace.
          if (expected_records_ >= 0 && stats_.rows != expected_records_) {
            ++stats_.skipped[static_cast<int>(SkipReason::kTruncated)];
            return Stop(record, absl::StrCat("the file ends after ", stats_.rows,
                                             " records, but its header says ",
                                             expected_records_, " (truncated?)"));
          }
          if (expected_checksum_.has_value() && checksum_ != *expected_checksum_) {
            return Stop(record,
                        absl::StrFormat(
                            "the records' fingerprint %016x is not the header's %016x: "
                            "the file is corrupt (a changed byte that still parses "
                            "changed a request's values)",
                            checksum_, *expected_checksum_));
          }
          done_ = true;
          return false;
        }
        ++stats_.skipped[static_cast<int>(SkipReason::kTruncated)];
        return Stop(record, "truncated or corrupt record");
      }
      ++stats_.rows;
      checksum_ = FoldRecordChecksum(checksum_, rec_);
      if (expected_records_ >= 0 && stats_.rows > expected_records_) {
        return Stop(record, absl::StrCat("a record past the ", expected_records_,
                                         " its header counts (two files joined?)"));
      }
      std::string msg;
      SkipReason reason = SkipReason::kMalformed;
      if (rec_.arrival_delta_ns() < 0) {
        reason = SkipReason::kTimeBackwards;
        msg = absl::StrCat("field arrival_delta_ns: ", rec_.arrival_delta_ns(),
                           " is negative (arrivals must be nondecreasing)");
      } else if (!CheckLen("input_tokens", rec_.input_tokens(), &reason, &msg) ||
                 !CheckLen("output_tokens", rec_.output_tokens(), &reason, &msg)) {
      } else if (rec_.hash_block_tokens() < 0 || rec_.hash_block_tokens() > 1'000'000) {
        msg = "field hash_block_tokens: outside 0..1000000";
      } else if (rec_.prefix_hashes_size() > 0 && rec_.hash_block_tokens() == 0 &&
                 block_ == 0) {
        msg =
            "field prefix_hashes: hashes given but no hash_block_tokens (record or "
            "header)";
      } else if (rec_.hashed_output_tokens() < 0 ||
                 rec_.hashed_output_tokens() > rec_.output_tokens()) {
        msg = absl::StrCat("field hashed_output_tokens: ", rec_.hashed_output_tokens(),
                           " is outside 0..output_tokens (", rec_.output_tokens(), ")");
      } else if (const int64_t block =
                     rec_.hash_block_tokens() != 0 ? rec_.hash_block_tokens() : block_;
                 block > 0 && rec_.prefix_hashes_size() >
                                  MaxPrefixHashes(rec_.input_tokens(),
                                                  rec_.hashed_output_tokens(), block)) {
        reason = SkipReason::kHashCount;
        msg =
            HashCountMessage("field prefix_hashes", rec_.prefix_hashes_size(),
                             "input_tokens", rec_.input_tokens(), "hashed_output_tokens",
                             rec_.hashed_output_tokens(), block);
      } else if (rec_.session_plus_one() < 0) {
        msg = "field session_plus_one: negative";
      } else if (rec_.arrival_delta_ns() > kMaxTraceArrivalNs - now_ns_) {
        msg = absl::StrCat("field arrival_delta_ns: ", rec_.arrival_delta_ns(),
                           " ns puts the arrival past ", kMaxTraceArrivalNs,
                           " ns (2^62, ~146 years; allowed 0..",
                           kMaxTraceArrivalNs - now_ns_, " here)");
      }
      if (!msg.empty()) {
        ++stats_.skipped[static_cast<int>(reason)];
        if (opts_.skip_bad_rows) continue;
        return Stop(record, msg);
      }
      now_ns_ += rec_.arrival_delta_ns();
      out.id = stats_.requests++;
      out.arrival_ns = now_ns_;
      out.input_tokens = rec_.input_tokens();
      out.output_tokens = rec_.output_tokens();
      out.prefix_hashes.assign(rec_.prefix_hashes().begin(), rec_.prefix_hashes().end());
      out.hash_block_tokens = out.prefix_hashes.empty()       ? 0
                              : rec_.hash_block_tokens() != 0 ? rec_.hash_block_tokens()
                                                              : block_;
      out.session_id = rec_.session_plus_one() - 1;
      out.hashed_output_tokens =
          out.prefix_hashes.empty() ? 0 : rec_.hashed_output_tokens();
      return true;
    }
  }

  std::string Describe() const override {
    return absl::StrCat("binary trace ", opts_.path, " (requests ", stats_.requests,
                        ", skipped: ", stats_.SkippedSummary(),
                        source_.empty() ? "" : "; from: ", source_, ")");
  }

 private:
  bool CheckLen(const char* field, int64_t v, SkipReason* reason,
                std::string* msg) const {
    if (v >= 1 && v <= opts_.max_tokens) return true;
    *reason = v < 0    ? SkipReason::kNegativeLength
              : v == 0 ? SkipReason::kZeroLength
                       : SkipReason::kAbsurdLength;
    *msg = absl::StrCat("field ", field, ": ", v, " is outside 1..", opts_.max_tokens);
    return false;
  }

  absl::Status Stop(int64_t record, std::string_view msg) {
    final_status_ = absl::InvalidArgumentError(
        absl::StrCat(opts_.path, ": record ", record, ": ", std::string(msg)));
    return final_status_;
  }

  ReaderOptions opts_;
  int fd_ = -1;
  std::unique_ptr<google::protobuf::io::FileInputStream> stream_;
  proto::RequestRecord rec_;
  int32_t block_ = 0;
  std::string source_;
  int64_t now_ns_ = 0;
  int64_t expected_records_ = -1;              // TraceHeader.num_requests, -1: not known
  std::optional<uint64_t> expected_checksum_;  // TraceHeader.records_checksum
  uint64_t checksum_ = kRecordChecksumSeed;    // of the records read
  bool done_ = false;
  absl::Status final_status_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TraceReader>> OpenBinaryReader(const ReaderOptions& opts) {
  return BinaryReader::Open(opts);
}

}  // namespace servesim::trace_internal
