// Text protos of hwmodels/devices/ and hwmodels/models/, embedded at build
// time by hwmodels/CMakeLists.txt (generated embedded_data.cc).
#ifndef SERVESIM_HWMODELS_EMBEDDED_DATA_H_
#define SERVESIM_HWMODELS_EMBEDDED_DATA_H_

namespace servesim::internal {

struct EmbeddedFile {
  const char* name;  // file name, e.g. "t4.textproto"
  const char* text;
};

extern const EmbeddedFile kEmbeddedDeviceFiles[];
extern const int kNumEmbeddedDeviceFiles;
extern const EmbeddedFile kEmbeddedModelFiles[];
extern const int kNumEmbeddedModelFiles;

}  // namespace servesim::internal

#endif  // SERVESIM_HWMODELS_EMBEDDED_DATA_H_
