#include "traces/trace_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "proto/trace.pb.h"
#include "sim/base/status_macros.h"
#include "sim/base/write_file.h"
#include "traces/file_util.h"
#include "traces/json.h"
#include "traces/record_checksum.h"

namespace servesim {
namespace {

constexpr size_t kFlushBytes = 1 << 20;

void AppendVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void AppendDelimited(std::string& out, const google::protobuf::MessageLite& m) {
  AppendVarint(out, m.ByteSizeLong());
  m.AppendToString(&out);
}

// ns as an exact decimal number of ms ("1234.5678").
void AppendMs(std::string& out, TimeNs ns) {
  absl::StrAppend(&out, ns / kNsPerMs);
  int64_t frac = ns % kNsPerMs;
  if (frac == 0) return;
  char digits[7];
  for (int i = 5; i >= 0; --i) {
    digits[i] = static_cast<char>('0' + frac % 10);
    frac /= 10;
  }
  int len = 6;
  while (digits[len - 1] == '0') --len;
  out.push_back('.');
  out.append(digits, len);
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(),
                                                suffix.data(), suffix.size()) == 0;
}

}  // namespace

absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name) {
  if (name == "binary") return OutputFormat::kBinary;
  if (name == "csv") return OutputFormat::kCsv;
  if (name == "jsonl") return OutputFormat::kJsonl;
  return absl::InvalidArgumentError(absl::StrCat("output format \"", std::string(name),
                                                 "\" (allowed: binary, csv, jsonl)"));
}

OutputFormat OutputFormatForPath(const std::string& path) {
  if (EndsWith(path, ".csv")) return OutputFormat::kCsv;
  if (EndsWith(path, ".jsonl") || EndsWith(path, ".json")) return OutputFormat::kJsonl;
  return OutputFormat::kBinary;
}

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(
    const std::string& path, OutputFormat format, const std::string& source_description) {
  std::unique_ptr<TraceWriter> w(new TraceWriter());
  w->path_ = path;
  w->format_ = format;
  if (path.empty()) return absl::InvalidArgumentError("output path: empty");
  struct stat st;
  bool in_place = false;
  mode_t mode = 0666;  // less the umask, as fopen would
  bool keep_mode = false;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": is a directory (expected an output file path)"));
    }
    if (!S_ISREG(st.st_mode)) {
      in_place = true;  // a FIFO, /dev/stdout, ...: cannot be renamed onto
    } else {
      mode = st.st_mode & 07777;
      keep_mode = true;
      // Write through a symlink: replace its target, not the link.
      struct stat lst;
      char resolved[PATH_MAX];
      if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode) &&
          ::realpath(path.c_str(), resolved) != nullptr) {
        w->path_ = resolved;
      }
    }
  }
  if (in_place) {
    w->file_ = std::fopen(path.c_str(), "wb");
    if (w->file_ == nullptr) {
      return absl::PermissionDeniedError(
          absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
    }
  } else {
    // A temporary beside the destination (same file system: rename is
    // atomic), removed if a signal ends the process (sim/base/write_file.h).
    TemporaryFile tmp;
    RETURN_IF_ERROR(CreateTemporaryBeside(w->path_, &tmp));
    w->tmp_path_ = tmp.path;
    const int fd = tmp.fd;
    if (keep_mode) (void)::fchmod(fd, mode);
    w->file_ = ::fdopen(fd, "wb");
    if (w->file_ == nullptr) {
      const std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(w->tmp_path_.c_str());
      UnregisterTemporary(w->tmp_path_);
      w->tmp_path_.clear();
      return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write: ", err));
    }
  }
  if (format == OutputFormat::kBinary) {
    // Room for the final description (SetSource), padded with spaces that
    // readers strip; the header keeps its byte size when rewritten.
    w->source_room_ = source_description.size() + 1024;
    w->SetSource(source_description);
    proto::TraceHeader header;
    header.set_magic("servesim-trace");
    header.set_version(1);
    header.set_source(w->source_);
    header.set_num_requests(kUnknownNumRequests);      // the count's room
    header.set_records_checksum(kUnknownNumRequests);  // the fingerprint's
    AppendDelimited(w->buf_, header);
  } else if (format == OutputFormat::kCsv) {
    w->buf_ =
        "arrival_ns,input_tokens,output_tokens,session_id,hash_block_tokens,hashed_"
        "output_tokens,prefix_hashes\n";
  }
  return w;
}

