#include "experiments/capacity/simulate_report.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "calibration/validation.h"
#include "experiments/capacity/cost.h"
#include "experiments/runner/config.h"
#include "hwmodels/catalog.h"
#include "sim/base/version.h"
#include "traces/bench_result.h"
#include "traces/open_trace.h"
#include "traces/trace_reader.h"

namespace servesim {

// The model_id / tokenizer_id of the result, as vLLM writes them: the
// Hugging Face id ("google/gemma-4-E2B-it") for a catalog name
// ("gemma-4-e2b"); a Hugging Face id or a config.json path as given.
std::string ResultModelId(const proto::ExperimentConfig& config) {
  std::string model = config.fleet().replicas_size() > 0
                          ? config.fleet().replicas(0).server().model()
                          : config.server().model();
  if (model.find('/') != std::string::npos) return model;
  absl::StatusOr<proto::ModelArch> arch = FindModel(model);
  if (!arch.ok() || arch->hf_ids_size() == 0) return model;
  return arch->hf_ids(0);
}

// A `vllm bench serve` file without start_times replayed at --request-rate
// inf sends every request at t = 0; says so, with the file's own rate when
// it has one. Empty when that is not the case.
std::string BenchArrivalNote(const proto::ClientConfig& cl) {
  if (cl.trace().empty() || (cl.request_rate() > 0 && std::isfinite(cl.request_rate()))) {
    return "";
  }
  TraceOptions t;
  t.path = cl.trace();
  t.format = cl.trace_format();
  absl::StatusOr<TraceFormat> format = ResolveTraceFormat(t);
  if (!format.ok() || *format != TraceFormat::kVllmBench) return "";
  absl::StatusOr<BenchResult> bench = ReadBenchResult(cl.trace());
  if (!bench.ok() || bench->start_times.has_value()) return "";
  std::string note = absl::StrCat(
      cl.trace(),
      " has no start_times: its requests are all sent at t = 0 (--request-rate inf)");
  const auto rate = bench->metrics.find("request_rate");
  if (rate != bench->metrics.end() && rate->second > 0 && std::isfinite(rate->second)) {
    absl::StrAppend(&note, "; the file was measured at request_rate ", rate->second,
                    ": give --request-rate ", rate->second,
                    " to send them as Poisson arrivals at that rate");
  }
  return note;
}

absl::StatusOr<GoodputSlos> ParseGoodput(const std::vector<std::string>& pairs) {
  GoodputSlos slos;
  for (const std::string& pair : pairs) {
    const size_t colon = pair.find(':');
    double ms = 0;
    if (colon == std::string::npos || pair.find(':', colon + 1) != std::string::npos ||
        !absl::SimpleAtod(pair.substr(colon + 1), &ms) || !std::isfinite(ms)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--goodput: '%s' is not KEY:VALUE (as vllm bench serve: KEY ttft, tpot or "
          "e2el, VALUE milliseconds, e.g. ttft:500)",
          pair));
    }
    const std::string key = pair.substr(0, colon);
    std::optional<double>* slot = key == "ttft"   ? &slos.ttft_ms
                                  : key == "tpot" ? &slos.tpot_ms
                                  : key == "e2el" ? &slos.e2el_ms
                                                  : nullptr;
    if (slot == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--goodput: '%s': metric '%s' is not one of ttft, tpot, e2el", pair, key));
    }
    if (ms < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--goodput: '%s': %g ms is negative (an SLO is >= 0 ms)", pair, ms));
    }
    *slot = ms;
  }
  return slos;
}

void SetRequestGoodput(ReportContext& ctx, const RunResult& result,
                       const std::vector<RequestRecord>& records,
                       const GoodputSlos& slos) {
  if (!slos.any()) {
    ctx.request_goodput.reset();
    return;
  }
  ctx.request_goodput =
      result.duration_s > 0
          ? static_cast<double>(GoodRequests(records, slos)) / result.duration_s
          : 0.0;
}

