#pragma once

// Helpers shared by the kube client tests: a self-removing temp directory, a bounded wait.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "test/fakes/temp_dir.h"

namespace kruise::kube::testutil {

using TempDir = ::kruise::testing::TempDir;

// Waits (bounded) for `pred`; false when `limit` passed first.
template <typename Pred>
bool WaitFor(Pred pred, absl::Duration limit = absl::Seconds(10)) {
  const absl::Time end = absl::Now() + limit;
  while (!pred()) {
    if (absl::Now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace kruise::kube::testutil
