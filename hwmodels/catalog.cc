#include "hwmodels/catalog.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "hwmodels/embedded_data.h"
#include "hwmodels/model_arch.h"
#include "hwmodels/step_model.h"
#include "proto/text_format.h"
#include "sim/base/hash.h"
#include "sim/base/read_file.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::TextFormat;
using internal::EmbeddedFile;

// "google/gemma-4-E2B-it" -> "gemma-4-e2b".
std::string NormalizeModelName(std::string_view name) {
  std::string s = absl::AsciiStrToLower(std::string(name));
  const size_t slash = s.rfind('/');
  if (slash != std::string::npos) s = s.substr(slash + 1);
  if (absl::EndsWith(s, "-it")) s.resize(s.size() - 3);
  return s;
}

bool FileExists(const std::string& path) {
  std::ifstream in(path);
  return in.good();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const char* flag) {
  absl::StatusOr<std::string> text = ReadTextFile(path, absl::StrCat(flag, ":"));
  // A missing file is a bad flag value here (exit 2), as every other input.
  if (absl::IsNotFound(text.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", path, ": file not found or not readable"));
  }
  if (!text.ok()) return absl::InvalidArgumentError(text.status().message());
  return text;
}

// A name is a file path when it names a text proto or has a folder in it.
bool LooksLikePath(const std::string& s) {
  return absl::EndsWith(s, ".textproto") || absl::EndsWith(s, ".txtpb") ||
         absl::EndsWith(s, ".pbtxt") || absl::EndsWith(s, ".json") ||
         absl::StrContains(s, "/");
}

// "FILE:LINE: " for the `index`-th value of top-level field `name` (or of
// the whole file when the field is absent).
std::string Where(const std::string& origin, const google::protobuf::Descriptor* desc,
                  const TextFormat::ParseInfoTree& tree, const std::string& name,
                  int index = -1) {
  const FieldDescriptor* fd = desc->FindFieldByName(name);
  if (fd != nullptr) {
    const auto loc = tree.GetLocation(fd, fd->is_repeated() ? std::max(index, 0) : -1);
    if (loc.line >= 0) return absl::StrCat(origin, ":", loc.line + 1, ": ");
  }
  return absl::StrCat(origin, ": ");
}

constexpr double kGib = 1024.0 * 1024.0 * 1024.0;

const char* const kWeightFormats[] = {"none",  "fp8",        "w8a8",
                                      "w4a16", "w4a16-emb4", "mxfp4"};
const char* const kDtypes[] = {"fp16", "bf16", "fp8", "int8"};
const char* const kVendors[] = {"nvidia", "amd", "google", "intel", "aws", "other"};
const char* const kPriceTiers[] = {"on-demand", "spot", "commit-1y", "commit-3y"};
// Architectures whose matrix units have no fp8 (vendor whitepapers: Turing
// and Ampere tensor cores, CDNA2 matrix cores, TPU MXUs before Ironwood).
const char* const kNoFp8Architectures[] = {"volta",   "turing",  "ampere",
                                           "cdna1",   "cdna2",   "tpu-v4",
                                           "tpu-v5e", "tpu-v5p", "tpu-v6e"};
const char* const kArchitectures[] = {
    "volta", "turing", "ampere", "ada",     "hopper",  "blackwell", "cdna1",  "cdna2",
    "cdna3", "cdna4",  "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e",   "tpu-v7", "other"};
// Kernels a quantized weight format runs (WeightFormat::kernel), each with
// its own "quant_kernel_eff.<kernel>" prior.
const char* const kQuantKernels[] = {"marlin", "fp8", "int8"};

template <size_t N>
bool In(const char* const (&set)[N], std::string_view v) {
  for (const char* s : set)
    if (v == s) return true;
  return false;
}
template <size_t N>
std::string Join(const char* const (&set)[N]) {
  return absl::StrJoin(set, ", ");
}

// The step parameter a param_priors key sets: the key is a name of the
// step-parameter table (StepParameterTable), or for a per-kernel entry
// (StepParameterWhen::kQuantized) "<name>.<kernel>". nullptr if none.
const StepParameterSpec* PriorKeyParameter(std::string_view key) {
  for (const StepParameterSpec& p : StepParameterTable()) {
    const std::string_view name = p.name;
    if (p.when != StepParameterWhen::kQuantized) {
      if (key == name) return &p;
    } else if (key.size() > name.size() + 1 && key.substr(0, name.size()) == name &&
               key[name.size()] == '.' &&
               In(kQuantKernels, key.substr(name.size() + 1))) {
      return &p;
    }
  }
  return nullptr;
}

// The keys PriorKeyParameter accepts, for an error message.
std::string AllowedPriorKeys() {
  std::vector<std::string> keys;
  for (const StepParameterSpec& p : StepParameterTable()) {
    keys.push_back(p.when == StepParameterWhen::kQuantized
                       ? absl::StrCat(p.name, ".{", Join(kQuantKernels), "}")
                       : std::string(p.name));
  }
  return absl::StrJoin(keys, ", ");
}

}  // namespace

std::string ContentHash(std::string_view bytes) {
  return absl::StrFormat("fnv1a64:%016x", Fnv1a64Hash(bytes));
}

std::string DevicePerformanceHash(const proto::Device& device) {
  proto::Device d = device;
  d.clear_name();
  d.clear_aliases();
  d.clear_prices();
  d.clear_startup_to_ready_s();
  d.clear_startup_source();
  d.clear_sources();
  d.clear_usable_memory_rule();
  d.clear_origin();
  d.clear_content_hash();
  d.clear_file_hash();
  // Text format prints fields in number order and map entries by key:
  // one text per content, whatever the file's order or comments.
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintToString(d, &text);
  return absl::StrFormat("perf-fnv1a64:%016x", Fnv1a64Hash(text));
}