namespace {

// `s` with each byte that starts no valid UTF-8 sequence replaced by '?'
// (a path of other bytes made the proto3 header unreadable).
std::string ToValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80         ? 1
                     : (c >> 5) == 6  ? 2
                     : (c >> 4) == 14 ? 3
                     : (c >> 3) == 30 ? 4
                                      : 0;
    if (n > 0 && i + n <= s.size() && IsValidUtf8(s.substr(i, n))) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  return out;
}

}  // namespace

void TraceWriter::SetSource(const std::string& source_description) {
  if (source_room_ == 0) return;
  std::string s = ToValidUtf8(source_description);
  if (s.size() > source_room_) {
    size_t cut = source_room_ - 3;
    // Do not split a UTF-8 sequence (proto3 strings must stay valid).
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s.resize(cut);
    s += "...";
  }
  s.resize(source_room_, ' ');
  source_ = std::move(s);
}

TraceWriter::~TraceWriter() { Discard(); }

void TraceWriter::Discard() {
  if (file_ != nullptr) {
    std::fclose(file_);
    file_ = nullptr;
  }
  if (!tmp_path_.empty()) {
    ::unlink(tmp_path_.c_str());
    UnregisterTemporary(tmp_path_);
    tmp_path_.clear();
  }
}

absl::Status TraceWriter::Write(const RequestSpec& r) {
  if (file_ == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(path_, ": closed"));
  if (r.arrival_ns < prev_ns_) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": request ", r.id, ": arrival ", r.arrival_ns,
                     " ns is before the previous one (", prev_ns_,
                     " ns); arrivals must be nondecreasing"));
  }
  const size_t line_start = buf_.size();
  switch (format_) {
    case OutputFormat::kBinary: {
      proto::RequestRecord rec;
      rec.set_arrival_delta_ns(r.arrival_ns - prev_ns_);
      rec.set_input_tokens(r.input_tokens);
      rec.set_output_tokens(r.output_tokens);
      for (uint64_t h : r.prefix_hashes) rec.add_prefix_hashes(h);
      if (!r.prefix_hashes.empty()) {
        rec.set_hash_block_tokens(r.hash_block_tokens);
        rec.set_hashed_output_tokens(r.hashed_output_tokens);
      }
      rec.set_session_plus_one(r.session_id + 1);
      checksum_ = FoldRecordChecksum(checksum_, rec);
      AppendDelimited(buf_, rec);
      break;
    }
    case OutputFormat::kCsv: {
      absl::StrAppend(&buf_, r.arrival_ns, ",", r.input_tokens, ",", r.output_tokens, ",",
                      r.session_id, ",");
      if (!r.prefix_hashes.empty()) {
        absl::StrAppend(&buf_, r.hash_block_tokens, ",", r.hashed_output_tokens);
      } else {
        buf_.push_back(',');
      }
      buf_.push_back(',');
      for (size_t i = 0; i < r.prefix_hashes.size(); ++i) {
        if (i) buf_.push_back(' ');
        absl::StrAppend(&buf_, r.prefix_hashes[i]);
      }
      buf_.push_back('\n');
      break;
    }
    case OutputFormat::kJsonl: {
      buf_ += "{\"timestamp\": ";
      AppendMs(buf_, r.arrival_ns);
      absl::StrAppend(&buf_, ", \"input_length\": ", r.input_tokens,
                      ", \"output_length\": ", r.output_tokens, ", \"hash_ids\": [");
      for (size_t i = 0; i < r.prefix_hashes.size(); ++i) {
        if (i) buf_ += ", ";
        absl::StrAppend(&buf_, r.prefix_hashes[i]);
      }
      absl::StrAppend(&buf_, "], \"hash_block_tokens\": ",
                      r.prefix_hashes.empty() ? 1 : r.hash_block_tokens);
      if (r.session_id >= 0) absl::StrAppend(&buf_, ", \"session_id\": ", r.session_id);
      if (!r.prefix_hashes.empty() && r.hashed_output_tokens > 0) {
        absl::StrAppend(&buf_, ", \"hashed_output_tokens\": ", r.hashed_output_tokens);
      }
      buf_ += "}\n";
      break;
    }
  }
  // A line the readers would refuse (5,000,000 prefix hashes of 1 token)
  // is not written: servesim would not read its own file back.
  if (format_ != OutputFormat::kBinary && buf_.size() - line_start > kMaxTraceLineBytes) {
    const size_t bytes = buf_.size() - line_start;
    buf_.resize(line_start);
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": request ", r.id, ": its line would be ", bytes, " bytes (",
        r.prefix_hashes.size(), " prefix hashes), past the ", kMaxTraceLineBytes,
        " bytes a trace reader takes; write binary (--to binary) or use a larger hash "
        "block"));
  }
  prev_ns_ = r.arrival_ns;
  ++written_;
  return Flush(false);
}

