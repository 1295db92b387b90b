#include "traces/transforms.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "sim/base/random.h"
#include "sim/base/status_macros.h"
#include "traces/prefix_hash.h"
#include "traces/trace_reader.h"

namespace servesim {
namespace {

// A wrapper that renumbers ids; subclasses decide what to keep.
class Wrapper : public RequestSource {
 public:
  explicit Wrapper(std::unique_ptr<RequestSource> source) : source_(std::move(source)) {}

  absl::StatusOr<bool> Next(RequestSpec& out) final {
    if (!error_.ok()) return error_;
    if (done_ || Exhausted()) {
      done_ = true;
      return false;
    }
    while (true) {
      ASSIGN_OR_RETURN(bool got, source_->Next(out));
      if (!got) {
        done_ = true;
        return false;
      }
      const int64_t input_id = out.id;
      switch (Apply(out)) {
        case Verdict::kKeep:
          if (out.arrival_ns < 0 || out.arrival_ns > kMaxTraceArrivalNs) {
            error_ = absl::InvalidArgumentError(absl::StrCat(
                Describe(), ": request ", input_id, ": arrival ", out.arrival_ns,
                " ns is outside 0..", kMaxTraceArrivalNs, " ns (2^62, ~146 years)"));
            return error_;
          }
          out.id = next_id_++;
          return true;
        case Verdict::kDrop:
          continue;
        case Verdict::kStop:
          done_ = true;
          return false;
        case Verdict::kError:
          return error_;
      }
    }
  }

 protected:
  // kError: Apply set error_, which every later Next() returns too.
  enum class Verdict { kKeep, kDrop, kStop, kError };
  virtual Verdict Apply(RequestSpec& r) = 0;
  // True when no further request can be kept: Next() then ends without
  // reading the source.
  virtual bool Exhausted() const { return false; }

  std::unique_ptr<RequestSource> source_;
  absl::Status error_;

 private:
  int64_t next_id_ = 0;
  bool done_ = false;
};

class WithArrivalsSource : public Wrapper {
 public:
  WithArrivalsSource(std::unique_ptr<RequestSource> s, std::unique_ptr<ArrivalProcess> a)
      : Wrapper(std::move(s)), arrivals_(std::move(a)) {}
  std::string Describe() const override {
    return absl::StrCat(source_->Describe(), " | arrivals ", arrivals_->Describe());
  }

 private:
  Verdict Apply(RequestSpec& r) override {
    r.arrival_ns = arrivals_->Next();
    return Verdict::kKeep;
  }
  std::unique_ptr<ArrivalProcess> arrivals_;
};

class TimeWindowSource : public Wrapper {
 public:
  TimeWindowSource(std::unique_ptr<RequestSource> s, TimeNs start, TimeNs end)
      : Wrapper(std::move(s)), start_(start), end_(end) {}
  std::string Describe() const override {
    return absl::StrCat(source_->Describe(), " | window [", start_ / 1e9, " s, ",
                        end_ / 1e9, " s)");
  }

 private:
  Verdict Apply(RequestSpec& r) override {
    if (r.arrival_ns >= end_) return Verdict::kStop;
    if (r.arrival_ns < start_) return Verdict::kDrop;
    r.arrival_ns -= start_;
    return Verdict::kKeep;
  }
  TimeNs start_, end_;
};

class ScaleTimeSource : public Wrapper {
 public:
  ScaleTimeSource(std::unique_ptr<RequestSource> s, double f, TimeScaleOrigin origin)
      : Wrapper(std::move(s)), f_(f), origin_(std::move(origin)) {}
  std::string Describe() const override {
    return absl::StrCat(source_->Describe(), " | time x", f_);
  }

 private:
  Verdict Apply(RequestSpec& r) override {
    const long double t = static_cast<long double>(r.arrival_ns) * f_;
    if (t <= static_cast<long double>(kMaxTraceArrivalNs)) {
      r.arrival_ns = static_cast<TimeNs>(std::llroundl(t));
      return Verdict::kKeep;
    }
    // The largest factor that keeps this arrival within the horizon.
    const double max_factor =
        static_cast<double>(kMaxTraceArrivalNs) / static_cast<double>(r.arrival_ns);
    const std::string allowed =
        origin_.option.empty()
            ? absl::StrCat("time factor <= ", max_factor)
            : absl::StrCat(origin_.option, " >= ", origin_.numerator / max_factor);
    error_ = absl::InvalidArgumentError(
        absl::StrCat(origin_.option.empty() ? "time factor" : origin_.option, " ",
                     origin_.option.empty() ? f_ : origin_.numerator / f_, ": request ",
                     r.id, " at ", static_cast<double>(r.arrival_ns) / 1e9,
                     " s would arrive at ", static_cast<double>(t / 1e9L),
                     " s, past the ", static_cast<double>(kMaxTraceArrivalNs) / 1e9,
                     " s horizon (2^62 ns, ~146 years); this request needs ", allowed));
    return Verdict::kError;
  }
  double f_;
  TimeScaleOrigin origin_;
};

class SampleSource : public Wrapper {
 public:
  SampleSource(std::unique_ptr<RequestSource> s, double fraction, uint64_t seed)
      : Wrapper(std::move(s)),
        fraction_(fraction),
        seed_(seed),
        sampler_(StreamSeed(seed, RngStream::kTraceSampling)) {}
  std::string Describe() const override {
    return absl::StrCat(source_->Describe(), " | sample ", fraction_, " seed ", seed_);
  }