absl::Status ValidateDevice(const proto::Device& d, const std::string& origin,
                            const google::protobuf::TextFormat::ParseInfoTree* tree) {
  const auto* desc = proto::Device::descriptor();
  TextFormat::ParseInfoTree empty;
  const TextFormat::ParseInfoTree& t = tree != nullptr ? *tree : empty;
  auto bad = [&](const std::string& field, const std::string& what, int index = -1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(origin, desc, t, field, index), "field ", field, ": ", what));
  };
  auto missing = [&](const std::string& field, const std::string& what) {
    // In the file with the zero value (0, ""): name its line and the value.
    const std::string where = Where(origin, desc, t, field);
    if (where != absl::StrCat(origin, ": ")) {
      const FieldDescriptor* fd = desc->FindFieldByName(field);
      const bool text = fd != nullptr && fd->type() == FieldDescriptor::TYPE_STRING;
      return absl::InvalidArgumentError(
          absl::StrCat(where, "field ", field, ": ", text ? "\"\"" : "0",
                       " is out of range (required: ", what, ")"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": field ", field, " is missing (required: ", what, ")"));
  };
  // A finite number in [lo, hi] (lo 0: in (0, hi]), or 0 when `optional`.
  auto range_from = [&](const char* field, double v, double lo, double hi,
                        const char* unit, bool optional) -> absl::Status {
    if (optional && v == 0) return absl::OkStatus();
    if (!(std::isfinite(v) && v > 0 && v >= lo && v <= hi)) {
      return bad(field,
                 absl::StrCat(v, " is out of range (allowed: ", unit, " in ",
                              lo > 0 ? absl::StrCat("[", lo) : std::string("(0"), ", ",
                              hi, "]", optional ? ", or 0/absent" : "", ")"));
    }
    return absl::OkStatus();
  };
  auto range = [&](const char* field, double v, double hi, const char* unit,
                   bool optional) { return range_from(field, v, 0, hi, unit, optional); };
  if (!d.origin().empty() || !d.content_hash().empty() || !d.file_hash().empty()) {
    return bad(!d.origin().empty()         ? "origin"
               : !d.content_hash().empty() ? "content_hash"
                                           : "file_hash",
               "is set by the catalog when it loads a file; remove it");
  }
  if (d.id().empty()) return missing("id", "a lower-case name such as \"h100-sxm\"");
  for (char c : d.id()) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '.' ||
          c == '_')) {
      return bad("id", absl::StrCat("'", d.id(),
                                    "' has a character outside [a-z0-9._-] (allowed: "
                                    "lower-case letters, digits, '-', '.', '_')"));
    }
  }
  if (d.vendor().empty()) return missing("vendor", Join(kVendors));
  if (!In(kVendors, d.vendor()))
    return bad("vendor",
               absl::StrCat("'", d.vendor(), "' (allowed: ", Join(kVendors), ")"));
  if (d.architecture().empty()) return missing("architecture", Join(kArchitectures));
  if (!In(kArchitectures, d.architecture())) {
    return bad("architecture", absl::StrCat("'", d.architecture(),
                                            "' (allowed: ", Join(kArchitectures), ")"));
  }
  // Memory, bandwidth and peaks: far above any device, far below overflow,
  // and no lower than a device anyone serves a model on (a bandwidth of
  // 1 B/s puts a step past the simulator's clock).
  if (d.memory_bytes() == 0)
    return missing("memory_bytes", "physical memory in bytes, > 0");
  RETURN_IF_ERROR(
      range_from("memory_bytes", d.memory_bytes(), 1e8, 1e14, "bytes", false));
  if (d.usable_memory_gib() == 0)
    return missing("usable_memory_gib", "GiB the runtime can use, > 0");
  RETURN_IF_ERROR(range("usable_memory_gib", d.usable_memory_gib(),
                        d.memory_bytes() / kGib, "GiB up to memory_bytes", false));
  if (d.bandwidth_bytes_per_s() == 0)
    return missing("bandwidth_bytes_per_s", "peak memory bandwidth in bytes/s, > 0");
  RETURN_IF_ERROR(range_from("bandwidth_bytes_per_s", d.bandwidth_bytes_per_s(), 1e9,
                             1e14, "bytes/s", false));
  if (d.peak_flops_fp16() == 0)
    return missing("peak_flops_fp16", "dense 16-bit tensor FLOP/s, > 0");
  RETURN_IF_ERROR(
      range_from("peak_flops_fp16", d.peak_flops_fp16(), 1e10, 1e17, "FLOP/s", false));
  RETURN_IF_ERROR(
      range_from("peak_flops_bf16", d.peak_flops_bf16(), 1e10, 1e17, "FLOP/s", true));
  RETURN_IF_ERROR(
      range_from("peak_flops_fp8", d.peak_flops_fp8(), 1e10, 1e17, "FLOP/s", true));
  RETURN_IF_ERROR(
      range_from("peak_ops_int8", d.peak_ops_int8(), 1e10, 1e17, "OP/s", true));
  RETURN_IF_ERROR(range("onchip_bytes", d.onchip_bytes(), 1e11, "bytes", true));
  RETURN_IF_ERROR(range("shared_memory_per_block_bytes",
                        d.shared_memory_per_block_bytes(), 1e9, "bytes", true));
  RETURN_IF_ERROR(range("board_power_w", d.board_power_w(), 1e5, "W", true));
  RETURN_IF_ERROR(range_from("sustained_clock_ratio", d.sustained_clock_ratio(), 0.05, 1,
                             "fraction of the boost clock", true));
  RETURN_IF_ERROR(range("non_torch_gib", d.non_torch_gib(), d.usable_memory_gib(),
                        "GiB up to usable_memory_gib", true));
  RETURN_IF_ERROR(
      range("cuda_graph_gib_per_layer", d.cuda_graph_gib_per_layer(), 10, "GiB", true));
  RETURN_IF_ERROR(
      range("sampler_logit_copies", d.sampler_logit_copies(), 1000, "copies", true));
  RETURN_IF_ERROR(range("forward_activation_factor", d.forward_activation_factor(), 1000,
                        "factor", true));
  if (d.default_max_num_batched_tokens() < 0 ||
      d.default_max_num_batched_tokens() > 1 << 24)
    return bad(
        "default_max_num_batched_tokens",
        absl::StrCat(d.default_max_num_batched_tokens(),
                     " is out of range (allowed: 0 for vLLM's rule, or [1, 2^24])"));
  if (d.default_max_num_seqs() < 0 || d.default_max_num_seqs() > 1 << 20)
    return bad(
        "default_max_num_seqs",
        absl::StrCat(d.default_max_num_seqs(),
                     " is out of range (allowed: 0 for vLLM's rule, or [1, 2^20])"));
  if (d.max_graph_capture_size() < 0 || d.max_graph_capture_size() > 1 << 20)
    return bad("max_graph_capture_size",
               absl::StrCat(d.max_graph_capture_size(), " is out of range [0, 2^20]"));
  if (d.compute_units() < 0 || d.compute_units() > 1 << 20)
    return bad("compute_units",
               absl::StrCat(d.compute_units(), " is out of range [0, 2^20]"));
  if (d.has_startup_to_ready_s())
    RETURN_IF_ERROR(
        range("startup_to_ready_s", d.startup_to_ready_s(), 86400, "seconds", true));

  // dtypes: each listed needs its peak, and each peak its dtype.
  if (d.dtypes().empty())
    return missing("dtypes",
                   absl::StrCat("the tensor dtypes the hardware runs: ", Join(kDtypes)));
  auto has = [&](const char* dt) {
    return std::find(d.dtypes().begin(), d.dtypes().end(), dt) != d.dtypes().end();
  };
  for (int i = 0; i < d.dtypes_size(); ++i) {
    if (!In(kDtypes, d.dtypes(i)))
      return bad("dtypes",
                 absl::StrCat("'", d.dtypes(i), "' (allowed: ", Join(kDtypes), ")"), i);
  }
  const bool no_fp8_arch = In(kNoFp8Architectures, d.architecture());
  if (has("fp8") && no_fp8_arch) {
    return bad("dtypes",
               absl::StrCat("fp8 is listed but ", d.architecture(),
                            " hardware has no fp8 (allowed: fp16, bf16, int8)"));
  }
  if (d.peak_flops_fp8() > 0 && (!has("fp8") || no_fp8_arch)) {
    return bad("peak_flops_fp8",
               absl::StrCat(d.peak_flops_fp8(), " is set but ",
                            no_fp8_arch ? absl::StrCat(d.architecture(), " hardware")
                                        : std::string("this device (dtypes)"),
                            " has no fp8 (allowed: 0 or absent)"));
  }
  if (has("fp8") && d.peak_flops_fp8() == 0)
    return missing("peak_flops_fp8", "> 0, since dtypes lists fp8");
  const bool bf16_peak = d.peak_flops_bf16() > 0;
  if (has("bf16") != bf16_peak) {
    return bad(bf16_peak ? "peak_flops_bf16" : "dtypes",
               bf16_peak ? "is set but dtypes does not list bf16 (allowed: 0 or absent)"
                         : "lists bf16 but peak_flops_bf16 is 0 (required: > 0)");
  }
  if (d.supports_bf16() != has("bf16")) {
    return bad("supports_bf16", absl::StrCat(d.supports_bf16() ? "true" : "false",
                                             " disagrees with dtypes (bf16 ",
                                             has("bf16") ? "" : "not ", "listed)"));
  }
  if (d.peak_ops_int8() > 0 && !has("int8"))
    return bad("peak_ops_int8",
               "is set but dtypes does not list int8 (allowed: 0 or absent)");
  if (has("int8") && d.peak_ops_int8() == 0)
    return missing("peak_ops_int8", "> 0, since dtypes lists int8");
  if (d.default_dtype() != "fp16" && d.default_dtype() != "bf16")
    return bad("default_dtype",
               absl::StrCat("'", d.default_dtype(), "' (allowed: fp16, bf16)"));
  if (d.default_dtype() == "bf16" && !has("bf16"))
    return bad("default_dtype", "bf16, but dtypes does not list bf16 (allowed: fp16)");

  // Weight formats the device's vLLM build runs.
  if (d.weight_formats().empty())
    return missing("weight_formats",
                   absl::StrCat("the --quantization formats its vLLM build runs: ",
                                Join(kWeightFormats)));
  for (int i = 0; i < d.weight_formats_size(); ++i) {
    const std::string& f = d.weight_formats(i);
    if (!In(kWeightFormats, f))
      return bad("weight_formats",
                 absl::StrCat("'", f, "' (allowed: ", Join(kWeightFormats), ")"), i);
    if (f == "w8a8" && !has("int8"))
      return bad("weight_formats", "w8a8 needs int8 in dtypes", i);
    // vLLM's Mxfp4Config: CUDA compute capability >= 8.0 (Marlin, triton
    // or FlashInfer MoE kernels) or ROCm with triton_kernels; no TPU path.
    if (f == "mxfp4" && d.vendor() != "nvidia" && d.vendor() != "amd")
      return bad("weight_formats",
                 absl::StrCat("mxfp4: vLLM's mxfp4 MoE kernels are CUDA / ROCm only "
                              "(vendor ",
                              d.vendor(), ")"),
                 i);
    if ((f == "w4a16" || f == "w4a16-emb4") && d.vendor() != "nvidia")
      return bad("weight_formats",
                 absl::StrCat(f, ": the Marlin W4A16 kernel is CUDA-only (vendor ",
                              d.vendor(), "); allowed here: none, fp8, w8a8"),
                 i);
  }
  if (std::find(d.weight_formats().begin(), d.weight_formats().end(), "none") ==
      d.weight_formats().end())
    return bad("weight_formats", "must list none (the unquantized model)");

  for (int i = 0; i < d.prices_size(); ++i) {
    const proto::PriceOffer& p = d.prices(i);
    // A cent a day is below any rental (1e-300 printed $0.000 per 1M).
    if (!(std::isfinite(p.usd_per_hour()) && p.usd_per_hour() >= 1e-4 &&
          p.usd_per_hour() <= 1e4))
      return bad("prices",
                 absl::StrCat("offer ", i + 1, ": usd_per_hour ", p.usd_per_hour(),
                              " is out of range (allowed: [0.0001, 10000])"),
                 i);
    if (p.num_devices() < 0 || p.num_devices() > 1 << 16)
      return bad("prices",
                 absl::StrCat("offer ", i + 1, ": num_devices ", p.num_devices(),
                              " is out of range (allowed: 0 for one, or [1, 65536])"),
                 i);
    if (!In(kPriceTiers, p.tier()))
      return bad("prices",
                 absl::StrCat("offer ", i + 1, ": tier '", p.tier(),
                              "' (allowed: ", Join(kPriceTiers), ")"),
                 i);
    if (p.provider().empty())
      return bad("prices", absl::StrCat("offer ", i + 1, ": provider is missing"), i);
    const std::string& dt = p.date();
    int year = 0, month = 0, day = 0;
    const bool date_ok =
        dt.empty() ||
        (dt.size() == 10 && dt[4] == '-' && dt[7] == '-' &&
         absl::SimpleAtoi(dt.substr(0, 4), &year) &&
         absl::SimpleAtoi(dt.substr(5, 2), &month) &&
         absl::SimpleAtoi(dt.substr(8, 2), &day) &&
         std::all_of(dt.begin(), dt.end(),
                     [](char c) { return absl::ascii_isdigit(c) || c == '-'; }) &&
         year >= 2000 && month >= 1 && month <= 12 && day >= 1 && day <= 31);
    if (!date_ok)
      return bad("prices",
                 absl::StrCat("offer ", i + 1, ": date '", dt,
                              "' is not a date YYYY-MM-DD (year >= 2000)"),
                 i);
  }
  // param_priors: each key once (a map keeps the last of two silently),
  // known names, values inside the step-parameter table's bounds.
  if (tree != nullptr) {
    const FieldDescriptor* fd = desc->FindFieldByName("param_priors");
    int entries = 0;
    while (t.GetLocation(fd, entries).line >= 0) ++entries;
    if (entries > d.param_priors_size()) {
      return bad("param_priors",
                 absl::StrCat(entries, " entries for ", d.param_priors_size(),
                              " distinct keys: a key is given twice (give each once)"),
                 d.param_priors_size());
    }
  }
  {
    std::vector<std::string> keys;
    for (const auto& [k, v] : d.param_priors()) keys.push_back(k);
    std::sort(keys.begin(), keys.end());  // the first bad key is the same every run
    for (const std::string& k : keys) {
      const double v = d.param_priors().at(k);
      const StepParameterSpec* spec = PriorKeyParameter(k);
      if (spec == nullptr) {
        return bad("param_priors", absl::StrCat("unknown key '", k,
                                                "' (allowed: ", AllowedPriorKeys(), ")"));
      }
      // The step-parameter table's bounds (the ones a fit keeps to): a
      // prior outside them (a host cost of 1e300 us, an efficiency of 0)
      // gives steps no device runs, or times past the simulator's clock.
      // attn_unit_gbs (upper +inf) is bounded by the device's bandwidth.
      const double upper =
          std::isfinite(spec->upper) ? spec->upper : d.bandwidth_bytes_per_s() / 1e9;
      const bool off = spec->when == StepParameterWhen::kPositive && v == 0;
      if (!off && !(std::isfinite(v) && v >= spec->lower && v <= upper)) {
        return bad(
            "param_priors",
            absl::StrCat("'", k, "': ", v, " is out of range (allowed: [", spec->lower,
                         ", ", upper, "] ", spec->unit,
                         spec->when == StepParameterWhen::kPositive ? ", or 0: off" : "",
                         ")"));
      }
    }
  }
  if (d.has_interconnect()) {
    const proto::Interconnect& ic = d.interconnect();
    // 0: unknown (the catalog's default); else at least 1e8 B/s, a link
    // slower than any a server is built with.
    const auto link_ok = [](double b) {
      return std::isfinite(b) && (b == 0 || (b >= 1e8 && b <= 1e14));
    };
    if (!link_ok(ic.bandwidth_bytes_per_s()) || !link_ok(ic.host_link_bytes_per_s()) ||
        ic.max_devices_per_node() < 0 || ic.max_devices_per_node() > 1 << 16) {
      return bad("interconnect",
                 absl::StrCat("bandwidth_bytes_per_s ", ic.bandwidth_bytes_per_s(),
                              ", host_link_bytes_per_s ", ic.host_link_bytes_per_s(),
                              " or max_devices_per_node ", ic.max_devices_per_node(),
                              " is out of range (allowed: bytes/s 0 (unknown) or in "
                              "[1e8, 1e14], devices in [0, 65536])"));
    }
    // Checked here, where the file is read, not first at
    // --tensor-parallel-size > 1 (where the message named no line).
    if (!(std::isfinite(ic.latency_s()) && ic.latency_s() >= 0 && ic.latency_s() <= 1)) {
      return bad(
          "interconnect",
          absl::StrCat("latency_s ", ic.latency_s(),
                       " is out of range (allowed: seconds per collective in [0, 1])"));
    }
    // One link to each peer of the node: more is a figure the model cannot
    // read (it would cap every group below the quoted bandwidth).
    const int32_t peers =
        ic.max_devices_per_node() > 1 ? ic.max_devices_per_node() - 1 : 1 << 16;
    if (ic.mesh_links() < 0 || ic.mesh_links() > peers) {
      return bad(
          "interconnect",
          absl::StrCat("mesh_links ", ic.mesh_links(),
                       " is out of range (allowed: links per device in [0, ", peers,
                       "], one to each other device of the node "
                       "(max_devices_per_node - 1); 0: a switch or torus)"));
    }
    if (ic.link_group_max() < 0 || ic.link_group_max() == 1 ||
        ic.link_group_max() > 1 << 16) {
      return bad("interconnect",
                 absl::StrCat("link_group_max ", ic.link_group_max(),
                              " is out of range (allowed: devices in [2, 65536]; 0: no "
                              "limit)"));
    }
  }
  if (d.sources().empty())
    return missing("sources", "where the numbers come from (datasheet name, URL, date)");
  return absl::OkStatus();
}

