#include "hwmodels/deployment.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "hwmodels/calibration_profile.h"

namespace servesim {
namespace {

ServerSpec Spec(const char* device, const char* model, const char* q = "none") {
  ServerSpec s;
  s.device = device;
  s.model = model;
  s.quantization = q;
  s.max_model_len = 8192;
  return s;
}

TEST(DeploymentTest, AutoDtypePicksFp16OnT4AndBf16Elsewhere) {
  EXPECT_EQ(BuildDeployment(Spec("t4", "gemma-4-e2b"))->dtype, "fp16");
  EXPECT_EQ(BuildDeployment(Spec("l4", "gemma-4-e2b"))->dtype, "bf16");
  ServerSpec s = Spec("t4", "gemma-4-e2b");
  s.dtype = "bf16";
  auto d = BuildDeployment(s);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("--dtype"), std::string::npos);
  EXPECT_NE(d.status().message().find("fp16"), std::string::npos);
}

// vLLM's `vllm serve` defaults: 8,192 / 1,024 on >= 70 GiB GPUs, 2,048 /
// 256 on smaller ones and on TPUs (whose TPU table arg_utils.py never
// matches: get_device_name() returns "TPU V6E", the table's key is "V6E").
TEST(DeploymentTest, SchedulerDefaultsFollowVllmServePerDevice) {
  struct Want {
    const char* device;
    int32_t batched, seqs;
  };
  for (const Want& w :
       {Want{"mi300x", 16384, 1024}, Want{"l4", 2048, 256}, Want{"t4", 2048, 256},
        Want{"tpu-v6e", 2048, 256}, Want{"tpu-v5e", 2048, 256}}) {
    auto d = BuildDeployment(Spec(w.device, "gemma-4-e2b"));
    ASSERT_TRUE(d.ok()) << w.device << ": " << d.status();
    EXPECT_EQ(d->scheduler.max_num_batched_tokens, w.batched) << w.device;
    EXPECT_EQ(d->scheduler.max_num_seqs, w.seqs) << w.device;
  }
}

TEST(DeploymentTest, UnknownNamesAndBadNumbersNameTheFlag) {
  struct Case {
    ServerSpec spec;
    const char* flag;
  };
  ServerSpec util = Spec("t4", "gemma-4-e2b");
  util.gpu_memory_utilization = 1.5;
  ServerSpec len = Spec("t4", "gemma-4-e2b");
  len.max_model_len = 1 << 20;
  for (const Case& c :
       {Case{Spec("a900", "gemma-4-e2b"), "--device"},
        Case{Spec("t4", "gemma-9"), "--model"},
        Case{Spec("t4", "gemma-4-e2b", "awq"), "--quantization"},
        Case{util, "--gpu-memory-utilization"}, Case{len, "--max-model-len"}}) {
    auto d = BuildDeployment(c.spec);
    ASSERT_FALSE(d.ok()) << c.flag;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find(c.flag), std::string::npos) << d.status();
  }
}

// mxfp4 quantizes MoE experts only: on a dense model it would quantize
// nothing under its name, so it is refused; on the MoE model it applies.
TEST(DeploymentTest, Mxfp4OnADenseModelIsRefused) {
  auto dense = BuildDeployment(Spec("l4", "gemma-4-e2b", "mxfp4"));
  ASSERT_FALSE(dense.ok());
  EXPECT_EQ(dense.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dense.status().message().find("--quantization mxfp4: quantizes MoE experts "
                                          "only, and gemma-4-e2b is dense"),
            std::string::npos)
      << dense.status();
  auto moe = BuildDeployment(Spec("h100-sxm", "gemma-4-26b-a4b", "mxfp4"));
  EXPECT_TRUE(moe.ok()) << moe.status();
}

// --kv-cache-dtype fp8 (vLLM's flag): one byte a KV element, so half the
// block bytes and twice the blocks in the same memory, and decode reads
// half the context bytes; refused on a device without fp8 and for a value
// vLLM does not take.
TEST(DeploymentTest, Fp8KvCacheHalvesTheBytesOnDevicesWithFp8) {
  ServerSpec s = Spec("h100-sxm", "gemma-4-12b");
  auto bf16 = BuildDeployment(s);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  s.kv_cache_dtype = "fp8";
  auto fp8 = BuildDeployment(s);
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  EXPECT_EQ(fp8->kv_cache_dtype, "fp8");
  EXPECT_EQ(fp8->kv_dtype_bytes, 1);
  ASSERT_EQ(fp8->kv_cache.groups.size(), bf16->kv_cache.groups.size());
  EXPECT_EQ(2 * fp8->memory.kv_block_bytes, bf16->memory.kv_block_bytes);
  EXPECT_NEAR(static_cast<double>(fp8->memory.num_blocks),
              2.0 * static_cast<double>(bf16->memory.num_blocks), 2.0);
  const std::vector<int32_t> ctx(32, 8192);
  EXPECT_LT(fp8->step_model->Cost(StepBatch{{}, ctx}).device_ns,
            bf16->step_model->Cost(StepBatch{{}, ctx}).device_ns);
  EXPECT_NE(fp8->provenance.find("KV cache fp8 (1 byte)"), std::string::npos);
  s.device = "t4";
  auto t4 = BuildDeployment(s);
  ASSERT_FALSE(t4.ok());
  EXPECT_NE(t4.status().message().find("--kv-cache-dtype fp8: t4 (NVIDIA T4) has no fp8"),
            std::string::npos)
      << t4.status();
  s.device = "h100-sxm";
  s.kv_cache_dtype = "int4";
  auto bad = BuildDeployment(s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--kv-cache-dtype: unknown value 'int4'"),
            std::string::npos);
  s.kv_cache_dtype = "auto";
  EXPECT_EQ(BuildDeployment(s)->kv_dtype_bytes, 2);
}

