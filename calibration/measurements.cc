#include "calibration/measurements.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "calibration/embedded_data.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "proto/text_format.h"
#include "sim/base/read_file.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

using servesim::proto::Measurement;
using servesim::proto::MeasurementSet;
using servesim::proto::ServerRun;

absl::StatusOr<MeasurementSet> ParseFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path, "measurement set"));
  MeasurementSet set;
  RETURN_IF_ERROR(ParseTextProto(text, path, &set));
  return set;
}

}  // namespace

std::string MetricName(servesim::proto::Metric m) {
  return absl::AsciiStrToLower(servesim::proto::Metric_Name(m));
}

absl::StatusOr<MeasurementDb> MeasurementDb::FromSets(
    const std::vector<MeasurementSet>& sets, const std::string& origin) {
  return FromNamedSets(sets, std::vector<std::string>(sets.size(), origin));
}

absl::StatusOr<MeasurementDb> MeasurementDb::FromNamedSets(
    const std::vector<MeasurementSet>& sets, const std::vector<std::string>& names) {
  MeasurementDb db;
  std::vector<size_t> set_of;  // measurement index -> the set that holds it
  for (size_t s = 0; s < sets.size(); ++s) {
    const std::string& origin = names.at(s);
    for (const ServerRun& run : sets[s].runs()) {
      if (run.id().empty() || run.device().empty() || run.model().empty()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: run '%s': id, device and model are required", origin, run.id()));
      }
      if (run.sweep_cells_size() > 0 && !run.sweep_reuses_prompt_seed()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: run '%s': sweep_cells is read only with sweep_reuses_prompt_seed: true",
            origin, run.id()));
      }
      for (int k = 0; k < run.sweep_cells_size(); ++k) {
        const servesim::proto::SweepCell& c = run.sweep_cells(k);
        if (c.input_tokens() < 1 || c.max_concurrency() < 1 || c.num_prompts() < 1 ||
            c.output_tokens() < 1) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s: run '%s': sweep_cells[%d] has input_tokens %d, max_concurrency %d, "
              "num_prompts %d, output_tokens %d (each >= 1)",
              origin, run.id(), k, c.input_tokens(), c.max_concurrency(), c.num_prompts(),
              c.output_tokens()));
        }
      }
      if (run.price_usd_per_hour() != 0 &&
          !(std::isfinite(run.price_usd_per_hour()) && run.price_usd_per_hour() > 0)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: run '%s': field price_usd_per_hour: %g must be finite and > 0 (0: none)",
            origin, run.id(), run.price_usd_per_hour()));
      }
      if (!db.run_index_.emplace(run.id(), db.runs_.size()).second) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: run id '%s' appears twice", origin, run.id()));
      }
      db.runs_.push_back(run);
    }
  }
  absl::flat_hash_map<std::string, std::string> cells;  // measurement key -> id
  for (size_t s = 0; s < sets.size(); ++s) {
    const std::string& origin = names.at(s);
    for (const Measurement& m : sets[s].measurements()) {
      const std::string where = absl::StrFormat("%s: measurement '%s'", origin, m.id());
      if (m.id().empty())
        return absl::InvalidArgumentError(origin + ": a measurement has no id");
      if (!db.run_index_.count(m.run())) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: field run: unknown run '%s'", where, m.run()));
      }
      if (m.metric() == servesim::proto::METRIC_UNSPECIFIED) {
        return absl::InvalidArgumentError(where + ": field metric is required");
      }
      if (!servesim::proto::Metric_IsValid(m.metric())) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: field metric: %d is not a Metric (proto/calibration.proto)", where,
            static_cast<int>(m.metric())));
      }
      const bool zero_ok =
          m.infeasible() || m.metric() == servesim::proto::FITS_IN_MEMORY;
      if (!std::isfinite(m.value()) || m.value() < 0 || (!zero_ok && m.value() == 0)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: field value: %g must be finite and > 0 (0 only for infeasible cells and "
            "FITS_IN_MEMORY)",
            where, m.value()));
      }
      // A cell not run has no value; a loaded/not-loaded flag is 0 or 1; any
      // other measured quantity (tok/s, ms, USD, tokens, a ratio) lies in
      // [1e-6, 1e12], so a typo never turns into a 300-digit error.
      if (m.infeasible() && m.value() != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: field value: %g with infeasible: true (a cell that was not run has "
            "value 0)",
            where, m.value()));
      }
      if (m.metric() == servesim::proto::FITS_IN_MEMORY && m.value() != 0 &&
          m.value() != 1) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: field value: %g for FITS_IN_MEMORY must be 0 (failed to load) or 1 "
            "(loaded)",
            where, m.value()));
      }
      if (m.value() != 0 &&
          (m.value() < kMinMeasuredValue || m.value() > kMaxMeasuredValue)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: field value: %g is out of range [%g, %g] (or 0 where allowed)", where,
            m.value(), kMinMeasuredValue, kMaxMeasuredValue));
      }
      if (!(m.tolerance_pct() >= 0 && std::isfinite(m.tolerance_pct())) ||
          !(m.rel_sigma() >= 0 && std::isfinite(m.rel_sigma()))) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: tolerance_pct (%g) and rel_sigma (%g) must be finite and >= 0", where,
            m.tolerance_pct(), m.rel_sigma()));
      }
      if (m.price_usd_per_hour() != 0 &&
          !(std::isfinite(m.price_usd_per_hour()) && m.price_usd_per_hour() > 0)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: field price_usd_per_hour: %g must be finite and > 0 (0: the run's)",
            where, m.price_usd_per_hour()));
      }
      // Every fit evaluation re-simulates each cell: a count far beyond a
      // benchmark's turns a fit into hours (3 ms a prompt a fit, measured).
      if (m.client().num_prompts() < 0 || m.client().num_prompts() > kMaxCellPrompts) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: client.num_prompts: %d is out of range [0, %d] (0: max(8, 2 x "
            "max_concurrency); a larger benchmark: keep a subset of its requests)",
            where, m.client().num_prompts(), kMaxCellPrompts));
      }
      if (!db.measurement_index_.emplace(m.id(), db.measurements_.size()).second) {
        return absl::InvalidArgumentError(where + ": id appears twice");
      }
      // A measurement appears once: the same run, metric, client method,
      // price and value under a second id (a copied row or file) would count
      // twice in the fit and in every MAPE. Repetitions of one cell differ in
      // value and are kept.
      std::string cell = absl::StrCat(m.run(), "\n", static_cast<int>(m.metric()), "\n",
                                      m.value(), "\n", m.price_usd_per_hour(), "\n",
                                      absl::StrJoin(m.depends_on(), ","), "\n");
      m.client().AppendToString(&cell);
      if (auto [it, fresh] = cells.emplace(std::move(cell), m.id()); !fresh) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: the same measurement as '%s' (run, metric, client, price and value "
            "alike); give a measurement once",
            where, it->second));
      }
      db.measurements_.push_back(m);
      set_of.push_back(s);
    }
  }
  for (size_t i = 0; i < db.measurements_.size(); ++i) {
    const Measurement& m = db.measurements_[i];
    for (const std::string& dep : m.depends_on()) {
      if (!db.measurement_index_.count(dep)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: measurement '%s': field depends_on: unknown measurement '%s'",
            names.at(set_of[i]), m.id(), dep));
      }
    }
  }
  return db;
}

