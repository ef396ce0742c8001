#include "kube/write_fence.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kube/call_deadline.h"

namespace kruise::kube {

WriteFence::WriteFence(Clock* clock) : clock_(clock) {}

void WriteFence::ExtendTo(absl::Time until) {
  absl::MutexLock lock(&mu_);
  until_ = std::max(until_, until);
}

void WriteFence::Close() {
  absl::MutexLock lock(&mu_);
  until_ = absl::InfinitePast();
}

absl::Time WriteFence::until() const {
  absl::MutexLock lock(&mu_);
  return until_;
}

absl::Status WriteFence::Check() const {
  const absl::Time until = this->until();
  const absl::Time now = clock_->Now();
  if (now < until) return absl::OkStatus();
  if (until == absl::InfinitePast()) {
    return absl::FailedPreconditionError("not the leader: this replica does not hold the lease");
  }
  return absl::FailedPreconditionError(
      absl::StrCat("not the leader: the lease was last renewed too long ago to be sure it is still "
                   "held (fence passed ",
                   absl::FormatDuration(absl::Trunc(now - until, absl::Milliseconds(1))),
                   " ago); writes are refused until it is renewed"));
}

namespace {

const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace

FencedKubeClient::FencedKubeClient(KubeClient* inner, const WriteFence* fence)
    : inner_(inner), fence_(fence) {}

template <typename F>
auto FencedKubeClient::Fenced(const char* verb, const Resource& r, const std::string& ns,
                              const std::string& name, F&& write) -> decltype(write()) {
  if (absl::Status s = fence_->Check(); !s.ok()) {
    fence_->CountRefused();
    Logger("kube")->warn("refused {} {} {}/{}: {}", verb, r.resource, ns, name, s.message());
    return s;
  }
  const absl::Time until = fence_->until();
  decltype(write()) result = [&] {
    ScopedCallDeadline at_fence(until);
    return write();
  }();
  // Timed out at (or within timer slack of) the term's end: the fence cut it off, whatever a
  // renewal did meanwhile. The caller retries under the next term, if there is one.
  if (absl::IsDeadlineExceeded(StatusOf(result)) &&
      fence_->clock_->Now() + absl::Milliseconds(50) >= until) {
    fence_->CountRefused();
    return absl::FailedPreconditionError(
        absl::StrCat("not the leader: ", verb, " ", r.resource, " ", ns, "/", name,
                     " was cut off at the fence (the end of this replica's lease term)"));
  }
  return result;
}

absl::StatusOr<Json> FencedKubeClient::Get(const Resource& r, const std::string& ns,
                                           const std::string& name) {
  return inner_->Get(r, ns, name);
}

absl::StatusOr<ListResult> FencedKubeClient::List(const Resource& r, const std::string& ns,
                                                  const ListOptions& opts) {
  return inner_->List(r, ns, opts);
}

absl::StatusOr<Json> FencedKubeClient::Create(const Resource& r, const std::string& ns,
                                              const Json& obj) {
  const Json* meta = obj.is_object() && obj.contains("metadata") ? &obj["metadata"] : nullptr;
  std::string name = meta != nullptr && meta->is_object() ? meta->value("name", "") : "";
  if (name.empty() && meta != nullptr && meta->is_object()) {
    name = meta->value("generateName", "") + "*";
  }
  return Fenced("create", r, ns, name, [&] { return inner_->Create(r, ns, obj); });
}

absl::StatusOr<Json> FencedKubeClient::Update(const Resource& r, const std::string& ns,
                                              const Json& obj, const std::string& subresource) {
  const Json* meta = obj.is_object() && obj.contains("metadata") ? &obj["metadata"] : nullptr;
  const std::string name = meta != nullptr && meta->is_object() ? meta->value("name", "") : "";
  return Fenced("update", r, ns, name, [&] { return inner_->Update(r, ns, obj, subresource); });
}

absl::StatusOr<Json> FencedKubeClient::Patch(const Resource& r, const std::string& ns,
                                             const std::string& name, PatchType type,
                                             const Json& patch, const std::string& subresource) {
  return Fenced("patch", r, ns, name,
                [&] { return inner_->Patch(r, ns, name, type, patch, subresource); });
}

absl::Status FencedKubeClient::Delete(const Resource& r, const std::string& ns,
                                      const std::string& name, const DeleteOptions& opts) {
  return Fenced("delete", r, ns, name, [&] { return inner_->Delete(r, ns, name, opts); });
}

absl::Status FencedKubeClient::Watch(const Resource& r, const std::string& ns,
                                     const ListOptions& opts, const WatchHandler& handler,
                                     WatchCanceller* canceller) {
  return inner_->Watch(r, ns, opts, handler, canceller);
}

}  // namespace kruise::kube
