// bare-cri-pull: times CRI PullImage calls made through a bare generated gRPC stub (no wrapper,
// no retries), the baseline of bench/manager/job_latency.sh.
//
//   bare-cri-pull --socket /run/containerd/containerd.sock REF...
//
// Pulls each REF in turn and prints one line per pull: "REF <milliseconds>". Exit 1 on the first
// failed pull (its error on stderr).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/our_puller.h"
#include "common/flags.h"

int main(int argc, char** argv) {
  kruise::Flags app{"Time CRI PullImage calls through a bare gRPC stub"};
  std::string socket;
  std::vector<std::string> refs;
  app.Add("--socket", &socket, "CRI socket path").Required();
  app.Add("refs", &refs, "Image references, pulled in turn").Required();
  if (auto exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  auto puller = kruise::bench::MakeBareGrpcPuller(socket);
  if (!puller.ok()) {
    std::fprintf(stderr, "bare-cri-pull: %s\n", puller.status().ToString().c_str());
    return 1;
  }
  for (const std::string& ref : refs) {
    auto start = std::chrono::steady_clock::now();
    absl::Status s = (*puller)->Pull(ref);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
    if (!s.ok()) {
      std::fprintf(stderr, "bare-cri-pull: %s: %s\n", ref.c_str(), s.ToString().c_str());
      return 1;
    }
    std::printf("%s %.1f\n", ref.c_str(), ms);
    std::fflush(stdout);
  }
  return 0;
}
