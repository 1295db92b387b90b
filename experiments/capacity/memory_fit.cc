#include "experiments/capacity/memory_fit.h"

#include <algorithm>

#include "hwmodels/deployment.h"
#include "hwmodels/parallelism.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

absl::StatusOr<bool> FitsAt(ServerSpec spec, int32_t max_model_len) {
  spec.max_model_len = max_model_len;
  ASSIGN_OR_RETURN(Deployment d, BuildDeployment(spec));
  return d.memory.fits;
}

}  // namespace

absl::StatusOr<int32_t> LargestFittingMaxModelLen(const ServerSpec& spec, int32_t upper) {
  if (upper < 1) return 0;
  ASSIGN_OR_RETURN(bool fits_one, FitsAt(spec, 1));
  if (!fits_one) return 0;
  ASSIGN_OR_RETURN(bool fits_upper, FitsAt(spec, upper));
  if (fits_upper) return upper;
  int32_t lo = 1, hi = upper;  // fits at lo, not at hi
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    ASSIGN_OR_RETURN(bool fits, FitsAt(spec, mid));
    (fits ? lo : hi) = mid;
  }
  return lo;
}

int32_t SmallestFittingTensorParallelSize(const ServerSpec& spec) {
  for (int32_t tp = std::max(spec.tensor_parallel_size, 1) + 1; tp <= kMaxParallelSize;
       ++tp) {
    ServerSpec s = spec;
    s.tensor_parallel_size = tp;
    absl::StatusOr<Deployment> d = BuildDeployment(s);
    if (d.ok() && d->memory.fits) return tp;
  }
  return 0;
}

std::vector<std::string> QuantizationsThatFit(const ServerSpec& spec) {
  std::vector<std::string> out;
  for (const char* q : {"none", "fp8", "w8a8", "w4a16", "w4a16-emb4"}) {
    if (spec.quantization == q) continue;
    ServerSpec s = spec;
    s.quantization = q;
    absl::StatusOr<Deployment> d = BuildDeployment(s);
    if (d.ok() && d->memory.fits) out.emplace_back(q);
  }
  return out;
}

}  // namespace servesim
