// informer_bench: memory and throughput of kube::Informer caching Pods.
//
//   informer_bench --pods 30000 --fake-apiserver build/.../fake-apiserver [--watch-events 100000]
//
// 1. list path: starts `fake-apiserver --seed-pods N --seed-nodes N/30` as a separate process (so
//    its memory is not ours), runs an Informer over HTTP on all Pods (StripManagedFields
//    transform, pages of 500) and reports the sync time, objects/s, the cached bytes per pod and
//    this process's RssAnon / VmRSS (from /proc/self/status) before and after the sync.
// 2. live watch over HTTP: pods are merge-patched through the fake server by 2 writer threads; the
//    time until the informer's handler has seen every update gives end-to-end events/s (bounded by
//    the fake server and the writers, which share the 2 cores).
// 3. informer capacity: an in-process KubeClient whose watch replays pre-built realistic pod
//    events as fast as the informer takes them: decode + transform + store + dispatch events/s.
//
// Prints one "key: value" line per figure.

#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/logging.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "test/fakes/apiserver/fake_apiserver.h"

// Which transform the informer applies (flag --compact / --strip-only).
bool g_compact_transform = true;

namespace {

using kruise::kube::Json;
namespace kube = kruise::kube;

struct ProcMem {
  int64_t rss_anon_kib = 0;
  int64_t vm_rss_kib = 0;
};

ProcMem ReadProcMem() {
  ProcMem m;
  std::ifstream in("/proc/self/status");
  std::string key;
  int64_t value = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    ls >> key >> value;
    if (key == "RssAnon:") m.rss_anon_kib = value;
    if (key == "VmRSS:") m.vm_rss_kib = value;
  }
  return m;
}

double MiB(int64_t kib) { return static_cast<double>(kib) / 1024.0; }

void Report(const std::string& key, const std::string& value) {
  std::cout << key << ": " << value << std::endl;
}

// The fake API server as a child process.
class FakeServerProcess {
 public:
  ~FakeServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int st = 0;
      waitpid(pid_, &st, 0);
    }
    if (!port_file_.empty()) unlink(port_file_.c_str());
  }

  absl::Status Start(const std::string& binary, int pods) {
    port_file_ = absl::StrCat("/tmp/informer-bench-port.", getpid());
    unlink(port_file_.c_str());
    std::vector<std::string> argv = {binary,
                                     "--addr",
                                     "127.0.0.1:0",
                                     "--port-file",
                                     port_file_,
                                     "--seed-pods",
                                     std::to_string(pods),
                                     "--seed-nodes",
                                     std::to_string(std::max(1, pods / 30)),
                                     "--seed-namespaces",
                                     "10"};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = fork();
    if (pid_ < 0) return absl::InternalError("fork failed");
    if (pid_ == 0) {
      execv(args[0], args.data());
      _exit(127);
    }
    // Seeding 30k pods takes a while; the port file appears once it serves.
    const absl::Time deadline = absl::Now() + absl::Minutes(5);
    while (absl::Now() < deadline) {
      std::ifstream f(port_file_);
      if (f >> port_) return absl::OkStatus();
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return absl::InternalError("fake-apiserver exited early");
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    return absl::DeadlineExceededError("fake-apiserver did not start within 5 min");
  }
  int port() const { return port_; }
  int64_t RssKib() const {
    std::ifstream in(absl::StrCat("/proc/", pid_, "/status"));
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("VmRSS:", 0) == 0) {
        int64_t v = 0;
        std::istringstream(line.substr(6)) >> v;
        return v;
      }
    }
    return 0;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string port_file_;
};

// Counts handler calls; lets the main thread wait for a count.
class Counter {
 public:
  void Add(int64_t n = 1) {
    absl::MutexLock lock(&mu_);
    count_ += n;
  }
  int64_t Get() {
    absl::MutexLock lock(&mu_);
    return count_;
  }
  bool WaitFor(int64_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return count_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }

 private:
  absl::Mutex mu_;
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

// An in-memory KubeClient: lists `pods`, then its watch replays `events` MODIFIED events built from
// them and blocks until cancelled.
class ReplayClient final : public kube::KubeClient {
 public:
  ReplayClient(std::vector<Json> pods, int64_t events) : pods_(std::move(pods)), events_(events) {}

