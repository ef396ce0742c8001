// stall-probe SECONDS: how much of the wall time this CPU is taken away from a runnable thread.
// Spins reading the monotonic clock; any gap between two reads longer than a threshold is time the
// thread did not run (hypervisor, interrupts, other tasks). Pin it with taskset.
// bench/webhook/run.sh runs one per CPU before the load: when a busy loop loses ~1% of wall time to
// gaps over 1 ms, any request's p99 on this machine is a few ms whatever the server does.

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0;
  if (seconds <= 0) {
    std::fprintf(stderr, "usage: stall-probe SECONDS\n");
    return 2;
  }
  using Clock = std::chrono::steady_clock;
  constexpr int kBounds = 3;
  const Clock::duration bounds[kBounds] = {
      std::chrono::microseconds(100), std::chrono::milliseconds(1), std::chrono::milliseconds(5)};
  long counts[kBounds] = {};
  Clock::duration lost[kBounds] = {};
  Clock::duration longest{};
  const Clock::time_point start = Clock::now();
  const Clock::time_point end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (Clock::time_point prev = start, now = start; now < end; prev = now) {
    now = Clock::now();
    const Clock::duration gap = now - prev;
    if (gap > longest) longest = gap;
    for (int i = 0; i < kBounds; ++i) {
      if (gap > bounds[i]) {
        ++counts[i];
        lost[i] += gap;
      }
    }
  }
  const double wall = std::chrono::duration<double>(end - start).count();
  std::printf("CPU %d, %.0f s busy loop: stalls", sched_getcpu(), seconds);
  for (int i = 0; i < kBounds; ++i) {
    std::printf("%s > %.1f ms: %ld (%.2f%% of wall time)", i == 0 ? "" : ";",
                std::chrono::duration<double, std::milli>(bounds[i]).count(), counts[i],
                100 * std::chrono::duration<double>(lost[i]).count() / wall);
  }
  std::printf("; longest %.1f ms\n", std::chrono::duration<double, std::milli>(longest).count());
  return 0;
}
