#include "kube/leader_election.h"

#include <unistd.h>

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kube/call_deadline.h"
#include "kube/errors.h"

namespace kruise::kube {
namespace {

constexpr char kMicroTimeFormat[] = "%Y-%m-%d%ET%H:%M:%E6SZ";

int64_t SecondsOf(absl::Duration d) {
  return absl::ToInt64Seconds(absl::Ceil(d, absl::Seconds(1)));
}

}  // namespace

const Resource& LeaseResource() {
  static const Resource* r = new Resource{"coordination.k8s.io", "v1", "leases", "Lease", true};
  return *r;
}

std::string FormatMicroTime(absl::Time t) {
  return absl::FormatTime(kMicroTimeFormat, t, absl::UTCTimeZone());
}

absl::StatusOr<absl::Time> ParseMicroTime(const std::string& s) {
  absl::Time t;
  std::string err;
  // RFC3339 with optional fractional seconds and any offset.
  if (!absl::ParseTime(absl::RFC3339_full, s, &t, &err)) {
    return absl::InvalidArgumentError(absl::StrCat("bad MicroTime \"", s, "\": ", err));
  }
  return t;
}

std::string DefaultLeaderIdentity(absl::string_view base) {
  char host[256] = {};
  if (!base.empty()) {
    std::snprintf(host, sizeof(host), "%.*s", static_cast<int>(base.size()), base.data());
  } else if (gethostname(host, sizeof(host) - 1) != 0) {
    std::snprintf(host, sizeof(host), "unknown");
  }
  absl::BitGen gen;
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string suffix;
  for (int i = 0; i < 8; ++i) suffix.push_back(kAlphabet[absl::Uniform(gen, 0u, 27u)]);
  return absl::StrCat(host, "_", suffix);
}

absl::StatusOr<std::unique_ptr<LeaderElector>> LeaderElector::Create(KubeClient* client,
                                                                     LeaderElectionConfig config) {
  if (config.lease_duration <= config.renew_deadline) {
    return absl::InvalidArgumentError("leaseDuration must be greater than renewDeadline");
  }
  if (config.renew_deadline <= config.retry_period * 1.2) {
    return absl::InvalidArgumentError("renewDeadline must be greater than 1.2 * retryPeriod");
  }
  if (config.retry_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("retryPeriod must be positive");
  }
  if (config.lease_name.empty() || config.lease_namespace.empty()) {
    return absl::InvalidArgumentError("lease name and namespace are required");
  }
  if (config.identity.empty()) config.identity = DefaultLeaderIdentity();
  return std::unique_ptr<LeaderElector>(new LeaderElector(client, std::move(config)));
}

LeaderElector::LeaderElector(KubeClient* client, LeaderElectionConfig config)
    : client_(client), config_(std::move(config)) {}

LeaderElector::~LeaderElector() = default;

bool LeaderElector::IsLeader() const {
  absl::MutexLock lock(&mu_);
  return leading_;
}

std::string LeaderElector::GetLeader() const {
  absl::MutexLock lock(&mu_);
  return observed_holder_;
}

void LeaderElector::ObserveLeader(const std::string& holder) {
  if (holder == reported_leader_ || holder.empty()) return;
  reported_leader_ = holder;
  Logger("leader")->info("new leader observed: {}", holder);
  if (config_.callbacks.on_new_leader) config_.callbacks.on_new_leader(holder);
}

LeaderElector::Attempt LeaderElector::TryAcquireOrRenew(absl::Time now, absl::Time deadline) {
  // No call of this attempt may outlive `deadline` (each gets what is left, without retries when
  // the client is configured so): a hung API server must not keep a leader acting on a lease it
  // can no longer renew.
  ScopedCallDeadline budget(deadline);
  Json spec = {{"holderIdentity", config_.identity},
               {"leaseDurationSeconds", SecondsOf(config_.lease_duration)},
               {"acquireTime", FormatMicroTime(now)},
               {"renewTime", FormatMicroTime(now)},
               {"leaseTransitions", 0}};

  absl::StatusOr<Json> lease =
      client_->Get(LeaseResource(), config_.lease_namespace, config_.lease_name);
  if (!lease.ok()) {
    if (!kube::IsNotFound(lease.status())) {
      Logger("leader")->warn("get lease {}/{}: {}", config_.lease_namespace, config_.lease_name,
                             lease.status());
      return Attempt::kFailed;
    }
    Json obj = {
        {"apiVersion", LeaseResource().ApiVersion()},
        {"kind", "Lease"},
        {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}},
        {"spec", spec}};
    absl::StatusOr<Json> created = client_->Create(LeaseResource(), config_.lease_namespace, obj);
    if (!created.ok()) return Attempt::kFailed;
    absl::MutexLock lock(&mu_);
    observed_spec_ = spec;
    observed_time_ = now;
    observed_holder_ = config_.identity;
    return Attempt::kHeld;
  }