  absl::StatusOr<Json> Get(const kube::Resource&, const std::string&, const std::string&) override {
    return absl::UnimplementedError("Get");
  }
  absl::StatusOr<kube::ListResult> List(const kube::Resource&, const std::string&,
                                        const kube::ListOptions&) override {
    kube::ListResult r;
    r.items = Json(pods_);
    r.resource_version = "1000";
    return r;
  }
  absl::StatusOr<Json> Create(const kube::Resource&, const std::string&, const Json&) override {
    return absl::UnimplementedError("Create");
  }
  absl::StatusOr<Json> Update(const kube::Resource&, const std::string&, const Json&,
                              const std::string&) override {
    return absl::UnimplementedError("Update");
  }
  absl::StatusOr<Json> Patch(const kube::Resource&, const std::string&, const std::string&,
                             kube::PatchType, const Json&, const std::string&) override {
    return absl::UnimplementedError("Patch");
  }
  absl::Status Delete(const kube::Resource&, const std::string&, const std::string&,
                      const kube::DeleteOptions&) override {
    return absl::UnimplementedError("Delete");
  }
  absl::Status Watch(const kube::Resource&, const std::string&, const kube::ListOptions&,
                     const kube::WatchHandler& handler, kube::WatchCanceller* canceller) override {
    if (!replayed_.exchange(true)) {
      // The wire form: each event is parsed from JSON text, as the REST client does.
      for (int64_t i = 0; i < events_; ++i) {
        if (canceller->cancelled()) return absl::OkStatus();
        const Json& base = pods_[static_cast<size_t>(i) % pods_.size()];
        Json obj = base;
        obj["metadata"]["resourceVersion"] = std::to_string(1001 + i);
        obj["metadata"]["labels"]["bench-seq"] = std::to_string(i);
        std::string text = obj.dump();
        kube::WatchEvent ev{kube::WatchEvent::Type::kModified, Json::parse(text)};
        if (!handler(std::move(ev))) return absl::OkStatus();
      }
    }
    absl::MutexLock lock(&mu_);
    auto cancelled = [canceller] { return canceller->cancelled(); };
    // Poll the cancel flag (it is an atomic outside our mutex).
    while (!mu_.AwaitWithTimeout(absl::Condition(&cancelled), absl::Milliseconds(20))) {
    }
    return absl::OkStatus();
  }

 private:
  std::vector<Json> pods_;
  int64_t events_;
  std::atomic<bool> replayed_{false};
  absl::Mutex mu_;
};

int RunListAndWatch(const std::string& fake_binary, int pods, int64_t live_events) {
  FakeServerProcess server;
  const absl::Time seed_start = absl::Now();
  absl::Status st = server.Start(fake_binary, pods);
  if (!st.ok()) {
    std::cerr << st << "\n";
    return 1;
  }
  Report("pods", std::to_string(pods));
  Report("fake_apiserver_seed_s", absl::StrCat(absl::ToDoubleSeconds(absl::Now() - seed_start)));
  Report("fake_apiserver_rss_mib", absl::StrCat(MiB(server.RssKib())));

  kube::RestConfig cfg;
  cfg.host = absl::StrCat("http://127.0.0.1:", server.port());
  cfg.qps = 0;
  cfg.timeout = absl::Minutes(2);
  auto client = kube::RestKubeClient::Create(cfg);
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 1;
  }
  // One raw pod, for the on-the-wire size with managedFields.
  kube::ListOptions one;
  one.limit = 1;
  auto sample = (*client)->List(kube::resources::Pods(), "", one);
  if (!sample.ok() || sample->items.empty()) {
    std::cerr << "sample list: " << sample.status() << "\n";
    return 1;
  }
  Json raw = sample->items[0];
  Json stripped = raw;
  kube::StripManagedFields(stripped);
  Report("pod_json_bytes_with_managed_fields", std::to_string(raw.dump().size()));
  Report("pod_json_bytes_after_transform", std::to_string(stripped.dump().size()));
  Report("pod_msgpack_bytes_after_transform",
         std::to_string(kube::EncodedObject::Encode(stripped).size()));
  Json compact = raw;
  kube::CompactPodForControllers(compact);
  Report("pod_json_bytes_after_compact_transform", std::to_string(compact.dump().size()));
  Report("pod_msgpack_bytes_after_compact_transform",
         std::to_string(kube::EncodedObject::Encode(compact).size()));
  sample = absl::InternalError("released");
  malloc_trim(0);

  const ProcMem before = ReadProcMem();
  Report("rss_anon_before_mib", absl::StrCat(MiB(before.rss_anon_kib)));
  Report("vm_rss_before_mib", absl::StrCat(MiB(before.vm_rss_kib)));

  kube::InformerOptions opts;
  opts.resource = kube::resources::Pods();
  opts.page_size = 500;
  opts.transform = g_compact_transform ? kube::CompactPodForControllers
                                                 : kube::StripManagedFields;
  opts.indexers[kube::kNamespaceIndex] = kube::NamespaceIndexFunc();
  kube::Informer informer(client->get(), kruise::Clock::Real(), opts);
  Counter adds;
  Counter updates;
  kube::ResourceEventHandler h;
  h.on_add = [&](const Json&) { adds.Add(); };
  h.on_update = [&](const Json&, const Json&) { updates.Add(); };
  informer.AddEventHandler(h);
  const absl::Time start = absl::Now();
  informer.Start();
  if (!informer.WaitForSync(absl::Now() + absl::Minutes(10))) {
    std::cerr << "informer did not sync\n";
    return 1;
  }
  const absl::Duration sync = absl::Now() - start;
  const ProcMem after = ReadProcMem();
  malloc_trim(0);
  const ProcMem trimmed = ReadProcMem();
  const size_t n = informer.store().size();
  Report("informer_sync_s", absl::StrCat(absl::ToDoubleSeconds(sync)));
  Report("list_objects_per_s", absl::StrCat(static_cast<double>(n) / absl::ToDoubleSeconds(sync)));
  Report("cached_objects", std::to_string(n));
  Report("handler_adds", std::to_string(adds.Get()));
  Report("store_encoded_bytes_per_object",
         std::to_string(n == 0 ? 0 : informer.store().EncodedBytes() / n));
  Report("rss_anon_after_mib", absl::StrCat(MiB(after.rss_anon_kib)));
  Report("vm_rss_after_mib", absl::StrCat(MiB(after.vm_rss_kib)));
  Report("rss_anon_after_trim_mib", absl::StrCat(MiB(trimmed.rss_anon_kib)));
  Report("vm_rss_after_trim_mib", absl::StrCat(MiB(trimmed.vm_rss_kib)));
  Report("rss_anon_delta_bytes_per_object",
         std::to_string(n == 0 ? 0
                               : (trimmed.rss_anon_kib - before.rss_anon_kib) * 1024 /
                                     static_cast<int64_t>(n)));

