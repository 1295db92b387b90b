#include "experiments/capacity/simulate_report.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "calibration/validation.h"
#include "experiments/capacity/cost.h"
#include "experiments/runner/config.h"
#include "hwmodels/calibration_profile.h"
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
    if (slot->has_value()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--goodput: '%s': %s is given twice (%g and %g ms); give each metric once",
          pair, key, **slot, ms));
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

namespace {

// "40" or "128 to 8192".
std::string Span(int32_t lo, int32_t hi) {
  return lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, " to ", hi);
}

// "async scheduling on" / "off".
std::string OnOff(bool on) { return on ? "on" : "off"; }

// The values a setting took over the fitted runs, joined ("w4a16-emb4",
// "none, w4a16-emb4").
template <typename Get>
std::string FittedValues(const std::vector<proto::FittedServer>& servers, Get get) {
  std::set<std::string> values;
  for (const proto::FittedServer& s : servers) values.insert(get(s));
  return absl::StrJoin(values, ", ");
}

// One setting that shapes a fitted term, set to a value no fitted run had.
struct SettingMismatch {
  std::string setting, fitted, here, why;
};

// Each `vllm serve` setting that shapes a fitted term and that `d` sets to
// a value none of the runs `fs` had (none when `fs` is empty: not recorded).
std::vector<SettingMismatch> SettingMismatches(const std::vector<proto::FittedServer>& fs,
                                               const Deployment& d) {
  std::vector<SettingMismatch> out;
  if (fs.empty()) return out;
  auto any = [&](auto pred) { return std::any_of(fs.begin(), fs.end(), pred); };
  if (!any([&](const proto::FittedServer& s) {
        return s.quantization() == d.format.id;
      })) {
    out.push_back(
        {"--quantization", FittedValues(fs, [](auto& s) { return s.quantization(); }),
         d.format.id,
         "its linear layers run another kernel family, whose weight-read and "
         "GEMM efficiencies the fit never saw (the fitted values are applied as "
         "they are)"});
  }
  // "auto" (a `calibrate` run left at the device's default) matches any.
  if (!any([&](const proto::FittedServer& s) {
        return s.dtype() == "auto" || s.dtype() == d.dtype;
      })) {
    out.push_back(
        {"--dtype", FittedValues(fs, [](auto& s) { return s.dtype(); }), d.dtype,
         "the 16-bit kernels and their peak differ by type on some devices; the "
         "fitted efficiencies are applied as they are"});
  }
  // By width: fp8, fp8_e4m3 and fp8_e5m2 all read one byte an element.
  const std::string kv = d.kv_cache_dtype == d.dtype ? "auto" : d.kv_cache_dtype;
  const auto one_byte = [](const std::string& t) { return absl::StartsWith(t, "fp8"); };
  if (!any([&](const proto::FittedServer& s) {
        return one_byte(s.kv_cache_dtype()) == one_byte(kv);
      })) {
    out.push_back({"--kv-cache-dtype",
                   FittedValues(fs, [](auto& s) { return s.kv_cache_dtype(); }), kv,
                   "decode attention reads KV elements of another width; its bandwidth "
                   "efficiency was fitted on the other"});
  }
  if (!any([&](const proto::FittedServer& s) {
        return s.async_scheduling() == d.spec.async_scheduling;
      })) {
    out.push_back(
        {"async scheduling",
         FittedValues(fs, [](auto& s) { return OnOff(s.async_scheduling()); }),
         OnOff(d.spec.async_scheduling),
         "the host work of a step overlaps the device's in one mode and adds to "
         "it in the other, and the fitted host terms came from the other mode"});
  }
  if (!any([&](const proto::FittedServer& s) {
        return s.tensor_parallel_size() == d.tensor_parallel_size;
      })) {
    out.push_back(
        {"--tensor-parallel-size",
         FittedValues(fs, [](auto& s) { return absl::StrCat(s.tensor_parallel_size()); }),
         absl::StrCat(d.tensor_parallel_size),
         "the collectives over the chips' link and the per-rank shapes are modelled from "
         "the datasheet; no fitted cell informed them"});
  }
  // `calibrate` refuses pipeline and expert parallel runs, so no profile
  // has seen either.
  if (d.pipeline_parallel_size > 1) {
    out.push_back({"--pipeline-parallel-size", "1",
                   absl::StrCat(d.pipeline_parallel_size),
                   "the stage handoffs and vLLM's batch queue are modelled, not fitted"});
  }
  if (d.expert_parallel_size > 1) {
    out.push_back({"expert parallelism", "off",
                   absl::StrCat("EP ", d.expert_parallel_size),
                   "the all-to-all exchanges and the expert load per rank are modelled, "
                   "not fitted"});
  }
  return out;
}

