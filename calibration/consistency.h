// Internal-consistency checks of the published tables: recomputes numbers
// the write-ups state from other numbers they state (prices, ratios, cost
// vs throughput) and reports what does not add up. Pure arithmetic on the
// measured data; no model involved.
#ifndef SERVESIM_CALIBRATION_CONSISTENCY_H_
#define SERVESIM_CALIBRATION_CONSISTENCY_H_

#include <string>
#include <vector>

#include "calibration/measurements.h"

namespace servesim {

struct ConsistencyFinding {
  std::string id;         // "tpu-v6e/on_demand_price_implied/c1"
  std::string statement;  // what the write-up states
  std::string formula;    // how it is recomputed
  double published = 0;
  double recomputed = 0;
  // |recomputed - published| allowed by the published rounding.
  double rounding = 0;
  bool consistent = false;
  std::string note;  // why it matters / what it implies
};

// Runs every check whose inputs are in `db` (a check is skipped when a
// measurement it needs is absent). Deterministic order.
std::vector<ConsistencyFinding> CheckPublishedConsistency(const MeasurementDb& db);

}  // namespace servesim

#endif  // SERVESIM_CALIBRATION_CONSISTENCY_H_
