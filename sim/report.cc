#include "sim/report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/json_writer.h"
#include "sim/base/version.h"

namespace servesim {
namespace {

double NsToS(TimeNs ns) { return static_cast<double>(ns) / 1e9; }
double NsToUs(TimeNs ns) { return static_cast<double>(ns) / 1e3; }

void WriteLatency(JsonWriter& w, const char* name, const LatencySummary& s) {
  w.KV(absl::StrCat("mean_", name, "_ms"), s.mean_ms);
  w.KV(absl::StrCat("median_", name, "_ms"), s.median_ms);
  w.KV(absl::StrCat("std_", name, "_ms"), s.std_ms);
  w.KV(absl::StrCat("p90_", name, "_ms"), s.p90_ms);
  w.KV(absl::StrCat("p99_", name, "_ms"), s.p99_ms);
}

void WriteSummaryObject(JsonWriter& w, const char* key, const LatencySummary& s) {
  w.Key(key).BeginObject();
  w.KV("count", s.count);
  w.KV("mean_ms", s.mean_ms).KV("median_ms", s.median_ms).KV("std_ms", s.std_ms);
  w.KV("p90_ms", s.p90_ms).KV("p99_ms", s.p99_ms);
  w.KV("exact", s.exact);
  w.EndObject();
}

void WriteFour(JsonWriter& w, const char* key, const std::array<double, 4>& a) {
  w.Key(key)
      .BeginObject()
      .KV("mean", a[0])
      .KV("p50", a[1])
      .KV("p99", a[2])
      .KV("max", a[3]);
  w.EndObject();
}

void AppendTimeCell(std::string& out, TimeNs ns) {
  if (ns >= 0) AppendDouble(out, NsToS(ns));
}

}  // namespace

std::string BenchResultJson(const RunResult& r, const ReportContext& ctx,
                            const std::vector<RequestRecord>& records,
                            const std::vector<std::vector<TimeNs>>& request_itls,
                            bool detailed, int indent) {
  JsonWriter w(indent);
  w.BeginObject();
  w.KV("date", ctx.date);
  w.KV("endpoint_type", ctx.backend);
  w.KV("backend", ctx.backend);
  if (ctx.label) {
    w.KV("label", *ctx.label);
  } else {
    w.Key("label").Null();
  }
  w.KV("model_id", ctx.model_id);
  w.KV("tokenizer_id", ctx.tokenizer_id.empty() ? ctx.model_id : ctx.tokenizer_id);
  w.KV("num_prompts", r.num_prompts);
  if (std::isinf(ctx.request_rate)) {
    w.KV("request_rate", "inf");
  } else {
    w.KV("request_rate", ctx.request_rate);
  }
  w.KV("burstiness", ctx.burstiness);
  if (ctx.max_concurrency > 0) {
    w.KV("max_concurrency", ctx.max_concurrency);
  } else {
    w.Key("max_concurrency").Null();
  }
  w.KV("duration", r.duration_s);
  w.KV("completed", r.completed);
  w.KV("failed", r.failed);
  w.KV("total_input_tokens", r.total_input_tokens);
  w.KV("total_output_tokens", r.total_output_tokens);
  w.KV("request_throughput", r.request_throughput);
  if (ctx.request_goodput) {
    w.KV("request_goodput", *ctx.request_goodput);
  } else {
    w.Key("request_goodput").Null();
  }
  w.KV("output_throughput", r.output_throughput);
  w.KV("total_token_throughput", r.total_token_throughput);
  w.KV("max_output_tokens_per_s", r.max_output_tokens_per_s);
  w.KV("max_concurrent_requests", r.max_concurrent_requests);
  // vLLM's inverse real-time factor: input audio seconds / duration; the
  // simulated requests are text, so 0 as vLLM writes for text.
  w.KV("rtfx", 0.0);
  WriteLatency(w, "ttft", r.ttft);
  WriteLatency(w, "tpot", r.tpot);
  WriteLatency(w, "itl", r.itl);
  WriteLatency(w, "e2el", r.e2el);
  if (detailed) {
    w.Key("input_lens").BeginArray();
    for (const auto& rec : records) w.Int(rec.input_tokens);
    w.EndArray();
    w.Key("output_lens").BeginArray();
    for (const auto& rec : records) w.Int(rec.ok() ? rec.output_tokens : 0);
    w.EndArray();
    w.Key("ttfts").BeginArray();
    for (const auto& rec : records)
      w.Double(rec.ok() ? NsToS(rec.first_token_ns - rec.send_ns) : 0);
    w.EndArray();
    w.Key("itls").BeginArray();
    for (size_t i = 0; i < records.size(); ++i) {
      w.BeginArray();
      if (i < request_itls.size()) {
        for (TimeNs g : request_itls[i]) w.Double(NsToS(g));
      }
      w.EndArray();
    }
    w.EndArray();
    w.Key("start_times").BeginArray();
    for (const auto& rec : records) w.Double(NsToS(rec.send_ns));
    w.EndArray();
    w.Key("generated_texts").BeginArray();
    for (size_t i = 0; i < records.size(); ++i) w.String(std::string_view());
    w.EndArray();
    w.Key("errors").BeginArray();
    for (const auto& rec : records) {
      w.String(rec.reject == RejectReason::kNone ? std::string_view()
                                                 : RejectReasonName(rec.reject));
    }
    w.EndArray();
  }
  w.Key("servesim").BeginObject();
  w.KV("version", VersionString()).KV("commit", CommitString());
  // Replayed bench requests that streamed no token (RequestSpec::unmeasured):
  // in num_prompts, as in the file, and in no other key, as vLLM's client
  // saw no token of them.
  if (r.unmeasured > 0) w.KV("unmeasured_requests", r.unmeasured);
  WriteSummaryObject(w, "queueing", r.queueing);
  WriteSummaryObject(w, "client_wait", r.client_wait);
  w.KV("preemptions", r.preemptions);
  w.Key("rejected").BeginObject();
  for (int i = 1; i < kNumRejectReasons; ++i) {
    w.KV(RejectReasonName(static_cast<RejectReason>(i)), r.rejected_by_reason[i]);
  }
  w.EndObject();
  w.KV("num_steps", r.num_steps);
  WriteFour(w, "batch_size", r.batch_size);
  WriteFour(w, "tokens_per_step", r.tokens_per_step);
  w.Key("kv_occupancy").BeginObject();
  w.KV("time_weighted_mean", r.kv_occupancy_mean).KV("max", r.kv_occupancy_max);
  w.Key("series").BeginArray();
  for (const auto& [t, occ] : r.kv_series)
    w.BeginArray().Double(t).Double(occ).EndArray();
  w.EndArray();
  w.EndObject();
  w.KV("itl_exact", r.itl.exact);
  if (!ctx.replica_shares.empty()) {
    int64_t total = 0;
    for (const ReportContext::ReplicaShare& rs : ctx.replica_shares) total += rs.requests;
    w.Key("replicas").BeginArray();
    for (size_t i = 0; i < ctx.replica_shares.size(); ++i) {
      const ReportContext::ReplicaShare& rs = ctx.replica_shares[i];
      w.BeginObject()
          .KV("replica", static_cast<int64_t>(i))
          .KV("description", rs.description)
          .KV("requests", rs.requests)
          .KV("share", total > 0 ? static_cast<double>(rs.requests) / total : 0.0)
          .EndObject();
    }
    w.EndArray();
  }
  if (!ctx.costs.empty()) {
    w.Key("cost").BeginArray();
    for (const ReportContext::Cost& c : ctx.costs) {
      w.BeginObject()
          .KV("tier", c.tier)
          .KV("offers", c.offers)
          .KV("usd_per_hour", c.usd_per_hour)
          .KV("usd_per_m_output_tokens", c.usd_per_m_output_tokens)
          .KV("output_tok_s_per_usd_hour", c.output_tok_s_per_usd_hour)
          .EndObject();
    }
    w.EndArray();
  }
  if (!r.itl.exact) {
    w.KV("itl_note",
         "pooled ITL exceeded the exact cap: percentiles from a log histogram (1024 bins "
         "per "
         "octave, relative bin width < 1e-3); mean and std exact");
  }
  if (ctx.write_servesim_extra) ctx.write_servesim_extra(w);
  w.Key("provenance").BeginArray();
  for (const auto& line : ctx.provenance) w.String(line);
  w.EndArray();
  if (!ctx.resolved_config.empty()) w.KV("resolved_config", ctx.resolved_config);
  w.EndObject();
  w.EndObject();
  std::string out = w.Take();
  out.push_back('\n');
  return out;
}

std::vector<int64_t> RequestsPerReplica(const std::vector<RequestRecord>& records,
                                        int32_t num_replicas) {
  std::vector<int64_t> out(static_cast<size_t>(std::max(0, num_replicas)), 0);
  for (const RequestRecord& rec : records) {
    if (rec.replica >= 0 && rec.replica < num_replicas) ++out[rec.replica];
  }
  return out;
}

std::string RequestsCsv(const std::vector<RequestRecord>& records) {
  std::string out =
      "id,replica,input_tokens,output_tokens,status,intended_s,send_s,arrival_s,"
      "first_scheduled_s,first_token_s,finish_s,ttft_ms,e2el_ms,queueing_ms,preemptions,"
      "prefix_hit_tokens\n";
  for (const RequestRecord& r : records) {
    absl::StrAppend(&out, r.id, ",", r.replica, ",", r.input_tokens, ",", r.output_tokens,
                    ",");
    AppendCsvCell(out, r.reject == RejectReason::kNone ? std::string_view("ok")
                                                       : RejectReasonName(r.reject));
    for (TimeNs t : {r.intended_ns, r.send_ns, r.arrival_ns, r.first_scheduled_ns,
                     r.first_token_ns, r.finish_ns}) {
      out.push_back(',');
      AppendTimeCell(out, t);
    }
    out.push_back(',');
    if (r.ok())
      AppendDouble(out, static_cast<double>(r.first_token_ns - r.send_ns) / 1e6);
    out.push_back(',');
    if (r.ok()) AppendDouble(out, static_cast<double>(r.finish_ns - r.send_ns) / 1e6);
    out.push_back(',');
    if (r.ok())
      AppendDouble(out, static_cast<double>(r.first_scheduled_ns - r.arrival_ns) / 1e6);
    absl::StrAppend(&out, ",", r.preemptions, ",", r.prefix_hit_tokens, "\n");
  }
  return out;
}

std::string SummaryText(const RunResult& r, const ReportContext& ctx) {
  std::string s;
  auto line = [&s](const std::string& label, double v) {
    absl::StrAppend(&s, absl::StrFormat("%-40s %-10.2f\n", label, v));
  };
  auto iline = [&s](const std::string& label, int64_t v) {
    absl::StrAppend(&s, absl::StrFormat("%-40s %-10d\n", label, v));
  };
  auto header = [&s](const std::string& title, char fill) {
    const int width = 50;
    const int pad = width - static_cast<int>(title.size()) - 2;
    const int left = pad / 2, right = pad - left;
    absl::StrAppend(&s, std::string(left, fill), " ", title, " ",
                    std::string(right, fill), "\n");
  };
  auto lat = [&](const std::string& title, const std::string& name,
                 const LatencySummary& l) {
    header(title, '-');
    line(absl::StrCat("Mean ", name, " (ms):"), l.mean_ms);
    line(absl::StrCat("Median ", name, " (ms):"), l.median_ms);
    line(absl::StrCat("P90 ", name, " (ms):"), l.p90_ms);
    line(absl::StrCat("P99 ", name, " (ms):"), l.p99_ms);
  };
  header("Serving Benchmark Result", '=');
  iline("Successful requests:", r.completed);
  if (r.failed > 0) iline("Failed requests:", r.failed);
  if (r.unmeasured > 0) iline("Unmeasured requests (load only):", r.unmeasured);
  if (ctx.max_concurrency > 0) iline("Maximum request concurrency:", ctx.max_concurrency);
  if (!std::isinf(ctx.request_rate)) line("Request rate (req/s):", ctx.request_rate);
  line("Benchmark duration (s):", r.duration_s);
  iline("Total input tokens:", r.total_input_tokens);
  iline("Total generated tokens:", r.total_output_tokens);
  line("Request throughput (req/s):", r.request_throughput);
  if (ctx.request_goodput) line("Request goodput (req/s):", *ctx.request_goodput);
  line("Output token throughput (tok/s):", r.output_throughput);
  line("Peak output token throughput (tok/s):", r.max_output_tokens_per_s);
  line("Peak concurrent requests:", static_cast<double>(r.max_concurrent_requests));
  line("Total Token throughput (tok/s):", r.total_token_throughput);
  lat("Time to First Token", "TTFT", r.ttft);
  lat("Time per Output Token (excl. 1st token)", "TPOT", r.tpot);
  lat(r.itl.exact ? "Inter-token Latency" : "Inter-token Latency (histogram)", "ITL",
      r.itl);
  lat("End-to-end Latency", "E2EL", r.e2el);
  header("servesim", '-');
  line("Mean queueing delay (ms):", r.queueing.mean_ms);
  line("P99 queueing delay (ms):", r.queueing.p99_ms);
  // Time a request waited at the client past its intended send time
  // (--max-concurrency, or a session's previous turn still answering).
  if (r.client_wait.count > 0 && r.client_wait.p99_ms > 0) {
    line("Mean client wait (ms):", r.client_wait.mean_ms);
    line("P99 client wait (ms):", r.client_wait.p99_ms);
  }
  iline("Preemptions:", r.preemptions);
  for (int i = 1; i < kNumRejectReasons; ++i) {
    if (r.rejected_by_reason[i] > 0) {
      iline(
          absl::StrCat("Rejected (",
                       std::string(RejectReasonName(static_cast<RejectReason>(i))), "):"),
          r.rejected_by_reason[i]);
    }
  }
  iline("Engine steps:", r.num_steps);
  line("Mean batch size (seqs):", r.batch_size[0]);
  line("Mean tokens per step:", r.tokens_per_step[0]);
  line("KV cache occupancy, mean (%):", 100 * r.kv_occupancy_mean);
  line("KV cache occupancy, max (%):", 100 * r.kv_occupancy_max);
  int64_t routed = 0;
  for (const ReportContext::ReplicaShare& rs : ctx.replica_shares) routed += rs.requests;
  for (size_t i = 0; i < ctx.replica_shares.size(); ++i) {
    const ReportContext::ReplicaShare& rs = ctx.replica_shares[i];
    absl::StrAppend(
        &s, absl::StrFormat(
                "%-40s %-10d (%.1f%%)\n",
                absl::StrCat("Requests on replica ", i, " (", rs.description, "):"),
                rs.requests,
                routed > 0 ? 100.0 * static_cast<double>(rs.requests) / routed : 0.0));
  }
  for (const ReportContext::Cost& c : ctx.costs) {
    absl::StrAppend(
        &s, absl::StrFormat("%-40s %-10.3f\n",
                            absl::StrCat("$ per 1M output tokens (", c.tier, "):"),
                            c.usd_per_m_output_tokens));
  }
  for (const ReportContext::Cost& c : ctx.costs) {
    absl::StrAppend(&s, "  ", c.tier, ": ", c.offers, "\n");
  }
  // A tier with no price is said, not left out silently (provenance holds
  // why: "cost (spot): not reported: ...").
  for (const std::string& p : ctx.provenance) {
    if (absl::StartsWith(p, "cost (")) absl::StrAppend(&s, p, "\n");
  }
  absl::StrAppend(&s, std::string(50, '='), "\n");
  return s;
}

void ChromeTraceRecorder::OnStep(int32_t replica, TimeNs start_ns, TimeNs duration_ns,
                                 const Scheduler& s, const StepCost& cost) {
  if (steps_ >= max_steps_) {
    ++dropped_steps_;
    return;
  }
  ++steps_;
  JsonWriter w;
  w.BeginObject();
  w.KV("name", s.batch_num_prefills() > 0 ? "step (prefill)" : "step (decode)");
  w.KV("cat", "step").KV("ph", "X");
  w.KV("ts", NsToUs(start_ns)).KV("dur", NsToUs(duration_ns));
  w.KV("pid", replica).KV("tid", int64_t{0});
  w.Key("args").BeginObject();
  w.KV("num_seqs", s.batch_num_seqs());
  w.KV("num_tokens", s.batch_num_tokens());
  w.KV("num_prefills", s.batch_num_prefills());
  w.KV("num_decodes", static_cast<int64_t>(s.batch().decode_context_lens.size()));
  w.Key("prefill_chunks").BeginArray();
  for (const PrefillChunk& c : s.batch().prefills) {
    w.BeginArray().Int(c.num_tokens).Int(c.num_computed_before).EndArray();
  }
  w.EndArray();
  w.KV("preempted", s.step_preemptions());
  w.KV("running", s.num_running()).KV("waiting", s.num_waiting());
  w.KV("kv_used_blocks", s.kv().num_used_blocks());
  w.KV("kv_total_blocks", s.kv().num_blocks());
  w.KV("host_us", NsToUs(cost.host_ns)).KV("device_us", NsToUs(cost.device_ns));
  w.EndObject();
  w.EndObject();
  if (!events_.empty()) events_.push_back(',');
  events_.append(w.str());
}

void ChromeTraceRecorder::OnRequestDone(const RequestRecord& rec) {
  const int64_t pid = rec.replica >= 0 ? rec.replica : 0;
  auto async_event = [&](const char* ph, const std::string& name, TimeNs t, bool args) {
    JsonWriter w;
    w.BeginObject().KV("name", name).KV("cat", "request").KV("ph", ph);
    w.Key("id").Int(rec.id);
    w.KV("ts", NsToUs(t)).KV("pid", pid).KV("tid", int64_t{1});
    if (args) {
      w.Key("args").BeginObject();
      w.KV("input_tokens", rec.input_tokens).KV("output_tokens", rec.output_tokens);
      w.KV("preemptions", rec.preemptions).KV("prefix_hit_tokens", rec.prefix_hit_tokens);
      w.KV("status", rec.reject == RejectReason::kNone ? std::string_view("ok")
                                                       : RejectReasonName(rec.reject));
      w.EndObject();
    }
    w.EndObject();
    if (!events_.empty()) events_.push_back(',');
    events_.append(w.str());
  };
  const std::string name = absl::StrCat("request ", rec.id);
  async_event("b", name, rec.send_ns, true);
  if (rec.first_scheduled_ns >= 0)
    async_event("n", "first scheduled", rec.first_scheduled_ns, false);
  if (rec.first_token_ns >= 0) async_event("n", "first token", rec.first_token_ns, false);
  async_event("e", name, rec.finish_ns, false);
}

std::string ChromeTraceRecorder::Finish(int32_t num_replicas) const {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  for (int32_t r = 0; r < num_replicas; ++r) {
    JsonWriter w;
    w.BeginObject().KV("name", "process_name").KV("ph", "M").KV("pid", r);
    w.Key("args").BeginObject().KV("name", absl::StrCat("replica ", r)).EndObject();
    w.EndObject();
    out.append(w.str());
    out.push_back(',');
  }
  out.append(events_);
  if (!events_.empty() || num_replicas == 0) {
    // nothing
  } else if (out.back() == ',') {
    out.pop_back();
  }
  out.append("],\"metadata\":{\"generator\":\"servesim\",\"dropped_steps\":");
  absl::StrAppend(&out, dropped_steps_, "}}\n");
  return out;
}

}  // namespace servesim