// The shipped profiles of d's device, other than the applied one, whose
// fitted runs had every setting d has ("calibration/profiles/l4@...").
std::vector<std::string> ShippedProfilesFittedLike(const Deployment& d) {
  std::vector<std::string> out;
  const std::string prefix = absl::StrCat(kShippedProfilePrefix, d.device.id());
  for (const std::string& name : ShippedProfileNames()) {
    if (!absl::StartsWith(name, prefix) ||
        (name.size() > prefix.size() && name[prefix.size()] != '.' &&
         name[prefix.size()] != '@')) {
      continue;
    }
    absl::StatusOr<ResolvedProfile> p = ResolveCalibrationProfile(name, d.device.id());
    if (!p.ok() || !p->found || p->profile.software_build() == d.profile_software_build)
      continue;
    const std::vector<proto::FittedServer> fs(p->profile.fitted_servers().begin(),
                                              p->profile.fitted_servers().end());
    if (!fs.empty() && SettingMismatches(fs, d).empty()) out.push_back(name);
  }
  return out;
}

// "the shipped l4 profile (vllm-0.30.0-sagemaker)" or "the calibration
// profile PATH".
std::string ProfileName(const Deployment& d) {
  return d.shipped_profile ? absl::StrCat("the shipped ", d.device.id(), " profile (",
                                          d.profile_software_build, ")")
                           : absl::StrCat("the calibration profile ", d.profile_origin);
}

// One profile's settings findings, each starting "outside the fit:".
void ServerSettingWarnings(const Deployment& d, const std::string& profile,
                           std::vector<std::string>& out) {
  const std::vector<SettingMismatch> mismatches = SettingMismatches(d.fitted_servers, d);
  if (mismatches.empty()) return;
  std::string alternative;
  if (const std::vector<std::string> like = ShippedProfilesFittedLike(d); !like.empty()) {
    alternative = absl::StrCat("; fitted under this run's settings: --calibration ",
                               absl::StrJoin(like, " or --calibration "));
  }
  for (const SettingMismatch& m : mismatches) {
    out.push_back(absl::StrFormat(
        "outside the fit: %s was fitted on runs served with %s %s; this run has %s: %s%s",
        profile, m.setting, m.fitted, m.here, m.why, alternative));
  }
}

// "runs a, b: vLLM 0.30.0; bf16, --quantization w4a16-emb4, ..." per
// group of fitted runs with the same settings.
std::vector<std::string> DescribeFittedServers(
    const std::vector<proto::FittedServer>& fs) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const proto::FittedServer& s : fs) {
    auto def = [](int32_t v) { return v > 0 ? absl::StrCat(v) : std::string("default"); };
    const std::string settings = absl::StrCat(
        "vLLM ", s.vllm_version().empty() ? "(version not recorded)" : s.vllm_version(),
        "; --dtype ", s.dtype(), " --quantization ", s.quantization(),
        " --kv-cache-dtype ", s.kv_cache_dtype(), " --tensor-parallel-size ",
        s.tensor_parallel_size(), ", async scheduling ", OnOff(s.async_scheduling()),
        ", prefix caching ", OnOff(s.enable_prefix_caching()), ", --max-num-seqs ",
        def(s.max_num_seqs()), " --max-num-batched-tokens ",
        def(s.max_num_batched_tokens()), " --max-model-len ", def(s.max_model_len()),
        " --gpu-memory-utilization ",
        s.gpu_memory_utilization() > 0 ? absl::StrCat(s.gpu_memory_utilization())
                                       : std::string("default"));
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == settings; });
    if (it == groups.end()) {
      groups.push_back({settings, {}});
      it = std::prev(groups.end());
    }
    it->second.push_back(s.run());
  }
  std::vector<std::string> out;
  out.reserve(groups.size());
  for (const auto& [settings, runs] : groups) {
    out.push_back(absl::StrCat(runs.size() == 1 ? "run " : "runs ",
                               absl::StrJoin(runs, ", "), ": ", settings));
  }
  return out;
}

}  // namespace