 private:
  Verdict Apply(RequestSpec&) override {
    return sampler_.Uniform01() < fraction_ ? Verdict::kKeep : Verdict::kDrop;
  }
  double fraction_;
  uint64_t seed_;
  Rng sampler_;
};

class FilterLengthsSource : public Wrapper {
 public:
  FilterLengthsSource(std::unique_ptr<RequestSource> s, LengthFilter f)
      : Wrapper(std::move(s)), f_(f) {}
  std::string Describe() const override {
    return absl::StrCat(source_->Describe(), " | input ", f_.min_input, "..",
                        f_.max_input, " output ", f_.min_output, "..", f_.max_output);
  }

 private:
  Verdict Apply(RequestSpec& r) override {
    const bool ok = r.input_tokens >= f_.min_input && r.input_tokens <= f_.max_input &&
                    r.output_tokens >= f_.min_output && r.output_tokens <= f_.max_output;
    return ok ? Verdict::kKeep : Verdict::kDrop;
  }
  LengthFilter f_;
};

class LimitSource : public Wrapper {
 public:
  LimitSource(std::unique_ptr<RequestSource> s, int64_t n)
      : Wrapper(std::move(s)), n_(n) {}
  std::string Describe() const override {
    return absl::StrCat(source_->Describe(), " | first ", n_);
  }

 private:
  // Done after n requests without reading another (a bad row after the
  // window failed the run, and the count said n + 1 rows read).
  bool Exhausted() const override { return seen_ >= n_; }
  Verdict Apply(RequestSpec&) override {
    return seen_++ < n_ ? Verdict::kKeep : Verdict::kStop;
  }
  int64_t n_;
  int64_t seen_ = 0;
};

class RequireCountSource : public RequestSource {
 public:
  RequireCountSource(std::unique_ptr<RequestSource> s, int64_t n, std::string what)
      : source_(std::move(s)), n_(n), what_(std::move(what)) {}

  absl::StatusOr<bool> Next(RequestSpec& out) override {
    if (given_ >= n_) return false;
    ASSIGN_OR_RETURN(const bool more, source_->Next(out));
    if (!more) {
      return absl::FailedPreconditionError(
          absl::StrCat(what_, ": asks for ", n_, " requests, but the source has only ",
                       given_, " (", source_->Describe(), ")"));
    }
    ++given_;
    return true;
  }
  std::string Describe() const override { return source_->Describe(); }

 private:
  std::unique_ptr<RequestSource> source_;
  int64_t n_;
  std::string what_;
  int64_t given_ = 0;
};

class LoopSource : public RequestSource {
 public:
  LoopSource(SourceFactory factory, std::unique_ptr<RequestSource> first, int64_t target,
             bool distinct)
      : factory_(std::move(factory)),
        source_(std::move(first)),
        target_(target),
        distinct_(distinct) {}

  absl::StatusOr<bool> Next(RequestSpec& out) override {
    while (emitted_ < target_) {
      ASSIGN_OR_RETURN(bool got, source_->Next(out));
      if (!got) {
        if (pass_ == 0) {
          if (count0_ == 0) return false;
          span_ = last0_ - first0_;
          gap_ = count0_ > 1 ? span_ / (count0_ - 1) : 0;
          // Describe the whole first pass, not the partial last one.
          first_pass_ = source_->Describe();
        }
        ++pass_;
        ASSIGN_OR_RETURN(source_, factory_());
        continue;
      }
      if (pass_ == 0) {
        if (count0_ == 0) first0_ = out.arrival_ns;
        last0_ = out.arrival_ns;
        ++count0_;
        max_session_ = std::max(max_session_, out.session_id);
        if (out.session_id >= 0)
          dense_session_.emplace(out.session_id, dense_session_.size());
      } else {
        const TimeNs period = span_ + gap_;
        if (period > 0 && pass_ > (kMaxTraceArrivalNs - out.arrival_ns) / period) {
          return absl::InvalidArgumentError(absl::StrCat(
              "loop to ", target_, " requests: pass ", pass_, " (request ", emitted_,
              ") would start ", static_cast<double>(pass_) * period / 1e9,
              " s in, past the ", static_cast<double>(kMaxTraceArrivalNs) / 1e9,
              " s horizon (2^62 ns, ~146 years); allowed here: at most ",
              (kMaxTraceArrivalNs / period + 1) * count0_,
              " requests, or a faster rate"));
        }
        out.arrival_ns += pass_ * period;
        if (out.session_id >= 0) {
          // Pass k's sessions follow every earlier pass's: numbered from the
          // largest of pass 0 on, densely (k x (largest + 1) overflowed on
          // BurstGPT's 63-bit hashed session ids, into negative ids).
          const auto n = static_cast<int64_t>(dense_session_.size());
          const auto it = dense_session_.find(out.session_id);
          if (it == dense_session_.end() || n == 0 ||
              pass_ > (std::numeric_limits<int64_t>::max() - max_session_) / n) {
            return absl::InvalidArgumentError(absl::StrCat(
                "loop to ", target_, " requests: pass ", pass_, " (request ", emitted_,
                "): session ", out.session_id,
                it == dense_session_.end()
                    ? " was not in the first pass (the source changed between passes)"
                    : absl::StrCat(
                          " cannot be renumbered past the first pass's largest "
                          "session id ",
                          max_session_, " within int64; allowed here: at most ",
                          ((std::numeric_limits<int64_t>::max() - max_session_) / n + 1) *
                              count0_,
                          " requests")));
          }
          out.session_id = max_session_ + 1 + (pass_ - 1) * n + it->second;
        }
        if (distinct_) {
          for (uint64_t& h : out.prefix_hashes)
            h = ChainHash(h, static_cast<uint64_t>(pass_));
        }
      }
      out.id = emitted_++;
      return true;
    }
    return false;
  }

