// TSan canary (KRUISE_SANITIZE=thread builds only; test/tsan/CMakeLists.txt): proves the TSan set-up
// neither hides a real race nor reports ordering that absl::Mutex provides.
//   tsan_canary guarded  - two threads update a counter under an absl::Mutex (also through Await
//                          and CondVar): must run clean;
//   tsan_canary racy     - the same, but one thread skips the lock: must be reported.
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

absl::Mutex mu;
long counter = 0;  // guarded by mu (except in the racy run)

int Run(bool racy) {
  absl::Notification started;
  std::thread other([&] {
    started.Notify();
    for (int i = 0; i < 10000; ++i) {
      if (racy) {
        ++counter;
      } else {
        absl::MutexLock lock(&mu);
        ++counter;
      }
    }
  });
  started.WaitForNotification();
  for (int i = 0; i < 10000; ++i) {
    absl::MutexLock lock(&mu);
    ++counter;
  }
  {
    absl::MutexLock lock(&mu);
    auto done = [] { return counter >= 10000; };
    mu.Await(absl::Condition(&done));
  }
  other.join();
  std::printf("counter %ld\n", counter);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || (std::strcmp(argv[1], "guarded") != 0 && std::strcmp(argv[1], "racy") != 0)) {
    std::fprintf(stderr, "usage: tsan_canary guarded|racy\n");
    return 2;
  }
  return Run(std::strcmp(argv[1], "racy") == 0);
}
