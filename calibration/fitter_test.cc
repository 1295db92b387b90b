#include "calibration/fitter.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <random>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "sim/base/parallel.h"

namespace servesim {
namespace {

// A step-time-like model: time per point = host + work / (peak * eff) +
// per_seq * seqs; predictions are throughputs (seqs / time).
struct Design {
  double work;
  double seqs;
};

std::vector<Design> MakeDesigns() {
  std::vector<Design> d;
  for (double work : {1.0, 4.0, 16.0, 64.0}) {
    for (double seqs : {1.0, 4.0, 16.0, 64.0}) d.push_back({work, seqs});
  }
  return d;
}

PredictFn MakeModel(const std::vector<Design>& designs) {
  return [designs](const ParameterSet& ps) -> absl::StatusOr<std::vector<double>> {
    const double host = ps.Get("host_ms");
    const double eff = ps.Get("eff");
    const double per_seq = ps.Get("per_seq_ms");
    std::vector<double> out;
    for (const Design& d : designs) {
      const double t = host + d.work / (10.0 * eff) + per_seq * d.seqs;
      out.push_back(d.seqs / t);
    }
    return out;
  };
}

Parameter Param(const char* name, double value, double lower, double upper) {
  Parameter p;
  p.name = name;
  p.value = value;
  p.lower = lower;
  p.upper = upper;
  return p;
}

ParameterSet StartSet() {
  return ParameterSet({Param("host_ms", 1.0, 0.0, 20.0), Param("eff", 0.5, 0.05, 1.0),
                       Param("per_seq_ms", 0.1, 0.0, 5.0)});
}

// Deterministic standard normal (Box-Muller on our own uniforms).
double Normal(std::mt19937_64& rng) {
  auto uniform = [&rng] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };
  const double u1 = uniform(), u2 = uniform();
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
}

std::vector<FitPoint> Synthetic(const PredictFn& model, const ParameterSet& truth,
                                double noise, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<FitPoint> pts;
  const std::vector<double> clean = *model(truth);
  pts.reserve(clean.size());
  for (double v : clean) {
    pts.push_back(
        {.measured = v * std::exp(noise * Normal(rng)), .rel_sigma = 0.03, .use = true});
  }
  return pts;
}

ParameterSet Truth() {
  ParameterSet t = StartSet();
  t.FindMutable("host_ms")->value = 3.0;
  t.FindMutable("eff")->value = 0.7;
  t.FindMutable("per_seq_ms")->value = 0.25;
  return t;
}

FitOptions Options() {
  FitOptions o;
  o.free_parameters = {"host_ms", "eff", "per_seq_ms"};
  return o;
}

TEST(FitterTest, RecoversKnownParametersFromNoisySyntheticData) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  const ParameterSet truth = Truth();
  const auto pts = Synthetic(model, truth, 0.03, 7);
  auto fit = FitParameters(StartSet(), pts, model, Options());
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_TRUE(fit->converged);
  for (const char* name : {"host_ms", "eff", "per_seq_ms"}) {
    const Parameter* p = fit->params.Find(name);
    const double want = truth.Get(name);
    EXPECT_GT(p->std_error, 0) << name;
    // Within 3 std errors and within 15% (noise is 3% per point).
    EXPECT_LT(std::abs(p->value - want), 3 * p->std_error) << name << " " << p->value;
    EXPECT_LT(std::abs(p->value / want - 1), 0.15) << name << " " << p->value;
  }
}

TEST(FitterTest, CovarianceDiagonalIsTheStdErrorsSquaredAndSymmetric) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  const auto pts = Synthetic(model, Truth(), 0.03, 7);
  auto fit = FitParameters(StartSet(), pts, model, Options());
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->covariance_names, Options().free_parameters);
  ASSERT_EQ(fit->covariance.size(), 9u);
  for (int i = 0; i < 3; ++i) {
    const double se = fit->params.Find(fit->covariance_names[i])->std_error;
    EXPECT_NEAR(fit->covariance[i * 3 + i], se * se, 1e-12 * (1 + se * se));
    for (int j = 0; j < 3; ++j) {
      EXPECT_NEAR(fit->covariance[i * 3 + j], fit->covariance[j * 3 + i],
                  1e-9 * std::abs(fit->covariance[i * 3 + j]) + 1e-300);
    }
  }
  // host and per-step work trade off: a non-zero off-diagonal.
  EXPECT_NE(fit->covariance[0 * 3 + 1], 0.0);
}