TEST(DeploymentTest, KvCacheSpecMatchesMemoryPlan) {
  auto d = BuildDeployment(Spec("l4", "gemma-4-e4b"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kv_cache.num_blocks, d->memory.num_blocks);
  // E4B: 24 layers hold KV (20 sliding + 4 full): groups of 4 layers.
  ASSERT_EQ(d->kv_cache.groups.size(), 6u);
  EXPECT_EQ(d->kv_cache.groups[0].num_layers, 4);
  EXPECT_NE(d->step_model, nullptr);
  EXPECT_NE(d->provenance.find("bw_eff_weights"), std::string::npos);
}

TEST(DeploymentTest, ParametersComeFromOverrideThenProfileThenPriors) {
  ServerSpec s = Spec("l4", "gemma-4-12b", "w4a16-emb4");
  auto prior = DefaultParameters(s);
  ASSERT_TRUE(prior.ok());
  ASSERT_NE(prior->Find("quant_kernel_eff"), nullptr);
  EXPECT_EQ(prior->Find("moe_routing_us"), nullptr);  // dense model
  for (const Parameter& p : prior->params()) {
    EXPECT_LE(p.lower, p.value) << p.name;
    EXPECT_LE(p.value, p.upper) << p.name;
    EXPECT_FALSE(p.meaning.empty()) << p.name;
  }
  // A profile written and read back is applied by name.
  ParameterSet fitted = *prior;
  fitted.FindMutable("bw_eff_weights")->value = 0.5;
  fitted.FindMutable("bw_eff_weights")->std_error = 0.01;
  proto::CalibrationProfile prof = ProfileFromParameters("l4", fitted);
  prof.set_software_build("test");
  const std::string path = ::testing::TempDir() + "/servesim_profile_l4.textproto";
  ASSERT_TRUE(SaveCalibrationProfile(prof, path).ok());
  s.calibration_profile = path;
  auto d = BuildDeployment(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_DOUBLE_EQ(d->params.Get("bw_eff_weights"), 0.5);
  EXPECT_DOUBLE_EQ(d->params.Find("bw_eff_weights")->std_error, 0.01);
  // An explicit override wins over the profile.
  ParameterSet over = *prior;
  over.FindMutable("bw_eff_weights")->value = 0.7;
  auto d2 = BuildDeployment(s, &over);
  ASSERT_TRUE(d2.ok());
  EXPECT_DOUBLE_EQ(d2->params.Get("bw_eff_weights"), 0.7);
  std::remove(path.c_str());
  // A broken profile is an error naming the file.
  s.calibration_profile = ::testing::TempDir() + "/servesim_missing_profile.textproto";
  auto d3 = BuildDeployment(s);
  ASSERT_FALSE(d3.ok());
  EXPECT_NE(d3.status().message().find("servesim_missing_profile"), std::string::npos);
}

TEST(DeploymentTest, BatchedTokensBelowMaxNumSeqsIsRefusedAsVllmDoes) {
  ServerSpec s = Spec("l4", "gemma-4-e2b", "none");
  s.max_num_batched_tokens = 1;
  auto d = BuildDeployment(s);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      d.status().message().find("--max-num-batched-tokens: 1 is below max_num_seqs 256"),
      std::string::npos)
      << d.status();
  s.max_num_seqs = 1;  // lowering the sequence limit makes it valid
  EXPECT_TRUE(BuildDeployment(s).ok());
  s.max_num_seqs = 2;
  EXPECT_NE(BuildDeployment(s).status().message().find("(--max-num-seqs)"),
            std::string::npos);
}

TEST(DeploymentTest, ProfileOfAnotherDeviceIsRefusedNamingBoth) {
  ServerSpec s = Spec("l4", "gemma-4-e2b", "none");
  auto prior = DefaultParameters(s);
  ASSERT_TRUE(prior.ok());
  const std::string path = ::testing::TempDir() + "/servesim_profile_mi300x.textproto";
  for (const char* device : {"mi300x", "MI300X-alias-unknown"}) {
    proto::CalibrationProfile prof = ProfileFromParameters(device, *prior);
    ASSERT_TRUE(SaveCalibrationProfile(prof, path).ok());
    s.calibration_profile = path;
    auto d = BuildDeployment(s);
    ASSERT_FALSE(d.ok()) << device;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find(std::string("device '") + device + "'"),
              std::string::npos)
        << d.status();
    EXPECT_NE(d.status().message().find("not on 'l4'"), std::string::npos) << d.status();
  }
  // The same profile under an alias of the right device is accepted.
  proto::CalibrationProfile prof = ProfileFromParameters("nvidia-l4", *prior);
  ASSERT_TRUE(SaveCalibrationProfile(prof, path).ok());
  EXPECT_TRUE(BuildDeployment(s).ok());
  std::remove(path.c_str());
}

TEST(DeploymentTest, RebuildKeepsUnlistedParameters) {
  auto d = BuildDeployment(Spec("mi300x", "gemma-4-e2b"));
  ASSERT_TRUE(d.ok());
  Parameter host;
  host.name = "host_step_us";
  host.value = 0;
  ParameterSet only_host({host});
  auto m = RebuildStepModel(*d, only_host);
  const int32_t ctx[] = {128};
  const StepBatch b{{}, ctx};
  // Within 1 ns: each cost is rounded to whole ns on its own.
  EXPECT_NEAR(static_cast<double>(m->Cost(b).host_ns),
              static_cast<double>(d->step_model->Cost(b).host_ns) -
                  d->params.Get("host_step_us") * 1000,
              1.0);
  EXPECT_EQ(m->Cost(b).device_ns, d->step_model->Cost(b).device_ns);
}

}  // namespace
}  // namespace servesim
