// Reports of one run, all deterministic (same inputs: same bytes):
//  (a) BenchResultJson: the object `vllm bench serve --save-result` writes
//      (same keys), plus a "servesim" object with simulator-only results
//      and provenance; with `detailed`, vLLM's per-request arrays
//      (input_lens, output_lens, ttfts, itls in seconds, start_times,
//      generated_texts as empty strings: no text is simulated, errors);
//  (b) RequestsCsv: one row per request with its timeline;
//  (c) ChromeTraceRecorder: a Chrome/Perfetto trace (steps per replica as
//      complete events with the batch in args; request lifetimes as async
//      events);
//  (d) SummaryText: a printout like `vllm bench serve`'s.
#ifndef SERVESIM_SIM_REPORT_H_
#define SERVESIM_SIM_REPORT_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/json_writer.h"
#include "sim/engine.h"
#include "sim/metrics.h"

namespace servesim {

// What the report says about the run beyond the numbers.
struct ReportContext {
  // "date" key; a fixed default so output is reproducible (pass the real
  // date from the config when wanted).
  std::string date = "19700101-000000";
  std::string backend = "vllm";
  // vLLM writes "endpoint_type" (= backend, "for backward compatibility")
  // and "label" (--label; null when not given).
  std::optional<std::string> label;
  std::string model_id;
  std::string tokenizer_id;  // empty: same as model_id
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int32_t max_concurrency = 0;  // 0: unlimited (null)
  // Requests per second meeting every --goodput SLO (GoodRequests over the
  // duration); absent: no --goodput given, written as null as vLLM does.
  std::optional<double> request_goodput;
  // Free-text provenance lines (engine, step model, source, versions).
  std::vector<std::string> provenance;
  // Resolved experiment config (text format), embedded when non-empty.
  std::string resolved_config;
  // What the simulated fleet costs at a price tier, from its devices'
  // published prices (filled by the caller; empty: no cost lines).
  struct Cost {
    std::string tier;    // "on-demand", "spot", ...
    std::string offers;  // "1x aws-sagemaker ml.g4dn.xlarge $0.736/h", ...
    double usd_per_hour = 0;
    double usd_per_m_output_tokens = 0;  // usd_per_hour / (output tok/s x 3600) x 1e6
    double output_tok_s_per_usd_hour = 0;
  };
  std::vector<Cost> costs;
  // Requests each replica of a fleet received (index = replica), with its
  // description ("mi300x/gemma-4-e4b"); empty for a single replica.
  struct ReplicaShare {
    std::string description;
    int64_t requests = 0;
  };
  std::vector<ReplicaShare> replica_shares;
  // Writes more keys into the "servesim" object, after the standard ones
  // and before "provenance" (e.g. simulate --interval's "intervals"); none
  // when empty.
  std::function<void(JsonWriter&)> write_servesim_extra;
};

// Requests routed to each replica (RequestRecord::replica; a request never
// routed is not counted), in replica order.
std::vector<int64_t> RequestsPerReplica(const std::vector<RequestRecord>& records,
                                        int32_t num_replicas);

// REQUIRES for detailed: request_itls has one list per record (empty lists
// are written when it is empty).
std::string BenchResultJson(const RunResult& result, const ReportContext& ctx,
                            const std::vector<RequestRecord>& records,
                            const std::vector<std::vector<TimeNs>>& request_itls,
                            bool detailed, int indent = 2);

// Header: id,replica,input_tokens,output_tokens,status,intended_s,send_s,
// arrival_s,first_scheduled_s,first_token_s,finish_s,ttft_ms,e2el_ms,
// queueing_ms,preemptions,prefix_hit_tokens. Times in seconds of simulated
// time; empty cells for events that never happened.
std::string RequestsCsv(const std::vector<RequestRecord>& records);

std::string SummaryText(const RunResult& result, const ReportContext& ctx);

// Records a Chrome trace while the engine runs. Steps beyond `max_steps`
// are dropped and the trace's metadata says so.
class ChromeTraceRecorder : public EngineObserver {
 public:
  static constexpr int64_t kDefaultMaxSteps = 200'000;
  explicit ChromeTraceRecorder(int64_t max_steps = kDefaultMaxSteps)
      : max_steps_(max_steps) {}
  void OnStep(int32_t replica, TimeNs start_ns, TimeNs duration_ns, const Scheduler& s,
              const StepCost& cost) override;
  void OnRequestDone(const RequestRecord& record) override;
  // The complete JSON document. `num_replicas` names the process tracks.
  std::string Finish(int32_t num_replicas) const;
  int64_t dropped_steps() const { return dropped_steps_; }

 private:
  std::string events_;  // comma-separated event objects
  int64_t steps_ = 0;
  int64_t dropped_steps_ = 0;
  int64_t max_steps_;
};

}  // namespace servesim

#endif  // SERVESIM_SIM_REPORT_H_
