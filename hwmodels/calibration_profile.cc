#include "hwmodels/calibration_profile.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "proto/text_format.h"
#include "sim/status_macros.h"

namespace servesim {
namespace {

bool Exists(const std::string& p) { return std::ifstream(p).good(); }

}  // namespace

absl::StatusOr<proto::CalibrationProfile> LoadCalibrationProfile(
    const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return absl::NotFoundError(absl::StrCat(path, ": cannot open calibration profile"));
  std::stringstream ss;
  ss << in.rdbuf();
  proto::CalibrationProfile p;
  RETURN_IF_ERROR(ParseTextProto(ss.str(), path, &p));
  return p;
}

absl::Status SaveCalibrationProfile(const proto::CalibrationProfile& profile,
                                    const std::string& path) {
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(profile, &text)) {
    return absl::InternalError("cannot print calibration profile");
  }
  std::ofstream out(path);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write"));
  out << "# proto-file: proto/hwmodels.proto\n# proto-message: "
         "servesim.proto.CalibrationProfile\n"
      << text;
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

std::string DefaultProfilePath(const std::string& device_id) {
  const std::string rel = absl::StrCat("calibration/profiles/", device_id, ".textproto");
  if (Exists(rel)) return rel;
#ifdef SERVESIM_SOURCE_DIR
  const std::string src = absl::StrCat(SERVESIM_SOURCE_DIR, "/", rel);
  if (Exists(src)) return src;
#endif
  return "";
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