absl::StatusOr<MeasurementDb> MeasurementDb::Load(const std::vector<std::string>& paths) {
  std::vector<MeasurementSet> sets;
  for (const std::string& p : paths) {
    ASSIGN_OR_RETURN(MeasurementSet s, ParseFile(p));
    sets.push_back(std::move(s));
  }
  return FromNamedSets(sets, paths);
}

absl::StatusOr<MeasurementDb> MeasurementDb::LoadDir(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".textproto") paths.push_back(entry.path().string());
  }
  if (ec) return absl::NotFoundError(absl::StrFormat("%s: %s", dir, ec.message()));
  if (paths.empty()) {
    return absl::NotFoundError(absl::StrFormat("%s: no *.textproto data files", dir));
  }
  std::sort(paths.begin(), paths.end());
  return Load(paths);
}

absl::StatusOr<MeasurementDb> MeasurementDb::LoadShipped() {
  std::vector<MeasurementSet> sets;
  std::vector<std::string> names;
  for (int i = 0; i < internal::kNumEmbeddedMeasurementFiles; ++i) {
    const internal::EmbeddedFile& f = internal::kEmbeddedMeasurementFiles[i];
    if (f.name[0] == '\0') continue;
    names.push_back(absl::StrFormat("%s/%s", kDefaultDataDir, f.name));
    MeasurementSet set;
    RETURN_IF_ERROR(ParseTextProto(f.text, names.back(), &set));
    sets.push_back(std::move(set));
  }
  if (sets.empty()) {
    return absl::NotFoundError(absl::StrFormat(
        "%s: no data files were embedded in this build", kDefaultDataDir));
  }
  return FromNamedSets(sets, names);
}

absl::StatusOr<MeasurementDb> MeasurementDb::LoadNamed(const std::string& dir) {
  return dir == kDefaultDataDir ? LoadShipped() : LoadDir(dir);
}

const ServerRun* MeasurementDb::FindRun(const std::string& id) const {
  auto it = run_index_.find(id);
  return it == run_index_.end() ? nullptr : &runs_[it->second];
}

const Measurement* MeasurementDb::FindMeasurement(const std::string& id) const {
  auto it = measurement_index_.find(id);
  return it == measurement_index_.end() ? nullptr : &measurements_[it->second];
}

ServerSpec MeasurementDb::SpecOf(const ServerRun& run) {
  ServerSpec s;
  s.device = run.device();
  s.model = run.model();
  s.dtype = run.dtype().empty() ? "auto" : run.dtype();
  s.quantization = run.quantization().empty() ? "none" : run.quantization();
  s.max_model_len = run.max_model_len();
  // 0: unset (vLLM's default); a negative or NaN value reaches the range
  // check (it read as the default).
  if (run.gpu_memory_utilization() != 0)
    s.gpu_memory_utilization = run.gpu_memory_utilization();
  s.max_num_seqs = run.max_num_seqs();
  s.max_num_batched_tokens = run.max_num_batched_tokens();
  s.enable_prefix_caching = run.enable_prefix_caching();
  s.async_scheduling = run.async_scheduling();
  s.tensor_parallel_size = std::max(1, run.tensor_parallel_size());
  if (!run.kv_cache_dtype().empty()) s.kv_cache_dtype = run.kv_cache_dtype();
  return s;
}

ServerSpec MeasurementDb::WithLoggedMemory(const ServerRun& run) {
  ServerSpec s = SpecOf(run);
  if (run.has_kv_cache_gib()) s.measured_kv_cache_gib = run.kv_cache_gib();
  if (run.has_weights_gib()) s.measured_weights_gib = run.weights_gib();
  if (run.has_activation_peak_gib())
    s.measured_activation_peak_gib = run.activation_peak_gib();
  if (run.has_cuda_graph_gib()) s.measured_cuda_graph_gib = run.cuda_graph_gib();
  return s;
}

}  // namespace servesim
