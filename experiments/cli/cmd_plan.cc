// servesim plan: the cheapest fleet per device (and mixed pair) that meets
// an SLO on a workload, with the candidates tried. See experiments/capacity/plan.h.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "calibration/validation.h"
#include "experiments/capacity/cost.h"
#include "experiments/capacity/intervals.h"
#include "experiments/capacity/memory_fit.h"
#include "experiments/capacity/plan.h"
#include "experiments/capacity/simulate_report.h"
#include "experiments/capacity/sweep.h"
#include "experiments/cli/cli.h"
#include "experiments/cli/progress.h"
#include "experiments/cli/server_flags.h"
#include "experiments/runner/run_experiment.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/catalog.h"
#include "hwmodels/catalog_priors.h"
#include "hwmodels/deployment.h"
#include "hwmodels/model_arch.h"
#include "proto/text_format.h"
#include "sim/base/read_file.h"
#include "sim/base/status_macros.h"
#include "sim/router.h"

namespace servesim::cli {
namespace {

struct PlanFlags {
  std::string config;
  std::string trace;
  std::string trace_format;
  double rate = 0;
  int num_prompts = 0;
  int input_len = 1024;
  int output_len = 128;
  double range_ratio = 0;
  // The three length flags above, to tell given from default.
  std::vector<const CLI::Option*> length_flags;
  int max_concurrency = 0;
  std::string seed;  // ParseSeed: [0, 2^63)
  std::string slo;
  // The shared server flags (--calibration is plan's own, per device, below);
  // --device D searches D alone, as --devices D does.
  ServerFlags server;
  std::string devices;
  bool devices_given = false;  // --devices given (even empty)
  std::string price = "on-demand";
  std::string provider;
  std::string region;
  std::vector<std::string> user_prices;   // DEVICE=USD_PER_HOUR
  std::vector<std::string> calibrations;  // DEVICE=FILE or FILE
  int max_replicas = 8;
  std::string router = "least-outstanding";
  bool no_mixed = false;
  int jobs = 1;
  int busy_hours = PlanOptions{}.busy_hours_per_day;
  bool json = false;
  int progress = -1;  // 1: always, 0: never, -1: when stderr is a terminal
  // --confidence C (0 < C < 1; 0: off) and its parameter draws.
  double confidence = 0;
  bool confidence_given = false;
  int confidence_samples = kDefaultIntervalSamples;
};

// --confidence: the runner also reports "slo_probability" (SloProbability
// over the parsed SLO terms), and the plan gets the term
// slo_probability >= C, so a fleet is met only when that probability is.
absl::Status AddConfidence(const PlanFlags& f, PointRunner& runner, PlanOptions& o) {
  IntervalOptions io;
  io.level = f.confidence;
  io.num_samples = f.confidence_samples;
  if (!(f.confidence > 0 && f.confidence < 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--confidence: %g is out of range (allowed: 0 < C < 1, e.g. 0.9)", f.confidence));
  }
  if (absl::Status st = ValidateIntervalOptions(io); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--confidence-samples: ", f.confidence_samples,
                     " is out of range (allowed: "
                     "2..1000)"));
  }
  std::vector<SloBound> bounds;
  for (const SloTerm& t : o.slo) {
    bounds.push_back(
        {t.metric, t.op == SloTerm::Op::kLe || t.op == SloTerm::Op::kLt, t.threshold});
  }
  uint64_t seed = 0;
  if (!f.seed.empty()) {
    ASSIGN_OR_RETURN(seed, ParseSeed(f.seed));
  }
  runner.run =
      [base = runner.run, bounds, io,
       seed](const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
    ASSIGN_OR_RETURN(std::vector<double> v, base(c));
    ASSIGN_OR_RETURN(double p, SloProbability(c, bounds, io, seed));
    v.push_back(p);
    return v;
  };
  SloTerm term;
  term.text = absl::StrFormat("P(meets every term)>=%g", f.confidence);
  term.metric = "slo_probability";
  term.op = SloTerm::Op::kGe;
  term.threshold = f.confidence;
  o.slo.push_back(term);
  return absl::OkStatus();
}

absl::StatusOr<PlanOptions> BuildOptions(const PlanFlags& f, const PointRunner& runner) {
  PlanOptions o;
  if (!f.config.empty()) {
    ASSIGN_OR_RETURN(const std::string text, ReadTextFile(f.config, "--config"));
    RETURN_IF_ERROR(ParseTextProto(text, f.config, &o.base));
    // plan searches fleets itself: a fleet in the config would be ignored.
    if (o.base.has_fleet()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--config ", f.config,
          ": field fleet: plan chooses the fleet itself (--devices, --max-replicas); "
          "remove it, or evaluate that fleet with `servesim simulate --config ",
          f.config, "`"));
    }
  }
  if (f.rate != 0 && !(f.rate > 0)) {  // 0: not given
    return absl::InvalidArgumentError(absl::StrCat(
        "--request-rate: ", f.rate, " is out of range (allowed: > 0 requests/s)"));
  }
  if (f.devices_given && f.devices.find_first_not_of(", \t") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--devices '", f.devices,
        "': no device named (leave --devices out for every calibrated device)"));
  }
  const bool has_trace = !f.trace.empty(), has_rate = f.rate > 0;
  if (!has_trace && !has_rate && f.config.empty()) {
    return absl::InvalidArgumentError(
        "give a workload: --trace FILE or --request-rate R (> 0)");
  }
  proto::ServerConfig* s = o.base.mutable_server();
  proto::ClientConfig* c = o.base.mutable_client();
  RETURN_IF_ERROR(f.server.ApplyTo(*s));
  std::string devices = f.devices;
  if (!s->device().empty()) {
    const bool both = !f.devices.empty();
    if (both && f.server.device()->count() > 0) {
      return absl::InvalidArgumentError(
          "--device and --devices: give one (--device D searches D alone)");
    }
    if (!both) devices = s->device();
    s->clear_device();  // each candidate fleet sets its own
  }
  if (s->model().empty()) s->set_model("gemma-4-e2b");
  // A trace gives each request's lengths: a length flag beside it would be
  // ignored.
  for (const CLI::Option* o : f.length_flags) {
    if (o->count() > 0 && (has_trace || !c->trace().empty())) {
      return absl::InvalidArgumentError(
          absl::StrCat(o->get_name(), " does not apply with a trace (",
                       has_trace ? "--trace" : "the --config's client.trace",
                       " gives each request's lengths)"));
    }
  }
  const auto flag_given = [&f](size_t i) {
    return i < f.length_flags.size() && f.length_flags[i]->count() > 0;
  };
  if (has_trace) {
    c->set_trace(f.trace);
    c->set_trace_format(f.trace_format);
    if (has_rate) c->set_request_rate(f.rate);  // rescales the trace's timeline
  } else if (has_rate) {
    c->set_request_rate(f.rate);
  }
  // With --request-rate the flags (or their defaults) set the lengths; a --config
  // workload keeps its own unless a flag is given.
  if (!has_trace && c->trace().empty()) {
    if (has_rate || flag_given(0)) c->set_random_input_len(f.input_len);
    if (has_rate || flag_given(1)) c->set_random_output_len(f.output_len);
    if (has_rate || flag_given(2)) c->set_random_range_ratio(f.range_ratio);
  }
  if (f.num_prompts > 0) c->set_num_prompts(f.num_prompts);
  if (f.max_concurrency > 0) c->set_max_concurrency(f.max_concurrency);
  if (!f.seed.empty()) {
    ASSIGN_OR_RETURN(const uint64_t seed, ParseSeed(f.seed));
    c->set_seed(seed);
  }
  if (!f.router.empty()) o.base.mutable_fleet()->set_router(f.router);

  static const char* const kTiers[] = {"on-demand", "spot", "commit-1y", "commit-3y"};
  if (std::find(std::begin(kTiers), std::end(kTiers), f.price) == std::end(kTiers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--price: '", f.price,
                     "' is not a price tier; allowed: on-demand, spot, "
                     "commit-1y, commit-3y"));
  }
  std::vector<std::string> ids;
  if (devices.empty()) {
    // The calibrated devices; an uncalibrated one (priors by rule) only when
    // --devices names it.
    for (const proto::Device& d : EmbeddedDevices())
      if (IsCalibratedDevice(d)) ids.push_back(d.id());
  } else {
    for (absl::string_view d : absl::StrSplit(devices, ',', absl::SkipWhitespace())) {
      if (std::find(ids.begin(), ids.end(), d) != ids.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--devices ", devices, ": '", d, "' is given twice; give each once"));
      }
      ids.emplace_back(d);
    }
  }
  if (ids.empty()) return absl::InvalidArgumentError("--devices: no device given");
  ASSIGN_OR_RETURN(const WeightFormat format,
                   ResolveWeightFormat(s->quantization().empty() ? std::string("none")
                                                                 : s->quantization()));
  {
    std::vector<std::string> kept, skipped;
    for (const std::string& id : ids) {
      absl::StatusOr<proto::Device> dev = FindDevice(id);
      if (!dev.ok()) return dev.status();
      // A fleet whose vLLM build has no kernel for the format cannot start.
      if (absl::Status st = CheckWeightFormat(*dev, format.id); !st.ok()) {
        std::fprintf(stderr, "servesim plan: skipping %s: %s\n", dev->id().c_str(),
                     std::string(st.message()).c_str());
        skipped.push_back(dev->id());
        continue;
      }
      // A device file given by path is planned by its path.
      kept.push_back(IsShippedDevice(*dev) ? dev->id() : id);
    }
    if (kept.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--quantization ", format.id,
          ": no device to plan on can run it (skipped: ", absl::StrJoin(skipped, ", "),
          "); allowed: a device whose weight_formats list it"));
    }
    ids = std::move(kept);
  }
  auto planned = [&ids](const std::string& d) {
    return std::find(ids.begin(), ids.end(), d) != ids.end();
  };
  // Per-device calibration profiles: --calibration DEVICE=FILE, or FILE
  // (its device field names the device); a config's server
  // calibration_profile is taken the same way, for its own device only.
  std::vector<std::pair<std::string, std::string>> profiles;  // device, file
  std::vector<std::string> given = f.calibrations;
  if (!o.base.server().calibration_profile().empty()) {
    given.insert(given.begin(), o.base.server().calibration_profile());
    o.base.mutable_server()->clear_calibration_profile();
  }
  for (const std::string& g : given) {
    const size_t eq = g.find('=');
    std::string device = eq == std::string::npos ? "" : g.substr(0, eq);
    const std::string file = eq == std::string::npos ? g : g.substr(eq + 1);
    ASSIGN_OR_RETURN(proto::CalibrationProfile profile, LoadCalibrationProfile(file));
    if (device.empty()) {
      if (profile.device().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--calibration ", file,
                         ": the profile has no device field; give it as DEVICE=FILE"));
      }
      device = profile.device();
    }
    if (!planned(device)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--calibration ", g, ": device '", device,
          "' is not one of the devices planned (", absl::StrJoin(ids, ", "), ")"));
    }
    if (!profile.device().empty() && profile.device() != device) {
      return absl::InvalidArgumentError(
          absl::StrCat("--calibration ", g, ": the profile was fitted on device '",
                       profile.device(), "', not '", device, "'"));
    }
    for (const auto& [d, other] : profiles) {
      if (d == device) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--calibration: two profiles for ", device, " (", other, ", ", file, ")"));
      }
    }
    profiles.emplace_back(device, file);
  }
  auto profile_of = [&profiles](const std::string& d) {
    for (const auto& [dev, file] : profiles) {
      if (dev == d) return file;
    }
    return std::string();
  };
  // The workload and server flags are checked once, before any fleet is
  // simulated, so bad input is exit 2 rather than "no fleet meets the SLO";
  // on each planned device with its own profile (a profile fitted on one
  // device is refused on another).
  for (const std::string& id : ids) {
    proto::ExperimentConfig probe = o.base;
    probe.mutable_server()->set_device(id);
    probe.mutable_server()->set_calibration_profile(profile_of(id));
    ApplyDefaults(probe);
    RETURN_IF_ERROR(Validate(probe));
    RETURN_IF_ERROR(MakeRouter(probe.fleet().router()).status());
    // Unknown model, quantization or dtype names are errors on any device;
    // whether the model fits is each device's own answer in the search.
    if (absl::StatusOr<Deployment> d = BuildDeployment(ToServerSpec(probe.server()));
        !d.ok() && absl::IsInvalidArgument(d.status())) {
      return d.status();
    }
    if (id == ids.front() && !probe.client().trace().empty()) {
      // Read the trace once: a bad record is an input error, named here.
      ASSIGN_OR_RETURN(std::unique_ptr<RequestSource> src,
                       OpenRequestSource(probe.client()));
      RequestSpec spec;
      while (true) {
        ASSIGN_OR_RETURN(bool more, src->Next(spec));
        if (!more) break;
      }
    }
  }
  // Prices: the user's own (--price-usd-per-hour DEVICE=X) or the cheapest
  // matching listed offer (experiments/capacity/cost.h SelectOffer).
  std::vector<std::pair<std::string, double>> user_prices;
  for (const std::string& g : f.user_prices) {
    const size_t eq = g.find('=');
    double usd = 0;
    if (eq == std::string::npos || eq == 0 ||
        !absl::SimpleAtod(absl::string_view(g).substr(eq + 1), &usd) ||
        !(usd > 0 && usd <= 1e6)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--price-usd-per-hour: '", g,
                       "' is not DEVICE=USD with USD in (0, 1e6] $/h (e.g. l4=0.55)"));
    }
    const std::string device = g.substr(0, eq);
    if (!planned(device)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--price-usd-per-hour ", g, ": device '", device,
          "' is not one of the devices planned (", absl::StrJoin(ids, ", "), ")"));
    }
    for (const auto& [seen, price] : user_prices) {
      if (seen == device) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--price-usd-per-hour ", g, ": device '", device, "' already has a price (",
            price, " $/h); give each device once"));
      }
    }
    user_prices.emplace_back(device, usd);
  }
  const OfferFilter filter{.provider = f.provider, .region = f.region};
  // Tensor parallel sizes per device: the one given (--tensor-parallel-size
  // or the config), else 1 and every larger power of two the device's node
  // holds, the model's heads allow and an instance of that many chips is
  // priced for (or the user's own price covers).
  const bool tp_given = o.base.server().tensor_parallel_size() > 0;
  // Pipeline and data parallelism are not searched: a
  // --pipeline-parallel-size / --data-parallel-size (or the config's) is
  // kept, and a replica is priced at TP x PP x DP chips (DP engines are
  // one server's, on one node, as simulate prices them).
  const int pp = std::max(1, o.base.server().pipeline_parallel_size());
  const int dp = std::max(1, o.base.server().data_parallel_size());
  for (const std::string& id : ids) {
    proto::Device dev = FindDevice(id).value();
    const std::vector<PriceOffer> offers = OffersFromDevice(dev);
    const double* user = nullptr;
    for (const auto& [d, usd] : user_prices) {
      if (d == id) user = &usd;
    }
    std::vector<int> tps;
    if (tp_given) {
      tps.push_back(o.base.server().tensor_parallel_size());
    } else {
      tps.push_back(1);
      for (int k = 2; k <= dev.interconnect().max_devices_per_node(); k *= 2) {
        const bool priced = user != nullptr ||
                            std::any_of(offers.begin(), offers.end(), [&](const auto& x) {
                              return x.num_devices == k * pp * dp && x.usd_per_hour > 0;
                            });
        if (!priced) continue;
        proto::ExperimentConfig probe = o.base;
        probe.mutable_server()->set_device(id);
        probe.mutable_server()->set_tensor_parallel_size(k);
        ApplyDefaults(probe);
        absl::StatusOr<Deployment> d = BuildDeployment(ToServerSpec(probe.server()));
        if (!d.ok() && absl::IsInvalidArgument(d.status())) continue;  // heads, ...
        tps.push_back(k);
      }
    }
    // With the shipped profile, its known gaps (what validate misses).
    std::vector<std::string> known_gaps;
    if (profile_of(id).empty()) {
      absl::StatusOr<ResolvedProfile> prof = ResolveCalibrationProfile("", id);
      if (prof.ok() && prof->found && prof->shipped) {
        known_gaps = ShippedKnownGapNotes(id, prof->profile.software_build());
      }
    }
    for (const int tp : tps) {
      PlanDevice pd;
      pd.device = id;
      pd.calibration_profile = profile_of(id);
      pd.tensor_parallel_size = tp;
      pd.pipeline_parallel_size = pp;
      pd.data_parallel_size = dp;
      pd.known_gaps = known_gaps;
      {
        proto::ExperimentConfig shape = o.base;
        shape.mutable_server()->set_device(id);
        shape.mutable_server()->set_calibration_profile(profile_of(id));
        shape.mutable_server()->set_tensor_parallel_size(tp);
        ApplyDefaults(shape);
        if (absl::StatusOr<Deployment> d = BuildDeployment(ToServerSpec(shape.server()));
            d.ok()) {
          pd.outside_fit = ServerSettingFindings(*d);
          if (d->calibrated)
            pd.fitted_max_input_tokens = d->fitted_range.max_input_tokens();
        }
      }
      const int chips = tp * pp * dp;
      if (user != nullptr) {
        // The user's price is per chip; a replica pays it per chip.
        pd.offer =
            UserOffer(id, *user * chips, offers.empty() ? nullptr : &offers.front());
        pd.offer.num_devices = chips;
      } else {
        // A replica of N chips is priced at an N-chip instance.
        absl::StatusOr<PriceOffer> offer = SelectOfferForDevices(
            offers, dev.id(), f.price, chips, &pd.price_note, filter);
        if (!offer.ok()) {
          if (chips > 1 && !tp_given) continue;  // no such instance at this tier
          return absl::NotFoundError(absl::StrCat("--price ", f.price, ": ",
                                                  offer.status().message(),
                                                  "; give --price-usd-per-hour ", id,
                                                  "=USD or drop it from "
                                                  "--devices"));
        }
        pd.offer = *offer;
      }
      o.devices.push_back(std::move(pd));
    }
  }
  absl::StatusOr<std::vector<SloTerm>> slo = ParseSlo(f.slo, runner.metric_names);
  if (!slo.ok()) return slo.status();
  o.slo = *std::move(slo);
  o.max_replicas = f.max_replicas;
  o.mixed_pairs = !f.no_mixed;
  o.jobs = f.jobs;
  o.busy_hours_per_day = f.busy_hours;
  return o;
}

