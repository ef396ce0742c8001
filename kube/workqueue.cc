#include "kube/workqueue.h"

#include <utility>

namespace kruise::kube {

WorkQueue::WorkQueue(Clock* clock, std::unique_ptr<RateLimiter> limiter)
    : clock_(clock), limiter_(limiter ? std::move(limiter) : DefaultControllerRateLimiter(clock)) {}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_ || dirty_.contains(key)) return;
  dirty_.insert(key);
  // A key being processed is re-queued by Done().
  if (processing_.contains(key)) return;
  queue_.push_back(key);
}

void WorkQueue::Add(const std::string& key) {
  absl::MutexLock lock(&mu_);
  AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return;
  if (delay <= absl::ZeroDuration()) {
    AddLocked(key);
    return;
  }
  const absl::Time at = clock_->Now() + delay;
  auto it = delayed_at_.find(key);
  if (it != delayed_at_.end()) {
    if (it->second <= at) return;  // an earlier add is already pending
    auto range = delayed_.equal_range(it->second);
    for (auto d = range.first; d != range.second; ++d) {
      if (d->second == key) {
        delayed_.erase(d);
        break;
      }
    }
    it->second = at;
  } else {
    delayed_at_.emplace(key, at);
  }
  delayed_.emplace(at, key);
  ++delayed_gen_;
}

void WorkQueue::AddRateLimited(const std::string& key) { AddAfter(key, limiter_->When(key)); }

void WorkQueue::Forget(const std::string& key) { limiter_->Forget(key); }

int WorkQueue::NumRequeues(const std::string& key) { return limiter_->NumRequeues(key); }

void WorkQueue::PromoteDueLocked() {
  if (delayed_.empty()) return;
  const absl::Time now = clock_->Now();
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    std::string key = std::move(delayed_.begin()->second);
    delayed_.erase(delayed_.begin());
    delayed_at_.erase(key);
    AddLocked(key);
  }
}

std::optional<std::string> WorkQueue::Get() { return GetUntil(absl::InfiniteFuture()); }

std::optional<std::string> WorkQueue::GetUntil(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  while (true) {
    PromoteDueLocked();
    if (!queue_.empty()) break;
    if (shutting_down_) return std::nullopt;
    const absl::Time now = clock_->Now();
    if (now >= deadline) return std::nullopt;
    absl::Time wake = deadline;
    if (!delayed_.empty() && delayed_.begin()->first < wake) wake = delayed_.begin()->first;
    const uint64_t gen = delayed_gen_;
    struct Args {
      WorkQueue* q;
      uint64_t gen;
    } args{this, gen};
    clock_->AwaitWithDeadline(&mu_,
                              absl::Condition(
                                  +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                    return !a->q->queue_.empty() || a->q->shutting_down_ ||
                                           a->q->delayed_gen_ != a->gen;
                                  },
                                  &args),
                              wake);
  }
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  return key;
}

void WorkQueue::Done(const std::string& key) {
  absl::MutexLock lock(&mu_);
  processing_.erase(key);
  if (dirty_.contains(key)) queue_.push_back(key);
}

int WorkQueue::Len() {
  absl::MutexLock lock(&mu_);
  PromoteDueLocked();
  return static_cast<int>(queue_.size());
}

int WorkQueue::NumDelayed() {
  absl::MutexLock lock(&mu_);
  PromoteDueLocked();
  return static_cast<int>(delayed_.size());
}

int WorkQueue::NumProcessing() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(processing_.size());
}

void WorkQueue::ShutDown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  delayed_.clear();
  delayed_at_.clear();
}

void WorkQueue::ShutDownAndDiscard() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  delayed_.clear();
  delayed_at_.clear();
  queue_.clear();
  dirty_.clear();
}

void WorkQueue::ShutDownWithDrain() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  delayed_.clear();
  delayed_at_.clear();
  mu_.Await(absl::Condition(
      +[](WorkQueue* q) ABSL_NO_THREAD_SAFETY_ANALYSIS { return q->processing_.empty(); }, this));
}

bool WorkQueue::ShuttingDown() {
  absl::MutexLock lock(&mu_);
  return shutting_down_;
}

}  // namespace kruise::kube
