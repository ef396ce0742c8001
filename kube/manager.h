#pragma once

// Manager: the composition root's lifecycle for a controller process.
//
// Run() starts, in order:
//   1. caches: every registered Informer, then waits until all have synced (cache_sync_timeout);
//   2. "every replica" runnables (NeedLeaderElection() == false): health, metrics, webhook servers;
//   3. leader election (if configured), blocking until this replica leads;
//   4. readiness gates (e.g. "webhook certificates are served"), then the leader-only runnables
//      (controllers).
// It stops in reverse order when the stop token fires (see StopOnSignals() for SIGTERM/SIGINT):
// leader runnables, then the lease is released, then the other runnables, then the caches.
// Losing the lease closes the write fence at once, runs the config's callbacks.on_lost (where a
// production process exits without draining), then stops everything and Run() returns 1: the
// process must exit (a new leader may already be acting).
//
// Thread-safety: Add*/AddGate before Run(); Run() once, from one thread; IsLeader()/Elected()
// from any thread.

#include <csignal>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/leader_election.h"

namespace kruise::kube {

// Anything with a blocking Start(stop): it runs until `stop` fires, then returns promptly.
class Runnable {
 public:
  virtual ~Runnable() = default;
  virtual void Start(std::stop_token stop) = 0;
  // true: only on the elected leader (controllers); false: on every replica (servers).
  virtual bool NeedLeaderElection() const = 0;
  virtual std::string Name() const { return "runnable"; }
};

// A one-shot "ready" signal: Open() once, Wait() from anywhere.
class Gate {
 public:
  explicit Gate(std::string name) : name_(std::move(name)) {}
  void Open();
  bool IsOpen() const;
  // Waits until open, `stop` fires or `deadline` on `clock`. Returns IsOpen().
  bool Wait(Clock* clock, absl::Time deadline, std::stop_token stop = {});
  const std::string& name() const { return name_; }

 private:
  const std::string name_;
  mutable absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

struct ManagerOptions {
  Clock* clock = Clock::Real();
  absl::Duration cache_sync_timeout = absl::Minutes(2);
  // How long leader-only runnables wait for the gates before Run() gives up (returns 1).
  absl::Duration gate_timeout = absl::Seconds(60);
  // Leader election: unset -> this replica always leads (single replica / tests). Callbacks in
  // the config are chained after the manager's own.
  std::optional<LeaderElectionConfig> leader_election;
  // Optional: the fence of the controllers' client (write_fence.h). With leader election it is
  // open while this replica's lease term lasts; without, from the start of the leader-only
  // runnables. Must outlive Run().
  WriteFence* fence = nullptr;
};

class Manager {
 public:
  // `client` is used for leader election only (may be null without leader election).
  Manager(KubeClient* client, ManagerOptions opts);
  ~Manager();

  // Non-owning (the caller keeps the objects alive until Run() returns).
  void AddInformer(Informer* informer);
  void Add(Runnable* runnable);
  void AddGate(Gate* gate);

  // Runs until `stop` fires (returns 0) or something fatal happens (returns 1: caches did not sync,
  // gates did not open, leader election misconfigured or leadership lost).
  int Run(std::stop_token stop);

  bool IsLeader() const;
  // True once the leader-only runnables were started.
  bool Elected() const;

 private:
  KubeClient* const client_;
  const ManagerOptions opts_;
  std::vector<Informer*> informers_;
  std::vector<Runnable*> runnables_;
  std::vector<Gate*> gates_;
  mutable absl::Mutex mu_;
  bool elected_ ABSL_GUARDED_BY(mu_) = false;
  bool leader_ ABSL_GUARDED_BY(mu_) = false;
};

// Blocks SIGTERM and SIGINT in the calling thread (call first thing in main(), before any thread
// exists, so every thread inherits the mask) and starts a thread that waits for them: the first
// signal requests stop on the returned source, a second one exits the process with status 1.
std::stop_source StopOnSignals();

}  // namespace kruise::kube