// Fills PlanGroup::fit for each device group whose replica does not fit
// its device: what would, solved with the memory planner at the group's
// device and tensor parallel size (plan's TP search covers only priced
// powers of two; this names the fewest chips and the longest length).
void AddFitHints(const PlanOptions& o, PlanResult& r) {
  for (PlanGroup& g : r.groups) {
    if (g.chosen >= 0 || g.tensor_parallel_size == 0 || g.candidates.empty() ||
        !r.candidates[g.candidates.front()].does_not_fit) {
      continue;
    }
    const auto d = std::find_if(o.devices.begin(), o.devices.end(), [&](const auto& pd) {
      return PlanDeviceLabel(pd) == g.group;
    });
    if (d == o.devices.end()) continue;
    proto::ExperimentConfig one = FleetExperiment(
        o.base,
        {FleetPart{d->device, 1, d->offer.usd_per_hour, d->tensor_parallel_size,
                   d->pipeline_parallel_size, d->data_parallel_size}},
        o.devices);
    proto::ExperimentConfig tmp;
    *tmp.mutable_server() =
        one.fleet().replicas_size() > 0 ? one.fleet().replicas(0).server() : one.server();
    ApplyDefaults(tmp);
    const ServerSpec spec = ToServerSpec(tmp.server());
    absl::StatusOr<Deployment> dep = BuildDeployment(spec);
    if (!dep.ok()) continue;
    absl::StatusOr<FitHint> hint = WhatFits(spec, dep->scheduler.max_model_len);
    if (!hint.ok()) continue;
    g.fit.known = true;
    g.fit.largest_max_model_len = hint->largest_max_model_len;
    g.fit.smallest_tensor_parallel_size = hint->tensor_parallel_size;
    g.fit.quantizations = hint->quantizations;
  }
}

}  // namespace

void RegisterPlanCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<PlanFlags>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Cheapest fleet per device (and mixed pair) meeting every SLO term on a workload.\n"
      "Each candidate fleet is simulated; the table of candidates is printed, and the\n"
      "fleet one replica smaller than each choice is shown to miss. Exit code 3 when\n"
      "no fleet up to --max-replicas meets the SLO.\n"
      "Example: servesim plan --request-rate 10 --slo 'ttft_p99<=1s' --devices t4,l4 "
      "--price "
      "spot");
  cmd->add_option("--config", f->config,
                  "base ExperimentConfig (text format) to start from");
  cmd->add_option("--trace", f->trace, "workload: replay this trace");
  cmd->add_option("--trace-format", f->trace_format, "trace format (empty: detect)");
  cmd->add_option(
      "--request-rate,--rate", f->rate,
      "workload: Poisson arrivals at R requests/s; with --trace, the trace's\n"
      "timeline rescaled to a mean of R requests/s");
  cmd->add_option("--num-prompts", f->num_prompts,
                  "requests to simulate (trace: the first N)");
  f->length_flags = {cmd->add_option("--random-input-len", f->input_len,
                                     "with --request-rate: prompt tokens"),
                     cmd->add_option("--random-output-len", f->output_len,
                                     "with --request-rate: output tokens"),
                     cmd->add_option("--random-range-ratio", f->range_ratio,
                                     "with --request-rate: length spread")};
  cmd->add_option("--max-concurrency", f->max_concurrency, "client concurrency cap")
      ->check(CLI::Range(1, INT32_MAX));
  cmd->add_option("--seed", f->seed, "client seed");
  cmd->add_option("--slo", f->slo, "e.g. 'ttft_p99<=500ms,tpot_p99<=50ms'")->required();
  f->server.Register(cmd, /*with_calibration=*/false);  // --model default: gemma-4-e2b
  cmd->add_option(
         "--devices", f->devices,
         "comma-separated device ids or device files (default: the calibrated ones)")
      ->each([f](const std::string&) { f->devices_given = true; });
  cmd->add_option("--price", f->price,
                  "price tier: on-demand|spot|commit-1y|commit-3y; each device pays the\n"
                  "cheapest listed offer of that tier or on-demand (named in every row)");
  cmd->add_option("--provider", f->provider,
                  "only offers of this provider (aws-ec2, aws-sagemaker, gce, gcp, ...)");
  cmd->add_option("--region", f->region, "only offers listed for this region");
  cmd->add_option("--price-usd-per-hour", f->user_prices,
                  "DEVICE=USD: your own price per chip-hour for a device (repeatable; "
                  "a\nreplica of TP x PP x DP chips pays that many of it)");
  cmd->add_option("--calibration,--calibration-profile", f->calibrations,
                  "DEVICE=FILE, or FILE (the profile's device field): a calibration\n"
                  "profile (from servesim calibrate) for that device's replicas "
                  "(repeatable)");
  cmd->add_option("--max-replicas", f->max_replicas, "largest fleet to try")
      ->check(CLI::Range(1, 256));
  cmd->add_option(
      "--router", f->router,
      absl::StrCat("round-robin|least-outstanding|vllm-dp|kv-aware|prefix-aware "
                   "(default ",
                   f->router, "; simulate's default is round-robin)"));
  cmd->add_flag("--no-mixed", f->no_mixed, "do not try mixed pairs of devices");
  cmd->add_option("--jobs,-j", f->jobs, "devices searched in parallel")
      ->check(CLI::Range(1, 1024));
  cmd->add_option(
         "--busy-hours", f->busy_hours,
         absl::StrCat("hours a day the workload runs, 1-24 (default ", f->busy_hours,
                      "); below 24 each\n"
                      "chosen fleet's daily bill is shown always on, stopped "
                      "and deleted\nwhen idle (start-up time billed)"))
      ->check(CLI::Range(1, 24));
  CLI::Option* confidence = cmd->add_option(
      "--confidence", f->confidence,
      "C (0 < C < 1): a fleet meets the SLO only when the probability that it meets\n"
      "every term (over calibration parameter draws, with the device's validate\n"
      "errors as a log-normal band) is at least C; the table shows the probability");
  CLI::Option* confidence_samples =
      cmd->add_option("--confidence-samples", f->confidence_samples,
                      WithDefault("parameter draws per candidate for --confidence",
                                  kDefaultIntervalSamples));
  cmd->add_flag("--json", f->json, "print everything as JSON");
  AddProgressFlags(cmd, &f->progress);
  cmd->callback([f, exit_code, confidence, confidence_samples] {
    f->confidence_given = confidence->count() > 0;
    if (confidence_samples->count() > 0 && !f->confidence_given) {
      std::fprintf(
          stderr,
          "servesim plan: error: --confidence-samples: only with --confidence "
          "(it sets the draws a probability of meeting the SLO is taken over)\n");
      *exit_code = kExitBadInput;
      return;
    }
    // A device that does not fit says what would (the fewest chips, ...).
    PointRunner runner = WithFitHints(SimulatorPointRunnerWithClientWait());
    if (f->confidence_given) runner.metric_names.emplace_back("slo_probability");
    absl::StatusOr<PlanOptions> o = BuildOptions(*f, runner);
    if (o.ok() && f->confidence_given) {
      if (absl::Status st = AddConfidence(*f, runner, *o); !st.ok()) o = st;
    }
    if (!o.ok()) {
      std::fprintf(stderr, "servesim plan: error: %s\n",
                   std::string(o.status().message()).c_str());
      *exit_code = kExitBadInput;
      return;
    }
    ProgressLine progress("plan", f->progress);
    std::atomic<int64_t> done = 0;
    if (progress.enabled()) {
      o->on_candidate = [&](const PlanCandidate& c) {
        const int64_t n = ++done;
        progress.Update(absl::StrFormat("%d fleets simulated in %s (last: %s, %s)", n,
                                        FormatDuration(progress.elapsed_s()), c.label,
                                        !c.ran ? "error" : (c.met ? "met" : "miss")));
      };
    }
    absl::StatusOr<PlanResult> r = RunPlan(*o, runner);
    progress.Finish(absl::StrFormat("%d fleets simulated in %s", done.load(),
                                    FormatDuration(progress.elapsed_s())));
    if (!r.ok()) {
      std::fprintf(stderr, "servesim plan: error: %s\n",
                   std::string(r.status().message()).c_str());
      *exit_code = kExitBadInput;
      return;
    }
    AddFitHints(*o, *r);
    const std::string text = f->json ? FormatPlanJson(*o, *r) : FormatPlanText(*o, *r);
    std::fwrite(text.data(), 1, text.size(), stdout);
    // A script can tell "no fleet meets the SLO" from the exit code.
    *exit_code = r->best_group >= 0 ? kExitOk : kExitCheckFailed;
  });
}

}  // namespace servesim::cli
