// servesim plan: the cheapest fleet per device (and mixed pair) that meets
// an SLO on a workload, with the candidates tried. See experiments/plan.h.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "experiments/cli.h"
#include "experiments/cost.h"
#include "experiments/plan.h"
#include "experiments/run_experiment.h"
#include "experiments/server_flags.h"
#include "experiments/sweep.h"
#include "google/protobuf/text_format.h"
#include "hwmodels/catalog.h"
#include "hwmodels/deployment.h"
#include "sim/router.h"
#include "sim/status_macros.h"

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
  int max_concurrency = 0;
  uint64_t seed = 0;
  std::string slo;
  std::string model = "gemma-4-e2b";
  std::string quantization;
  std::string dtype;
  int max_model_len = 0;
  std::string devices;
  std::string price = "on-demand";
  int max_replicas = 8;
  std::string router = "least-outstanding";
  bool no_mixed = false;
  int jobs = 1;
  int busy_hours = 24;
  bool json = false;
};

absl::StatusOr<PlanOptions> BuildOptions(const PlanFlags& f, const PointRunner& runner) {
  PlanOptions o;
  if (!f.config.empty()) {
    std::ifstream in(f.config);
    if (!in)
      return absl::NotFoundError(absl::StrCat("--config ", f.config, ": cannot open"));
    std::stringstream ss;
    ss << in.rdbuf();
    if (!google::protobuf::TextFormat::ParseFromString(ss.str(), &o.base)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--config ", f.config, ": not a text-format ExperimentConfig"));
    }
  }
  const bool has_trace = !f.trace.empty(), has_rate = f.rate > 0;
  if (!has_trace && !has_rate && f.config.empty()) {
    return absl::InvalidArgumentError("give a workload: --trace FILE or --rate R (> 0)");
  }
  proto::ServerConfig* s = o.base.mutable_server();
  proto::ClientConfig* c = o.base.mutable_client();
  if (!f.model.empty() && (f.config.empty() || s->model().empty())) s->set_model(f.model);
  if (!f.quantization.empty()) s->set_quantization(f.quantization);
  if (!f.dtype.empty()) s->set_dtype(f.dtype);
  if (f.max_model_len > 0) s->set_max_model_len(f.max_model_len);
  if (has_trace) {
    c->set_trace(f.trace);
    c->set_trace_format(f.trace_format);
    if (has_rate) c->set_request_rate(f.rate);  // rescales the trace's timeline
  } else if (has_rate) {
    c->set_request_rate(f.rate);
    c->set_random_input_len(f.input_len);
    c->set_random_output_len(f.output_len);
    c->set_random_range_ratio(f.range_ratio);
  }
  if (f.num_prompts > 0) c->set_num_prompts(f.num_prompts);
  if (f.max_concurrency > 0) c->set_max_concurrency(f.max_concurrency);
  if (f.seed != 0) c->set_seed(f.seed);
  if (!f.router.empty()) o.base.mutable_fleet()->set_router(f.router);

  if (f.max_model_len < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-model-len: ", f.max_model_len,
                     " is out of range [1, 2^31) (omit: the "
                     "model's limit)"));
  }
  static const char* const kTiers[] = {"on-demand", "spot", "commit-1y", "commit-3y"};
  if (std::find(std::begin(kTiers), std::end(kTiers), f.price) == std::end(kTiers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--price: '", f.price,
                     "' is not a price tier; allowed: on-demand, spot, "
                     "commit-1y, commit-3y"));
  }
  // The workload and server flags are checked once, before any fleet is
  // simulated, so bad input is exit 2 rather than "no fleet meets the SLO".
  {
    proto::ExperimentConfig probe = o.base;
    probe.mutable_server()->set_device("l4");  // any device: device-free checks
    ApplyDefaults(probe);
    RETURN_IF_ERROR(Validate(probe));
    RETURN_IF_ERROR(MakeRouter(probe.fleet().router()).status());
    // Unknown model, quantization or dtype names are errors on any device;
    // whether the model fits is each device's own answer in the search.
    if (absl::StatusOr<Deployment> d = BuildDeployment(ToServerSpec(probe.server()));
        !d.ok() && absl::IsInvalidArgument(d.status())) {
      return d.status();
    }
    if (!probe.client().trace().empty()) {
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
  std::vector<std::string> ids;
  if (f.devices.empty()) {
    ids = DeviceIds();
  } else {
    for (absl::string_view d : absl::StrSplit(f.devices, ',', absl::SkipWhitespace())) {
      ids.emplace_back(d);
    }
  }
  for (const std::string& id : ids) {
    absl::StatusOr<proto::Device> dev = FindDevice(id);
    if (!dev.ok()) return dev.status();
    PlanDevice pd;
    pd.device = dev->id();
    // A replica of --tensor-parallel-size N is priced at an N-chip instance.
    absl::StatusOr<PriceOffer> offer = SelectOfferForDevices(
        OffersFromDevice(*dev), dev->id(), f.price,
        std::max(1, o.base.server().tensor_parallel_size()), &pd.price_note);
    if (!offer.ok()) return offer.status();
    pd.offer = *offer;
    o.devices.push_back(std::move(pd));
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

}  // namespace

void RegisterPlanCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<PlanFlags>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Cheapest fleet per device (and mixed pair) meeting every SLO term on a workload.\n"
      "Each candidate fleet is simulated; the table of candidates is printed, and the\n"
      "fleet one replica smaller than each choice is shown to miss. Exit code 3 when\n"
      "no fleet up to --max-replicas meets the SLO.\n"
      "Example: servesim plan --rate 10 --slo 'ttft_p99<=1s' --devices t4,l4 --price "
      "spot");
  cmd->add_option("--config", f->config,
                  "base ExperimentConfig (text format) to start from");
  cmd->add_option("--trace", f->trace, "workload: replay this trace");
  cmd->add_option("--trace-format", f->trace_format, "trace format (empty: detect)");
  cmd->add_option(
      "--rate,--request-rate", f->rate,
      "workload: Poisson arrivals at R requests/s; with --trace, the trace's\n"
      "timeline rescaled to a mean of R requests/s");
  cmd->add_option("--num-prompts", f->num_prompts,
                  "requests to simulate (trace: the first N)");
  cmd->add_option("--random-input-len", f->input_len, "with --rate: prompt tokens");
  cmd->add_option("--random-output-len", f->output_len, "with --rate: output tokens");
  cmd->add_option("--random-range-ratio", f->range_ratio, "with --rate: length spread");
  cmd->add_option("--max-concurrency", f->max_concurrency, "client concurrency cap")
      ->check(CLI::Range(1, INT32_MAX));
  cmd->add_option("--seed", f->seed, "client seed");
  cmd->add_option("--slo", f->slo, "e.g. 'ttft_p99<=500ms,tpot_p99<=50ms'")->required();
  cmd->add_option("--model", f->model, "model id (default gemma-4-e2b)");
  cmd->add_option("--quantization", f->quantization, "none|fp8|w8a8|w4a16|w4a16-emb4");
  cmd->add_option("--dtype", f->dtype, "bf16|fp16|auto");
  cmd->add_option("--max-model-len", f->max_model_len, "max model length");
  cmd->add_option("--devices", f->devices, "comma-separated devices (default: all)");
  cmd->add_option("--price", f->price, "price tier: on-demand|spot|commit-1y|commit-3y");
  cmd->add_option("--max-replicas", f->max_replicas, "largest fleet to try")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--router", f->router,
                  "round-robin|least-outstanding|kv-aware|prefix-aware (default "
                  "least-outstanding; simulate's default is round-robin)");
  cmd->add_flag("--no-mixed", f->no_mixed, "do not try mixed pairs of devices");
  cmd->add_option("--jobs,-j", f->jobs, "devices searched in parallel")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--busy-hours", f->busy_hours,
                  "hours a day the workload runs (1-24, default 24); below 24 each\n"
                  "chosen fleet's daily bill is shown always on, stopped and deleted\n"
                  "when idle (start-up time billed)")
      ->check(CLI::Range(1, 24));
  cmd->add_flag("--json", f->json, "print everything as JSON");
  cmd->callback([f, exit_code] {
    const PointRunner runner = SimulatorPointRunner();
    absl::StatusOr<PlanOptions> o = BuildOptions(*f, runner);
    if (!o.ok()) {
      std::fprintf(stderr, "servesim plan: %s\n",
                   std::string(o.status().message()).c_str());
      *exit_code = kExitBadInput;
      return;
    }
    absl::StatusOr<PlanResult> r = RunPlan(*o, runner);
    if (!r.ok()) {
      std::fprintf(stderr, "servesim plan: %s\n",
                   std::string(r.status().message()).c_str());
      *exit_code = kExitBadInput;
      return;
    }
    const std::string text = f->json ? FormatPlanJson(*o, *r) : FormatPlanText(*o, *r);
    std::fwrite(text.data(), 1, text.size(), stdout);
    // A script can tell "no fleet meets the SLO" from the exit code.
    *exit_code = r->best_group >= 0 ? kExitOk : kExitCheckFailed;
  });
}

}  // namespace servesim::cli