// The same synthetic device fitted on 4 and on 12 of its cells (the 4 among
// the 12): every parameter's std error, so the parameter band of a
// prediction, is smaller with 12, for every noise draw tried.
TEST(FitterTest, UncertaintyShrinksWithMoreCalibrationCells) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    std::vector<FitPoint> pts = Synthetic(model, Truth(), 0.03, seed);
    std::vector<FitPoint> four = pts, twelve = pts;
    for (size_t i = 0; i < pts.size(); ++i) {
      // (work, seqs) = (1, 1), (4, 16), (16, 4), (64, 64): each knob seen.
      four[i].use = i == 0 || i == 6 || i == 9 || i == 15;
      twelve[i].use = (i < 12 && i != 11) || i == 15;
    }
    auto f4 = FitParameters(StartSet(), four, model, Options());
    auto f12 = FitParameters(StartSet(), twelve, model, Options());
    ASSERT_TRUE(f4.ok() && f12.ok());
    for (const char* name : {"host_ms", "eff", "per_seq_ms"}) {
      EXPECT_LT(f12->params.Find(name)->std_error, f4->params.Find(name)->std_error)
          << "seed " << seed << " " << name;
    }
  }
}

TEST(FitterTest, RecoversExactParametersFromNoiselessData) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  const auto pts = Synthetic(model, Truth(), 0.0, 1);
  auto fit = FitParameters(StartSet(), pts, model, Options());
  ASSERT_TRUE(fit.ok()) << fit.status();
  for (const char* name : {"host_ms", "eff", "per_seq_ms"}) {
    EXPECT_NEAR(fit->params.Get(name) / Truth().Get(name), 1.0, 1e-4) << name;
  }
}

TEST(FitterTest, StaysInsideBoundsWhenDataPushOutside) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  ParameterSet truth = Truth();
  truth.FindMutable("eff")->value = 0.99;
  auto pts = Synthetic(model, truth, 0.0, 1);
  for (auto& p : pts) p.measured *= 1.5;  // faster than eff = 1 allows
  ParameterSet start = StartSet();
  auto fit = FitParameters(start, pts, model, Options());
  ASSERT_TRUE(fit.ok()) << fit.status();
  for (const Parameter& p : fit->params.params()) {
    EXPECT_GE(p.value, p.lower) << p.name;
    EXPECT_LE(p.value, p.upper) << p.name;
  }
}

TEST(FitterTest, PriorHoldsParameterTheDataCannotInform) {
  // Only single-sequence, tiny-work points: per_seq and host are not
  // separable, so the prior must decide per_seq.
  std::vector<Design> designs = {{1.0, 1.0}, {1.0, 1.0}};
  const PredictFn model = MakeModel(designs);
  ParameterSet start = StartSet();
  start.FindMutable("per_seq_ms")->prior = 0.4;
  start.FindMutable("per_seq_ms")->prior_sigma = 0.01;
  auto pts = Synthetic(model, Truth(), 0.0, 1);
  FitOptions o;
  o.free_parameters = {"host_ms", "per_seq_ms"};
  auto fit = FitParameters(start, pts, model, o);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->params.Get("per_seq_ms"), 0.4, 0.03);
}

