#include "sim/analytic_step_model.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace servesim {

StepCost AnalyticStepModel::Cost(const StepBatch& batch) const {
  int64_t tokens = 0;
  int64_t context = 0;
  for (const PrefillChunk& c : batch.prefills) {
    tokens += c.num_tokens;
    context += c.num_computed_before;
  }
  for (int32_t ctx : batch.decode_context_lens) context += ctx;
  tokens += static_cast<int64_t>(batch.decode_context_lens.size());
  const double seqs =
      static_cast<double>(batch.prefills.size() + batch.decode_context_lens.size());
  const double host = p_.host_base_ns + p_.host_per_seq_ns * seqs;
  const double device = p_.device_base_ns +
                        p_.device_per_token_ns * static_cast<double>(tokens) +
                        p_.device_per_context_token_ns * static_cast<double>(context);
  return StepCost{static_cast<TimeNs>(std::llround(host)),
                  static_cast<TimeNs>(std::llround(device))};
}

std::string AnalyticStepModel::Describe() const {
  return absl::StrFormat(
      "analytic step model: host_ns = %g + %g*num_seqs; device_ns = %g + %g*tokens + "
      "%g*sum(context)",
      p_.host_base_ns, p_.host_per_seq_ns, p_.device_base_ns, p_.device_per_token_ns,
      p_.device_per_context_token_ns);
}

}  // namespace servesim