absl::StatusOr<proto::Device> ParseDeviceText(std::string_view text,
                                              const std::string& origin) {
  proto::Device d;
  TextFormat::ParseInfoTree tree;
  RETURN_IF_ERROR(ParseTextProto(text, origin, &d, /*merge=*/false, &tree));
  RETURN_IF_ERROR(ValidateDevice(d, origin, &tree));
  d.set_origin(origin);
  d.set_content_hash(DevicePerformanceHash(d));
  d.set_file_hash(ContentHash(text));
  return d;
}

absl::StatusOr<proto::ModelArch> ParseModelText(std::string_view text,
                                                const std::string& origin) {
  proto::ModelArch m;
  TextFormat::ParseInfoTree tree;
  RETURN_IF_ERROR(ParseTextProto(text, origin, &m, /*merge=*/false, &tree));
  if (m.id().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin,
                     ": field id is missing (required: a name such as "
                     "\"llama-3.1-8b\")"));
  }
  absl::StatusOr<ModelArch> expanded = ExpandModelArch(m);
  if (!expanded.ok()) {
    // ExpandModelArch names the field ("... field NAME: ..."); add its line.
    const std::string msg(expanded.status().message());
    std::string field;
    if (const size_t at = msg.find("field "); at != std::string::npos) {
      for (size_t i = at + 6;
           i < msg.size() && (absl::ascii_isalnum(msg[i]) || msg[i] == '_'); ++i)
        field.push_back(msg[i]);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(Where(origin, proto::ModelArch::descriptor(), tree, field), msg));
  }
  return m;
}