  Json old_spec = lease->value("spec", Json::object());
  const std::string holder = old_spec.value("holderIdentity", "");
  const int64_t duration_s = old_spec.value("leaseDurationSeconds", int64_t{0});
  {
    absl::MutexLock lock(&mu_);
    if (old_spec != observed_spec_) {
      observed_spec_ = old_spec;
      observed_time_ = now;
    }
    observed_holder_ = holder;
    if (!holder.empty() && holder != config_.identity) {
      // Someone else holds it. A leader seeing this lost it (it was frozen or partitioned long
      // enough for the lease to expire and be taken): it must not write it back.
      if (leading_) return Attempt::kTakenByOther;
      if (observed_time_ + absl::Seconds(duration_s) > now) return Attempt::kFailed;
    }
  }
  if (holder == config_.identity) {
    spec["acquireTime"] = old_spec.value("acquireTime", FormatMicroTime(now));
    spec["leaseTransitions"] = old_spec.value("leaseTransitions", int64_t{0});
  } else {
    spec["leaseTransitions"] = old_spec.value("leaseTransitions", int64_t{0}) + 1;
  }
  Json updated = *lease;
  updated["spec"] = spec;
  absl::StatusOr<Json> res = client_->Update(LeaseResource(), config_.lease_namespace, updated);
  if (!res.ok()) {
    if (!IsConflict(res.status())) {
      Logger("leader")->warn("update lease {}/{}: {}", config_.lease_namespace, config_.lease_name,
                             res.status());
    }
    return Attempt::kFailed;
  }
  absl::MutexLock lock(&mu_);
  observed_spec_ = spec;
  observed_time_ = now;
  observed_holder_ = config_.identity;
  return Attempt::kHeld;
}

void LeaderElector::Release() {
  // Bounded like a renewal: a clean stop must not hang on a slow API server.
  ScopedCallDeadline budget(config_.clock->Now() + config_.renew_deadline);
  absl::StatusOr<Json> lease =
      client_->Get(LeaseResource(), config_.lease_namespace, config_.lease_name);
  if (!lease.ok()) return;
  Json spec = lease->value("spec", Json::object());
  if (spec.value("holderIdentity", "") != config_.identity) return;
  const std::string now = FormatMicroTime(config_.clock->Now());
  spec["holderIdentity"] = "";
  spec["leaseDurationSeconds"] = 1;
  spec["renewTime"] = now;
  spec["acquireTime"] = now;
  Json updated = *lease;
  updated["spec"] = spec;
  absl::StatusOr<Json> res = client_->Update(LeaseResource(), config_.lease_namespace, updated);
  if (!res.ok()) {
    Logger("leader")->warn("release lease: {}", res.status());
    return;
  }
  absl::MutexLock lock(&mu_);
  observed_spec_ = spec;
  observed_time_ = config_.clock->Now();
  observed_holder_ = "";
}

