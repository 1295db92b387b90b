// The device and model catalog: the text protos in hwmodels/devices/ and
// hwmodels/models/, embedded into the binary at build time (adding a
// device or a model is adding a file), plus import of a Hugging Face
// config.json. Stateless functions; thread-safe.
#ifndef SERVESIM_HWMODELS_CATALOG_H_
#define SERVESIM_HWMODELS_CATALOG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/hwmodels.pb.h"

namespace servesim {

// Device by id or alias, case-insensitive ("T4", "nvidia-t4").
// InvalidArgument names --device and the allowed ids.
absl::StatusOr<servesim::proto::Device> FindDevice(const std::string& name);
std::vector<std::string> DeviceIds();  // sorted

// Model by id ("gemma-4-e2b"), Hugging Face id ("google/gemma-4-E2B-it";
// case-insensitive, "-it" and the "google/" owner optional), or a path to
// a config.json (an existing file). InvalidArgument names --model.
absl::StatusOr<servesim::proto::ModelArch> FindModel(const std::string& name_or_path);
std::vector<std::string> ModelIds();  // sorted

// Builds a model description from a Hugging Face config.json text: Gemma 4
// (text_config, layer_types, global head dim, KV sharing, per-layer
// embeddings, experts) and Llama/Qwen/Mistral-style dense decoders.
// `origin` names the file in error messages.
absl::StatusOr<servesim::proto::ModelArch> ImportHfConfig(const std::string& json_text,
                                                          const std::string& origin);

}  // namespace servesim

#endif  // SERVESIM_HWMODELS_CATALOG_H_
