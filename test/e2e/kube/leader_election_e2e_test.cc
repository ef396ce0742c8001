// Leader election between two processes (leader-candidate) on a real Lease in kube-local:
// kill -9 of the leader -> the other takes over after the lease expires; SIGTERM of the leader ->
// it releases the lease and the other takes over at once.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "kube/leader_election.h"
#include "kube/object.h"
#include "test/e2e/kube/kube_local_env.h"

namespace kruise::testing {
namespace {

constexpr int kLeaseSeconds = 4;
constexpr int kRenewSeconds = 3;
constexpr int kRetrySeconds = 1;

struct Line {
  std::string text;
  absl::Time at;
};

// Output lines of all candidates, in arrival order.
class Transcript {
 public:
  void Add(std::string text) {
    absl::MutexLock lock(&mu_);
    lines_.push_back({std::move(text), absl::Now()});
  }
  // Waits until a line equal to `text` arrived at index >= `from`; returns its time.
  std::optional<absl::Time> WaitFor(const std::string& text, absl::Duration timeout,
                                    size_t from = 0) {
    absl::MutexLock lock(&mu_);
    std::optional<absl::Time> found;
    auto cond = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      for (size_t i = from; i < lines_.size(); ++i) {
        if (lines_[i].text == text) {
          found = lines_[i].at;
          return true;
        }
      }
      return false;
    };
    mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
    return found;
  }
  size_t size() {
    absl::MutexLock lock(&mu_);
    return lines_.size();
  }
  int Count(const std::string& prefix) {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const auto& l : lines_) n += absl::StartsWith(l.text, prefix) ? 1 : 0;
    return n;
  }
  std::string Dump() {
    absl::MutexLock lock(&mu_);
    std::string out;
    for (const auto& l : lines_) absl::StrAppend(&out, l.text, "\n");
    return out;
  }

 private:
  absl::Mutex mu_;
  std::vector<Line> lines_ ABSL_GUARDED_BY(mu_);
};

// One leader-candidate process; its stdout lines go to the transcript.
class Candidate {
 public:
  Candidate(const std::string& identity, const KubeLocalEnv& env, const std::string& ns,
            const std::string& lease, Transcript* out)
      : identity_(identity), out_(out) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    std::vector<std::string> argv = {LEADER_CANDIDATE_PATH,
                                     "--kubeconfig",
                                     env.kubeconfig(),
                                     "--namespace",
                                     ns,
                                     "--name",
                                     lease,
                                     "--identity",
                                     identity,
                                     "--lease-duration",
                                     std::to_string(kLeaseSeconds),
                                     "--renew-deadline",
                                     std::to_string(kRenewSeconds),
                                     "--retry-period",
                                     std::to_string(kRetrySeconds)};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    if (pid_ < 0) {
      close(fds[0]);
      return;
    }
    reader_ = std::thread([this, fd = fds[0]] {
      std::string pending;
      char buf[1024];
      while (true) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        pending.append(buf, static_cast<size_t>(n));
        size_t nl;
        while ((nl = pending.find('\n')) != std::string::npos) {
          out_->Add(pending.substr(0, nl));
          pending.erase(0, nl + 1);
        }
      }
      close(fd);
    });
  }
  ~Candidate() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      Wait();
    }
    if (reader_.joinable()) reader_.join();
  }

  bool started() const { return pid_ > 0; }
  const std::string& identity() const { return identity_; }
  void Signal(int sig) { kill(pid_, sig); }
  // Reaps the process (blocks until it exits); returns its wait status.
  int Wait() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return status;
  }

 private:
  std::string identity_;
  Transcript* out_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::thread reader_;
};