// Fewer points than parameters leave the points no degrees of freedom, but
// a misfit the priors force (two measurements of one cell a factor 4
// apart) still says the errors are larger than the points' noise.
TEST(FitterTest, MisfitScalesStdErrorsUpWhenPointsDoNotOutnumberParameters) {
  const std::vector<Design> designs = {{16.0, 4.0}, {16.0, 4.0}};
  const PredictFn model = MakeModel(designs);
  ParameterSet start = StartSet();
  for (const char* name : {"host_ms", "eff", "per_seq_ms"}) {
    Parameter* q = start.FindMutable(name);
    q->prior = Truth().Get(name);
    q->prior_sigma = 0.3 * q->prior;
  }
  std::vector<FitPoint> agree = Synthetic(model, Truth(), 0.0, 1);
  std::vector<FitPoint> apart = agree;
  apart[0].measured *= 0.5;
  apart[1].measured *= 2.0;
  auto fit_agree = FitParameters(start, agree, model, Options());
  auto fit_apart = FitParameters(start, apart, model, Options());
  ASSERT_TRUE(fit_agree.ok()) << fit_agree.status();
  ASSERT_TRUE(fit_apart.ok()) << fit_apart.status();
  EXPECT_EQ(fit_agree->variance_scale, 1.0);
  // (log 2 / 0.03)^2 x 2 over 2 + 3 - 3 rows: about 534.
  EXPECT_GT(fit_apart->variance_scale, 400.0);
  for (const char* name : {"host_ms", "eff", "per_seq_ms"}) {
    EXPECT_GT(fit_apart->params.Find(name)->std_error,
              10 * fit_agree->params.Find(name)->std_error)
        << name;
  }
}

TEST(FitterTest, HuberLossLimitsTheInfluenceOfOneOutlier) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  auto pts = Synthetic(model, Truth(), 0.0, 1);
  pts[5].measured *= 3.0;  // one wild point
  auto fit = FitParameters(StartSet(), pts, model, Options());
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->params.Get("eff") / 0.7, 1.0, 0.05);
  EXPECT_NEAR(fit->predicted[0] / (*model(Truth()))[0], 1.0, 0.05);
}

TEST(FitterTest, RejectsUnknownFreeParameter) {
  const PredictFn model = MakeModel(MakeDesigns());
  FitOptions o;
  o.free_parameters = {"nope"};
  auto fit = FitParameters(StartSet(), Synthetic(model, Truth(), 0, 1), model, o);
  EXPECT_EQ(fit.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FitterTest, SameInputsGiveBitIdenticalResults) {
  const PredictFn model = MakeModel(MakeDesigns());
  const auto pts = Synthetic(model, Truth(), 0.03, 3);
  auto a = FitParameters(StartSet(), pts, model, Options());
  auto b = FitParameters(StartSet(), pts, model, Options());
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t k = 0; k < a->params.size(); ++k) {
    EXPECT_EQ(a->params.params()[k].value, b->params.params()[k].value);
    EXPECT_EQ(a->params.params()[k].std_error, b->params.params()[k].std_error);
  }
}

TEST(LeaveOneOutTest, HeldOutPredictionIgnoresTheHeldOutMeasurement) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  auto pts = Synthetic(model, Truth(), 0.03, 11);
  std::vector<std::string> groups;
  for (size_t i = 0; i < pts.size(); ++i) groups.push_back("g" + std::to_string(100 + i));
  auto base = LeaveOneGroupOut(StartSet(), pts, groups, model, Options());
  ASSERT_TRUE(base.ok()) << base.status();
  for (size_t i : {size_t{0}, size_t{6}, size_t{15}}) {
    auto changed = pts;
    changed[i].measured *= 2.0;
    auto loo = LeaveOneGroupOut(StartSet(), changed, groups, model, Options());
    ASSERT_TRUE(loo.ok()) << loo.status();
    EXPECT_EQ((*loo)[i], (*base)[i]) << "point " << i;
    // ...while the other points' held-out predictions do see it.
    const size_t j = (i + 1) % pts.size();
    EXPECT_NE((*loo)[j], (*base)[j]) << "point " << j;
  }
}