namespace {

struct Catalog {
  std::vector<proto::Device> devices;  // sorted by id
  std::vector<std::string> device_texts;
  std::vector<proto::ModelArch> models;  // sorted by id
  std::vector<std::string> model_texts;
  absl::Status status;  // first embedded file that failed to parse
};

// The embedded files, parsed and validated once (thread-safe static init).
const Catalog& Embedded() {
  static const Catalog* const kCatalog = [] {
    auto* c = new Catalog;
    std::vector<std::pair<std::string, int>> order;
    for (int i = 0; i < internal::kNumEmbeddedDeviceFiles; ++i) {
      const EmbeddedFile& f = internal::kEmbeddedDeviceFiles[i];
      absl::StatusOr<proto::Device> d =
          ParseDeviceText(f.text, absl::StrCat("hwmodels/devices/", f.name));
      if (!d.ok()) {
        if (c->status.ok()) c->status = absl::InternalError(d.status().message());
        continue;
      }
      c->devices.push_back(*std::move(d));
      c->device_texts.emplace_back(f.text);
    }
    for (int i = 0; i < internal::kNumEmbeddedModelFiles; ++i) {
      const EmbeddedFile& f = internal::kEmbeddedModelFiles[i];
      absl::StatusOr<proto::ModelArch> m =
          ParseModelText(f.text, absl::StrCat("hwmodels/models/", f.name));
      if (!m.ok()) {
        if (c->status.ok()) c->status = absl::InternalError(m.status().message());
        continue;
      }
      c->models.push_back(*std::move(m));
      c->model_texts.emplace_back(f.text);
    }
    // The embedded lists are sorted by file name; ids follow file names.
    return c;
  }();
  return *kCatalog;
}

int FindEmbeddedDevice(const std::string& name) {
  const std::string want = absl::AsciiStrToLower(name);
  const Catalog& c = Embedded();
  for (size_t i = 0; i < c.devices.size(); ++i) {
    const proto::Device& d = c.devices[i];
    if (d.id() == want) return static_cast<int>(i);
    for (const std::string& a : d.aliases())
      if (absl::AsciiStrToLower(a) == want) return static_cast<int>(i);
  }
  return -1;
}

int FindEmbeddedModel(const std::string& name) {
  const std::string want = NormalizeModelName(name);
  const Catalog& c = Embedded();
  for (size_t i = 0; i < c.models.size(); ++i) {
    const proto::ModelArch& m = c.models[i];
    if (m.id() == want) return static_cast<int>(i);
    for (const std::string& h : m.hf_ids())
      if (NormalizeModelName(h) == want) return static_cast<int>(i);
  }
  return -1;
}

absl::Status UnknownDevice(const std::string& name) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--device: unknown device '", name,
      "'; allowed: ", absl::StrJoin(DeviceIds(), ", "),
      ", or a path to a device file (.textproto; see `servesim devices show t4`)"));
}

}  // namespace

absl::StatusOr<proto::Device> FindDevice(const std::string& name_or_path) {
  RETURN_IF_ERROR(Embedded().status);
  const int i = FindEmbeddedDevice(name_or_path);
  if (i >= 0) return Embedded().devices[i];
  if (LooksLikePath(name_or_path)) {
    ASSIGN_OR_RETURN(std::string text, ReadWholeFile(name_or_path, "--device"));
    return ParseDeviceText(text, name_or_path);
  }
  return UnknownDevice(name_or_path);
}

absl::StatusOr<std::string> DeviceFileText(const std::string& name_or_path) {
  RETURN_IF_ERROR(Embedded().status);
  const int i = FindEmbeddedDevice(name_or_path);
  if (i >= 0) return Embedded().device_texts[i];
  if (LooksLikePath(name_or_path)) return ReadWholeFile(name_or_path, "--device");
  return UnknownDevice(name_or_path);
}

std::vector<proto::Device> EmbeddedDevices() {
  std::vector<proto::Device> v = Embedded().devices;
  std::sort(v.begin(), v.end(), [](const proto::Device& a, const proto::Device& b) {
    return a.id() < b.id();
  });
  return v;
}

std::vector<proto::ModelArch> EmbeddedModels() {
  std::vector<proto::ModelArch> v = Embedded().models;
  std::sort(v.begin(), v.end(), [](const proto::ModelArch& a, const proto::ModelArch& b) {
    return a.id() < b.id();
  });
  return v;
}