std::vector<std::string> FitRangeWarnings(const ExperimentRun& run,
                                          const RunResult& result) {
  std::vector<std::string> out;
  const std::vector<RequestRecord>& records = run.engine->records();
  std::set<std::string> seen;  // profiles already checked
  for (const Deployment& d : run.fleet.deployments) {
    const proto::FittedRange& range = d.fitted_range;
    if (!d.calibrated || !seen.insert(d.profile_origin).second) continue;
    const std::string profile = ProfileName(d);
    if (range.max_input_tokens() > 0) {
      int64_t longer = 0, shorter = 0, total = 0;
      int32_t longest = 0, shortest = std::numeric_limits<int32_t>::max();
      for (const RequestRecord& r : records) {
        ++total;
        longest = std::max(longest, r.input_tokens);
        shortest = std::min(shortest, r.input_tokens);
        longer += r.input_tokens > range.max_input_tokens();
        shorter += r.input_tokens < range.min_input_tokens();
      }
      const std::string fitted = absl::StrCat(
          profile, " was fitted on cells with prompts of ",
          Span(range.min_input_tokens(), range.max_input_tokens()), " tokens");
      if (longer > 0) {
        out.push_back(absl::StrFormat(
            "outside the fit: %s; %d of this run's %d requests (%.1f%%) have longer "
            "prompts (up to %d tokens): their prefill and attention times extrapolate "
            "the fitted efficiencies (how far that held on measured cells: `servesim "
            "validate`, leave_one_input_length_out)",
            fitted, longer, total, 100.0 * static_cast<double>(longer) / total, longest));
      }
      if (shorter > 0) {
        out.push_back(absl::StrFormat(
            "outside the fit: %s; %d of this run's %d requests (%.1f%%) have shorter "
            "prompts (down to %d tokens): the split between per-step floor and "
            "per-token cost is extrapolated (`servesim validate`, "
            "leave_one_input_length_out)",
            fitted, shorter, total, 100.0 * static_cast<double>(shorter) / total,
            shortest));
      }
    }
    const double max_batch = result.batch_size[3];
    if (range.max_concurrency() > 0 && max_batch > range.max_concurrency()) {
      out.push_back(absl::StrFormat(
          "outside the fit: %s was fitted on cells of %s concurrent requests; this "
          "run batches up to %.0f sequences in one step: the per-sequence terms are "
          "extrapolated (`servesim validate`, leave_one_concurrency_out)",
          profile, Span(range.min_concurrency(), range.max_concurrency()), max_batch));
    }
    // A profile names its models as its cells' runs did: a catalog id or a
    // Hugging Face id (a `calibrate` bench file's model_id); compare the
    // catalog entries they resolve to.
    auto canonical = [](const std::string& name) {
      absl::StatusOr<proto::ModelArch> arch = FindModel(name);
      return arch.ok() ? arch->id() : name;
    };
    const std::string served = canonical(d.model.id);
    if (range.models_size() > 0 &&
        std::none_of(range.models().begin(), range.models().end(),
                     [&](const std::string& m) { return canonical(m) == served; })) {
      out.push_back(absl::StrFormat(
          "outside the fit: %s was fitted on %s; this run serves %s, whose operator "
          "shapes reach the fitted efficiencies through the shape law "
          "(docs/step_model.md; `servesim validate`, leave_one_model_out)",
          profile, absl::StrJoin(range.models(), ", "), d.model.id));
    }
  }
  // Settings per replica group: a fleet's groups may share a profile and
  // differ in their flags (each line once).
  std::set<std::string> said;
  for (const Deployment& d : run.fleet.deployments) {
    if (!d.calibrated) continue;
    std::vector<std::string> lines;
    ServerSettingWarnings(d, ProfileName(d), lines);
    for (std::string& line : lines) {
      if (said.insert(line).second) out.push_back(std::move(line));
    }
  }
  return out;
}

std::vector<std::string> ServerSettingFindings(const Deployment& d) {
  std::vector<std::string> out;
  if (d.calibrated) ServerSettingWarnings(d, ProfileName(d), out);
  return out;
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
  // Under which server settings each applied profile was fitted.
  std::set<std::string> described;
  for (const Deployment& d : run.fleet.deployments) {
    if (!d.calibrated || d.fitted_servers.empty() ||
        !described.insert(d.profile_origin).second) {
      continue;
    }
    for (const std::string& line : DescribeFittedServers(d.fitted_servers)) {
      ctx.provenance.push_back(
          absl::StrCat("profile ", d.profile_origin, " fitted under: ", line));
    }
  }
  for (std::string& w : FitRangeWarnings(run, result))
    ctx.provenance.push_back(std::move(w));
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
        // Said, not left out silently (L4 TP2: no 2-GPU L4 instance listed).
        std::set<int> listed;
        for (const PriceOffer& o : offers) {
          if (o.kind == tier && o.usd_per_hour > 0) listed.insert(o.num_devices);
        }
        ctx.provenance.push_back(absl::StrCat(
            "cost (", tier, "): not reported: no ", tier, " offer of ", chips, " x ",
            device.id(), " is listed in its device file",
            listed.empty() ? std::string(" (none of that tier)")
                           : absl::StrCat(" (listed: ", absl::StrJoin(listed, ", "),
                                          " chips an instance)")));
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
