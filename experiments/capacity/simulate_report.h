// What `servesim simulate` reports about a finished run beyond the
// engine's numbers: the provenance lines, the resolved config and the
// fleet's cost per 1M output tokens. One home, used by the CLI and the
// Python module, so both write the same JSON bytes.
#ifndef SERVESIM_EXPERIMENTS_CAPACITY_SIMULATE_REPORT_H_
#define SERVESIM_EXPERIMENTS_CAPACITY_SIMULATE_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/runner/run_experiment.h"
#include "proto/experiment.pb.h"
#include "sim/metrics.h"
#include "sim/report.h"

namespace servesim {

// The report context of `run`, the finished run of `config` (the resolved
// config RunExperiment was given). `date` is the JSON "date" key.
// Also: the model_id vLLM writes (the Hugging Face id of a catalog name), the
// note on a bench file replayed without start_times, and each replica's
// request share.
ReportContext SimulateReportContext(const proto::ExperimentConfig& config,
                                    const ExperimentRun& run, const std::string& date);

// Where `run` leaves the workloads its deployments' calibration profiles
// were fitted on (Deployment::fitted_range, from the fitted cells): prompts
// longer or shorter than every fitted cell's, more sequences in one step
// than the most concurrent fitted cell had requests, a model no fitted
// cell served. The fitted terms are then extrapolated, which the profile's
// held-out errors do not cover (validate's block passes show how far such
// extrapolation held on measured data). One line per finding and distinct
// profile, each starting "outside the fit:"; empty when the run stays
// inside or no profile records its range. A mixed fleet compares every
// request with every profile. SimulateReportContext puts them in the
// provenance; the CLI and the Python module also warn with them.
std::vector<std::string> FitRangeWarnings(const ExperimentRun& run,
                                          const RunResult& result);

// The lines of FitRangeWarnings about `d`'s server settings alone (no run
// needed): each `vllm serve` setting that shapes a fitted term and that no
// run its profile was fitted on had. Empty without a profile or without
// recorded settings. `plan` lists them per device.
std::vector<std::string> ServerSettingFindings(const Deployment& d);

// vLLM's --goodput "KEY:VALUE" pairs (KEY ttft, tpot or e2el; VALUE a
// non-negative number of milliseconds). Errors name the pair and the rule.
absl::StatusOr<GoodputSlos> ParseGoodput(const std::vector<std::string>& pairs);

// ctx.request_goodput from the run's records (requests meeting every SLO
// per second of duration, as vLLM's good_completed / dur_s); left absent
// (null in the JSON) when `slos` has none.
void SetRequestGoodput(ReportContext& ctx, const RunResult& result,
                       const std::vector<RequestRecord>& records,
                       const GoodputSlos& slos);

// The model_id / tokenizer_id of the result, as vLLM writes them.
std::string ResultModelId(const proto::ExperimentConfig& config);

// A `vllm bench serve` file without start_times replayed at --request-rate
// inf sends every request at t = 0: the note saying so (empty otherwise).
std::string BenchArrivalNote(const proto::ClientConfig& client);

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_CAPACITY_SIMULATE_REPORT_H_
