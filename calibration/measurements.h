// The measured reference data (calibration/data/*.textproto, schema
// servesim.proto.MeasurementSet in proto/calibration.proto): loading,
// validation and lookup. Value type; thread-compatible.
#ifndef SERVESIM_CALIBRATION_MEASUREMENTS_H_
#define SERVESIM_CALIBRATION_MEASUREMENTS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hwmodels/server_spec.h"
#include "proto/calibration.pb.h"

namespace servesim {

// All runs and measurements of one or more data files, checked: ids are
// unique, every measurement names a known run and a metric, values are
// finite (positive unless infeasible or a 0/1 outcome), depends_on names
// known measurements. Order is file order (files sorted by name).
class MeasurementDb {
 public:
  // Parses the text-format files; errors name the file and line.
  static absl::StatusOr<MeasurementDb> Load(const std::vector<std::string>& paths);
  // Every *.textproto in `dir`, sorted by file name.
  static absl::StatusOr<MeasurementDb> LoadDir(const std::string& dir);
  // The shipped data: the files of calibration/data/, embedded in the binary
  // at build time (named "calibration/data/<file>" in errors).
  static absl::StatusOr<MeasurementDb> LoadShipped();
  // `dir` == kDefaultDataDir: LoadShipped() (never a folder of that name in
  // the current directory); anything else: LoadDir(dir).
  static absl::StatusOr<MeasurementDb> LoadNamed(const std::string& dir);
  // From in-memory sets (tests, `calibrate`); `origin` names them in errors.
  static absl::StatusOr<MeasurementDb> FromSets(
      const std::vector<servesim::proto::MeasurementSet>& sets,
      const std::string& origin);
  // The same, with one name per set (its file), so an error names the file
  // that holds the run or measurement at fault.
  static absl::StatusOr<MeasurementDb> FromNamedSets(
      const std::vector<servesim::proto::MeasurementSet>& sets,
      const std::vector<std::string>& names);

  const std::vector<servesim::proto::ServerRun>& runs() const { return runs_; }
  const std::vector<servesim::proto::Measurement>& measurements() const {
    return measurements_;
  }
  // nullptr when absent.
  const servesim::proto::ServerRun* FindRun(const std::string& id) const;
  const servesim::proto::Measurement* FindMeasurement(const std::string& id) const;

  // The `vllm serve` flags of a run as the deployment builder takes them
  // (memory overrides from the run's log are not set: see WithLoggedMemory).
  static ServerSpec SpecOf(const servesim::proto::ServerRun& run);
  // Same, plus the memory figures the run's server log gave.
  static ServerSpec WithLoggedMemory(const servesim::proto::ServerRun& run);

 private:
  std::vector<servesim::proto::ServerRun> runs_;
  std::vector<servesim::proto::Measurement> measurements_;
  std::map<std::string, size_t> run_index_;
  std::map<std::string, size_t> measurement_index_;
};

// The name of the shipped data (the repository folder it is embedded from).
inline constexpr char kDefaultDataDir[] = "calibration/data";

// Metric name as in the proto enum, lower case ("output_throughput").
std::string MetricName(servesim::proto::Metric m);

// The most requests one measured cell may hold (each fit evaluation
// re-simulates every cell).
inline constexpr int32_t kMaxCellPrompts = 100000;

// The range of a measured value other than 0 (tok/s, ms, USD, tokens and
// ratios alike): outside it, a value is a typo or a unit slip.
inline constexpr double kMinMeasuredValue = 1e-6;
inline constexpr double kMaxMeasuredValue = 1e12;

}  // namespace servesim

#endif  // SERVESIM_CALIBRATION_MEASUREMENTS_H_
