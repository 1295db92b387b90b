// Calibration profiles (proto CalibrationProfile): the shipped ones (the
// files of calibration/profiles/, embedded in the binary at build time, so a
// prediction never depends on the directory it runs from), a user's own on
// disk, and their application to a ParameterSet. Thread-safe.
#ifndef SERVESIM_HWMODELS_CALIBRATION_PROFILE_H_
#define SERVESIM_HWMODELS_CALIBRATION_PROFILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hwmodels/params.h"
#include "proto/hwmodels.pb.h"

namespace servesim {

// Text-format read/write. Errors name the file (and the parse error).
absl::StatusOr<servesim::proto::CalibrationProfile> LoadCalibrationProfile(
    const std::string& path);
absl::Status SaveCalibrationProfile(const servesim::proto::CalibrationProfile& profile,
                                    const std::string& path);

// The name under which a shipped profile is given: its repository path,
// "calibration/profiles/<name>.textproto" (e.g. "calibration/profiles/t4.textproto",
// "calibration/profiles/l4@vllm-0.28.0.textproto").
inline constexpr char kShippedProfilePrefix[] = "calibration/profiles/";
std::string ShippedProfileName(const std::string& file_name);

// Every shipped profile's name (as above), sorted.
std::vector<std::string> ShippedProfileNames();

// A profile resolved from a --calibration value, with where it came from.
struct ResolvedProfile {
  bool found = false;  // false: no value and no shipped profile for the device
  servesim::proto::CalibrationProfile profile;
  // "shipped calibration/profiles/t4.textproto (embedded in servesim 0.2.0)"
  // or the user's path.
  std::string origin;
  bool shipped = false;
};

// Resolves the calibration of a deployment on `device_id`:
// - `value` empty: the device's shipped profile
//   (calibration/profiles/<device_id>.textproto) when one is shipped, else
//   found == false (priors);
// - `value` naming a shipped profile (see ShippedProfileName): the embedded
//   copy, never a file of that name in the current directory;
// - anything else: a profile file read from disk (errors name the path).
absl::StatusOr<ResolvedProfile> ResolveCalibrationProfile(const std::string& value,
                                                          const std::string& device_id);

// Copies the profile's values (and std errors, sources) onto the parameters
// of the same name; unknown names are ignored. Returns how many applied.
int ApplyProfile(const servesim::proto::CalibrationProfile& profile,
                 ParameterSet* params);

// A profile holding `params`' values (for the fitter to fill in and save).
servesim::proto::CalibrationProfile ProfileFromParameters(const std::string& device_id,
                                                          const ParameterSet& params);

}  // namespace servesim

#endif  // SERVESIM_HWMODELS_CALIBRATION_PROFILE_H_
