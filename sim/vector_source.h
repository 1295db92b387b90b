// A RequestSource over an in-memory list (tests, small experiments).
// Ids are reassigned 0, 1, 2, ... in order. Not thread-safe.
#ifndef SERVESIM_SIM_VECTOR_SOURCE_H_
#define SERVESIM_SIM_VECTOR_SOURCE_H_

#include <string>
#include <utility>
#include <vector>

#include "sim/request_source.h"

namespace servesim {

class VectorSource : public RequestSource {
 public:
  explicit VectorSource(std::vector<RequestSpec> requests,
                        std::string description = "vector")
      : requests_(std::move(requests)), description_(std::move(description)) {}
  absl::StatusOr<bool> Next(RequestSpec& out) override {
    if (next_ >= requests_.size()) return false;
    out = requests_[next_];
    out.id = static_cast<RequestId>(next_);
    ++next_;
    return true;
  }
  std::string Describe() const override { return description_; }

 private:
  std::vector<RequestSpec> requests_;
  std::string description_;
  size_t next_ = 0;
};

}  // namespace servesim

#endif  // SERVESIM_SIM_VECTOR_SOURCE_H_