std::vector<std::string> DeviceIds() {
  std::vector<std::string> ids;
  for (const proto::Device& d : Embedded().devices) ids.push_back(d.id());
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<std::string> ModelIds() {
  std::vector<std::string> ids;
  for (const proto::ModelArch& m : Embedded().models) ids.push_back(m.id());
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::Status CheckWeightFormat(const proto::Device& d, const std::string& format_id) {
  if (std::find(d.weight_formats().begin(), d.weight_formats().end(), format_id) !=
      d.weight_formats().end())
    return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--quantization: ", format_id, " is not supported on ", d.id(), " (",
                   d.name(), "): its vLLM build has no kernel for it",
                   format_id == "fp8" ? " (no fp8 path)"
                   : absl::StartsWith(format_id, "w4a16") && d.vendor() != "nvidia"
                       ? " (the Marlin W4A16 kernel is CUDA-only)"
                       : "",
                   "; allowed: ", absl::StrJoin(d.weight_formats(), ", "),
                   " (weight_formats in ", d.origin(), ")"));
}

namespace {

absl::Status UnknownModel(const std::string& name) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--model: unknown model '", name, "'; allowed: ", absl::StrJoin(ModelIds(), ", "),
      ", their Hugging Face ids (e.g. google/gemma-4-E2B-it), or a path to "
      "a config.json or a model .textproto"));
}

}  // namespace

namespace {

// `vllm serve /path/to/model` takes the model's folder: its config.json is
// the model. Other names pass through; a folder without one is an error.
absl::StatusOr<std::string> ModelFilePath(const std::string& name_or_path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(name_or_path, ec)) return name_or_path;
  const std::string config =
      (std::filesystem::path(name_or_path) / "config.json").string();
  if (FileExists(config)) return config;
  return absl::InvalidArgumentError(absl::StrCat(
      "--model ", name_or_path,
      ": is a directory without a config.json (give a model folder with the Hugging "
      "Face config.json, the config.json itself, a model .textproto or a catalog id: "
      "`servesim models`)"));
}

}  // namespace

absl::StatusOr<proto::ModelArch> FindModel(const std::string& name_or_dir) {
  RETURN_IF_ERROR(Embedded().status);
  ASSIGN_OR_RETURN(const std::string name_or_path, ModelFilePath(name_or_dir));
  const bool text_proto = absl::EndsWith(name_or_path, ".textproto") ||
                          absl::EndsWith(name_or_path, ".txtpb") ||
                          absl::EndsWith(name_or_path, ".pbtxt");
  if (LooksLikePath(name_or_path) &&
      (FileExists(name_or_path) || text_proto || absl::EndsWith(name_or_path, ".json"))) {
    ASSIGN_OR_RETURN(std::string text, ReadWholeFile(name_or_path, "--model"));
    if (text_proto) return ParseModelText(text, name_or_path);
    return ImportHfConfig(text, name_or_path);
  }
  const int i = FindEmbeddedModel(name_or_path);
  if (i >= 0) return Embedded().models[i];
  return UnknownModel(name_or_path);
}

absl::StatusOr<std::string> ModelFileText(const std::string& name_or_dir) {
  RETURN_IF_ERROR(Embedded().status);
  ASSIGN_OR_RETURN(const std::string name_or_path, ModelFilePath(name_or_dir));
  if (LooksLikePath(name_or_path) && FileExists(name_or_path))
    return ReadWholeFile(name_or_path, "--model");
  const int i = FindEmbeddedModel(name_or_path);
  if (i >= 0) return Embedded().model_texts[i];
  return UnknownModel(name_or_path);
}

namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

const Value* Field(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  if (it == s.fields().end() || it->second.kind_case() == Value::kNullValue)
    return nullptr;
  return &it->second;
}

// First present numeric field among `keys`; `def` when none.
double Num(const Struct& s, std::initializer_list<const char*> keys, double def) {
  for (const char* k : keys) {
    const Value* v = Field(s, k);
    if (v != nullptr && v->kind_case() == Value::kNumberValue) return v->number_value();
  }
  return def;
}

bool Bool(const Struct& s, const char* key, bool def) {
  const Value* v = Field(s, key);
  return v != nullptr && v->kind_case() == Value::kBoolValue ? v->bool_value() : def;
}

const char* JsonKind(const Value& v) {
  switch (v.kind_case()) {
    case Value::kNumberValue:
      return "a number";
    case Value::kStringValue:
      return "a string";
    case Value::kBoolValue:
      return "a boolean";
    case Value::kStructValue:
      return "an object";
    case Value::kListValue:
      return "a list";
    default:
      return "null";
  }
}

// The dimensions an imported config is read from: when present (and not
// null), an integer in [lo, hi]. A key of another type, a fraction or a
// value out of range is an error, never the default silently (a string "8"
// for num_key_value_heads read as 32 heads; "128" experts as a dense model).
struct IntKey {
  const char* key;
  double lo;
  double hi;
};
constexpr IntKey kIntKeys[] = {
    {"vocab_size", 1, 1e7},
    {"hidden_size", 1, 1e7},
    {"num_hidden_layers", 1, 1000},  // ExpandModelArch's range
    {"num_attention_heads", 1, 1e7},
    {"num_key_value_heads", 1, 1e7},
    {"head_dim", 1, 1e5},
    {"num_global_key_value_heads", 1, 1e7},
    {"num_full_key_value_heads", 1, 1e7},
    {"global_head_dim", 1, 1e5},
    {"full_head_dim", 1, 1e5},
    {"num_kv_shared_layers", 0, 1e7},
    {"hidden_size_per_layer_input", 0, 1e7},
    {"num_experts", 0, 1e6},
    {"num_local_experts", 0, 1e6},
    {"n_routed_experts", 0, 1e6},
    {"top_k_experts", 0, 1e6},
    {"num_experts_per_tok", 0, 1e6},
    {"experts_per_token", 0, 1e6},
    {"moe_intermediate_size", 1, 1e7},
    {"expert_intermediate_size", 1, 1e7},
    {"shared_expert_intermediate_size", 0, 1e7},
    {"n_shared_experts", 0, 1e3},
    {"first_k_dense_replace", 0, 1e7},
    {"max_position_embeddings", 1, 1e8},
    {"sliding_window", 0, 1e8},
    {"sliding_window_pattern", 0, 1e4},
    {"kv_lora_rank", 1, 1e7},
    {"qk_rope_head_dim", 1, 1e7},
    {"qk_nope_head_dim", 1, 1e7},
    {"v_head_dim", 1, 1e7},
    {"q_lora_rank", 0, 1e7},
    {"moe_layer_freq", 0, 1e4},
    {"decoder_sparse_step", 0, 1e4},
};
constexpr const char* kBoolKeys[] = {"tie_word_embeddings", "use_sliding_window",
                                     "attention_k_eq_v"};

absl::Status CheckIntValue(const Value& v, const std::string& origin,
                           const std::string& key, double lo, double hi) {
  const bool number = v.kind_case() == Value::kNumberValue;
  const double x = number ? v.number_value() : 0;
  if (number && x == std::floor(x) && x >= lo && x <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--model ", origin, ": field ", key, ": ",
                   number ? absl::StrCat(x, " is out of range")
                          : absl::StrCat(JsonKind(v), ", not a number"),
                   " (allowed: an integer in [", lo, ", ", hi, "], or null/absent)"));
}

