#include "hwmodels/catalog.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "hwmodels/embedded_data.h"
#include "sim/status_macros.h"

namespace servesim {
namespace {

using internal::EmbeddedFile;

template <typename Msg>
absl::StatusOr<Msg> ParseEmbedded(const EmbeddedFile& f) {
  Msg m;
  if (!google::protobuf::TextFormat::ParseFromString(f.text, &m)) {
    return absl::InternalError(
        absl::StrCat("embedded ", f.name, ": not a valid text proto"));
  }
  return m;
}

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

}  // namespace

absl::StatusOr<proto::Device> FindDevice(const std::string& name) {
  const std::string want = absl::AsciiStrToLower(name);
  for (int i = 0; i < internal::kNumEmbeddedDeviceFiles; ++i) {
    ASSIGN_OR_RETURN(proto::Device d,
                     ParseEmbedded<proto::Device>(internal::kEmbeddedDeviceFiles[i]));
    if (d.id() == want) return d;
    for (const std::string& a : d.aliases())
      if (absl::AsciiStrToLower(a) == want) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--device: unknown device '", name,
                   "'; allowed: ", absl::StrJoin(DeviceIds(), ", ")));
}

std::vector<std::string> DeviceIds() {
  std::vector<std::string> ids;
  for (int i = 0; i < internal::kNumEmbeddedDeviceFiles; ++i) {
    auto d = ParseEmbedded<proto::Device>(internal::kEmbeddedDeviceFiles[i]);
    if (d.ok()) ids.push_back(d->id());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<std::string> ModelIds() {
  std::vector<std::string> ids;
  for (int i = 0; i < internal::kNumEmbeddedModelFiles; ++i) {
    auto m = ParseEmbedded<proto::ModelArch>(internal::kEmbeddedModelFiles[i]);
    if (m.ok()) ids.push_back(m->id());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::StatusOr<proto::ModelArch> FindModel(const std::string& name_or_path) {
  if ((absl::EndsWith(name_or_path, ".json") || absl::StrContains(name_or_path, "/")) &&
      FileExists(name_or_path)) {
    std::ifstream in(name_or_path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ImportHfConfig(ss.str(), name_or_path);
  }
  if (absl::EndsWith(name_or_path, ".json")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model: ", name_or_path, ": config file not found or not readable"));
  }
  const std::string want = NormalizeModelName(name_or_path);
  for (int i = 0; i < internal::kNumEmbeddedModelFiles; ++i) {
    ASSIGN_OR_RETURN(proto::ModelArch m,
                     ParseEmbedded<proto::ModelArch>(internal::kEmbeddedModelFiles[i]));
    if (m.id() == want) return m;
    for (const std::string& h : m.hf_ids())
      if (NormalizeModelName(h) == want) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--model: unknown model '", name_or_path,
                   "'; allowed: ", absl::StrJoin(ModelIds(), ", "),
                   ", their Hugging Face ids (e.g. google/gemma-4-E2B-it), or a path to "
                   "a config.json"));
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

}  // namespace

absl::StatusOr<proto::ModelArch> ImportHfConfig(const std::string& json_text,
                                                const std::string& origin) {
  Struct root;
  auto st = google::protobuf::util::JsonStringToMessage(json_text, &root);
  if (!st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model ", origin, ": not valid JSON: ", st.message().as_string()));
  }
  const Struct* cfg = &root;
  if (const Value* tc = Field(root, "text_config");
      tc != nullptr && tc->kind_case() == Value::kStructValue) {
    cfg = &tc->struct_value();
  }
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
        "--model ", origin, ": model_type '", model_type,
        "' is not supported (attention-only decoders: gemma*, llama, mistral, mixtral, "
        "qwen*, phi*, granite, olmo*, internlm*, yi, deepseek*, gpt_oss, starcoder2)"));
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
  const int32_t head_dim = static_cast<int32_t>(Num(*cfg, {"head_dim"}, hidden / heads));
  m.set_num_kv_heads_sliding(kv_heads);
  m.set_head_dim_sliding(head_dim);
  m.set_num_kv_heads_full(static_cast<int32_t>(
      Num(*cfg, {"num_global_key_value_heads", "num_full_key_value_heads"}, kv_heads)));
  m.set_head_dim_full(
      static_cast<int32_t>(Num(*cfg, {"global_head_dim", "full_head_dim"}, head_dim)));
  m.set_full_attention_k_eq_v(Bool(*cfg, "attention_k_eq_v", false));
  m.set_num_kv_shared_layers(
      static_cast<int32_t>(Num(*cfg, {"num_kv_shared_layers"}, 0)));
  m.set_per_layer_embedding_dim(
      static_cast<int32_t>(Num(*cfg, {"hidden_size_per_layer_input"}, 0)));
  m.set_num_experts(
      static_cast<int32_t>(Num(*cfg, {"num_experts", "num_local_experts"}, 0)));
  m.set_experts_top_k(
      static_cast<int32_t>(Num(*cfg, {"top_k_experts", "num_experts_per_tok"}, 0)));
  m.set_expert_intermediate_size(static_cast<int32_t>(
      Num(*cfg, {"moe_intermediate_size", "expert_intermediate_size"}, 0)));
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
    for (const Value& v : lt->list_value().values()) {
      const std::string t = v.kind_case() == Value::kStringValue ? v.string_value() : "";
      pattern.push_back(absl::StrContains(t, "sliding") ? 'S' : 'F');
    }
    if (static_cast<int64_t>(pattern.size()) != layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model ", origin, ": field layer_types has ", pattern.size(),
                       " entries, num_hidden_layers is ", layers));
    }
  } else if (const double p = Num(*cfg, {"sliding_window_pattern"}, 0); p > 1) {
    m.set_sliding_pattern(static_cast<int32_t>(p));
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
  } else {
    ASSIGN_OR_RETURN(int64_t w, need({"intermediate_size"}, "intermediate_size"));
    auto* r = m.add_ffn_runs();
    r->set_count(static_cast<int32_t>(layers));
    r->set_intermediate_size(static_cast<int32_t>(w));
  }
  m.add_sources(absl::StrCat("imported from ", origin));
  return m;
}

}  // namespace servesim
