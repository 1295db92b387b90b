// Where requests come from: a trace reader, a synthetic generator, a
// benchmark file. Implementations live in traces/ (and simple ones in sim/).
#ifndef SERVESIM_SIM_REQUEST_SOURCE_H_
#define SERVESIM_SIM_REQUEST_SOURCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "sim/request.h"

namespace servesim {

// A stream of requests in nondecreasing arrival_ns order, read one at a
// time so memory stays bounded whatever the length of the source.
// Thread-compatible; not copyable.
class RequestSource {
 public:
  virtual ~RequestSource() = default;
  RequestSource() = default;
  RequestSource(const RequestSource&) = delete;
  RequestSource& operator=(const RequestSource&) = delete;

  // Fills `out` with the next request and returns true; returns false at
  // the end of the stream. A bad record is an error whose message names
  // the file, line (or record) and field, and the allowed range. After an
  // error or the end, further calls return the same result.
  // Ids are assigned 0, 1, 2, ... in stream order.
  virtual absl::StatusOr<bool> Next(RequestSpec& out) = 0;

  // One line saying what this source is (file, format, transforms), for
  // the provenance written beside results.
  virtual std::string Describe() const = 0;
};

}  // namespace servesim

#endif  // SERVESIM_SIM_REQUEST_SOURCE_H_
