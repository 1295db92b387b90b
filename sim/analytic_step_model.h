// A simple, documented StepTimeModel stand-in for tests and benchmarks:
//   host_ns   = host_base_ns + host_per_seq_ns * num_seqs
//   device_ns = device_base_ns + device_per_token_ns * tokens
//               + device_per_context_token_ns * sum(context)
// where tokens = prefill chunk tokens + one per decode, and context = the
// tokens each request attends to that are already cached (prefill:
// num_computed_before; decode: its context length). No hardware meaning.
// Immutable, thread-safe.
#ifndef SERVESIM_SIM_ANALYTIC_STEP_MODEL_H_
#define SERVESIM_SIM_ANALYTIC_STEP_MODEL_H_

#include <string>

#include "sim/step_time_model.h"

namespace servesim {

struct AnalyticStepParams {
  double host_base_ns = 0;
  double host_per_seq_ns = 0;
  double device_base_ns = 0;
  double device_per_token_ns = 0;
  double device_per_context_token_ns = 0;
};

class AnalyticStepModel : public StepTimeModel {
 public:
  explicit AnalyticStepModel(const AnalyticStepParams& p) : p_(p) {}
  StepCost Cost(const StepBatch& batch) const override;
  std::string Describe() const override;
  const AnalyticStepParams& params() const { return p_; }

 private:
  AnalyticStepParams p_;
};

}  // namespace servesim

#endif  // SERVESIM_SIM_ANALYTIC_STEP_MODEL_H_
