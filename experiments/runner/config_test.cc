// The experiment config without the command line: ApplyDefaults' documented
// defaults, Validate's range checks (each message names the flag and the
// allowed range) and the plain structs a config resolves to. The CLI11
// bindings that fill a config are tested in experiments/cli/server_flags_test.cc.
#include "experiments/runner/config.h"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace servesim {
namespace {

proto::ExperimentConfig Base() {
  proto::ExperimentConfig c;
  c.mutable_server()->set_device("l4");
  c.mutable_server()->set_model("gemma-4-e2b");
  return c;
}

// Applies `edit` to Base(), then the defaults, and expects Validate to
// name `needle`.
void ExpectErrorNaming(const std::function<void(proto::ExperimentConfig&)>& edit,
                       const std::string& needle) {
  proto::ExperimentConfig c = Base();
  edit(c);
  ApplyDefaults(c);
  const absl::Status st = Validate(c);
  ASSERT_FALSE(st.ok()) << needle;
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find(needle), std::string::npos) << st;
}

TEST(ConfigTest, ApplyDefaultsFillsVllmsDefaults) {
  proto::ExperimentConfig c = Base();
  ApplyDefaults(c);
  ASSERT_TRUE(Validate(c).ok()) << Validate(c);
  EXPECT_EQ(c.client().num_prompts(), 1000);
  EXPECT_EQ(c.client().random_input_len(), 1024);
  EXPECT_EQ(c.client().random_output_len(), 128);
  EXPECT_EQ(c.client().burstiness(), 1.0);
  EXPECT_EQ(c.client().seed(), 0u);
  EXPECT_TRUE(c.client().ignore_eos());
  const ClientConfig cl = ToClientConfig(c.client());
  EXPECT_TRUE(std::isinf(cl.request_rate));
  EXPECT_EQ(cl.max_concurrency, 0);
}

// The server defaults have one home: ServerSpec's initialisers.
TEST(ConfigTest, ServerDefaultsAreServerSpecsInitialisers) {
  proto::ServerConfig s;
  ApplyServerDefaults(s);
  const ServerSpec kDefault;
  EXPECT_EQ(s.dtype(), kDefault.dtype);
  EXPECT_EQ(s.quantization(), kDefault.quantization);
  EXPECT_EQ(s.gpu_memory_utilization(), kDefault.gpu_memory_utilization);
  EXPECT_EQ(s.block_size(), kDefault.block_size);
  EXPECT_EQ(s.enable_prefix_caching(), kDefault.enable_prefix_caching);
  EXPECT_EQ(s.async_scheduling(), kDefault.async_scheduling);
  EXPECT_DOUBLE_EQ(s.gpu_memory_utilization(), 0.90);
  EXPECT_EQ(s.block_size(), 16);
  EXPECT_TRUE(s.enable_prefix_caching());
}

TEST(ConfigTest, EachOutOfRangeFieldIsAnErrorNamingItsFlag) {
  using C = proto::ExperimentConfig;
  ExpectErrorNaming([](C& c) { c.mutable_server()->set_block_size(7); }, "--block-size");
  ExpectErrorNaming([](C& c) { c.mutable_server()->set_block_size(0); }, "--block-size");
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_client_overhead_s(1e10); },
                    "[0, 1e6] s");
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_client_overhead_s(-0.1); },
                    "--client-overhead-s");
  ExpectErrorNaming(
      [](C& c) {
        c.mutable_server()->set_max_num_batched_tokens(1);
        c.mutable_server()->set_max_num_seqs(256);
      },
      "max_num_batched_tokens >= max_num_seqs");
  ExpectErrorNaming([](C& c) { c.mutable_server()->set_gpu_memory_utilization(1.2); },
                    "--gpu-memory-utilization");
  ExpectErrorNaming([](C& c) { c.mutable_server()->set_max_model_len(-1); },
                    "--max-model-len");
  ExpectErrorNaming([](C& c) { c.mutable_server()->set_max_num_seqs(-1); },
                    "--max-num-seqs");
  ExpectErrorNaming([](C& c) { c.mutable_server()->set_max_num_batched_tokens(-3); },
                    "--max-num-batched-tokens");
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_random_input_len(-5); },
                    "--random-input-len");
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_random_output_len(-1); },
                    "--random-output-len");
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_num_prompts(-1); },
                    "--num-prompts");
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_max_concurrency(-1); },
                    "--max-concurrency");
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_request_rate(-1); },
                    "--request-rate");
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_burstiness(0); }, "--burstiness");
  // A denormal Gamma shape made NaN arrival times, blamed on --request-rate.
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_burstiness(1e-310); },
                    "--burstiness: 1e-310 is out of range [0.001, 1000]");
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_random_range_ratio(1.5); },
                    "--random-range-ratio");
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_trace_format("azure"); },
                    "--trace-format: given without --trace");
  ExpectErrorNaming([](C& c) { c.mutable_server()->set_tensor_parallel_size(100); },
                    "--tensor-parallel-size: 100 is out of range [1, 64]");
  ExpectErrorNaming([](C& c) { c.mutable_server()->set_pipeline_parallel_size(65); },
                    "--pipeline-parallel-size");
  ExpectErrorNaming([](C& c) { c.mutable_server()->set_data_parallel_size(-1); },
                    "--data-parallel-size");
  for (int bs : {1, 16, 128, 1024}) {
    proto::ExperimentConfig c = Base();
    c.mutable_server()->set_block_size(bs);
    ApplyDefaults(c);
    EXPECT_TRUE(Validate(c).ok()) << bs;
  }
}

