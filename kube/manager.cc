#include "kube/manager.h"

#include <pthread.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdlib>
#include <thread>

#include "common/logging.h"

namespace kruise::kube {

void Gate::Open() {
  absl::MutexLock lock(&mu_);
  open_ = true;
}

bool Gate::IsOpen() const {
  absl::MutexLock lock(&mu_);
  return open_;
}

bool Gate::Wait(Clock* clock, absl::Time deadline, std::stop_token stop) {
  std::stop_callback cb(stop, [this] {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  });
  absl::MutexLock lock(&mu_);
  auto cond = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return open_ || cancelled_; };
  clock->AwaitWithDeadline(&mu_, absl::Condition(&cond), deadline);
  return open_;
}

Manager::Manager(KubeClient* client, ManagerOptions opts)
    : client_(client), opts_(std::move(opts)) {}

Manager::~Manager() = default;

void Manager::AddInformer(Informer* informer) { informers_.push_back(informer); }
void Manager::Add(Runnable* runnable) { runnables_.push_back(runnable); }
void Manager::AddGate(Gate* gate) { gates_.push_back(gate); }

bool Manager::IsLeader() const {
  absl::MutexLock lock(&mu_);
  return leader_;
}

bool Manager::Elected() const {
  absl::MutexLock lock(&mu_);
  return elected_;
}

namespace {

// Runs runnables on threads with a shared stop source; Stop() stops and joins them.
class Group {
 public:
  void Start(const std::vector<Runnable*>& runnables) {
    for (Runnable* r : runnables) {
      threads_.emplace_back([r, token = stop_.get_token()] { r->Start(token); });
    }
  }
  void Stop() {
    stop_.request_stop();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
  }
  ~Group() { Stop(); }

 private:
  std::stop_source stop_;
  std::vector<std::thread> threads_;
};

}  // namespace

int Manager::Run(std::stop_token stop) {
  auto log = Logger("manager");
  Clock* clock = opts_.clock;
  std::vector<Runnable*> every_replica, leader_only;
  for (Runnable* r : runnables_)
    (r->NeedLeaderElection() ? leader_only : every_replica).push_back(r);

  // Manager-wide stop: the caller's stop token or a fatal event (lost lease).
  absl::Mutex mu;
  bool stopping = false;
  bool fatal = false;
  auto request_stop = [&](bool is_fatal) {
    absl::MutexLock lock(&mu);
    stopping = true;
    fatal = fatal || is_fatal;
  };
  std::stop_callback on_stop(stop, [&] { request_stop(false); });
  std::stop_source internal_stop;  // for waits that take a token
  std::stop_callback forward(stop, [&] { internal_stop.request_stop(); });

  // 1. Caches.
  for (Informer* inf : informers_) inf->Start();
  auto stop_informers = [&] {
    // Cancel every watch first: each informer takes up to ~1 s to notice, so joining one after
    // the other would add that up.
    for (Informer* informer : informers_) informer->RequestStop();
    for (auto it = informers_.rbegin(); it != informers_.rend(); ++it) (*it)->Stop();
  };
  const absl::Time sync_deadline = clock->Now() + opts_.cache_sync_timeout;
  for (Informer* inf : informers_) {
    if (!inf->WaitForSync(sync_deadline)) {
      if (stop.stop_requested()) {
        stop_informers();
        return 0;
      }
      log->error("cache for {} did not sync within {}", inf->resource().resource,
                 absl::FormatDuration(opts_.cache_sync_timeout));
      stop_informers();
      return 1;
    }
  }
  log->info("caches synced ({} informers)", informers_.size());
#if defined(__GLIBC__)
  // The initial lists decode whole pages into JSON trees while the caches fill; glibc keeps the
  // freed pages in its per-thread arenas (about 30 MiB with 30k pods, as much as the caches
  // themselves: bench/manager). Give them back once.
  malloc_trim(0);
#endif

  // 2. Every-replica runnables.
  Group replica_group;
  replica_group.Start(every_replica);

  // 3 + 4. Leader election, gates, leader-only runnables. The leader-only group lives exactly as
  // long as leadership: it is stopped before the lease is released.
  auto lead = [&](std::stop_token leading) {
    const absl::Time gate_deadline = clock->Now() + opts_.gate_timeout;
    for (Gate* g : gates_) {
      if (!g->Wait(clock, gate_deadline, leading)) {
        if (leading.stop_requested()) return;
        log->error("gate {} not ready within {}", g->name(),
                   absl::FormatDuration(opts_.gate_timeout));
        request_stop(true);
        return;
      }
    }
    {
      absl::MutexLock lock(&mu_);
      elected_ = true;
    }
    log->info("starting {} leader-only runnables", leader_only.size());
    Group leader_group;
    leader_group.Start(leader_only);
    absl::Mutex lmu;
    bool done = false;
    std::stop_callback cb(leading, [&] {
      absl::MutexLock lock(&lmu);
      done = true;
    });
    {
      absl::MutexLock lock(&lmu);
      lmu.Await(absl::Condition(&done));
    }
    log->info("stopping leader-only runnables");
    leader_group.Stop();
  };

  std::thread election;
  std::unique_ptr<LeaderElector> elector;
  if (opts_.leader_election) {
    LeaderElectionConfig cfg = *opts_.leader_election;
    LeaderCallbacks user = cfg.callbacks;
    cfg.clock = clock;
    cfg.fence = opts_.fence;
    cfg.callbacks.on_started_leading = [&, user](std::stop_token leading) {
      {
        absl::MutexLock lock(&mu_);
        leader_ = true;
      }
      if (user.on_started_leading) {
        std::thread t([&] { user.on_started_leading(leading); });
        lead(leading);
        t.join();
      } else {
        lead(leading);
      }
    };
    cfg.callbacks.on_stopped_leading = [&, user] {
      {
        absl::MutexLock lock(&mu_);
        leader_ = false;
      }
      if (user.on_stopped_leading) user.on_stopped_leading();
    };
    auto created = LeaderElector::Create(client_, std::move(cfg));
    if (!created.ok()) {
      log->error("leader election: {}", created.status());
      replica_group.Stop();
      stop_informers();
      return 1;
    }
    elector = std::move(*created);
    election = std::thread([&] {
      if (!elector->Run(internal_stop.get_token())) {
        log->error("leadership lost: stopping");
        request_stop(true);
      }
    });
  } else {
    {
      absl::MutexLock lock(&mu_);
      leader_ = true;
    }
    if (opts_.fence != nullptr) opts_.fence->ExtendTo(absl::InfiniteFuture());
    election = std::thread([&] { lead(internal_stop.get_token()); });
  }

  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&stopping));
  }
  log->info("shutting down");
  // Reverse order: leader runnables and the lease (election thread), every-replica runnables,
  // caches.
  internal_stop.request_stop();
  if (election.joinable()) election.join();
  replica_group.Stop();
  stop_informers();
  absl::MutexLock lock(&mu);
  return fatal ? 1 : 0;
}

std::stop_source StopOnSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::stop_source source;
  std::thread([set, source]() mutable {
    int signals = 0;
    while (true) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (++signals == 1) {
        Logger("manager")->info("received signal {}: shutting down", sig);
        source.request_stop();
      } else {
        Logger("manager")->warn("second signal {}: exiting now", sig);
        std::_Exit(1);
      }
    }
  }).detach();
  return source;
}

}  // namespace kruise::kube
