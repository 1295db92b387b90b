#include "traces/synthetic.h"

#include <cmath>
#include <limits>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/status_macros.h"
#include "sim/random_source.h"
#include "traces/prefix_hash.h"
#include "traces/trace_reader.h"

namespace servesim {
namespace {

// A gap in ns, exact up to the arrival horizon; past it, one ns beyond (the
// source then refuses the request, naming the horizon). Gaps were clamped
// at 1e8 s, which silently sped up low rates (constant 1e-9 req/s came out
// at 1e-8).
TimeNs SecondsToNs(double s) {
  if (!(s > 0)) return 0;
  if (!(s * 1e9 <= static_cast<double>(kMaxTraceArrivalNs)))
    return kMaxTraceArrivalNs + 1;
  return static_cast<TimeNs>(std::llround(s * 1e9));
}

// ns of a time in ns held as a double, saturating at INT64_MAX.
TimeNs SaturatingNs(double t) {
  if (!(t < 9.2e18)) return std::numeric_limits<TimeNs>::max();
  return static_cast<TimeNs>(std::llround(t));
}

// The value as given: an integer in full (StrCat's 6 digits printed
// 10,000,001 as 1e+07, which reads as inside [1, 10000000]), else the
// shortest exact form.
absl::Status RangeError(std::string_view field, double v, std::string_view allowed) {
  const std::string value = std::isfinite(v) && v == std::trunc(v) && std::abs(v) < 1e18
                                ? absl::StrCat(static_cast<int64_t>(v))
                                : absl::StrFormat("%.17g", v);
  return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": ", value,
                                                 " is outside the allowed range ",
                                                 std::string(allowed)));
}

}  // namespace

// ------------------------------------------------------------ arrivals

