// `servesim devices` and `servesim models`: what the catalog holds (the
// embedded files of hwmodels/devices/ and hwmodels/models/), as a table or
// --json, and `... show ID|PATH` printing one whole file.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/cli/cli.h"
#include "google/protobuf/util/json_util.h"
#include "hwmodels/catalog.h"
#include "hwmodels/catalog_priors.h"
#include "hwmodels/model_arch.h"
#include "sim/base/json_writer.h"

namespace servesim::cli {
namespace {

struct ListFlags {
  bool json = false;
  bool show_given = false;  // the `show` subcommand ran
  std::string show;         // id, alias or path for `show`
};

int Fail(const char* cmd, const absl::Status& st) {
  std::fprintf(stderr, "servesim %s: error: %s\n", cmd,
               std::string(st.message()).c_str());
  return kExitBadInput;
}

// `show ID --json`: the parsed file as one JSON object (the proto's own
// field names), for scripts; the text form is the file itself.
int PrintJson(const char* cmd, const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.preserve_proto_field_names = true;
  std::string out;
  if (auto st = google::protobuf::util::MessageToJsonString(m, &out, o); !st.ok()) {
    return Fail(cmd, absl::InternalError(st.message().as_string()));
  }
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

absl::Status CheckShowId(const std::string& id, const char* list) {
  if (!id.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "id: empty; give an id, alias or path (`servesim ", list, "` lists them)"));
}

// Peak dense FLOP/s by dtype, as the file lists its dtypes.
void DtypePeaks(JsonWriter& w, const proto::Device& d) {
  w.Key("peak_flops").BeginObject();
  for (const std::string& dt : d.dtypes()) {
    const double v = dt == "fp16"   ? d.peak_flops_fp16()
                     : dt == "bf16" ? d.peak_flops_bf16()
                     : dt == "fp8"  ? d.peak_flops_fp8()
                                    : d.peak_ops_int8();
    w.KV(dt, v);
  }
  // fp16 is the 16-bit path of every device (TPUs run it on the bf16 MXU).
  if (std::find(d.dtypes().begin(), d.dtypes().end(), "fp16") == d.dtypes().end())
    w.KV("fp16", d.peak_flops_fp16());
  w.EndObject();
}

std::string PeaksText(const proto::Device& d) {
  std::vector<std::string> parts;
  for (const std::string& dt : d.dtypes()) {
    const double v = dt == "fp16"   ? d.peak_flops_fp16()
                     : dt == "bf16" ? d.peak_flops_bf16()
                     : dt == "fp8"  ? d.peak_flops_fp8()
                                    : d.peak_ops_int8();
    parts.push_back(absl::StrFormat("%s %.0f", dt, v / 1e12));
  }
  return absl::StrJoin(parts, ", ");
}

int RunDevices(const ListFlags& f) {
  if (f.show_given) {
    if (absl::Status st = CheckShowId(f.show, "devices"); !st.ok()) {
      return Fail("devices show", st);
    }
    absl::StatusOr<std::string> text = DeviceFileText(f.show);
    if (!text.ok()) return Fail("devices show", text.status());
    // A file given by path is validated before it is shown as usable.
    absl::StatusOr<proto::Device> d = FindDevice(f.show);
    if (!d.ok()) return Fail("devices show", d.status());
    if (f.json) return PrintJson("devices show", *d);
    std::fputs(text->c_str(), stdout);
    return kExitOk;
  }
  const std::vector<proto::Device> devices = EmbeddedDevices();
  if (f.json) {
    JsonWriter w(2);
    w.BeginObject().Key("devices").BeginArray();
    for (const proto::Device& d : devices) {
      w.BeginObject();
      w.KV("id", d.id());
      w.KV("name", d.name());
      w.KV("vendor", d.vendor());
      w.KV("architecture", d.architecture());
      w.KV("memory_bytes", d.memory_bytes());
      w.KV("usable_memory_gib", d.usable_memory_gib());
      w.KV("usable_memory_rule", d.usable_memory_rule());
      w.KV("bandwidth_bytes_per_s", d.bandwidth_bytes_per_s());
      DtypePeaks(w, d);
      w.Key("weight_formats").BeginArray();
      for (const std::string& q : d.weight_formats()) w.String(q);
      w.EndArray();
      w.KV("calibrated", IsCalibratedDevice(d));
      if (d.has_interconnect()) {
        const proto::Interconnect& ic = d.interconnect();
        w.Key("interconnect").BeginObject();
        w.KV("kind", ic.kind());
        w.KV("bandwidth_bytes_per_s", ic.bandwidth_bytes_per_s());
        w.KV("max_devices_per_node", ic.max_devices_per_node());
        w.KV("topology", ic.topology());
        w.EndObject();
      }
      w.Key("prices").BeginArray();
      for (const proto::PriceOffer& p : d.prices()) {
        w.BeginObject();
        w.KV("provider", p.provider());
        w.KV("instance", p.instance());
        w.KV("region", p.region());
        w.KV("tier", p.tier());
        w.KV("usd_per_hour", p.usd_per_hour());
        w.KV("date", p.date());
        w.KV("source", p.source());
        w.EndObject();
      }
      w.EndArray();
      w.Key("source").BeginArray();
      for (const std::string& s : d.sources()) w.String(s);
      w.EndArray();
      w.KV("file", d.origin());
      w.KV("content_hash", d.content_hash());
      w.KV("file_hash", d.file_hash());
      w.EndObject();
    }
    w.EndArray().EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  std::printf("%-10s %-7s %-10s %9s %8s  %-44s %-30s %s\n", "id", "vendor", "arch",
              "mem GiB", "TB/s", "dense TFLOP/s (TOP/s int8)", "weight formats",
              "first price");
  for (const proto::Device& d : devices) {
    std::string price = "-";
    if (d.prices_size() > 0) {
      const proto::PriceOffer& p = d.prices(0);
      price = absl::StrFormat("$%.4g/h %s %s", p.usd_per_hour(), p.tier(), p.provider());
    }
    std::printf("%-10s %-7s %-10s %9.2f %8.3f  %-44s %-30s %s%s\n", d.id().c_str(),
                d.vendor().c_str(), d.architecture().c_str(), d.usable_memory_gib(),
                d.bandwidth_bytes_per_s() / 1e12, PeaksText(d).c_str(),
                absl::StrJoin(d.weight_formats(), ",").c_str(), price.c_str(),
                IsCalibratedDevice(d) ? "" : "  [uncalibrated: priors by rule]");
  }
  std::printf(
      "\n%zu devices. `servesim devices show ID` prints a file; --device PATH takes your "
      "own (same format).\n",
      devices.size());
  return kExitOk;
}

int RunModels(const ListFlags& f) {
  if (f.show_given) {
    if (absl::Status st = CheckShowId(f.show, "models"); !st.ok()) {
      return Fail("models show", st);
    }
    absl::StatusOr<proto::ModelArch> m = FindModel(f.show);
    if (!m.ok()) return Fail("models show", m.status());
    if (f.json) return PrintJson("models show", *m);
    absl::StatusOr<std::string> text = ModelFileText(f.show);
    if (!text.ok()) return Fail("models show", text.status());
    std::fputs(text->c_str(), stdout);
    return kExitOk;
  }
  const std::vector<proto::ModelArch> models = EmbeddedModels();
  struct Row {
    const proto::ModelArch* desc;
    double params = 0;
    int64_t kv_bytes_per_token = 0;
  };
  std::vector<Row> rows;
  for (const proto::ModelArch& m : models) {
    Row r{&m};
    if (absl::StatusOr<ModelArch> a = ExpandModelArch(m); a.ok()) {
      r.params = CountParams(*a).Text();
      r.kv_bytes_per_token = KvBytesPerToken(*a, 2);
    }
    rows.push_back(r);
  }
  if (f.json) {
    JsonWriter w(2);
    w.BeginObject().Key("models").BeginArray();
    for (const Row& r : rows) {
      const proto::ModelArch& m = *r.desc;
      w.BeginObject();
      w.KV("id", m.id());
      w.KV("name", m.display_name());
      w.KV("family", m.family());
      w.Key("hf_ids").BeginArray();
      for (const std::string& h : m.hf_ids()) w.String(h);
      w.EndArray();
      w.KV("text_params", r.params);
      w.KV("num_layers", m.num_layers());
      w.KV("hidden_size", m.hidden_size());
      w.KV("num_experts", m.num_experts());
      w.KV("experts_top_k", m.experts_top_k());
      w.KV("max_position_embeddings", m.max_position_embeddings());
      w.KV("kv_bytes_per_token_16bit", r.kv_bytes_per_token);
      w.Key("source").BeginArray();
      for (const std::string& s : m.sources()) w.String(s);
      w.EndArray();
      w.EndObject();
    }
    w.EndArray().EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  std::printf("%-16s %-8s %10s %7s %9s %12s  %s\n", "id", "family", "params B", "layers",
              "experts", "KV B/token", "Hugging Face id");
  for (const Row& r : rows) {
    const proto::ModelArch& m = *r.desc;
    std::printf("%-16s %-8s %10.2f %7d %9s %12lld  %s\n", m.id().c_str(),
                m.family().c_str(), r.params / 1e9, m.num_layers(),
                m.num_experts() > 0
                    ? absl::StrCat(m.experts_top_k(), "/", m.num_experts()).c_str()
                    : "-",
                static_cast<long long>(r.kv_bytes_per_token),
                m.hf_ids_size() > 0 ? m.hf_ids(0).c_str() : "");
  }
  std::printf(
      "\n%zu models. `servesim models show ID` prints a file; --model also takes a "
      "Hugging "
      "Face config.json or a model .textproto.\n",
      rows.size());
  return kExitOk;
}

void Register(CLI::App& app, int* exit_code, const char* name, const char* what,
              int (*run)(const ListFlags&)) {
  auto f = std::make_shared<ListFlags>();
  CLI::App* cmd = app.add_subcommand(
      name, absl::StrCat("List the ", what, " servesim knows (embedded files), or `",
                         name, " show ID` to print one file."));
  cmd->add_flag(
      "--json", f->json,
      absl::StrCat("a JSON object with a `", name, "` array of objects keyed id, ..."));
  CLI::App* show = cmd->add_subcommand(
      "show", "print one whole file (--json: the parsed file as a JSON object)");
  show->add_option("id", f->show, "id, alias or path")->required();
  show->add_flag("--json", f->json,
                 "the parsed file as one JSON object (proto field names)");
  show->callback([f, exit_code, run] {
    f->show_given = true;
    *exit_code = run(*f);
  });
  cmd->callback([f, exit_code, run, cmd] {
    if (cmd->got_subcommand("show")) return;  // show's own callback ran
    *exit_code = run(*f);
  });
}

}  // namespace

void RegisterDevicesCommand(CLI::App& app, int* exit_code) {
  Register(app, exit_code, "devices", "accelerators", &RunDevices);
}

void RegisterModelsCommand(CLI::App& app, int* exit_code) {
  Register(app, exit_code, "models", "models", &RunModels);
}

}  // namespace servesim::cli