// A block pass: every point of a block is held out together. The block
// "work64" was measured with a different efficiency; its held-out
// predictions must be those of the fit on the other blocks alone (and so
// must not move when the block's own measurements change), which fails
// the moment any point of the block leaks into its refit.
TEST(LeaveOneOutTest, BlockRefitSeesNoPointOfTheBlock) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  auto pts = Synthetic(model, Truth(), 0.02, 29);
  std::vector<std::string> blocks;
  blocks.reserve(designs.size());
  for (const Design& d : designs) blocks.push_back(absl::StrFormat("work%g", d.work));
  auto base = LeaveOneGroupOut(StartSet(), pts, blocks, model, Options());
  ASSERT_TRUE(base.ok()) << base.status();
  // The refit without the block, done by hand.
  auto train = pts;
  for (size_t i = 0; i < pts.size(); ++i) train[i].use = blocks[i] != "work64";
  auto manual = FitParameters(StartSet(), train, model, Options());
  ASSERT_TRUE(manual.ok()) << manual.status();
  auto changed = pts;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (blocks[i] == "work64") changed[i].measured *= 0.5;
  }
  auto moved = LeaveOneGroupOut(StartSet(), changed, blocks, model, Options());
  ASSERT_TRUE(moved.ok()) << moved.status();
  int in_block = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (blocks[i] != "work64") continue;
    ++in_block;
    EXPECT_EQ((*base)[i], manual->predicted[i]) << "point " << i;
    EXPECT_EQ((*moved)[i], (*base)[i]) << "point " << i;
  }
  EXPECT_EQ(in_block, 4);
}

// A point with an empty group name is in every refit and never held out.
TEST(LeaveOneOutTest, EmptyGroupNameIsNeverHeldOut) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  auto pts = Synthetic(model, Truth(), 0.02, 31);
  std::vector<std::string> groups;
  for (size_t i = 0; i < pts.size(); ++i)
    groups.push_back(i < 4 ? "" : "b" + std::to_string(i % 3));
  auto loo = LeaveOneGroupOut(StartSet(), pts, groups, model, Options());
  ASSERT_TRUE(loo.ok()) << loo.status();
  auto all = FitParameters(StartSet(), pts, model, Options());
  ASSERT_TRUE(all.ok()) << all.status();
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ((*loo)[i], all->predicted[i]) << i;
  // Each refit still sees the unlabelled points: without "b0" the fit is
  // the one on the unlabelled points plus b1 and b2.
  auto train = pts;
  for (size_t i = 0; i < pts.size(); ++i) train[i].use = groups[i] != "b0";
  auto manual = FitParameters(StartSet(), train, model, Options());
  ASSERT_TRUE(manual.ok());
  for (size_t i = 0; i < pts.size(); ++i) {
    if (groups[i] == "b0") {
      EXPECT_EQ((*loo)[i], manual->predicted[i]) << i;
    }
  }
}

TEST(LeaveOneOutTest, ThreadCountDoesNotChangeAnyBit) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  const auto pts = Synthetic(model, Truth(), 0.03, 17);
  std::vector<std::string> groups;
  for (size_t i = 0; i < pts.size(); ++i)
    groups.push_back("cell" + std::to_string(i / 3));
  FitOptions one = Options();
  one.jobs = 1;
  auto serial = LeaveOneGroupOut(StartSet(), pts, groups, model, one);
  ASSERT_TRUE(serial.ok()) << serial.status();
  for (int jobs : {2, 3, 64}) {
    FitOptions many = Options();
    many.jobs = jobs;
    auto parallel = LeaveOneGroupOut(StartSet(), pts, groups, model, many);
    ASSERT_TRUE(parallel.ok()) << parallel.status();
    ASSERT_EQ(parallel->size(), serial->size());
    for (size_t i = 0; i < pts.size(); ++i) {
      EXPECT_EQ((*parallel)[i], (*serial)[i]) << "jobs " << jobs << " point " << i;
    }
  }
}

