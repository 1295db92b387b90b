#include "traces/trace_stats.h"

#include <cmath>
#include <map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/json_writer.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

LengthSummary Summarize(const std::map<int32_t, int64_t>& hist, int64_t n, double sum) {
  LengthSummary s;
  if (n == 0) return s;
  s.min = hist.begin()->first;
  s.max = hist.rbegin()->first;
  s.mean = sum / static_cast<double>(n);
  const double ps[3] = {0.50, 0.90, 0.99};
  int64_t* outs[3] = {&s.p50, &s.p90, &s.p99};
  for (int k = 0; k < 3; ++k) {
    // Nearest rank: ceil(p * n), 1-based.
    const int64_t rank =
        std::max<int64_t>(1, static_cast<int64_t>(std::ceil(ps[k] * n - 1e-9)));
    int64_t cum = 0;
    for (const auto& [value, count] : hist) {
      cum += count;
      if (cum >= rank) {
        *outs[k] = value;
        break;
      }
    }
  }
  return s;
}

void WriteLengths(JsonWriter& w, std::string_view key, const LengthSummary& s) {
  w.Key(key).BeginObject();
  w.KV("min", s.min).KV("p50", s.p50).KV("p90", s.p90).KV("p99", s.p99).KV("max", s.max);
  w.KV("mean", s.mean);
  w.EndObject();
}

}  // namespace

absl::StatusOr<TraceStats> ComputeTraceStats(RequestSource& source,
                                             int64_t max_tracked_hashes) {
  TraceStats st;
  std::map<int32_t, int64_t> in_hist, out_hist;
  double in_sum = 0, out_sum = 0;
  std::unordered_set<uint64_t> seen;  // membership only: order never reaches output
  int64_t hits = 0;
  // Welford over the gaps (in seconds).
  int64_t gaps = 0;
  double gap_mean = 0, gap_m2 = 0;
  TimeNs first = 0, prev = 0;
  RequestSpec r;
  while (true) {
    ASSIGN_OR_RETURN(bool got, source.Next(r));
    if (!got) break;
    if (st.requests == 0) {
      first = r.arrival_ns;
    } else {
      const double g = static_cast<double>(r.arrival_ns - prev) / 1e9;
      ++gaps;
      const double d = g - gap_mean;
      gap_mean += d / static_cast<double>(gaps);
      gap_m2 += d * (g - gap_mean);
    }
    prev = r.arrival_ns;
    ++st.requests;
    ++in_hist[r.input_tokens];
    ++out_hist[r.output_tokens];
    in_sum += r.input_tokens;
    out_sum += r.output_tokens;
    if (r.session_id >= 0) ++st.requests_in_sessions;
    // Prompt blocks are counted; hashes of an answer (past the prompt's
    // blocks) are only remembered, for the next turn's prompt to repeat.
    // (With an answer hashed, a block the prompt ends inside holds answer
    // tokens too: it is not counted as a prompt block.)
    const size_t prompt_blocks =
        r.hash_block_tokens <= 0 ? 0
        : r.hashed_output_tokens > 0
            ? static_cast<size_t>(r.input_tokens / r.hash_block_tokens)
            : static_cast<size_t>(
                  MaxPrefixHashes(r.input_tokens, 0, r.hash_block_tokens));
    for (size_t i = 0; i < r.prefix_hashes.size(); ++i) {
      const uint64_t h = r.prefix_hashes[i];
      const bool prompt = i < prompt_blocks;
      if (prompt) ++st.hashed_blocks;
      if (seen.count(h)) {
        if (prompt) ++hits;
      } else if (static_cast<int64_t>(seen.size()) < max_tracked_hashes) {
        seen.insert(h);
      } else {
        st.prefix_sharing_approximate = true;
      }
    }
  }
  st.source = source.Describe();
  if (auto* reader = dynamic_cast<TraceReader*>(&source)) st.reader = reader->stats();
  st.span_ns = prev - first;
  if (st.requests >= 2 && st.span_ns > 0) {
    st.mean_rate_per_s = static_cast<double>(st.requests - 1) * 1e9 / st.span_ns;
  }
  st.input = Summarize(in_hist, st.requests, in_sum);
  st.output = Summarize(out_hist, st.requests, out_sum);
  if (gaps >= 2 && gap_mean > 0) {
    st.interarrival_cv = std::sqrt(gap_m2 / static_cast<double>(gaps)) / gap_mean;
  }
  if (st.hashed_blocks > 0) {
    st.prefix_sharing_ratio =
        static_cast<double>(hits) / static_cast<double>(st.hashed_blocks);
  }
  return st;
}

namespace {
// Text for people: 6 significant digits (the JSON keeps every digit).
std::string Sig6(double v) { return absl::StrFormat("%.6g", v); }
}  // namespace

std::string FormatTraceStatsText(const TraceStats& s) {
  std::string out;
  absl::StrAppend(&out, "source: ", s.source, "\n");
  absl::StrAppend(&out, "requests: ", s.requests, "\n");
  absl::StrAppend(&out, "time span: ", Sig6(s.span_ns / 1e9), " s\n");
  absl::StrAppend(&out, "mean rate: ", Sig6(s.mean_rate_per_s), " req/s\n");
  auto lengths = [&](const char* name, const LengthSummary& l) {
    absl::StrAppend(&out, name, " tokens: p50 ", l.p50, ", p90 ", l.p90, ", p99 ", l.p99,
                    ", max ", l.max, ", mean ", Sig6(l.mean), "\n");
  };
  lengths("input", s.input);
  lengths("output", s.output);
  absl::StrAppend(&out, "inter-arrival CV: ", Sig6(s.interarrival_cv), "\n");
  absl::StrAppend(&out, "prefix sharing: ", Sig6(s.prefix_sharing_ratio), " of ",
                  s.hashed_blocks, " hashed blocks seen before",
                  s.prefix_sharing_approximate ? " (approximate: hash set capped)" : "",
                  "\n");
  absl::StrAppend(&out, "requests in sessions: ", s.requests_in_sessions, "\n");
  if (s.reader) {
    absl::StrAppend(&out, "rows read: ", s.reader->rows, "\n");
    absl::StrAppend(&out, "skipped rows: ", s.reader->SkippedSummary(), "\n");
  }
  return out;
}

std::string FormatTraceStatsJson(const TraceStats& s) {
  JsonWriter w(2);
  w.BeginObject();
  w.KV("source", s.source);
  w.KV("requests", s.requests);
  w.KV("span_s", s.span_ns / 1e9);
  w.KV("mean_rate_per_s", s.mean_rate_per_s);
  WriteLengths(w, "input_tokens", s.input);
  WriteLengths(w, "output_tokens", s.output);
  w.KV("interarrival_cv", s.interarrival_cv);
  w.KV("hashed_blocks", s.hashed_blocks);
  w.KV("prefix_sharing_ratio", s.prefix_sharing_ratio);
  w.KV("prefix_sharing_approximate", s.prefix_sharing_approximate);
  w.KV("requests_in_sessions", s.requests_in_sessions);
  if (s.reader) {
    w.KV("rows_read", s.reader->rows);
    w.Key("skipped").BeginObject();
    for (int i = 0; i < kNumSkipReasons; ++i) {
      w.KV(SkipReasonName(static_cast<SkipReason>(i)), s.reader->skipped[i]);
    }
    w.EndObject();
  }
  w.EndObject();
  std::string out = w.Take();
  out.push_back('\n');
  return out;
}

}  // namespace servesim
