#pragma once

// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status and absl::StatusOr.
// Debian's abseil (20220623) does not ship them.
//
//   RETURN_IF_ERROR(DoThing());
//   ASSIGN_OR_RETURN(auto value, ComputeValue());
//   ASSIGN_OR_RETURN(existing_var, ComputeValue());

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#define KRUISE_STATUS_CONCAT_INNER_(a, b) a##b
#define KRUISE_STATUS_CONCAT_(a, b) KRUISE_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                                   \
  do {                                                          \
    if (::absl::Status _kruise_st = (expr); !_kruise_st.ok()) { \
      return _kruise_st;                                        \
    }                                                           \
  } while (0)

#define KRUISE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) {                                    \
    return std::move(tmp).status();                   \
  }                                                   \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  KRUISE_ASSIGN_OR_RETURN_IMPL_(KRUISE_STATUS_CONCAT_(_kruise_statusor_, __LINE__), lhs, expr)

namespace kruise {

// Returns `status` with `context` prepended to its message, keeping its code ("context: message").
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace kruise