absl::Status CheckConfigTypes(const Struct& cfg, const Struct& root,
                              const std::string& origin) {
  for (const IntKey& k : kIntKeys) {
    if (const Value* v = Field(cfg, k.key); v != nullptr)
      RETURN_IF_ERROR(CheckIntValue(*v, origin, k.key, k.lo, k.hi));
  }
  // intermediate_size: one width, or one per layer.
  if (const Value* v = Field(cfg, "intermediate_size"); v != nullptr) {
    if (v->kind_case() == Value::kListValue) {
      for (int i = 0; i < v->list_value().values_size(); ++i) {
        RETURN_IF_ERROR(CheckIntValue(v->list_value().values(i), origin,
                                      absl::StrCat("intermediate_size[", i, "]"), 1,
                                      1e7));
      }
    } else {
      RETURN_IF_ERROR(CheckIntValue(*v, origin, "intermediate_size", 1, 1e7));
    }
  }
  for (const Struct* s : {&cfg, &root}) {
    for (const char* key : kBoolKeys) {
      const Value* v = Field(*s, key);
      if (v != nullptr && v->kind_case() != Value::kBoolValue) {
        return absl::InvalidArgumentError(
            absl::StrCat("--model ", origin, ": field ", key, ": ", JsonKind(*v),
                         ", not a boolean (allowed: true, false, or null/absent)"));
      }
    }
  }
  return absl::OkStatus();
}

// The deepest nesting of JSON lists and objects in `text` (strings
// skipped), and the line where it first passes `limit` (0 if never).
int DeepestLineOver(std::string_view text, int limit) {
  int depth = 0, line = 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return line;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return 0;
}

// protobuf's JSON error as ":LINE:COL: not valid JSON: REASON". Its message
// is the reason, then ~20 characters around the error (newlines kept) and a
// line with a caret under the spot; where that context occurs once in the
// text, the spot is located (otherwise the message is given as it is).
std::string JsonErrorText(std::string_view text, const std::string& message) {
  const size_t first_nl = message.find('\n');
  const size_t last_nl = message.rfind('\n');
  if (first_nl != std::string::npos && last_nl > first_nl) {
    const std::string context = message.substr(first_nl + 1, last_nl - first_nl - 1);
    const size_t caret = message.find('^', last_nl);
    const size_t at = context.empty() ? std::string::npos : text.find(context);
    if (caret != std::string::npos && at != std::string::npos &&
        text.find(context, at + 1) == std::string::npos) {
      // The caret counts characters from the context's start, newlines
      // included (it is printed as if the context were one line).
      const size_t offset = std::min(at + (caret - last_nl - 1), text.size());
      int64_t line = 1, col = 1;
      for (size_t i = 0; i < offset; ++i) {
        if (text[i] == '\n') {
          ++line;
          col = 1;
        } else {
          ++col;
        }
      }
      return absl::StrCat(":", line, ":", col,
                          ": not valid JSON: ", message.substr(0, first_nl));
    }
  }
  return absl::StrCat(": not valid JSON: ", message);
}

}  // namespace