  if (live_events > 0) {
    // Writers patch pods through the fake server; the informer sees them over its watch.
    std::vector<std::string> keys = informer.store().ListKeys();
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> failures{0};
    const absl::Time wstart = absl::Now();
    std::vector<std::thread> writers;
    for (int w = 0; w < 2; ++w) {
      writers.emplace_back([&] {
        for (int64_t i = next++; i < live_events; i = next++) {
          auto [ns, name] = kube::SplitStoreKey(keys[static_cast<size_t>(i) % keys.size()]);
          auto r =
              (*client)->Patch(kube::resources::Pods(), ns, name, kube::PatchType::kMerge,
                               {{"metadata", {{"labels", {{"bench-seq", std::to_string(i)}}}}}});
          if (!r.ok()) ++failures;
        }
      });
    }
    for (auto& t : writers) t.join();
    const absl::Duration written = absl::Now() - wstart;
    const bool all = updates.WaitFor(live_events - failures.load(), absl::Minutes(2));
    const absl::Duration seen = absl::Now() - wstart;
    Report("live_watch_events", std::to_string(updates.Get()));
    Report("live_watch_patch_failures", std::to_string(failures.load()));
    Report("live_watch_all_seen", all ? "true" : "false");
    Report("live_patches_per_s",
           absl::StrCat(static_cast<double>(live_events) / absl::ToDoubleSeconds(written)));
    Report("live_watch_events_per_s",
           absl::StrCat(static_cast<double>(updates.Get()) / absl::ToDoubleSeconds(seen)));
  }
  informer.Stop();
  return 0;
}

int RunReplay(int64_t events) {
  std::vector<Json> pods;
  for (int i = 0; i < 1000; ++i) {
    pods.push_back(kruise::testing::MakeRealisticPod(
        absl::StrCat("ns-", i % 10), absl::StrCat("pod-", i), absl::StrCat("node-", i % 33), i));
    pods.back()["metadata"]["resourceVersion"] = std::to_string(i + 1);
  }
  ReplayClient client(pods, events);
  kube::InformerOptions opts;
  opts.resource = kube::resources::Pods();
  opts.indexers[kube::kNamespaceIndex] = kube::NamespaceIndexFunc();
  kube::Informer informer(&client, kruise::Clock::Real(), opts);
  Counter updates;
  kube::ResourceEventHandler h;
  h.on_update = [&](const Json&, const Json&) { updates.Add(); };
  informer.AddEventHandler(h);
  const absl::Time start = absl::Now();
  informer.Start();
  const bool all = updates.WaitFor(events, absl::Minutes(5));
  const absl::Duration took = absl::Now() - start;
  informer.Stop();
  Report("replay_events", std::to_string(updates.Get()));
  Report("replay_all_seen", all ? "true" : "false");
  Report("replay_events_per_s",
         absl::StrCat(static_cast<double>(updates.Get()) / absl::ToDoubleSeconds(took)));
  return all ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Informer memory and throughput benchmark"};
  app.add_flag("--compact,!--strip-only", g_compact_transform,
               "cache pods with CompactPodForControllers (default) or only StripManagedFields");
  int pods = 10000;
  std::string fake = KRUISE_FAKE_APISERVER_PATH;
  int64_t live_events = 20000;
  int64_t replay_events = 200000;
  app.add_option("--pods", pods, "pods seeded in the fake apiserver (0: skip the list phase)");
  app.add_option("--fake-apiserver", fake, "path of the fake-apiserver binary");
  app.add_option("--live-events", live_events, "pod patches through the fake server (0: skip)");
  app.add_option("--replay-events", replay_events, "in-process watch events (0: skip)");
  CLI11_PARSE(app, argc, argv);
  kruise::Logger("bench");  // initialise logging before threads start
  int rc = 0;
  if (pods > 0) {
    if (fake.empty()) {
      std::cerr << "--fake-apiserver is required with --pods\n";
      return 2;
    }
    rc |= RunListAndWatch(fake, pods, live_events);
  }
  if (replay_events > 0) rc |= RunReplay(replay_events);
  return rc;
}