TEST(LeaveOneOutTest, AFailingRefitIsReportedWhateverTheThreadCount) {
  // Only host_ms free, started at 8. Group "pull" (8 points) was measured
  // with host 9, the rest with host 3: every fit that sees "pull" stays
  // above 3.5, the refit without it heads for 3 and the predictor fails
  // there. The all-points fit succeeds, so a LeaveOneGroupOut that dropped
  // refit errors would return OK.
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  ParameterSet pulled = Truth();
  pulled.FindMutable("host_ms")->value = 9.0;
  auto pts = Synthetic(model, Truth(), 0, 23);
  const auto pull = Synthetic(model, pulled, 0, 23);
  std::vector<std::string> groups;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (i < 8) pts[i] = pull[i];
    pts[i].rel_sigma = 1.0;  // inside the Huber threshold: every point pulls fully
    groups.push_back(i < 8 ? "pull" : "cell" + std::to_string(i));
  }
  ParameterSet start = Truth();
  start.FindMutable("host_ms")->value = 8.0;
  FitOptions o = Options();
  o.free_parameters = {"host_ms"};
  auto failing_below = [&](double floor) -> PredictFn {
    return [&model,
            floor](const ParameterSet& ps) -> absl::StatusOr<std::vector<double>> {
      if (ps.Get("host_ms") < floor) {
        return absl::InvalidArgumentError(absl::StrFormat("model fails below %g", floor));
      }
      return model(ps);
    };
  };
  // Control: with the floor out of the way every fit succeeds; the
  // all-points fit stays above 3.5 and the refit without "pull" does not.
  auto all = FitParameters(start, pts, failing_below(0.5), o);
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<FitPoint> without_pull = pts;
  for (size_t i = 0; i < 8; ++i) without_pull[i].use = false;
  auto refit = FitParameters(start, without_pull, failing_below(0.5), o);
  ASSERT_TRUE(refit.ok()) << refit.status();
  ASSERT_LT(refit->params.Get("host_ms"), 3.5);
  ASSERT_GT(all->params.Get("host_ms"), 3.5);
  ASSERT_TRUE(LeaveOneGroupOut(start, pts, groups, failing_below(0.5), o).ok());
  for (int jobs : {1, 4}) {
    o.jobs = jobs;
    auto r = LeaveOneGroupOut(start, pts, groups, failing_below(3.5), o);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << "jobs " << jobs;
    EXPECT_EQ(r.status().message(), "model fails below 3.5") << "jobs " << jobs;
  }
}

TEST(LeaveOneOutTest, GroupIsHeldOutTogether) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  auto pts = Synthetic(model, Truth(), 0.03, 5);
  std::vector<std::string> groups(pts.size(), "");
  for (size_t i = 0; i < pts.size(); ++i) groups[i] = "cell" + std::to_string(i / 2);
  auto base = LeaveOneGroupOut(StartSet(), pts, groups, model, Options());
  ASSERT_TRUE(base.ok());
  auto changed = pts;
  changed[1].measured *= 2.0;  // same group as point 0
  auto loo = LeaveOneGroupOut(StartSet(), changed, groups, model, Options());
  ASSERT_TRUE(loo.ok());
  EXPECT_EQ((*loo)[0], (*base)[0]);
  EXPECT_EQ((*loo)[1], (*base)[1]);
}

