#include "hwmodels/catalog_priors.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/catalog.h"
#include "hwmodels/step_model.h"
#include "sim/base/median.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

// The priors a calibrated device carries into the mean (see the header).
bool RuleKey(const std::string& k) { return k != "attn_unit_gbs" && k != "attn_units"; }

}  // namespace

bool TransfersAcrossDevices(std::string_view name) {
  if (name == "gemm_w_half") return true;
  const StepParameterSpec* spec = FindStepParameter(name);
  return spec != nullptr && std::string_view(spec->unit) == "fraction";
}

bool IsShippedDevice(const proto::Device& device) {
  for (const proto::Device& d : EmbeddedDevices()) {
    if (d.id() == device.id()) return d.content_hash() == device.content_hash();
  }
  return false;
}

namespace {

// The shipped profile of a device id, if one is shipped.
absl::StatusOr<ResolvedProfile> ShippedProfile(const std::string& id) {
  return ResolveCalibrationProfile("", id);
}

}  // namespace

bool IsCalibratedDevice(const proto::Device& device) {
  if (!IsShippedDevice(device)) return false;
  absl::StatusOr<ResolvedProfile> prof = ShippedProfile(device.id());
  return prof.ok() && prof->found;
}

std::string LeaveOneDeviceOutError(const std::vector<std::string>& from) {
  // family -> (mape, device) of each source device's entry.
  std::map<std::string, std::vector<std::pair<double, std::string>>> by_family;
  for (const std::string& id : from) {
    absl::StatusOr<ResolvedProfile> prof = ShippedProfile(id);
    if (!prof.ok() || !prof->found) continue;
    for (const auto& e : prof->profile.structural_errors()) {
      if (e.pass() == "leave_one_device_out" && e.num_points() > 0)
        by_family[e.family()].emplace_back(e.mape(), id);
    }
  }
  if (by_family.empty()) return "";
  std::vector<std::string> parts;
  for (const char* family : {"throughput", "ttft", "tpot"}) {
    auto it = by_family.find(family);
    if (it == by_family.end()) continue;
    const auto [lo, hi] = std::minmax_element(it->second.begin(), it->second.end());
    parts.push_back(lo->second == hi->second
                        ? absl::StrFormat("%s %.1f%% (%s)", family, lo->first, lo->second)
                        : absl::StrFormat("%s %.1f%% (%s) to %.1f%% (%s)", family,
                                          lo->first, lo->second, hi->first, hi->second));
  }
  return absl::StrCat(absl::StrJoin(parts, "; "),
                      " (leave-one-device-out MAPE of `servesim validate`: each of ",
                      absl::StrJoin(from, ", "), " predicted from the other devices)");
}

