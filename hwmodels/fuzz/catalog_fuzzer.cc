// libFuzzer target: the device and model parsers (device text proto,
// model text proto, Hugging Face config.json) never crash, and whatever a
// device parse accepts passes ValidateDevice again and can be looked up
// for every weight format.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hwmodels/catalog.h"
#include "hwmodels/model_arch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto device = servesim::ParseDeviceText(text, "fuzz.textproto");
  if (device.ok()) {
    servesim::proto::Device copy = *device;
    copy.clear_origin();
    copy.clear_content_hash();
    copy.clear_file_hash();
    if (!servesim::ValidateDevice(copy, "fuzz", nullptr).ok()) __builtin_trap();
    for (const char* f : {"none", "fp8", "w8a8", "w4a16", "w4a16-emb4"})
      (void)servesim::CheckWeightFormat(*device, f);
  }
  auto model = servesim::ParseModelText(text, "fuzz.textproto");
  // A model text proto that parses also expands.
  if (model.ok() && !servesim::ExpandModelArch(*model).ok()) __builtin_trap();
  auto hf = servesim::ImportHfConfig(std::string(text), "fuzz/config.json");
  if (hf.ok()) (void)servesim::ExpandModelArch(*hf);
  return 0;
}