// Several labelings at once give, bit for bit, what one LeaveOneGroupOut
// per labeling and a FitParameters on all points give, on any thread count,
// with or without the memo.
TEST(LeaveGroupsOutTest, SameAsOnePassAtATime) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  auto pts = Synthetic(model, Truth(), 0.03, 41);
  pts[5].use = false;  // a point no fit sees
  std::vector<std::vector<std::string>> labelings(3);
  for (size_t i = 0; i < pts.size(); ++i) {
    labelings[0].push_back("cell" + std::to_string(i / 2));
    labelings[1].push_back(absl::StrFormat("work%g", designs[i].work));
    labelings[2].push_back(i < 4 ? "" : absl::StrFormat("seqs%g", designs[i].seqs));
  }
  auto all = FitParameters(StartSet(), pts, model, Options());
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::vector<double>> one_pass;
  for (const auto& labels : labelings) {
    auto loo = LeaveOneGroupOut(StartSet(), pts, labels, model, Options());
    ASSERT_TRUE(loo.ok()) << loo.status();
    one_pass.push_back(*loo);
  }
  // The labelings really differ: a pass that ignored its labels would not
  // match the others.
  ASSERT_NE(one_pass[0], one_pass[1]);
  ASSERT_NE(one_pass[1], one_pass[2]);
  for (bool memo : {false, true}) {
    for (int jobs : {1, 3}) {
      FitOptions o = Options();
      o.jobs = jobs;
      const PredictFn fn = memo ? MemoizePredict(model) : model;
      auto r = LeaveGroupsOut(StartSet(), pts, labelings, fn, o);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->all.predicted, all->predicted) << "memo " << memo << " jobs " << jobs;
      EXPECT_EQ(r->all.cost, all->cost);
      EXPECT_EQ(r->all.iterations, all->iterations);
      EXPECT_EQ(r->all.covariance, all->covariance);
      ASSERT_EQ(r->held_out.size(), labelings.size());
      for (size_t l = 0; l < labelings.size(); ++l) {
        EXPECT_EQ(r->held_out[l], one_pass[l])
            << "labeling " << l << " memo " << memo << " jobs " << jobs;
      }
    }
  }
  // No labeling: just the all-points fit.
  auto none = LeaveGroupsOut(StartSet(), pts, {}, model, Options());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->all.predicted, all->predicted);
  EXPECT_TRUE(none->held_out.empty());
  // A labeling of the wrong length names itself.
  auto bad = LeaveGroupsOut(StartSet(), pts, {labelings[0], {"x"}}, model, Options());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

// The memo calls the model once per distinct parameter set, also when
// several threads ask for the same one at once, and hands every caller the
// model's answer (errors included).
TEST(MemoizePredictTest, OneCallPerDistinctParameterSet) {
  const auto designs = MakeDesigns();
  const PredictFn model = MakeModel(designs);
  std::atomic<int> calls{0};
  const PredictFn counted =
      [&](const ParameterSet& ps) -> absl::StatusOr<std::vector<double>> {
    ++calls;
    if (ps.Get("eff") > 0.9) return absl::InvalidArgumentError("eff too high");
    return model(ps);
  };
  const PredictFn memo = MemoizePredict(counted);
  ParameterSet a = StartSet(), b = StartSet(), bad = StartSet();
  b.FindMutable("per_seq_ms")->value = std::nextafter(0.1, 1.0);  // one ulp away
  bad.FindMutable("eff")->value = 0.95;
  std::vector<absl::StatusOr<std::vector<double>>> got(64);
  ParallelFor(64, 8, [&](int i) {
    got[i] = memo(i % 3 == 0 ? a : i % 3 == 1 ? b : bad);
  });
  EXPECT_EQ(calls.load(), 3);
  for (int i = 0; i < 64; ++i) {
    const ParameterSet& ps = i % 3 == 0 ? a : i % 3 == 1 ? b : bad;
    const auto want = model(ps);
    if (i % 3 == 2) {
      EXPECT_EQ(got[i].status().message(), "eff too high") << i;
    } else {
      ASSERT_TRUE(got[i].ok()) << i;
      EXPECT_EQ(*got[i], *want) << i;
    }
  }
  ASSERT_NE(*model(a), *model(b));  // one ulp of a parameter is another key
  // A fit through the memo is the fit without it; refitting the same
  // points costs no model call.
  auto pts = Synthetic(model, Truth(), 0.03, 7);
  const PredictFn fit_memo = MemoizePredict(counted);
  calls = 0;
  auto first = FitParameters(StartSet(), pts, fit_memo, Options());
  ASSERT_TRUE(first.ok()) << first.status();
  const int first_calls = calls.load();
  EXPECT_GT(first_calls, 0);
  auto again = FitParameters(StartSet(), pts, fit_memo, Options());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(calls.load(), first_calls);
  auto plain = FitParameters(StartSet(), pts, model, Options());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(first->predicted, plain->predicted);
  EXPECT_EQ(again->predicted, plain->predicted);
}

}  // namespace
}  // namespace servesim
