#include "hwmodels/calibration_profile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "hwmodels/embedded_data.h"
#include "proto/text_format.h"
#include "sim/base/read_file.h"
#include "sim/base/status_macros.h"
#include "sim/base/version.h"
#include "sim/base/write_file.h"

namespace servesim {
namespace {

// The embedded profile of that shipped name, or nullptr.
const internal::EmbeddedFile* FindShipped(const std::string& name) {
  for (int i = 0; i < internal::kNumEmbeddedProfileFiles; ++i) {
    const internal::EmbeddedFile& f = internal::kEmbeddedProfileFiles[i];
    if (f.name[0] != '\0' && ShippedProfileName(f.name) == name) return &f;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<proto::CalibrationProfile> LoadCalibrationProfile(
    const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path, "calibration profile"));
  proto::CalibrationProfile p;
  RETURN_IF_ERROR(ParseTextProto(text, path, &p));
  return p;
}

absl::Status SaveCalibrationProfile(const proto::CalibrationProfile& profile,
                                    const std::string& path) {
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(profile, &text)) {
    return absl::InternalError("cannot print calibration profile");
  }
  // Whole or not at all (sim/base/write_file.h).
  return WriteFileWhole(path, absl::StrCat("# proto-file: proto/hwmodels.proto\n# "
                                           "proto-message: "
                                           "servesim.proto.CalibrationProfile\n",
                                           text));
}

std::string ShippedProfileName(const std::string& file_name) {
  return absl::StrCat(kShippedProfilePrefix, file_name);
}

std::vector<std::string> ShippedProfileNames() {
  std::vector<std::string> out;
  for (int i = 0; i < internal::kNumEmbeddedProfileFiles; ++i) {
    const internal::EmbeddedFile& f = internal::kEmbeddedProfileFiles[i];
    if (f.name[0] != '\0') out.push_back(ShippedProfileName(f.name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<ResolvedProfile> ResolveCalibrationProfile(const std::string& value,
                                                          const std::string& device_id) {
  ResolvedProfile r;
  std::string name =
      value.empty() ? ShippedProfileName(absl::StrCat(device_id, ".textproto")) : value;
  // A bare name ("l4", "l4@vllm-0.28.0") that is no file here names a
  // shipped profile; neither is an error listing the shipped names.
  std::error_code ec;
  if (!value.empty() && !absl::StrContains(value, '/') &&
      !absl::EndsWith(value, ".textproto") && !std::filesystem::exists(value, ec)) {
    name = ShippedProfileName(absl::StrCat(value, ".textproto"));
    if (FindShipped(name) == nullptr) {
      std::vector<std::string> shipped;
      for (const std::string& n : ShippedProfileNames()) {
        shipped.push_back(n.substr(sizeof(kShippedProfilePrefix) - 1,
                                   n.size() - (sizeof(kShippedProfilePrefix) - 1) -
                                       std::string_view(".textproto").size()));
      }
      return absl::NotFoundError(
          absl::StrCat("--calibration ", value,
                       ": no such file, and no shipped profile of that name (shipped: ",
                       absl::StrJoin(shipped, ", "), "; or a path to a profile file)"));
    }
  }
  if (const internal::EmbeddedFile* f = FindShipped(name)) {
    RETURN_IF_ERROR(ParseTextProto(f->text, name, &r.profile));
    r.found = true;
    r.shipped = true;
    r.origin =
        absl::StrCat("shipped ", name, " (embedded in servesim ", VersionString(), ")");
    return r;
  }
  if (value.empty()) return r;  // no shipped profile: priors
  ASSIGN_OR_RETURN(r.profile, LoadCalibrationProfile(value));
  r.found = true;
  r.origin = value;
  return r;
}

int ApplyProfile(const proto::CalibrationProfile& profile, ParameterSet* params) {
  int n = 0;
  for (const auto& pp : profile.parameters()) {
    Parameter* p = params->FindMutable(pp.name());
    if (p == nullptr) continue;
    p->value = pp.value();
    p->std_error = pp.std_error();
    p->source = pp.source().empty()
                    ? absl::StrCat("calibration profile ", profile.device(), " (",
                                   profile.software_build(), ")")
                    : pp.source();
    ++n;
  }
  return n;
}

proto::CalibrationProfile ProfileFromParameters(const std::string& device_id,
                                                const ParameterSet& params) {
  proto::CalibrationProfile out;
  out.set_device(device_id);
  for (const Parameter& p : params.params()) {
    auto* pp = out.add_parameters();
    pp->set_name(p.name);
    pp->set_value(p.value);
    pp->set_std_error(p.std_error);
    pp->set_source(p.source);
  }
  return out;
}

}  // namespace servesim