absl::Status ValidateArrivalSpec(const ArrivalSpec& spec) {
  using K = ArrivalSpec::Kind;
  const bool needs_rate = spec.kind == K::kConstant || spec.kind == K::kPoisson ||
                          spec.kind == K::kGamma || spec.kind == K::kWeibull ||
                          spec.kind == K::kSpikes;
  if (needs_rate && !(spec.rate_per_s > 0 && spec.rate_per_s <= 1e9)) {
    return RangeError("arrival rate_per_s", spec.rate_per_s, "(0, 1e9]");
  }
  if ((spec.kind == K::kGamma || spec.kind == K::kWeibull) &&
      !(spec.shape >= 1e-3 && spec.shape <= 1e3)) {
    return RangeError("arrival shape", spec.shape, "[0.001, 1000]");
  }
  // Weibull's scale divides by Gamma(1 + 1/shape), which overflows past
  // shape ~ 0.0059 (the run aborted).
  if (spec.kind == K::kWeibull && !(spec.shape >= 1e-2)) {
    return RangeError("arrival shape (weibull)", spec.shape, "[0.01, 1000]");
  }
  if (spec.kind == K::kSchedule) {
    if (spec.schedule.empty()) {
      return absl::InvalidArgumentError("arrival schedule: needs at least one phase");
    }
    double total_rate_time = 0;
    for (size_t i = 0; i < spec.schedule.size(); ++i) {
      const RatePhase& p = spec.schedule[i];
      if (!(p.duration_s > 0 && p.duration_s <= 1e8)) {
        return RangeError(absl::StrCat("arrival schedule[", i, "].duration_s"),
                          p.duration_s, "(0, 1e8]");
      }
      if (!(p.rate_per_s >= 0 && p.rate_per_s <= 1e9)) {
        return RangeError(absl::StrCat("arrival schedule[", i, "].rate_per_s"),
                          p.rate_per_s, "[0, 1e9]");
      }
      total_rate_time += p.duration_s * p.rate_per_s;
    }
    if (!(total_rate_time > 0)) {
      return absl::InvalidArgumentError("arrival schedule: every phase has rate 0");
    }
  }
  if (spec.kind == K::kSpikes) {
    if (!(spec.spike_period_s > 0 && spec.spike_period_s <= 1e8)) {
      return RangeError("arrival spike_period_s", spec.spike_period_s, "(0, 1e8]");
    }
    if (!(spec.spike_duration_s > 0 && spec.spike_duration_s < spec.spike_period_s)) {
      return RangeError("arrival spike_duration_s", spec.spike_duration_s,
                        "(0, spike_period_s)");
    }
    if (!(spec.spike_multiplier >= 1 && spec.spike_multiplier <= 1e6)) {
      return RangeError("arrival spike_multiplier", spec.spike_multiplier, "[1, 1e6]");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ArrivalProcess>> ArrivalProcess::Create(
    const ArrivalSpec& spec, uint64_t seed) {
  RETURN_IF_ERROR(ValidateArrivalSpec(spec));
  std::unique_ptr<ArrivalProcess> p(
      new ArrivalProcess(spec, StreamSeed(seed, RngStream::kTraceArrivals)));
  if (spec.kind == ArrivalSpec::Kind::kSchedule) {
    p->phases_ = spec.schedule;
  } else if (spec.kind == ArrivalSpec::Kind::kSpikes) {
    p->phases_ = {{spec.spike_period_s - spec.spike_duration_s, spec.rate_per_s},
                  {spec.spike_duration_s, spec.rate_per_s * spec.spike_multiplier}};
  }
  for (const RatePhase& ph : p->phases_) p->cycle_s_ += ph.duration_s;
  return p;
}

TimeNs ArrivalProcess::NextScheduled() {
  // Exact inversion of a piecewise-constant-rate Poisson process: spend an
  // Exp(1) budget of "expected arrivals" through the phases.
  double budget = sampler_.Exponential(1.0);
  const double cycle_ns = cycle_s_ * 1e9;
  double t = static_cast<double>(now_ns_);
  double pos = std::fmod(t, cycle_ns);
  size_t phase = 0;
  double phase_start = 0;
  while (phase_start + phases_[phase].duration_s * 1e9 <= pos) {
    phase_start += phases_[phase].duration_s * 1e9;
    phase = (phase + 1) % phases_.size();
    if (phase == 0) break;
  }
  for (int guard = 0; guard < 1'000'000; ++guard) {
    const double rate_per_ns = phases_[phase].rate_per_s / 1e9;
    const double left_ns = phase_start + phases_[phase].duration_s * 1e9 - pos;
    if (rate_per_ns > 0 && budget <= rate_per_ns * left_ns) {
      t += budget / rate_per_ns;
      return SaturatingNs(t);
    }
    budget -= rate_per_ns * left_ns;
    t += left_ns;
    pos += left_ns;
    phase_start += phases_[phase].duration_s * 1e9;
    phase = (phase + 1) % phases_.size();
    if (phase == 0) {
      pos = 0;
      phase_start = 0;
    }
  }
  return SaturatingNs(t);
}

TimeNs ArrivalProcess::Next() {
  using K = ArrivalSpec::Kind;
  TimeNs gap = 0;
  if (first_ && spec_.kind != K::kSchedule && spec_.kind != K::kSpikes) {
    first_ = false;
    return now_ns_;  // the first request goes out at once, as vLLM's client
  }
  switch (spec_.kind) {
    case K::kAllAtOnce:
      return now_ns_;
    case K::kConstant:
      gap = SecondsToNs(1.0 / spec_.rate_per_s);
      break;
    case K::kPoisson:
      gap = SecondsToNs(sampler_.Exponential(spec_.rate_per_s));
      break;
    case K::kGamma:
      gap = SecondsToNs(
          sampler_.Gamma(spec_.shape, 1.0 / (spec_.rate_per_s * spec_.shape)));
      break;
    case K::kWeibull: {
      const double lambda =
          1.0 / (spec_.rate_per_s * std::tgamma(1.0 + 1.0 / spec_.shape));
      gap = SecondsToNs(sampler_.Weibull(spec_.shape, lambda));
      break;
    }
    case K::kSchedule:
    case K::kSpikes: {
      const TimeNs t = NextScheduled();
      now_ns_ = std::max(now_ns_, t);
      return now_ns_;
    }
  }
  // Saturates instead of overflowing; consumers refuse arrivals past
  // kMaxTraceArrivalNs long before INT64_MAX.
  now_ns_ = gap > std::numeric_limits<TimeNs>::max() - now_ns_
                ? std::numeric_limits<TimeNs>::max()
                : now_ns_ + gap;
  return now_ns_;
}

std::string ArrivalProcess::Describe() const {
  using K = ArrivalSpec::Kind;
  switch (spec_.kind) {
    case K::kAllAtOnce:
      return "all at t=0";
    case K::kConstant:
      return absl::StrCat("constant ", spec_.rate_per_s, "/s");
    case K::kPoisson:
      return absl::StrCat("poisson ", spec_.rate_per_s, "/s");
    case K::kGamma:
      return absl::StrCat("gamma ", spec_.rate_per_s, "/s shape ", spec_.shape);
    case K::kWeibull:
      return absl::StrCat("weibull ", spec_.rate_per_s, "/s shape ", spec_.shape);
    case K::kSchedule:
      return absl::StrCat("schedule of ", phases_.size(), " phases");
    case K::kSpikes:
      return absl::StrCat("poisson ", spec_.rate_per_s, "/s with x",
                          spec_.spike_multiplier, " spikes of ", spec_.spike_duration_s,
                          " s every ", spec_.spike_period_s, " s");
  }
  return "";
}

// ------------------------------------------------------------ lengths

absl::Status ValidateLengthSpec(const LengthSpec& spec) {
  using K = LengthSpec::Kind;
  if (spec.kind == K::kEmpirical) {
    if (spec.empirical.empty()) {
      return absl::InvalidArgumentError("lengths: empirical distribution is empty");
    }
    return absl::OkStatus();
  }
  if (spec.input_len < 1 || spec.input_len > 10'000'000) {
    return RangeError("lengths input_len", spec.input_len, "[1, 10000000]");
  }
  if (spec.output_len < 1 || spec.output_len > 10'000'000) {
    return RangeError("lengths output_len", spec.output_len, "[1, 10000000]");
  }
  if (spec.kind == K::kUniform && !(spec.range_ratio >= 0 && spec.range_ratio < 1)) {
    return RangeError("lengths range_ratio", spec.range_ratio, "[0, 1)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<int32_t, int32_t>>> SampleEmpiricalLengths(
    RequestSource& source, int64_t max_samples, uint64_t seed) {
  if (max_samples < 1) return RangeError("max_samples", max_samples, "[1, inf)");
  Rng sampler(StreamSeed(seed, RngStream::kEmpiricalLengths));
  // Reservoir of (position, pair), sorted back into source order at the end.
  std::vector<std::pair<int64_t, std::pair<int32_t, int32_t>>> reservoir;
  RequestSpec spec;
  int64_t seen = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool got, source.Next(spec));
    if (!got) break;
    const std::pair<int32_t, int32_t> p(spec.input_tokens, spec.output_tokens);
    if (seen < max_samples) {
      reservoir.emplace_back(seen, p);
    } else {
      const int64_t j = sampler.UniformInt(0, seen);
      if (j < max_samples) reservoir[j] = {seen, p};
    }
    ++seen;
  }
  if (reservoir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source.Describe(), ": no requests to take lengths from"));
  }
  std::sort(reservoir.begin(), reservoir.end());
  std::vector<std::pair<int32_t, int32_t>> out;
  out.reserve(reservoir.size());
  for (const auto& [pos, p] : reservoir) out.push_back(p);
  return out;
}

// ------------------------------------------------------------ sessions

absl::Status ValidateSessionSpec(const SessionSpec& spec) {
  if (spec.min_turns < 1 || spec.min_turns > 10'000) {
    return RangeError("sessions min_turns", spec.min_turns, "[1, 10000]");
  }
  if (spec.max_turns < spec.min_turns || spec.max_turns > 10'000) {
    return RangeError("sessions max_turns", spec.max_turns, "[min_turns, 10000]");
  }
  if (!(spec.think_time_s >= 0 && spec.think_time_s <= 1e7)) {
    return RangeError("sessions think_time_s", spec.think_time_s, "[0, 1e7]");
  }
  if (spec.shared_prefix_tokens < 0 || spec.shared_prefix_tokens > 10'000'000) {
    return RangeError("sessions shared_prefix_tokens", spec.shared_prefix_tokens,
                      "[0, 10000000]");
  }
  if (spec.max_input_tokens < 0) {
    return RangeError("sessions max_input_tokens", spec.max_input_tokens,
                      "[0, inf) (0: none)");
  }
  return absl::OkStatus();
}

namespace {

class SyntheticSource : public RequestSource {
 public:
  SyntheticSource(SyntheticOptions opts, std::unique_ptr<ArrivalProcess> arrivals)
      : opts_(std::move(opts)),
        arrivals_(std::move(arrivals)),
        lengths_(StreamSeed(opts_.seed, RngStream::kSyntheticLengths)),
        sessions_(StreamSeed(opts_.seed, RngStream::kSyntheticSessions)),
        think_(StreamSeed(opts_.seed, RngStream::kSyntheticThinkTime)),
        session_salt_(Mix64(opts_.seed ^ 0x5E55'1011ULL)) {
    multi_turn_ = opts_.sessions.max_turns > 1;
    next_start_ns_ = arrivals_->Next();
  }

  absl::StatusOr<bool> Next(RequestSpec& out) override {
    if (emitted_ >= opts_.num_requests) return false;
    const TimeNs next_ns =
        !pending_.empty() && pending_.top().arrival_ns <= next_start_ns_
            ? pending_.top().arrival_ns
            : next_start_ns_;
    if (next_ns > kMaxTraceArrivalNs) {
      return absl::InvalidArgumentError(absl::StrCat(
          "synthetic workload: request ", emitted_, " would arrive at ",
          static_cast<double>(next_ns) / 1e9, " s, past the ",
          static_cast<double>(kMaxTraceArrivalNs) / 1e9,
          " s horizon (2^62 ns, ~146 years); allowed: fewer requests (num_requests <= ",
          emitted_, ") or a higher arrival rate"));
    }
    out = RequestSpec();
    out.id = emitted_++;
    const auto [new_input, output] = DrawLengths();
    out.output_tokens = output;
    if (!multi_turn_) {
      out.arrival_ns = next_start_ns_;
      next_start_ns_ = arrivals_->Next();
      ASSIGN_OR_RETURN(
          out.input_tokens,
          PromptTokens(int64_t{opts_.sessions.shared_prefix_tokens} + new_input));
      FillHashes(-1, opts_.sessions.shared_prefix_tokens, out);
      return true;
    }
    // The next event: a pending turn, or a new session (pending first on
    // ties, then by sequence number).
    Turn turn;
    if (!pending_.empty() && pending_.top().arrival_ns <= next_start_ns_) {
      turn = pending_.top();
      pending_.pop();
      turn.context_tokens += new_input;  // history + new user text
    } else {
      turn.arrival_ns = next_start_ns_;
      next_start_ns_ = arrivals_->Next();
      turn.session_id = next_session_++;
      turn.turns_left = static_cast<int32_t>(
          sessions_.UniformInt(opts_.sessions.min_turns, opts_.sessions.max_turns));
      turn.context_tokens = int64_t{opts_.sessions.shared_prefix_tokens} + new_input;
    }
    out.arrival_ns = turn.arrival_ns;
    out.session_id = turn.session_id;
    ASSIGN_OR_RETURN(out.input_tokens, PromptTokens(turn.context_tokens));
    // The follow-up turn: the history grows by this answer.
    turn.turns_left -= 1;
    turn.context_tokens += output;
    const bool follow_up =
        turn.turns_left > 0 && (opts_.sessions.max_input_tokens == 0 ||
                                turn.context_tokens < opts_.sessions.max_input_tokens);
    // A turn with a follow-up hashes its answer too: the next prompt
    // repeats it, and vLLM caches the answer's blocks as decode fills them.
    out.hashed_output_tokens = follow_up ? output : 0;
    FillHashes(turn.session_id, int64_t{out.input_tokens} + out.hashed_output_tokens,
               out);
    if (follow_up) {
      const double think = opts_.sessions.think_time_s > 0
                               ? think_.Exponential(1.0 / opts_.sessions.think_time_s)
                               : 0.0;
      turn.arrival_ns += static_cast<TimeNs>(std::llround(std::min(think, 1e8) * 1e9));
      turn.seq = seq_++;
      pending_.push(turn);
    }
    return true;
  }

  std::string Describe() const override {
    using K = LengthSpec::Kind;
    const LengthSpec& l = opts_.lengths;
    std::string lengths =
        l.kind == K::kFixed ? absl::StrCat("fixed ", l.input_len, "/", l.output_len)
        : l.kind == K::kUniform
            ? absl::StrCat("uniform ", l.input_len, "/", l.output_len, " range_ratio ",
                           l.range_ratio)
            : absl::StrCat("empirical (", l.empirical.size(), " pairs)");
    std::string d =
        absl::StrCat("synthetic ", opts_.num_requests, " requests, arrivals ",
                     arrivals_->Describe(), ", lengths ", lengths, ", seed ", opts_.seed);
    if (multi_turn_) {
      absl::StrAppend(&d, ", sessions of ", opts_.sessions.min_turns, "-",
                      opts_.sessions.max_turns, " turns, think ",
                      opts_.sessions.think_time_s, " s");
      // Once the request count is reached, each session with a turn still
      // pending was cut short: fewer turns than drawn (maybe than min_turns).
      if (emitted_ >= opts_.num_requests && !pending_.empty()) {
        absl::StrAppend(&d, ", ", pending_.size(), " of ", next_session_,
                        " sessions cut short by the request count");
      }
    }
    if (opts_.sessions.shared_prefix_tokens > 0) {
      absl::StrAppend(&d, ", shared prefix ", opts_.sessions.shared_prefix_tokens,
                      " tokens");
    }
    return d;
  }

 private:
  struct Turn {
    TimeNs arrival_ns = 0;
    int64_t seq = 0;
    int64_t session_id = -1;
    int32_t turns_left = 0;
    int64_t context_tokens = 0;  // prompt so far (+ answer once answered)
  };
  struct Later {
    bool operator()(const Turn& a, const Turn& b) const {
      return a.arrival_ns != b.arrival_ns ? a.arrival_ns > b.arrival_ns : a.seq > b.seq;
    }
  };

  // A prompt (shared prefix + input, or a session's context so far) over
  // the 10,000,000 tokens a trace may hold is an error naming the request,
  // not a prompt silently cut to the limit.
  absl::StatusOr<int32_t> PromptTokens(int64_t tokens) const {
    if (tokens > 10'000'000) {
      return absl::InvalidArgumentError(absl::StrCat(
          "synthetic workload: request ", emitted_ - 1, " has a prompt of ", tokens,
          " tokens (shared prefix + input", multi_turn_ ? " + the session's history" : "",
          "), over the 10000000 a trace holds; allowed: shorter lengths or prefix",
          multi_turn_ ? ", fewer turns, or --max-input-tokens to end a session sooner"
                      : ""));
    }
    return static_cast<int32_t>(tokens);
  }

  std::pair<int32_t, int32_t> DrawLengths() {
    const LengthSpec& l = opts_.lengths;
    switch (l.kind) {
      case LengthSpec::Kind::kFixed:
        return {l.input_len, l.output_len};
      case LengthSpec::Kind::kUniform: {
        auto draw = [&](int32_t len) {
          const LengthBounds b = VllmRandomLengthBounds(len, l.range_ratio);
          return static_cast<int32_t>(lengths_.UniformInt(b.lo, b.hi));
        };
        const int32_t in = draw(l.input_len);
        return {in, draw(l.output_len)};
      }
      case LengthSpec::Kind::kEmpirical:
        return l.empirical[lengths_.UniformInt(
            0, static_cast<int64_t>(l.empirical.size()) - 1)];
    }
    return {l.input_len, l.output_len};
  }

  // Hashes of the full blocks whose content is known to repeat: the shared
  // system prompt, then (for a session) its append-only history, up to
  // `hashed_tokens` of prompt and answer. Block content ids are global for
  // the shared prefix and (session, block index) after it.
  void FillHashes(int64_t session, int64_t hashed_tokens, RequestSpec& out) {
    const int64_t block = opts_.hash_block_tokens;
    const int64_t shared_blocks = opts_.sessions.shared_prefix_tokens / block;
    const int64_t blocks = session < 0 ? shared_blocks : hashed_tokens / block;
    if (blocks <= 0) {
      out.hashed_output_tokens = 0;  // nothing hashed: no answer named either
      return;
    }
    out.prefix_hashes.reserve(blocks);
    uint64_t h = kPrefixHashRoot;
    for (int64_t i = 0; i < blocks; ++i) {
      const uint64_t content =
          i < shared_blocks
              ? Mix64(0xC0FFEEULL + i)
              : Mix64(session_salt_ ^ Mix64(static_cast<uint64_t>(session)) ^
                      static_cast<uint64_t>(i));
      h = ChainHash(h, content);
      out.prefix_hashes.push_back(h);
    }
    out.hash_block_tokens = static_cast<int32_t>(block);
  }

  SyntheticOptions opts_;
  std::unique_ptr<ArrivalProcess> arrivals_;
  Rng lengths_, sessions_, think_;
  uint64_t session_salt_;
  bool multi_turn_ = false;
  int64_t emitted_ = 0;
  TimeNs next_start_ns_ = 0;
  int64_t next_session_ = 0;
  int64_t seq_ = 0;
  std::priority_queue<Turn, std::vector<Turn>, Later> pending_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RequestSource>> MakeSyntheticSource(
    const SyntheticOptions& opts) {
  if (opts.num_requests < 1 || opts.num_requests > std::numeric_limits<int32_t>::max()) {
    return RangeError("num_requests", static_cast<double>(opts.num_requests),
                      "[1, 2147483647]");
  }
  if (opts.hash_block_tokens < 1 || opts.hash_block_tokens > 1'000'000) {
    return RangeError("hash_block_tokens", opts.hash_block_tokens, "[1, 1000000]");
  }
  RETURN_IF_ERROR(ValidateLengthSpec(opts.lengths));
  RETURN_IF_ERROR(ValidateSessionSpec(opts.sessions));
  ASSIGN_OR_RETURN(auto arrivals, ArrivalProcess::Create(opts.arrival, opts.seed));
  return std::unique_ptr<RequestSource>(new SyntheticSource(opts, std::move(arrivals)));
}

std::vector<uint64_t> VllmRandomPromptHashes(uint64_t seed, int64_t index,
                                             int32_t input_tokens, int32_t block_tokens) {
  SERVESIM_CHECK(block_tokens >= 1 && input_tokens >= 0 && index >= 0);
  const uint64_t prompt =
      Mix64(Mix64(seed ^ 0x7261'6E64'6F6D'0000ULL) + static_cast<uint64_t>(index));
  std::vector<uint64_t> hashes(static_cast<size_t>(input_tokens / block_tokens));
  uint64_t h = kPrefixHashRoot;
  for (size_t b = 0; b < hashes.size(); ++b) {
    h = ChainHash(h, Mix64(prompt + b));
    hashes[b] = h;
  }
  return hashes;
}

}  // namespace servesim