ReportContext SimulateReportContext(const proto::ExperimentConfig& config,
                                    const ExperimentRun& run, const std::string& date) {
  const ClientConfig& client = run.client;
  const RunResult result = run.engine->Result();
  const std::string arrival_note = BenchArrivalNote(config.client());
  ReportContext ctx;
  ctx.date = date;
  ctx.model_id = ResultModelId(config);
  ctx.request_rate = client.request_rate;
  ctx.burstiness = client.burstiness;
  ctx.max_concurrency = client.max_concurrency;
  ctx.provenance.push_back(absl::StrCat("servesim ", VersionString(), " (commit ",
                                        CommitString(), ") simulate"));
  ctx.provenance.push_back(run.engine->Describe());
  for (const std::string& p : run.fleet.provenance) ctx.provenance.push_back(p);
  // Where a shipped profile applies, what `servesim validate` misses with it
  // (the shipped fit config's known gaps): the checks, the missing term and
  // the measurement that would settle it.
  std::set<std::pair<std::string, std::string>> gaps_noted;  // (device, build)
  for (const Deployment& d : run.fleet.deployments) {
    if (!d.shipped_profile ||
        !gaps_noted.insert({d.device.id(), d.profile_software_build}).second) {
      continue;
    }
    for (std::string& note :
         ShippedKnownGapNotes(d.device.id(), d.profile_software_build)) {
      ctx.provenance.push_back(std::move(note));
    }
  }
  ctx.provenance.push_back(absl::StrCat("client: ", run.source->Describe()));
  if (client.replay_arrivals)
    ctx.provenance.emplace_back("arrivals: replayed from the trace");
  if (!arrival_note.empty())
    ctx.provenance.push_back(absl::StrCat("arrivals: ", arrival_note));
  if (!config.client().ignore_eos()) {
    ctx.provenance.emplace_back(
        "ignore_eos=false: simulated outputs still have exactly the requested lengths");
  }
  ctx.resolved_config = ConfigToText(config);
  // What the fleet costs per 1M output tokens at its devices' cheapest
  // on-demand and spot prices (experiments/capacity/cost.h SelectOffer: spot takes
  // on-demand when that is cheaper, and the offers line names it; a tier is
  // left out when a device has no offer of it).
  for (const char* tier : {"on-demand", "spot"}) {
    ReportContext::Cost cost;
    cost.tier = tier;
    bool complete = true;
    for (size_t k = 0; k < run.fleet.deployments.size() && complete; ++k) {
      const proto::Device& device = run.fleet.deployments[k].device;
      const int count =
          config.fleet().replicas_size() > 0
              ? std::max(1, config.fleet().replicas(static_cast<int>(k)).count())
              : 1;
      // A replica of TP x PP x DP chips is priced as one instance of that many.
      const int tp = run.fleet.deployments[k].tensor_parallel_size;
      const int pp = run.fleet.deployments[k].pipeline_parallel_size;
      const int dp = run.fleet.deployments[k].data_parallel_size;
      const int chips = tp * pp * dp;
      const std::vector<PriceOffer> offers = OffersFromDevice(device);
      auto offer = SelectOfferForDevices(offers, device.id(), tier, chips);
      if (!offer.ok() ||
          std::none_of(offers.begin(), offers.end(), [&](const PriceOffer& o) {
            return o.kind == tier && o.usd_per_hour > 0 && o.num_devices == chips;
          })) {
        complete = false;
        break;
      }
      cost.usd_per_hour += count * offer->usd_per_hour;
      absl::StrAppend(&cost.offers, cost.offers.empty() ? "" : " + ", count, "x ",
                      device.id(), tp > 1 ? absl::StrCat(" TP", tp) : "",
                      pp > 1 ? absl::StrCat(" PP", pp) : "",
                      dp > 1 ? absl::StrCat(" DP", dp) : "", " ", OfferLabel(*offer));
    }
    if (!complete || cost.usd_per_hour <= 0 || !(result.output_throughput > 0)) continue;
    cost.usd_per_m_output_tokens =
        UsdPerMillionTokens(cost.usd_per_hour, result.output_throughput);
    cost.output_tok_s_per_usd_hour =
        TokensPerSecondPerUsdHour(result.output_throughput, cost.usd_per_hour);
    ctx.costs.push_back(std::move(cost));
  }

  const auto& records = run.engine->records();
  if (run.engine->num_replicas() > 1) {
    const std::vector<int64_t> per =
        RequestsPerReplica(records, run.engine->num_replicas());
    for (int32_t i = 0; i < run.engine->num_replicas(); ++i) {
      ctx.replica_shares.push_back({run.engine->replica_config(i).description, per[i]});
    }
  }
  return ctx;
}

}  // namespace servesim
