// The servesim version (the CMake project version) and the git commit the
// binary was built from, as written into every result (--version,
// servesim.version / servesim.commit in the JSON, every sweep row).
// Thread-safe: constants.
#ifndef SERVESIM_SIM_BASE_VERSION_H_
#define SERVESIM_SIM_BASE_VERSION_H_

namespace servesim {

// "0.2.0".
const char* VersionString();

// The commit's 12-digit hash, "+dirty" appended when the work tree had
// uncommitted changes at build time; "unknown" when built outside git.
const char* CommitString();

}  // namespace servesim

#endif  // SERVESIM_SIM_BASE_VERSION_H_
