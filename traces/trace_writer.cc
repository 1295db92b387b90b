#include "traces/trace_writer.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "proto/trace.pb.h"
#include "sim/status_macros.h"

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
  w->file_ = std::fopen(path.c_str(), "wb");
  if (w->file_ == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
  }
  if (format == OutputFormat::kBinary) {
    proto::TraceHeader header;
    header.set_magic("servesim-trace");
    header.set_version(1);
    header.set_source(source_description);
    AppendDelimited(w->buf_, header);
  } else if (format == OutputFormat::kCsv) {
    w->buf_ =
        "arrival_ns,input_tokens,output_tokens,session_id,hash_block_tokens,prefix_"
        "hashes\n";
  }
  return w;
}

TraceWriter::~TraceWriter() {
  if (file_ != nullptr) (void)Close();
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
  switch (format_) {
    case OutputFormat::kBinary: {
      proto::RequestRecord rec;
      rec.set_arrival_delta_ns(r.arrival_ns - prev_ns_);
      rec.set_input_tokens(r.input_tokens);
      rec.set_output_tokens(r.output_tokens);
      for (uint64_t h : r.prefix_hashes) rec.add_prefix_hashes(h);
      if (!r.prefix_hashes.empty()) rec.set_hash_block_tokens(r.hash_block_tokens);
      rec.set_session_plus_one(r.session_id + 1);
      AppendDelimited(buf_, rec);
      break;
    }
    case OutputFormat::kCsv: {
      absl::StrAppend(&buf_, r.arrival_ns, ",", r.input_tokens, ",", r.output_tokens, ",",
                      r.session_id, ",");
      if (!r.prefix_hashes.empty()) absl::StrAppend(&buf_, r.hash_block_tokens);
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
      buf_ += "}\n";
      break;
    }
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
  if (file_ == nullptr) return absl::OkStatus();
  absl::Status st = Flush(true);
  if (std::fclose(file_) != 0 && st.ok()) {
    st = absl::DataLossError(
        absl::StrCat(path_, ": close failed: ", std::strerror(errno)));
  }
  file_ = nullptr;
  return st;
}

absl::StatusOr<int64_t> ConvertTrace(RequestSource& source, const std::string& path,
                                     OutputFormat format) {
  ASSIGN_OR_RETURN(auto writer, TraceWriter::Open(path, format, source.Describe()));
  RequestSpec r;
  while (true) {
    ASSIGN_OR_RETURN(bool got, source.Next(r));
    if (!got) break;
    RETURN_IF_ERROR(writer->Write(r));
  }
  RETURN_IF_ERROR(writer->Close());
  return writer->written();
}

}  // namespace servesim