absl::StatusOr<proto::ModelArch> ImportHfConfig(const std::string& json_text,
                                                const std::string& origin) {
  // A config.json nests a few levels (quantization_config, rope_scaling);
  // the JSON parser's time grows faster than linearly with nested lists
  // (200,000 levels ran for minutes), so depth is checked first.
  constexpr int kMaxJsonDepth = 32;
  if (const int line = DeepestLineOver(json_text, kMaxJsonDepth); line > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model ", origin, ":", line, ": JSON nested deeper than ",
                     kMaxJsonDepth, " levels (allowed: at most ", kMaxJsonDepth, ")"));
  }
  Struct root;
  auto st = google::protobuf::util::JsonStringToMessage(json_text, &root);
  if (!st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model ", origin, JsonErrorText(json_text, st.message().as_string())));
  }
  const Struct* cfg = &root;
  if (const Value* tc = Field(root, "text_config");
      tc != nullptr && tc->kind_case() == Value::kStructValue) {
    cfg = &tc->struct_value();
  }
  RETURN_IF_ERROR(CheckConfigTypes(*cfg, root, origin));
  auto need = [&](std::initializer_list<const char*> keys,
                  const char* what) -> absl::StatusOr<int64_t> {
    const double v = Num(*cfg, keys, -1);
    if (v <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--model ", origin, ": field ", what, " is missing or not a positive number"));
    }
    // Far above any real model, far below int32 overflow in the planner.
    constexpr double kMax = 1e7;
    if (v > kMax || v != std::floor(v)) {
      return absl::InvalidArgumentError(absl::StrCat("--model ", origin, ": field ", what,
                                                     ": ", v,
                                                     " is out of range (an integer in "
                                                     "[1, 1e7])"));
    }
    return static_cast<int64_t>(v);
  };
  proto::ModelArch m;
  std::string model_type;
  if (const Value* v = Field(*cfg, "model_type");
      v && v->kind_case() == Value::kStringValue)
    model_type = v->string_value();
  if (model_type.empty()) {
    if (const Value* v = Field(root, "model_type");
        v && v->kind_case() == Value::kStringValue)
      model_type = v->string_value();
  }
  std::string base = origin;
  if (const size_t slash = base.rfind('/'); slash != std::string::npos) {
    const std::string dir = base.substr(0, slash);
    const size_t s2 = dir.rfind('/');
    base = s2 == std::string::npos ? dir : dir.substr(s2 + 1);
  }
  // Decoder-only transformers with (grouped-query) attention only: the
  // step model has no state-space or recurrent layers.
  static const char* const kFamilies[] = {
      "gemma", "llama",    "mistral", "mixtral",  "qwen",    "phi",       "granite",
      "olmo",  "internlm", "yi",      "deepseek", "gpt_oss", "starcoder2"};
  bool known = model_type.empty();
  for (const char* f : kFamilies) known = known || absl::StartsWith(model_type, f);
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model ", origin, ": field model_type: '", model_type,
        "' is not supported (attention-only decoders: gemma*, llama, mistral, mixtral, "
        "qwen*, phi*, granite, olmo*, internlm*, yi, deepseek*, gpt_oss, starcoder2)"));
  }
  // Layer kinds the step model and KV layout do not have, named by the
  // field that asks for them.
  auto unsupported = [&](const char* field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model ", origin, ": model_type '", model_type, "': field ", field, ": ", why));
  };
  const bool deepseek = model_type == "deepseek_v2" || model_type == "deepseek_v3";
  if (Field(*cfg, "kv_lora_rank") != nullptr && !deepseek) {
    return unsupported("kv_lora_rank",
                       "multi-head latent attention is modelled for model_type "
                       "deepseek_v2 and deepseek_v3 only (allowed otherwise: "
                       "grouped-query attention, no kv_lora_rank)");
  }
  if (const double freq = Num(*cfg, {"moe_layer_freq"}, 1); freq != 1) {
    return unsupported("moe_layer_freq",
                       absl::StrCat(freq,
                                    ": MoE on every n-th layer only is not modelled "
                                    "(allowed: 1)"));
  }
  if (const Value* v = Field(*cfg, "mlp_only_layers");
      v != nullptr && v->kind_case() == Value::kListValue &&
      v->list_value().values_size() > 0) {
    return unsupported("mlp_only_layers",
                       "dense layers between MoE layers are not modelled (allowed: [])");
  }
  if (const double step = Num(*cfg, {"decoder_sparse_step"}, 1); step != 1) {
    return unsupported("decoder_sparse_step",
                       absl::StrCat(step,
                                    ": MoE on every n-th layer only is not modelled "
                                    "(allowed: 1)"));
  }
  // A Hugging Face cache snapshot (.../models--ORG--NAME/snapshots/HASH/
  // config.json) is named after its repository, not its commit hash.
  if (const size_t at = origin.rfind("models--"); at != std::string::npos) {
    const std::string rest = origin.substr(at + 8);
    const size_t end = rest.find('/');
    if (end != std::string::npos && rest.compare(end, 11, "/snapshots/") == 0) {
      const std::string repo = rest.substr(0, end);
      if (const size_t sep = repo.find("--"); sep != std::string::npos) {
        base = absl::StrCat(repo.substr(0, sep), "/", repo.substr(sep + 2));
      } else {
        base = repo;
      }
    }
  }
  m.set_id(absl::StrCat("import:", base));
  m.set_display_name(
      absl::StrCat(model_type.empty() ? "model" : model_type, " from ", origin));
  m.set_family(absl::StartsWith(model_type, "gemma") ? "gemma4" : model_type);
  ASSIGN_OR_RETURN(int64_t vocab, need({"vocab_size"}, "vocab_size"));
  ASSIGN_OR_RETURN(int64_t hidden, need({"hidden_size"}, "hidden_size"));
  ASSIGN_OR_RETURN(int64_t layers, need({"num_hidden_layers"}, "num_hidden_layers"));
  ASSIGN_OR_RETURN(int64_t heads, need({"num_attention_heads"}, "num_attention_heads"));
  m.set_vocab_size(vocab);
  m.set_hidden_size(static_cast<int32_t>(hidden));
  m.set_num_layers(static_cast<int32_t>(layers));
  m.set_num_q_heads(static_cast<int32_t>(heads));
  const int32_t kv_heads =
      static_cast<int32_t>(Num(*cfg, {"num_key_value_heads"}, heads));
  if (kv_heads < 1 || kv_heads > heads || heads % kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model ", origin, ": field num_key_value_heads: ", kv_heads,
                     " must divide num_attention_heads ", heads,
                     " (allowed: a divisor in [1, ", heads, "])"));
  }
  // Without a head_dim key, Hugging Face's default: hidden_size //
  // num_attention_heads (integer division, as in transformers).
  const int64_t default_head_dim = hidden / heads;
  if (default_head_dim < 1 && Field(*cfg, "head_dim") == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model ", origin, ": field num_attention_heads: ", heads,
        " is more than hidden_size ", hidden,
        " with no head_dim given (allowed: at most hidden_size heads, or a head_dim)"));
  }
  const int32_t head_dim = static_cast<int32_t>(
      Num(*cfg, {"head_dim"}, static_cast<double>(default_head_dim)));
  m.set_num_kv_heads_sliding(kv_heads);
  m.set_head_dim_sliding(head_dim);
  const int32_t kv_heads_full = static_cast<int32_t>(
      Num(*cfg, {"num_global_key_value_heads", "num_full_key_value_heads"}, kv_heads));
  if (kv_heads_full > heads || heads % kv_heads_full != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model ", origin, ": field num_global_key_value_heads: ", kv_heads_full,
        " must divide num_attention_heads ", heads, " (allowed: a divisor in [1, ", heads,
        "])"));
  }
  m.set_num_kv_heads_full(kv_heads_full);
  m.set_head_dim_full(
      static_cast<int32_t>(Num(*cfg, {"global_head_dim", "full_head_dim"}, head_dim)));
  m.set_full_attention_k_eq_v(Bool(*cfg, "attention_k_eq_v", false));
  // DeepSeek MLA (vLLM's MLA attention): the cache holds one latent of
  // kv_lora_rank + qk_rope_head_dim values per token per layer, the same on
  // every TP rank (one KV "head", replicated).
  if (deepseek && Field(*cfg, "kv_lora_rank") != nullptr) {
    ASSIGN_OR_RETURN(int64_t kv_rank, need({"kv_lora_rank"}, "kv_lora_rank"));
    ASSIGN_OR_RETURN(int64_t rope, need({"qk_rope_head_dim"}, "qk_rope_head_dim"));
    ASSIGN_OR_RETURN(int64_t nope, need({"qk_nope_head_dim"}, "qk_nope_head_dim"));
    ASSIGN_OR_RETURN(int64_t v_dim, need({"v_head_dim"}, "v_head_dim"));
    const double q_rank = Num(*cfg, {"q_lora_rank"}, 0);  // null in V2-Lite
    if (q_rank < 0 || q_rank > 1e7 || q_rank != std::floor(q_rank))
      return unsupported("q_lora_rank",
                         absl::StrCat(q_rank,
                                      " is out of range (null or an integer in "
                                      "[0, 1e7])"));
    m.set_kv_lora_rank(static_cast<int32_t>(kv_rank));
    m.set_qk_rope_head_dim(static_cast<int32_t>(rope));
    m.set_qk_nope_head_dim(static_cast<int32_t>(nope));
    m.set_v_head_dim(static_cast<int32_t>(v_dim));
    m.set_q_lora_rank(static_cast<int32_t>(q_rank));
    m.set_num_kv_heads_full(1);
    m.set_num_kv_heads_sliding(1);
    m.set_head_dim_full(static_cast<int32_t>(kv_rank + rope));
    m.set_head_dim_sliding(static_cast<int32_t>(kv_rank + rope));
  }
  m.set_num_kv_shared_layers(
      static_cast<int32_t>(Num(*cfg, {"num_kv_shared_layers"}, 0)));
  m.set_per_layer_embedding_dim(
      static_cast<int32_t>(Num(*cfg, {"hidden_size_per_layer_input"}, 0)));
  m.set_num_experts(static_cast<int32_t>(
      Num(*cfg, {"num_experts", "num_local_experts", "n_routed_experts"}, 0)));
  m.set_experts_top_k(static_cast<int32_t>(
      Num(*cfg, {"top_k_experts", "num_experts_per_tok", "experts_per_token"}, 0)));
  m.set_expert_intermediate_size(static_cast<int32_t>(
      Num(*cfg, {"moe_intermediate_size", "expert_intermediate_size"}, 0)));
  if (m.num_experts() > 0 &&
      (m.experts_top_k() <= 0 || m.experts_top_k() > m.num_experts())) {
    return unsupported(
        "num_experts_per_tok",
        absl::StrCat(m.experts_top_k(),
                     " is missing or out of range for an MoE model (allowed: [1, "
                     "num_experts ",
                     m.num_experts(), "])"));
  }
  // MoE FFNs: Gemma 4 keeps a dense MLP beside the experts; Qwen2-MoE has a
  // shared expert (shared_expert_intermediate_size); Mixtral and gpt-oss give
  // the expert width as intermediate_size and have no dense MLP; Qwen3-MoE
  // has neither shared expert nor dense MLP.
  int64_t moe_dense_width = -1;  // -1: intermediate_size as given (dense models)
  if (m.num_experts() > 0 && !absl::StartsWith(model_type, "gemma")) {
    const double width = Num(*cfg, {"intermediate_size"}, 0);
    if (m.expert_intermediate_size() <= 0) {
      if (width <= 0 || width > 1e7)
        return unsupported(
            "intermediate_size",
            "missing or out of range for the expert width (allowed: [1, 1e7])");
      m.set_expert_intermediate_size(static_cast<int32_t>(width));
    }
    moe_dense_width =
        static_cast<int64_t>(Num(*cfg, {"shared_expert_intermediate_size"}, 0));
    // DeepSeek: n_shared_experts always-on experts of the routed width (a
    // dense branch), and dense-MLP layers before the first MoE layer.
    if (deepseek) {
      const double shared = Num(*cfg, {"n_shared_experts"}, 0);
      if (shared < 0 || shared > 1e3 || shared != std::floor(shared))
        return unsupported(
            "n_shared_experts",
            absl::StrCat(shared, " is out of range (an integer in [0, 1e3])"));
      moe_dense_width = static_cast<int64_t>(shared) * m.expert_intermediate_size();
      if (moe_dense_width > 1e7)
        return unsupported(
            "n_shared_experts",
            absl::StrCat(shared, " x moe_intermediate_size ",
                         m.expert_intermediate_size(), " is out of range (at most 1e7)"));
      const double first = Num(*cfg, {"first_k_dense_replace"}, 0);
      if (first < 0 || first > static_cast<double>(layers) || first != std::floor(first))
        return unsupported(
            "first_k_dense_replace",
            absl::StrCat(first, " is out of range (an integer in [0, ", layers, "])"));
      m.set_first_k_dense_layers(static_cast<int32_t>(first));
    }
    if (moe_dense_width < 0 || moe_dense_width > 1e7)
      return unsupported("shared_expert_intermediate_size",
                         absl::StrCat(moe_dense_width, " is out of range [0, 1e7]"));
  }
  m.set_tie_word_embeddings(
      Bool(*cfg, "tie_word_embeddings", Bool(root, "tie_word_embeddings", false)));
  const double max_pos = Num(*cfg, {"max_position_embeddings"}, 8192);
  if (!(max_pos >= 1 && max_pos <= 1e8)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model ", origin, ": field max_position_embeddings: ", max_pos,
                     " is out of range [1, 1e8]"));
  }
  m.set_max_position_embeddings(static_cast<int64_t>(max_pos));

  // Sliding window and layer types.
  const bool use_sliding = Bool(*cfg, "use_sliding_window", true);
  const int32_t window = static_cast<int32_t>(Num(*cfg, {"sliding_window"}, 0));
  std::string pattern;
  if (const Value* lt = Field(*cfg, "layer_types");
      lt != nullptr && lt->kind_case() == Value::kListValue) {
    // Attention layers only: a linear-attention, Mamba or other recurrent
    // layer (Qwen3-Next, Granite hybrids) has no KV cache of this kind and
    // no cost in the step model.
    for (int i = 0; i < lt->list_value().values_size(); ++i) {
      const Value& v = lt->list_value().values(i);
      const std::string t = v.kind_case() == Value::kStringValue ? v.string_value() : "";
      if (t != "sliding_attention" && t != "full_attention") {
        return unsupported(
            absl::StrCat("layer_types[", i, "]").c_str(),
            absl::StrCat(v.kind_case() == Value::kStringValue ? absl::StrCat("'", t, "'")
                                                              : std::string(JsonKind(v)),
                         " is not modelled (allowed: 'sliding_attention', "
                         "'full_attention')"));
      }
      pattern.push_back(t == "sliding_attention" ? 'S' : 'F');
    }
    if (static_cast<int64_t>(pattern.size()) != layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model ", origin, ": field layer_types has ", pattern.size(),
                       " entries, num_hidden_layers is ", layers));
    }
  } else if (const double p = Num(*cfg, {"sliding_window_pattern"}, 0); p > 1) {
    m.set_sliding_pattern(static_cast<int32_t>(p));
  }
  // A window without a per-layer pattern (Mistral-7B-v0.1, Phi-3) is every
  // layer's: vLLM's Attention falls back to the model's sliding_window
  // (cache_config.sliding_window) where a layer sets none. It was modelled
  // as full attention (13.6x concurrency at 32k on an H100 for ~22x).
  if (use_sliding && window > 0 && pattern.empty() && m.sliding_pattern() <= 1) {
    pattern.assign(static_cast<size_t>(layers), 'S');
  }
  if (use_sliding && window > 0 && (!pattern.empty() || m.sliding_pattern() > 1)) {
    m.set_sliding_window(window);
    m.set_layer_pattern(pattern);
  } else {
    m.set_sliding_window(0);
    m.set_sliding_pattern(0);
    m.set_num_kv_heads_sliding(m.num_kv_heads_full());
    m.set_head_dim_sliding(m.head_dim_full());
  }

  // FFN widths: a number, or a list per layer (run-length encoded).
  const Value* inter = Field(*cfg, "intermediate_size");
  if (inter != nullptr && inter->kind_case() == Value::kListValue) {
    const auto& vals = inter->list_value().values();
    if (vals.size() != layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model ", origin, ": field intermediate_size has ", vals.size(),
                       " entries, num_hidden_layers is ", layers));
    }
    for (const Value& v : vals) {
      const int32_t w = static_cast<int32_t>(v.number_value());
      if (m.ffn_runs_size() > 0 &&
          m.ffn_runs(m.ffn_runs_size() - 1).intermediate_size() == w) {
        auto* r = m.mutable_ffn_runs(m.ffn_runs_size() - 1);
        r->set_count(r->count() + 1);
      } else {
        auto* r = m.add_ffn_runs();
        r->set_count(1);
        r->set_intermediate_size(w);
      }
    }
  } else if (moe_dense_width >= 0 && m.first_k_dense_layers() > 0) {
    ASSIGN_OR_RETURN(int64_t w, need({"intermediate_size"}, "intermediate_size"));
    auto* dense = m.add_ffn_runs();
    dense->set_count(m.first_k_dense_layers());
    dense->set_intermediate_size(static_cast<int32_t>(w));
    if (m.first_k_dense_layers() < layers) {
      auto* r = m.add_ffn_runs();
      r->set_count(static_cast<int32_t>(layers - m.first_k_dense_layers()));
      r->set_intermediate_size(static_cast<int32_t>(moe_dense_width));
    }
  } else if (moe_dense_width >= 0) {
    auto* r = m.add_ffn_runs();
    r->set_count(static_cast<int32_t>(layers));
    r->set_intermediate_size(static_cast<int32_t>(moe_dense_width));
  } else {
    ASSIGN_OR_RETURN(int64_t w, need({"intermediate_size"}, "intermediate_size"));
    auto* r = m.add_ffn_runs();
    r->set_count(static_cast<int32_t>(layers));
    r->set_intermediate_size(static_cast<int32_t>(w));
  }
  // The checkpoint's weight format, when servesim has it (others load as
  // their --quantization says).
  if (const Value* qc = Field(root, "quantization_config");
      qc != nullptr && qc->kind_case() == Value::kStructValue) {
    if (const Value* qm = Field(qc->struct_value(), "quant_method");
        qm != nullptr && qm->kind_case() == Value::kStringValue) {
      const std::string method = absl::AsciiStrToLower(qm->string_value());
      // Another method (gptq, awq, compressed-tensors, ...) is recorded as
      // such: the deployment asks for the --quantization that matches it
      // instead of loading 16-bit weights silently.
      m.set_checkpoint_quantization(method == "mxfp4" || method == "fp8"
                                        ? method
                                        : absl::StrCat(kUnmodelledQuantPrefix, method));
      if (const Value* wb = Field(qc->struct_value(), "weight_block_size");
          method == "fp8" && wb != nullptr && wb->kind_case() == Value::kListValue &&
          wb->list_value().values_size() == 2 &&
          wb->list_value().values(0).kind_case() == Value::kNumberValue) {
        const double n = wb->list_value().values(0).number_value();
        if (!(n >= 1 && n <= 65536 && n == std::floor(n))) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--model ", origin, ": field quantization_config.weight_block_size[0]: ", n,
              " is not an integer in [1, 65536]"));
        }
        m.set_checkpoint_weight_block_n(static_cast<int32_t>(n));
      }
    }
  }
  m.add_sources(absl::StrCat("imported from ", origin));
  // The imported description must expand into layers (heads that fit the
  // hidden size, experts within range, ...): the error names the file here,
  // not first at deployment as "model 'import:...'".
  if (absl::StatusOr<ModelArch> expanded = ExpandModelArch(m); !expanded.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model ", origin, ": the config does not describe a model servesim ",
        "can build: ", expanded.status().message()));
  }
  return m;
}

}  // namespace servesim