TEST(LeaderElectionE2eTest, TwoProcessesFailOverOnKillAndHandOverOnSigterm) {
  KubeLocalEnv env;
  KRUISE_KUBE_LOCAL_OR_SKIP(env);
  auto client = AdminClient(env);
  ASSERT_TRUE(client.ok()) << client.status();
  ScopedNamespace ns(client->get(), "kruise-e2e-le");
  ASSERT_TRUE(ns.status().ok()) << ns.status();
  const std::string lease = "e2e-leader";

  Transcript out;
  std::map<std::string, std::unique_ptr<Candidate>> cands;
  for (const char* id : {"cand-a", "cand-b"}) {
    cands[id] = std::make_unique<Candidate>(id, env, ns.name(), lease, &out);
    ASSERT_TRUE(cands[id]->started());
  }
  // One of them leads (the lease does not exist yet: the first to create it wins).
  std::string leader;
  ASSERT_TRUE(PollUntil(
      [&] {
        for (const char* id : {"cand-a", "cand-b"}) {
          if (out.WaitFor(absl::StrCat("LEADING ", id), absl::ZeroDuration())) leader = id;
        }
        return !leader.empty();
      },
      absl::Seconds(20)))
      << out.Dump();
  const std::string follower = leader == "cand-a" ? "cand-b" : "cand-a";
  // The follower has seen the leader, and stays a follower while the leader renews.
  ASSERT_TRUE(out.WaitFor(absl::StrCat("OBSERVED ", leader), absl::Seconds(10)));
  EXPECT_FALSE(
      out.WaitFor(absl::StrCat("LEADING ", follower), absl::Seconds(kLeaseSeconds + kRetrySeconds)))
      << out.Dump();
  EXPECT_EQ(out.Count("LEADING"), 1) << out.Dump();
  auto lease_obj = (*client)->Get(kube::LeaseResource(), ns.name(), lease);
  ASSERT_TRUE(lease_obj.ok()) << lease_obj.status();
  EXPECT_EQ(kube::GetString(*lease_obj, {"spec", "holderIdentity"}), leader);
  EXPECT_EQ(kube::GetInt(*lease_obj, {"spec", "leaseDurationSeconds"}), kLeaseSeconds);

  // kill -9 of the leader: no release; the follower takes over once the lease has not changed for
  // leaseDuration (judged from its own observations, which lag by up to one retry period), then
  // at its next retry (retry period + 20 % jitter).
  size_t mark = out.size();
  const absl::Time killed = absl::Now();
  cands[leader]->Signal(SIGKILL);
  cands[leader]->Wait();
  auto took_over = out.WaitFor(absl::StrCat("LEADING ", follower), absl::Seconds(30), mark);
  ASSERT_TRUE(took_over.has_value()) << out.Dump();
  const absl::Duration failover = *took_over - killed;
  std::cout << "failover after kill -9: " << failover << "\n";
  EXPECT_LT(failover, absl::Seconds(kLeaseSeconds) + 2 * absl::Seconds(kRetrySeconds) * 1.2 +
                          absl::Milliseconds(500));
  EXPECT_GE(failover, absl::Seconds(kLeaseSeconds) - absl::Seconds(kRetrySeconds) * 1.2);

  // A new candidate joins as a follower of the new leader.
  const std::string next_leader = follower;
  cands["cand-c"] = std::make_unique<Candidate>("cand-c", env, ns.name(), lease, &out);
  ASSERT_TRUE(cands["cand-c"]->started());
  ASSERT_TRUE(out.WaitFor("READY cand-c", absl::Seconds(10)));
  mark = out.size();
  // Its first read of the lease reports the current leader.
  ASSERT_TRUE(PollUntil(
      [&] {
        lease_obj = (*client)->Get(kube::LeaseResource(), ns.name(), lease);
        return lease_obj.ok() &&
               kube::GetString(*lease_obj, {"spec", "holderIdentity"}) == next_leader;
      },
      absl::Seconds(10)));
  ASSERT_TRUE(out.WaitFor(absl::StrCat("OBSERVED ", next_leader), absl::Seconds(10)));

  // SIGTERM of the leader: it releases the lease, the follower takes it at its next retry.
  mark = out.size();
  const absl::Time termed = absl::Now();
  cands[next_leader]->Signal(SIGTERM);
  auto handed = out.WaitFor("LEADING cand-c", absl::Seconds(20), mark);
  ASSERT_TRUE(handed.has_value()) << out.Dump();
  const absl::Duration handover = *handed - termed;
  std::cout << "handover after SIGTERM: " << handover << "\n";
  EXPECT_LT(handover, absl::Seconds(2));
  EXPECT_TRUE(out.WaitFor(absl::StrCat("STOPPED ", next_leader), absl::Seconds(5), mark));
  const int status = cands[next_leader]->Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  lease_obj = (*client)->Get(kube::LeaseResource(), ns.name(), lease);
  ASSERT_TRUE(lease_obj.ok()) << lease_obj.status();
  EXPECT_EQ(kube::GetString(*lease_obj, {"spec", "holderIdentity"}), "cand-c");
  EXPECT_GE(kube::GetInt(*lease_obj, {"spec", "leaseTransitions"}).value_or(0), 2);

  cands["cand-c"]->Signal(SIGTERM);
  EXPECT_TRUE(out.WaitFor("STOPPED cand-c", absl::Seconds(10)));
  const int c_status = cands["cand-c"]->Wait();
  EXPECT_TRUE(WIFEXITED(c_status) && WEXITSTATUS(c_status) == 0) << c_status;
  // Released: nobody holds it now.
  lease_obj = (*client)->Get(kube::LeaseResource(), ns.name(), lease);
  ASSERT_TRUE(lease_obj.ok()) << lease_obj.status();
  EXPECT_EQ(kube::GetString(*lease_obj, {"spec", "holderIdentity"}).value_or(""), "");
}

}  // namespace
}  // namespace kruise::testing
