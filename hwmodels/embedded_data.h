// Text protos of hwmodels/devices/, hwmodels/models/ and
// calibration/profiles/, embedded at configure time by hwmodels/CMakeLists.txt
// (generated embedded_data.cc, see servesim_embed in cmake/servesim.cmake).
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
extern const EmbeddedFile kEmbeddedProfileFiles[];
extern const int kNumEmbeddedProfileFiles;

}  // namespace servesim::internal

#endif  // SERVESIM_HWMODELS_EMBEDDED_DATA_H_
