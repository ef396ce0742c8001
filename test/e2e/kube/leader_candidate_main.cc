// leader-candidate: one leader-election candidate as a process, for the two-process e2e test.
//
//   leader-candidate --kubeconfig K --namespace NS --name LEASE --identity ID
//                    [--lease-duration 15] [--renew-deadline 10] [--retry-period 2]
//
// Prints one line per transition on stdout (flushed): "READY <identity>" once started,
// "OBSERVED <leader>" when it sees a new leader, "LEADING <identity>" when it takes the lease and
// "STOPPED <identity>" when leadership ends. Holds the lease until killed. SIGTERM/SIGINT stop it
// cleanly: the lease is released (so a successor takes over at once) and it exits 0. Exits 1 when
// leadership was lost, 2 on bad flags or config.

#include <signal.h>

#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "common/clock.h"
#include "common/flags.h"
#include "kube/config.h"
#include "kube/leader_election.h"
#include "kube/rest_client.h"

namespace {

std::mutex g_out_mu;

void Say(const std::string& what, const std::string& who) {
  std::lock_guard<std::mutex> lock(g_out_mu);
  std::cout << what << " " << who << std::endl;  // endl: flush, a test reads these lines live
}

}  // namespace

int main(int argc, char** argv) {
  kruise::Flags app{"Leader election candidate (kruise-cpp e2e helper)"};
  std::string kubeconfig;
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;
  int lease_s = 15;
  int renew_s = 10;
  double retry_s = 2;
  app.Add("--kubeconfig", &kubeconfig, "kubeconfig file").Required();
  app.Add("--namespace", &lease_namespace, "namespace of the Lease").Required();
  app.Add("--name", &lease_name, "name of the Lease").Required();
  app.Add("--identity", &identity, "this candidate's identity").Required();
  app.Add("--lease-duration", &lease_s, "lease duration (seconds)");
  app.Add("--renew-deadline", &renew_s, "renew deadline (seconds)");
  app.Add("--retry-period", &retry_s, "retry period (seconds)");
  if (auto exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;

  // Block the stop signals before any thread starts: only the sigwait thread receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto config = kruise::kube::LoadKubeconfig(kubeconfig);
  if (!config.ok()) {
    std::cerr << "leader-candidate: " << config.status() << "\n";
    return 2;
  }
  auto client = kruise::kube::RestKubeClient::Create(*std::move(config));
  if (!client.ok()) {
    std::cerr << "leader-candidate: " << client.status() << "\n";
    return 2;
  }

  kruise::kube::LeaderElectionConfig le;
  le.lease_namespace = lease_namespace;
  le.lease_name = lease_name;
  le.identity = identity;
  le.lease_duration = absl::Seconds(lease_s);
  le.renew_deadline = absl::Seconds(renew_s);
  le.retry_period = absl::Seconds(retry_s);
  le.release_on_cancel = true;
  le.callbacks.on_started_leading = [identity](std::stop_token stop) {
    Say("LEADING", identity);
    // Hold leadership (the "work") until it ends.
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, stop, [] { return false; });
  };
  le.callbacks.on_stopped_leading = [identity] { Say("STOPPED", identity); };
  le.callbacks.on_new_leader = [](const std::string& leader) { Say("OBSERVED", leader); };
  auto elector = kruise::kube::LeaderElector::Create(client->get(), le);
  if (!elector.ok()) {
    std::cerr << "leader-candidate: " << elector.status() << "\n";
    return 2;
  }

  std::stop_source stop;
  std::thread signal_thread([&signals, &stop] {
    int sig = 0;
    sigwait(&signals, &sig);
    stop.request_stop();
  });
  Say("READY", identity);
  const bool clean = (*elector)->Run(stop.get_token());
  if (!stop.stop_requested()) {
    // Leadership lost: wake the signal thread so the process can exit.
    pthread_kill(signal_thread.native_handle(), SIGTERM);
  }
  signal_thread.join();
  Say("EXIT", clean ? "clean" : "lost");
  return clean ? 0 : 1;
}
