// The device and model catalog: the text protos in hwmodels/devices/ and
// hwmodels/models/, embedded into the binary at build time (adding a
// device or a model is adding a file), plus import of a Hugging Face
// config.json. Stateless functions; thread-safe.
#ifndef SERVESIM_HWMODELS_CATALOG_H_
#define SERVESIM_HWMODELS_CATALOG_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/text_format.h"
#include "proto/hwmodels.pb.h"

namespace servesim {

// Device by id or alias, case-insensitive ("T4", "nvidia-t4"), or a path
// to a device text proto (a name ending in .textproto / .txtpb / .pbtxt or
// with a '/' in it), parsed and validated as ParseDeviceText does.
// InvalidArgument names --device and the allowed ids, or FILE:LINE: field.
absl::StatusOr<servesim::proto::Device> FindDevice(const std::string& name_or_path);
std::vector<std::string> DeviceIds();  // the embedded devices, sorted
// The embedded devices / models, sorted by id.
std::vector<servesim::proto::Device> EmbeddedDevices();
std::vector<servesim::proto::ModelArch> EmbeddedModels();
// The text of the file a device (model) resolves from: the embedded file
// of an id or alias, or the file at a path.
absl::StatusOr<std::string> DeviceFileText(const std::string& name_or_path);
absl::StatusOr<std::string> ModelFileText(const std::string& name_or_path);

// Parses a device text proto and validates it (ValidateDevice); sets origin,
// content_hash (DevicePerformanceHash) and file_hash (ContentHash of the
// bytes). `origin` names the file in errors ("FILE:LINE: field F:
// ..."): unknown keys, a missing bandwidth, negative memory, an fp8 peak on
// a device without fp8 are all errors naming the field.
absl::StatusOr<servesim::proto::Device> ParseDeviceText(std::string_view text,
                                                        const std::string& origin);
// Every rule a device file must meet; `tree` (optional) gives line numbers.
absl::Status ValidateDevice(const servesim::proto::Device& device,
                            const std::string& origin,
                            const google::protobuf::TextFormat::ParseInfoTree* tree);
// FNV-1a 64 of a file's bytes: "fnv1a64:<16 hex digits>".
std::string ContentHash(std::string_view bytes);
// The device's content_hash: FNV-1a 64 of its canonical text with the
// fields that do not describe the hardware's performance cleared (name,
// aliases, prices, startup_to_ready_s, startup_source, sources,
// usable_memory_rule; origin and the hashes): "perf-fnv1a64:<16 hex>".
std::string DevicePerformanceHash(const servesim::proto::Device& device);

// OK when the device's vLLM build runs `format_id` (a WeightFormat id);
// otherwise InvalidArgument naming --quantization, the device and the
// formats it allows.
absl::Status CheckWeightFormat(const servesim::proto::Device& device,
                               const std::string& format_id);

// Model by id ("gemma-4-e2b"), Hugging Face id ("google/gemma-4-E2B-it";
// case-insensitive, "-it" and the "google/" owner optional), a path to a
// config.json or to a servesim model text proto (.textproto), or a model
// folder holding a config.json (as `vllm serve /path/to/model` takes it).
// InvalidArgument names --model (or FILE:LINE: field).
absl::StatusOr<servesim::proto::ModelArch> FindModel(const std::string& name_or_path);
std::vector<std::string> ModelIds();  // sorted

// Parses a model text proto and checks it expands (ExpandModelArch).
absl::StatusOr<servesim::proto::ModelArch> ParseModelText(std::string_view text,
                                                          const std::string& origin);

// Builds a model description from a Hugging Face config.json text: Gemma 4
// (text_config, layer_types, global head dim, KV sharing, per-layer
// embeddings, experts) and Llama/Qwen/Mistral-style dense decoders.
// `origin` names the file in error messages.
absl::StatusOr<servesim::proto::ModelArch> ImportHfConfig(const std::string& json_text,
                                                          const std::string& origin);

// ModelArch.checkpoint_quantization of a config.json whose
// quantization_config.quant_method is not a format servesim models by name
// (gptq, awq, ...): this prefix, then the method. The deployment then needs
// an explicit --quantization.
inline constexpr char kUnmodelledQuantPrefix[] = "unmodelled:";

}  // namespace servesim

#endif  // SERVESIM_HWMODELS_CATALOG_H_
