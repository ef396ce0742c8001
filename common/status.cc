#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kruise {

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace kruise
