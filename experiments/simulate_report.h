// What `servesim simulate` reports about a finished run beyond the
// engine's numbers: the provenance lines, the resolved config and the
// fleet's cost per 1M output tokens. One home, used by the CLI and the
// Python module, so both write the same JSON bytes.
#ifndef SERVESIM_EXPERIMENTS_SIMULATE_REPORT_H_
#define SERVESIM_EXPERIMENTS_SIMULATE_REPORT_H_

#include <string>

#include "experiments/run_experiment.h"
#include "proto/experiment.pb.h"
#include "sim/report.h"

namespace servesim::cli {

// The report context of `run`, the finished run of `config` (the resolved
// config RunExperiment was given). `date` is the JSON "date" key.
ReportContext SimulateReportContext(const proto::ExperimentConfig& config,
                                    const ExperimentRun& run, const std::string& date);

}  // namespace servesim::cli

#endif  // SERVESIM_EXPERIMENTS_SIMULATE_REPORT_H_
