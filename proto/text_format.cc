#include "proto/text_format.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace servesim {
namespace {

class Collector : public google::protobuf::io::ErrorCollector {
 public:
  explicit Collector(const std::string& where) : where_(where) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    errors_.push_back(
        absl::StrCat(where_, ":", line + 1, ":", column + 1, ": ", message));
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  std::string Joined() const { return absl::StrJoin(errors_, "; "); }

 private:
  std::string where_;
  std::vector<std::string> errors_;
};

}  // namespace

absl::Status ParseTextProto(std::string_view text, const std::string& where,
                            google::protobuf::Message* message, bool merge,
                            google::protobuf::TextFormat::ParseInfoTree* locations) {
  google::protobuf::TextFormat::Parser parser;
  Collector errors(where);
  parser.RecordErrorsTo(&errors);
  if (locations != nullptr) parser.WriteLocationsTo(locations);
  const std::string buf(text);
  const bool ok =
      merge ? parser.MergeFromString(buf, message) : parser.ParseFromString(buf, message);
  if (!ok) {
    const std::string joined = errors.Joined();
    return absl::InvalidArgumentError(
        joined.empty() ? absl::StrCat(where, ": not a valid text-format ",
                                      message->GetDescriptor()->full_name())
                       : joined);
  }
  return absl::OkStatus();
}

absl::Status ReadTextProtoFile(const std::string& path,
                               google::protobuf::Message* message) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseTextProto(ss.str(), path, message);
}

}  // namespace servesim
