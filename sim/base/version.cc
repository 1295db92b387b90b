#include "sim/base/version.h"

namespace servesim {

const char* VersionString() { return SERVESIM_VERSION; }

}  // namespace servesim
