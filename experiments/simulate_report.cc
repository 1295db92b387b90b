#include "experiments/simulate_report.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiments/cost.h"
#include "experiments/server_flags.h"
#include "sim/version.h"

namespace servesim::cli {

ReportContext SimulateReportContext(const proto::ExperimentConfig& config,
                                    const ExperimentRun& run, const std::string& date) {
  const ClientConfig& client = run.client;
  const RunResult result = run.engine->Result();
  ReportContext ctx;
  ctx.date = date;
  ctx.model_id = config.fleet().replicas_size() > 0
                     ? config.fleet().replicas(0).server().model()
                     : config.server().model();
  ctx.request_rate = client.request_rate;
  ctx.burstiness = client.burstiness;
  ctx.max_concurrency = client.max_concurrency;
  ctx.provenance.push_back(absl::StrCat("servesim ", VersionString(), " (commit ",
                                        CommitString(), ") simulate"));
  ctx.provenance.push_back(run.engine->Describe());
  for (const std::string& p : run.fleet.provenance) ctx.provenance.push_back(p);
  ctx.provenance.push_back(absl::StrCat("client: ", run.source->Describe()));
  if (client.replay_arrivals)
    ctx.provenance.emplace_back("arrivals: replayed from the trace");
  if (!config.client().ignore_eos()) {
    ctx.provenance.emplace_back(
        "ignore_eos=false: simulated outputs still have exactly the requested lengths");
  }
  ctx.resolved_config = ConfigToText(config);
  // What the fleet costs per 1M output tokens at its devices' first
  // published on-demand and spot prices (experiments/cost.h SelectOffer; a
  // tier is left out when a device lacks it).
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
      std::string note;
      auto offer = SelectOffer(OffersFromDevice(device), device.id(), tier, &note);
      if (!offer.ok() || !note.empty()) {
        complete = false;
        break;
      }
      cost.usd_per_hour += count * offer->usd_per_hour;
      absl::StrAppend(&cost.offers, cost.offers.empty() ? "" : " + ", count, "x ",
                      device.id(), " ", offer->provider, " ", offer->instance,
                      offer->region.empty() ? "" : absl::StrCat(" ", offer->region),
                      absl::StrFormat(" $%g/h", offer->usd_per_hour));
    }
    if (!complete || cost.usd_per_hour <= 0 || !(result.output_throughput > 0)) continue;
    cost.usd_per_m_output_tokens =
        UsdPerMillionTokens(cost.usd_per_hour, result.output_throughput);
    cost.output_tok_s_per_usd_hour =
        TokensPerSecondPerUsdHour(result.output_throughput, cost.usd_per_hour);
    ctx.costs.push_back(std::move(cost));
  }
  return ctx;
}

}  // namespace servesim::cli
