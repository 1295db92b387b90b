// Tiny Status helpers: the installed Abseil (20220623) has no
// RETURN_IF_ERROR / ASSIGN_OR_RETURN.
#ifndef SERVESIM_SIM_BASE_STATUS_MACROS_H_
#define SERVESIM_SIM_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SERVESIM_CONCAT_INNER_(a, b) a##b
#define SERVESIM_CONCAT_(a, b) SERVESIM_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    ::absl::Status _servesim_st = (expr);        \
    if (!_servesim_st.ok()) return _servesim_st; \
  } while (0)

// ASSIGN_OR_RETURN(auto x, Foo()); / ASSIGN_OR_RETURN(x, Foo());
#define ASSIGN_OR_RETURN(lhs, expr) \
  SERVESIM_ASSIGN_OR_RETURN_IMPL_(SERVESIM_CONCAT_(_servesim_sor_, __LINE__), lhs, expr)
// `tmp` and `lhs` name a variable and a declaration: they cannot be
// parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SERVESIM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

// Invariant check inside the event loop: a broken invariant is a bug, so
// abort loudly with the location and the failed condition.
#define SERVESIM_CHECK(cond)                                                   \
  do {                                                                         \
    if (!(cond)) ::servesim::internal::CheckFailed(__FILE__, __LINE__, #cond); \
  } while (0)

namespace servesim::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond);
}  // namespace servesim::internal

#endif  // SERVESIM_SIM_BASE_STATUS_MACROS_H_
