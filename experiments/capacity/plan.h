// Capacity planning: for each device (and each mixed pair of devices), the
// cheapest fleet that meets every SLO term on a workload, found by
// simulating candidate fleets. A device may come with several tensor
// parallel sizes (one PlanDevice each, the same device, increasing TP): each
// is a group of its own, searched in increasing TP, and a larger TP is not
// searched once the device has a chosen fleet no dearer than one replica
// of it (a TP-k fleet costs at least one k-chip instance). Single-device fleets are
// searched upward from 1 replica, so the replica count below the chosen one is always in
// the table and missed; mixed pairs (a x A + b x B, a, b >= 1) are tried in
// increasing $/h among those cheaper than both devices' own choices, the
// first that meets wins. A device whose first candidate fails to build
// (the model does not fit, ...) is reported with that reason.
// Thread-safe if the runner is; candidates of different groups may run on
// parallel threads, with results independent of the thread count.
#ifndef SERVESIM_EXPERIMENTS_CAPACITY_PLAN_H_
#define SERVESIM_EXPERIMENTS_CAPACITY_PLAN_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/capacity/cost.h"
#include "experiments/capacity/sweep.h"
#include "proto/experiment.pb.h"

namespace servesim {

// One SLO term, e.g. "ttft_p99<=500ms" -> p99_ttft_ms <= 500.
struct SloTerm {
  enum class Op { kLe, kLt, kGe, kGt };
  std::string text;    // as written
  std::string metric;  // runner metric name
  Op op = Op::kLe;
  double threshold = 0;  // in the metric's unit (ms for *_ms metrics)
  bool Meets(double value) const;
};

// Parses "ttft_p99<=500ms,tpot_p99<=50ms". A name is either a runner metric
// name ("p99_ttft_ms", "output_throughput") or <latency>_<stat> with
// latency in ttft|tpot|itl|e2el|queueing and stat in mean|median|p50|std|
// p90|p99 (p50 = median), mapped to "<stat>_<latency>_ms". Times take a
// unit: us, ms (default), s. InvalidArgument names the term and lists the
// allowed names when the metric is not one of `metric_names`.
absl::StatusOr<std::vector<SloTerm>> ParseSlo(
    std::string_view text, const std::vector<std::string>& metric_names);

// A device the planner may use, with the price it pays.
struct PlanDevice {
  std::string device;  // as ServerConfig.device takes it
  PriceOffer offer;
  std::string price_note;  // e.g. "no spot offer for t4; on-demand used"
  // Calibration profile file for this device's replicas (a user's, from
  // `servesim calibrate`); empty: the base server's (the shipped default).
  std::string calibration_profile;
  // Chips per replica: TP x PP x DP; `offer` is then an instance of that
  // many chips (PP and DP are the base server's, not searched).
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  int data_parallel_size = 1;
  // With the shipped profile: what `servesim validate` misses with it (the
  // shipped fit config's known gaps, calibration/validation.h
  // KnownGapNotes); empty with a user's profile.
  std::vector<std::string> known_gaps;
  // The replica's server settings that no run of its profile was fitted
  // under (ServerSettingFindings, experiments/capacity/simulate_report.h).
  std::vector<std::string> outside_fit;
  // The longest prompt of a cell its profile was fitted on (0: no profile,
  // or a profile that did not record it): a single-request TTFT verdict on
  // longer prompts rests on extrapolated prefill, and says so.
  int32_t fitted_max_input_tokens = 0;
};

// "l4", or "l4 TP4" for tensor_parallel_size 4 ("l4 TP2 PP2 DP2" with
// pipeline and data parallelism): the group name.
std::string PlanDeviceLabel(const PlanDevice& d);

struct PlanCandidate {
  std::string group;             // "l4", or "l4+t4" for a mixed pair
  std::vector<FleetPart> fleet;  // counts >= 1
  std::string label;             // "2 x l4 + 1 x t4"
  int num_replicas = 0;
  double usd_per_hour = 0;
  bool ran = false;   // simulated without error
  std::string error;  // when !ran
  // When !ran because a replica does not fit its device (the runner's
  // error is ResourceExhausted, as RunExperiment returns it).
  bool does_not_fit = false;
  bool met = false;
  std::vector<double> slo_values;   // per SLO term (NaN when !ran)
  std::vector<std::string> missed;  // "p99_ttft_ms 812 > 500" per missed term
  std::vector<double> metrics;      // all runner metrics (empty when !ran)
  double output_tokens_per_s = 0;
  double total_tokens_per_s = 0;
  double usd_per_million_output = 0;
  double usd_per_million_total = 0;
  // The fleet serves under 90% of the offered request rate (the base
  // client's finite request_rate; runner metric request_throughput): its
  // $/1M looks cheap only because it drops throughput.
  bool saturated = false;
  double served_requests_per_s = 0;  // when saturated
  // Requests the server rejected (longer than max_model_len or the KV
  // cache): a miss no replica count fixes (requests do not span replicas).
  double rejected_requests = 0;
};

struct PlanOptions {
  // server: the model, quantization and flags of every replica (device is
  // replaced); client: the workload; fleet.router: the router (replicas
  // are replaced).
  proto::ExperimentConfig base;
  std::vector<PlanDevice> devices;
  std::vector<SloTerm> slo;
  int max_replicas = 8;     // per fleet, all devices together
  bool mixed_pairs = true;  // also search a x A + b x B
  int jobs = 1;             // groups searched in parallel
  // Hours a day the workload runs (one stretch from hour 0; 1..24). Below
  // 24, each chosen fleet also gets its daily bill under every idle policy
  // (always on; stopped or deleted when idle, start-up time billed).
  int busy_hours_per_day = 24;
  // Called after each candidate fleet is simulated (progress lines), from
  // the worker threads: must be thread-safe. Empty: nothing.
  std::function<void(const PlanCandidate&)> on_candidate;
};

struct PlanGroup {
  std::string group;
  int tensor_parallel_size = 1;  // 0 for a mixed pair
  std::vector<int> candidates;   // indices into PlanResult::candidates, in trial order
  int chosen = -1;               // cheapest fleet that met every term
  // Candidates with one replica fewer than the chosen fleet (all missed).
  std::vector<int> one_fewer;
  std::string reason;  // why nothing was chosen (does not fit, not searched, ...)
  // What would fit when one replica of this group does not fit its device
  // (its first candidate's does_not_fit), each with all else kept. Filled
  // by the caller that can ask the memory planner (cmd_plan: memory_fit.h
  // WhatFits); RunPlan leaves it unknown.
  struct FitHint {
    bool known = false;
    int32_t largest_max_model_len = 0;          // 0: no length fits
    int32_t smallest_tensor_parallel_size = 0;  // 0: none fits
    std::vector<std::string> quantizations;     // that fit at the given length
  } fit;
  // When PlanOptions::busy_hours_per_day < 24 and a fleet was chosen: its
  // daily bill per policy (always-on, stop-when-idle, delete-when-idle),
  // each replica group priced with its own offer (start-up time, billing
  // while stopped) and the chosen fleet's simulated output throughput.
  std::vector<std::pair<IdlePolicy, DailyCost>> daily;
};

struct PlanResult {
  std::vector<std::string> metric_names;
  std::vector<PlanCandidate> candidates;
  std::vector<PlanGroup> groups;  // devices in the given order, then pairs
  int best_group = -1;            // the cheapest chosen fleet over all groups
};

// The ExperimentConfig that simulates `fleet` for `base`; a replica whose
// device is in `devices` with a calibration_profile gets that profile.
proto::ExperimentConfig FleetExperiment(const proto::ExperimentConfig& base,
                                        const std::vector<FleetPart>& fleet,
                                        const std::vector<PlanDevice>& devices = {});

// Runs the search. Errors: no devices, no SLO terms, max_replicas < 1, the
// runner lacking a metric an SLO term names.
absl::StatusOr<PlanResult> RunPlan(const PlanOptions& options, const PointRunner& runner);

// Human-readable report: the candidates table per group, the choice per
// group with the missed one-fewer fleet, and the cheapest overall.
std::string FormatPlanText(const PlanOptions& options, const PlanResult& result);
// Everything as one JSON document (deterministic bytes).
std::string FormatPlanJson(const PlanOptions& options, const PlanResult& result);

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_CAPACITY_PLAN_H_
