// Integer helpers shared across the project.
#ifndef SERVESIM_SIM_BASE_INT_MATH_H_
#define SERVESIM_SIM_BASE_INT_MATH_H_

#include <cstdint>

namespace servesim {

// ceil(a / b). REQUIRES: a >= 0, b > 0, a + b - 1 does not overflow.
constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace servesim

#endif  // SERVESIM_SIM_BASE_INT_MATH_H_
