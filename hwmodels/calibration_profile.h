// Calibration profiles (proto CalibrationProfile) on disk and applied to a
// ParameterSet. calibration/profiles/<device>.textproto is the default
// profile of a device (written by the calibration helper). Thread-safe.
#ifndef SERVESIM_HWMODELS_CALIBRATION_PROFILE_H_
#define SERVESIM_HWMODELS_CALIBRATION_PROFILE_H_

#include <string>

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

// The default profile path for a device, found relative to the working
// directory or the source tree (calibration/profiles/<device>.textproto);
// empty when none exists.
std::string DefaultProfilePath(const std::string& device_id);

// Copies the profile's values (and std errors, sources) onto the parameters
// of the same name; unknown names are ignored. Returns how many applied.
int ApplyProfile(const servesim::proto::CalibrationProfile& profile,
                 ParameterSet* params);

// A profile holding `params`' values (for the fitter to fill in and save).
servesim::proto::CalibrationProfile ProfileFromParameters(const std::string& device_id,
                                                          const ParameterSet& params);

}  // namespace servesim

#endif  // SERVESIM_HWMODELS_CALIBRATION_PROFILE_H_
