// The shipped measurement files (calibration/data/*.textproto) and fit
// configuration (calibration/fit_config.textproto), embedded at configure
// time by calibration/CMakeLists.txt (servesim_embed, cmake/servesim.cmake),
// so `validate` and `calibrate` read the same data from any directory and
// from an installed binary.
#ifndef SERVESIM_CALIBRATION_EMBEDDED_DATA_H_
#define SERVESIM_CALIBRATION_EMBEDDED_DATA_H_

#include "hwmodels/embedded_data.h"

namespace servesim::internal {

extern const EmbeddedFile kEmbeddedMeasurementFiles[];
extern const int kNumEmbeddedMeasurementFiles;
extern const EmbeddedFile kEmbeddedFitConfigFiles[];  // exactly one
extern const int kNumEmbeddedFitConfigFiles;

}  // namespace servesim::internal

#endif  // SERVESIM_CALIBRATION_EMBEDDED_DATA_H_