  std::string Describe() const override {
    return absl::StrCat(pass_ == 0 ? source_->Describe() : first_pass_, " | loop to ",
                        target_, " requests",
                        distinct_ ? " (distinct hashes per pass)" : " (hashes kept)");
  }

 private:
  SourceFactory factory_;
  std::unique_ptr<RequestSource> source_;
  int64_t target_;
  bool distinct_;
  int64_t emitted_ = 0;
  int64_t pass_ = 0;
  int64_t count0_ = 0;
  TimeNs first0_ = 0, last0_ = 0, span_ = 0, gap_ = 0;
  int64_t max_session_ = -1;
  // Pass 0's session ids, in order of first appearance.
  absl::flat_hash_map<int64_t, int64_t> dense_session_;
  std::string first_pass_;  // Describe() of pass 0 once it ended
};

}  // namespace

std::unique_ptr<RequestSource> WithArrivals(std::unique_ptr<RequestSource> source,
                                            std::unique_ptr<ArrivalProcess> arrivals) {
  return std::make_unique<WithArrivalsSource>(std::move(source), std::move(arrivals));
}

std::unique_ptr<RequestSource> TimeWindow(std::unique_ptr<RequestSource> source,
                                          TimeNs start_ns, TimeNs end_ns) {
  return std::make_unique<TimeWindowSource>(std::move(source), start_ns, end_ns);
}

std::unique_ptr<RequestSource> ScaleTime(std::unique_ptr<RequestSource> source,
                                         double time_factor, TimeScaleOrigin origin) {
  return std::make_unique<ScaleTimeSource>(std::move(source), time_factor,
                                           std::move(origin));
}

std::unique_ptr<RequestSource> Sample(std::unique_ptr<RequestSource> source,
                                      double fraction, uint64_t seed) {
  return std::make_unique<SampleSource>(std::move(source), fraction, seed);
}

std::unique_ptr<RequestSource> FilterLengths(std::unique_ptr<RequestSource> source,
                                             LengthFilter filter) {
  return std::make_unique<FilterLengthsSource>(std::move(source), filter);
}

std::unique_ptr<RequestSource> Limit(std::unique_ptr<RequestSource> source,
                                     int64_t max_requests) {
  return std::make_unique<LimitSource>(std::move(source), max_requests);
}

std::unique_ptr<RequestSource> RequireCount(std::unique_ptr<RequestSource> source,
                                            int64_t count, std::string what) {
  return std::make_unique<RequireCountSource>(std::move(source), count, std::move(what));
}

absl::StatusOr<std::unique_ptr<RequestSource>> Loop(SourceFactory factory,
                                                    int64_t target_requests,
                                                    bool distinct_hashes) {
  if (target_requests < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("loop target ", target_requests, " is negative (allowed 0..)"));
  }
  ASSIGN_OR_RETURN(auto first, factory());
  return std::unique_ptr<RequestSource>(new LoopSource(
      std::move(factory), std::move(first), target_requests, distinct_hashes));
}

double SourceSpan::MeanRatePerS() const {
  if (requests < 2 || last_ns <= first_ns) return 0;
  return static_cast<double>(requests - 1) * 1e9 /
         static_cast<double>(last_ns - first_ns);
}

absl::StatusOr<SourceSpan> MeasureSpan(RequestSource& source) {
  SourceSpan span;
  RequestSpec r;
  while (true) {
    ASSIGN_OR_RETURN(bool got, source.Next(r));
    if (!got) break;
    if (span.requests == 0) span.first_ns = r.arrival_ns;
    span.last_ns = r.arrival_ns;
    ++span.requests;
  }
  return span;
}

}  // namespace servesim