absl::StatusOr<PriorsByRule> DerivePriorsByRule(const proto::Device& device) {
  struct Member {
    proto::Device device;
    std::map<std::string, double> fitted;  // profile values by name
  };
  std::vector<Member> all;
  for (const proto::Device& d : EmbeddedDevices()) {
    ASSIGN_OR_RETURN(ResolvedProfile prof, ShippedProfile(d.id()));
    if (!prof.found) continue;
    Member m{d, {}};
    for (const auto& p : prof.profile.parameters()) m.fitted[p.name()] = p.value();
    all.push_back(std::move(m));
  }
  std::vector<const Member*> cls;
  for (const Member& m : all)
    if (m.device.vendor() == device.vendor()) cls.push_back(&m);
  const bool same_vendor = !cls.empty();
  if (!same_vendor)
    for (const Member& m : all) cls.push_back(&m);

  PriorsByRule out;
  out.device = device;
  for (const Member* m : cls) out.from.push_back(m->device.id());
  std::sort(out.from.begin(), out.from.end());
  if (cls.empty()) {
    out.note =
        absl::StrCat("device ", device.id(),
                     " is not calibrated and no calibrated device exists: "
                     "step-model priors are the defaults of hwmodels/step_model.cc");
    return out;
  }
  // Mean over the class of each calibrated value.
  std::map<std::string, std::pair<double, int>> sums;
  for (const Member* m : cls) {
    for (const auto& [k, v] : m->device.param_priors()) {
      if (!RuleKey(k)) continue;
      const bool quant = absl::StartsWith(k, "quant_kernel_eff.");
      auto it = m->fitted.find(k);
      const double value = !quant && it != m->fitted.end() ? it->second : v;
      sums[k].first += value;
      sums[k].second += 1;
    }
  }
  // What every shipped profile fits, by parameter (the leave-one-device-
  // out rule's sources), with the profiles' names.
  std::map<std::string, std::vector<double>> fitted_all;
  std::set<std::string> median_from;
  for (const std::string& name : ShippedProfileNames()) {
    ASSIGN_OR_RETURN(ResolvedProfile prof, ResolveCalibrationProfile(name, ""));
    if (!prof.found) continue;
    for (const auto& p : prof.profile.parameters()) {
      if (!TransfersAcrossDevices(p.name())) continue;
      fitted_all[p.name()].push_back(p.value());
      median_from.insert(prof.profile.device());
    }
  }
  auto* priors = out.device.mutable_param_priors();
  for (const auto& [k, sn] : sums) {
    if (priors->contains(k)) continue;  // the file's own prior wins
    auto it = fitted_all.find(k);
    if (it != fitted_all.end()) {
      (*priors)[k] = Median(it->second);
      out.median_keys.push_back(k);
    } else {
      (*priors)[k] = sn.first / sn.second;
    }
    out.keys.push_back(k);
  }
  if (!out.median_keys.empty())
    out.median_from.assign(median_from.begin(), median_from.end());
  // Decode attention without split-KV: only when the whole class has it.
  const bool all_unit = std::all_of(cls.begin(), cls.end(), [](const Member* m) {
    return m->device.param_priors().contains("attn_unit_gbs");
  });
  if (all_unit && !priors->contains("attn_unit_gbs") && device.compute_units() > 0) {
    double s = 0;
    for (const Member* m : cls) {
      auto it = m->fitted.find("attn_unit_gbs");
      s += it != m->fitted.end() ? it->second
                                 : m->device.param_priors().at("attn_unit_gbs");
    }
    (*priors)["attn_unit_gbs"] = s / cls.size();
    (*priors)["attn_units"] = device.compute_units();
    out.keys.emplace_back("attn_unit_gbs");
    out.keys.emplace_back("attn_units");
  }
  // Memory-planner overheads left at 0.
  auto mean_field = [&](double (proto::Device::*get)() const) {
    double s = 0;
    for (const Member* m : cls) s += (m->device.*get)();
    return s / cls.size();
  };
  if (device.non_torch_gib() == 0) {
    out.device.set_non_torch_gib(mean_field(&proto::Device::non_torch_gib));
    out.keys.emplace_back("non_torch_gib");
  }
  if (device.graph_capture() && device.cuda_graph_gib_per_layer() == 0) {
    out.device.set_cuda_graph_gib_per_layer(
        mean_field(&proto::Device::cuda_graph_gib_per_layer));
    out.keys.emplace_back("cuda_graph_gib_per_layer");
  }
  std::sort(out.keys.begin(), out.keys.end());
  // Every device whose values the rule used: what each of them shows
  // predicted from the others is the error to expect.
  std::set<std::string> sources(out.from.begin(), out.from.end());
  sources.insert(out.median_from.begin(), out.median_from.end());
  const std::string err =
      LeaveOneDeviceOutError(std::vector<std::string>(sources.begin(), sources.end()));
  if (out.keys.empty()) {
    out.note = absl::StrCat(
        "device ", device.id(), " (", device.origin(),
        ") is not calibrated: its file sets every step-model prior itself (the rule "
        "that fills in the priors of an uncalibrated device from the calibrated ones "
        "sets none); calibrate it with `servesim calibrate --device ",
        IsShippedDevice(device) ? device.id() : device.origin(), " --bench FILE...`");
    return out;
  }
  out.note = absl::StrCat(
      "device ", device.id(), " (", device.origin(),
      ") is not calibrated: its step-model priors come by rule",
      out.median_keys.empty()
          ? ""
          : absl::StrCat(": ", absl::StrJoin(out.median_keys, ", "),
                         " the median of the values the shipped profiles of ",
                         absl::StrJoin(out.median_from, ", "),
                         " fit (validate's leave-one-device-out rule); the rest"),
      " from the calibrated ",
      same_vendor ? absl::StrCat(device.vendor(), " devices ")
                  : absl::StrCat("devices (none is ", device.vendor(), ") "),
      absl::StrJoin(out.from, ", "), " (mean of their fitted values; ", out.keys.size(),
      " set in all: ", absl::StrJoin(out.keys, ", "), "); expected error: ",
      err.empty() ? "not measured (no leave-one-device-out error in the profiles of "
                    "the devices above)"
                  : err,
      ". Calibrate it with `servesim calibrate --device ", device.origin(),
      " --bench FILE...`");
  if (IsShippedDevice(device)) {
    // A shipped file is named by its id.
    const std::string from = absl::StrCat("--device ", device.origin());
    const size_t at = out.note.rfind(from);
    if (at != std::string::npos)
      out.note.replace(at, from.size(), absl::StrCat("--device ", device.id()));
  }
  return out;
}

}  // namespace servesim