// An explicit 0 (a config file, --set or a sweep axis) is a value, not
// "unset": it is refused like the flag, not replaced by the default. With
// a trace, num_prompts 0 means the whole trace.
TEST(ConfigTest, AnExplicitZeroIsCheckedNotReplacedByTheDefault) {
  using C = proto::ExperimentConfig;
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_num_prompts(0); },
                    "--num-prompts: 0 is out of range");
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_random_input_len(0); },
                    "--random-input-len: 0 is out of range");
  ExpectErrorNaming([](C& c) { c.mutable_client()->set_random_output_len(0); },
                    "--random-output-len: 0 is out of range");
  proto::ExperimentConfig c = Base();
  c.mutable_client()->set_trace("t.csv");
  c.mutable_client()->set_num_prompts(0);
  ApplyDefaults(c);
  EXPECT_TRUE(Validate(c).ok()) << Validate(c);
  EXPECT_EQ(c.client().num_prompts(), 0);
  proto::ExperimentConfig unset = Base();
  unset.mutable_client()->set_trace("t.csv");
  ApplyDefaults(unset);
  EXPECT_FALSE(unset.client().has_num_prompts());  // all of the trace
}

TEST(ConfigTest, MissingDeviceOrModelIsAnError) {
  ExpectErrorNaming(
      [](proto::ExperimentConfig& c) { c.mutable_server()->clear_device(); },
      "--device: required");
  ExpectErrorNaming([](proto::ExperimentConfig& c) { c.mutable_server()->clear_model(); },
                    "--model: required");
}

TEST(ConfigTest, FleetCountIsCapped) {
  proto::ExperimentConfig c;
  auto* r = c.mutable_fleet()->add_replicas();
  r->mutable_server()->set_device("l4");
  r->mutable_server()->set_model("gemma-4-e2b");
  r->set_count(kMaxReplicas + 1);
  ApplyDefaults(c);
  EXPECT_NE(Validate(c).message().find("fleet.replicas[0].count"), std::string::npos);
  r->set_count(kMaxReplicas);
  *c.mutable_fleet()->add_replicas() = *r;
  EXPECT_NE(Validate(c).message().find("total count"), std::string::npos);
}

TEST(ConfigTest, RandomLengthsMustFitTheResolvedLimit) {
  proto::ClientConfig cl;
  cl.set_random_input_len(40000);
  cl.set_random_output_len(128);
  const absl::Status st = CheckRandomLengthsFit(cl, 32768, "the model's limit");
  EXPECT_NE(st.message().find("40128"), std::string::npos) << st;
  EXPECT_NE(st.message().find("the model's limit 32768"), std::string::npos) << st;
  cl.set_random_input_len(1024);
  EXPECT_TRUE(CheckRandomLengthsFit(cl, 32768, "x").ok());
  cl.set_random_input_len(40000);
  cl.set_trace("t.csv");  // a trace's requests are judged one by one (rejected)
  EXPECT_TRUE(CheckRandomLengthsFit(cl, 32768, "x").ok());
}

TEST(ConfigTest, InputPlusOutputExactlyMaxModelLenIsAccepted) {
  proto::ExperimentConfig c = Base();
  c.mutable_server()->set_max_model_len(1100);
  c.mutable_client()->set_random_input_len(900);
  c.mutable_client()->set_random_output_len(200);
  ApplyDefaults(c);
  EXPECT_TRUE(Validate(c).ok()) << Validate(c);
  c.mutable_server()->set_max_model_len(1099);
  const absl::Status st = Validate(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--max-model-len"), std::string::npos) << st;
}

TEST(ConfigTest, RequestRateParsesInfAndNumbers) {
  EXPECT_TRUE(std::isinf(ParseRequestRate("inf").value()));
  EXPECT_TRUE(std::isinf(ParseRequestRate("Infinity").value()));
  EXPECT_DOUBLE_EQ(ParseRequestRate("2.5").value(), 2.5);
  EXPECT_FALSE(ParseRequestRate("0").ok());
  const absl::StatusOr<double> bad = ParseRequestRate("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--request-rate"), std::string::npos);
}

TEST(ConfigTest, TraceArrivalsAreReplayedWithOrWithoutARate) {
  proto::ClientConfig c;
  EXPECT_FALSE(ToClientConfig(c).replay_arrivals);
  c.set_trace("x.jsonl");
  EXPECT_TRUE(ToClientConfig(c).replay_arrivals);
  c.set_request_rate(3);  // rescales the trace's timeline, still replayed
  EXPECT_TRUE(ToClientConfig(c).replay_arrivals);
}

// Parallel sizes: 0 (unset) is 1 in the ServerSpec, and a TP 1 config
// writes no parallel field (it reads as it did before they existed).
TEST(ConfigTest, UnsetParallelSizesAreOne) {
  proto::ExperimentConfig c = Base();
  ApplyDefaults(c);
  const ServerSpec spec = ToServerSpec(c.server());
  EXPECT_EQ(spec.tensor_parallel_size, 1);
  EXPECT_EQ(spec.pipeline_parallel_size, 1);
  EXPECT_EQ(spec.data_parallel_size, 1);
  EXPECT_FALSE(spec.enable_expert_parallel);
  EXPECT_EQ(ConfigToText(c).find("parallel"), std::string::npos);
  c.mutable_server()->set_tensor_parallel_size(4);
  EXPECT_EQ(ToServerSpec(c.server()).tensor_parallel_size, 4);
}

}  // namespace
}  // namespace servesim