absl::Status TraceWriter::Flush(bool force) {
  if (!force && buf_.size() < kFlushBytes) return absl::OkStatus();
  if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), file_) != buf_.size()) {
    return absl::DataLossError(
        absl::StrCat(path_, ": write failed: ", std::strerror(errno)));
  }
  buf_.clear();
  return absl::OkStatus();
}

absl::Status TraceWriter::Close() {
  if (file_ == nullptr) {
    return tmp_path_.empty() ? absl::OkStatus()
                             : absl::FailedPreconditionError(
                                   absl::StrCat(path_, ": writer already failed"));
  }
  absl::Status st = Flush(true);
  if (st.ok() && format_ == OutputFormat::kBinary && !tmp_path_.empty()) {
    // Rewrite the header with the final source line (same byte size).
    proto::TraceHeader header;
    header.set_magic("servesim-trace");
    header.set_version(1);
    header.set_source(source_);
    header.set_num_requests(static_cast<uint64_t>(written_));
    header.set_records_checksum(checksum_);
    std::string bytes;
    AppendDelimited(bytes, header);
    if (std::fflush(file_) != 0 || std::fseek(file_, 0, SEEK_SET) != 0 ||
        std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
      st = absl::DataLossError(
          absl::StrCat(path_, ": rewriting the header failed: ", std::strerror(errno)));
    }
  }
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0 && st.ok()) {
    st = absl::DataLossError(
        absl::StrCat(path_, ": close failed: ", std::strerror(errno)));
  }
  if (st.ok() && !tmp_path_.empty()) {
    if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
      st = absl::DataLossError(absl::StrCat(path_, ": cannot replace it with ", tmp_path_,
                                            ": ", std::strerror(errno)));
    } else {
      UnregisterTemporary(tmp_path_);
      tmp_path_.clear();
    }
  }
  Discard();  // removes the temporary after a failure
  return st;
}

absl::StatusOr<ConvertSummary> ConvertTraceWithSummary(RequestSource& source,
                                                       const std::string& path,
                                                       OutputFormat format,
                                                       bool write_when_empty) {
  ASSIGN_OR_RETURN(auto writer, TraceWriter::Open(path, format, source.Describe()));
  ConvertSummary summary;
  RequestSpec r;
  while (true) {
    ASSIGN_OR_RETURN(bool got, source.Next(r));
    if (!got) break;
    // A trace file has no field for a load-only request: written, it
    // would be measured. Left out, as the readers used to leave it.
    if (r.unmeasured) {
      ++summary.unmeasured_left_out;
      continue;
    }
    RETURN_IF_ERROR(writer->Write(r));
    if (summary.requests == 0) summary.first_arrival_ns = r.arrival_ns;
    summary.last_arrival_ns = r.arrival_ns;
    ++summary.requests;
  }
  summary.source = source.Describe();  // with the counts of the finished read
  if (summary.unmeasured_left_out > 0) {
    // The bench reader's description says how simulate replays them; the
    // file written here does not hold them.
    absl::StrAppend(&summary.source, " | left out here: the ",
                    summary.unmeasured_left_out,
                    " requests that streamed no token (a trace file has no field for "
                    "load-only requests; simulate --trace on the original replays them)");
  }
  if (summary.requests == 0 && !write_when_empty) return summary;  // temporary removed
  writer->SetSource(summary.source);
  RETURN_IF_ERROR(writer->Close());
  return summary;
}

absl::StatusOr<int64_t> ConvertTrace(RequestSource& source, const std::string& path,
                                     OutputFormat format) {
  ASSIGN_OR_RETURN(ConvertSummary summary, ConvertTraceWithSummary(source, path, format));
  return summary.requests;
}

}  // namespace servesim