bool LeaderElector::Wait(std::stop_token& stop, absl::Duration d) {
  absl::MutexLock lock(&mu_);
  auto stopped = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_requested_; };
  config_.clock->AwaitWithDeadline(&mu_, absl::Condition(&stopped), config_.clock->Now() + d);
  return !stop_requested_ && !stop.stop_requested();
}

void LeaderElector::SetLeading(bool leading, absl::Time fence_until) {
  {
    absl::MutexLock lock(&mu_);
    leading_ = leading;
  }
  if (config_.fence == nullptr) return;
  if (leading) {
    config_.fence->ExtendTo(fence_until);
  } else {
    config_.fence->Close();
  }
}

bool LeaderElector::Run(std::stop_token stop) {
  auto log = Logger("leader");
  std::stop_callback on_stop(stop, [this] {
    absl::MutexLock lock(&mu_);
    stop_requested_ = true;
  });
  static thread_local absl::BitGen gen;
  Clock* clock = config_.clock;
  // Campaign: retry_period with up to 20 % jitter (as client-go's JitterUntil(retryPeriod, 1.2)).
  absl::Time renewed_at;  // when the round that last renewed (or acquired) started
  while (true) {
    if (stop.stop_requested()) return true;
    const absl::Time start = clock->Now();
    const bool acquired =
        TryAcquireOrRenew(start, start + config_.renew_deadline) == Attempt::kHeld;
    ObserveLeader(GetLeader());
    if (acquired) {
      renewed_at = start;
      break;
    }
    if (!Wait(stop, config_.retry_period * absl::Uniform(gen, 1.0, 1.2))) return true;
  }
  log->info("{} acquired lease {}/{}", config_.identity, config_.lease_namespace,
            config_.lease_name);
  SetLeading(true, renewed_at + config_.renew_deadline);
  std::stop_source leading_stop;
  std::thread leader_thread;
  if (config_.callbacks.on_started_leading) {
    leader_thread = std::thread([cb = config_.callbacks.on_started_leading,
                                 token = leading_stop.get_token()] { cb(token); });
  }
  // Renew every retry_period. Leadership (and the write fence) lasts until renewed_at +
  // renew_deadline: a renewal that has not succeeded by then, whatever its calls are doing, ends
  // it, and so does seeing another holder.
  std::string lost;
  while (lost.empty()) {
    if (!Wait(stop, config_.retry_period)) break;
    while (true) {
      const absl::Time start = clock->Now();
      const absl::Time term_end = renewed_at + config_.renew_deadline;
      if (start >= term_end) {
        lost = absl::StrCat("could not renew within ", absl::FormatDuration(config_.renew_deadline),
                            " of the last renewal");
        break;
      }
      const Attempt a = TryAcquireOrRenew(start, term_end);
      if (a == Attempt::kHeld) {
        renewed_at = start;
        SetLeading(true, renewed_at + config_.renew_deadline);
        break;
      }
      if (a == Attempt::kTakenByOther) {
        lost = absl::StrCat("the lease is held by ", GetLeader());
        break;
      }
      const absl::Duration left = term_end - clock->Now();
      if (left > absl::ZeroDuration() && !Wait(stop, std::min(config_.retry_period, left))) break;
    }
    if (stop.stop_requested()) break;
  }
  SetLeading(false, absl::InfinitePast());
  if (!lost.empty()) {
    // The fence is closed: nothing this process writes through it reaches the API server. Tell
    // the owner before stopping the leader's work, which may take a while to drain.
    log->error("{} lost lease {}/{}: {}", config_.identity, config_.lease_namespace,
               config_.lease_name, lost);
    if (config_.callbacks.on_lost) config_.callbacks.on_lost();
  }
  leading_stop.request_stop();
  if (leader_thread.joinable()) leader_thread.join();
  if (lost.empty() && config_.release_on_cancel) {
    Release();
    log->info("{} released lease {}/{}", config_.identity, config_.lease_namespace,
              config_.lease_name);
  }
  if (config_.callbacks.on_stopped_leading) config_.callbacks.on_stopped_leading();
  return lost.empty();
}

}  // namespace kruise::kube
