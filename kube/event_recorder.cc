#include "kube/event_recorder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "kube/errors.h"

namespace kruise::kube {
namespace {

std::string Timestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::string Str(const Json& obj, const char* field) {
  auto it = obj.find(field);
  return (it != obj.end() && it->is_string()) ? it->get<std::string>() : "";
}

}  // namespace

const Resource& EventResource() {
  static const Resource* r = new Resource{"", "v1", "events", "Event", true};
  return *r;
}

EventRecorder::EventRecorder(KubeClient* client, EventRecorderOptions opts)
    : client_(client), opts_(std::move(opts)) {
  worker_ = std::thread([this] { Loop(); });
}

EventRecorder::~EventRecorder() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  worker_.join();
}

void EventRecorder::Event(const Json& object, EventType type, const std::string& reason,
                          const std::string& message) {
  Pending p;
  p.type = type;
  p.reason = reason;
  p.message = message;
  p.at = opts_.clock->Now();
  const Json meta = object.is_object() ? object.value("metadata", Json::object()) : Json::object();
  p.ns = meta.is_object() ? Str(meta, "namespace") : "";
  p.involved = {{"kind", object.is_object() ? Str(object, "kind") : ""},
                {"apiVersion", object.is_object() ? Str(object, "apiVersion") : ""},
                {"name", Str(meta, "name")}};
  for (const char* f : {"namespace", "uid", "resourceVersion"}) {
    const std::string v = Str(meta, f);
    if (!v.empty()) p.involved[f] = v;
  }
  const std::string object_key = absl::StrCat(Str(p.involved, "kind"), "/", p.ns, "/",
                                              Str(p.involved, "name"), "/", Str(p.involved, "uid"));

  absl::MutexLock lock(&mu_);
  // Spam filter: per-object token bucket.
  auto it = buckets_.find(object_key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= opts_.max_tracked_objects) buckets_.clear();
    it = buckets_.emplace(object_key, Bucket{static_cast<double>(opts_.burst), p.at}).first;
  }
  Bucket& b = it->second;
  if (p.at > b.last && opts_.refill_interval > absl::ZeroDuration()) {
    b.tokens = std::min<double>(opts_.burst, b.tokens + (p.at - b.last) / opts_.refill_interval);
    b.last = p.at;
  }
  if (b.tokens < 1) {
    ++stats_.rate_limited;
    return;
  }
  if (queue_.size() >= opts_.queue_capacity) {
    ++stats_.dropped;
    return;
  }
  b.tokens -= 1;
  queue_.push_back(std::move(p));
}

EventRecorderStats EventRecorder::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool EventRecorder::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return queue_.empty() && !busy_; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void EventRecorder::Loop() {
  while (true) {
    Pending p;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      p = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    Write(p);
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

void EventRecorder::Write(const Pending& p) {
  auto log = Logger("events");
  const std::string ns = p.ns.empty() ? "default" : p.ns;
  const std::string type = p.type == EventType::kWarning ? "Warning" : "Normal";
  const std::string agg_key =
      absl::StrCat(p.involved.dump(), "\n", type, "\n", p.reason, "\n", p.message);
  bool created = false, patched = false;
  auto it = aggregates_.find(agg_key);
  if (it != aggregates_.end() && p.at - it->second.last < opts_.aggregation_window) {
    Aggregate& a = it->second;
    Json patch = {{"count", a.count + 1}, {"lastTimestamp", Timestamp(p.at)}};
    absl::StatusOr<Json> res =
        client_->Patch(EventResource(), a.ns, a.name, PatchType::kMerge, patch);
    if (res.ok()) {
      ++a.count;
      a.last = p.at;
      patched = true;
    } else if (!kube::IsNotFound(res.status())) {
      log->warn("patch event {}/{}: {}", a.ns, a.name, res.status());
      absl::MutexLock lock(&mu_);
      ++stats_.failed;
      return;
    }
  }
  if (!patched) {
    const std::string name = absl::StrFormat(
        // client-go names events "<object>.<unix nanos in hex>"; the sequence keeps names unique
        // when the clock does not move between events.
        "%s.%x", p.involved.value("name", "unknown"), absl::ToUnixNanos(p.at) + name_seq_++);
    Json ev = {{"apiVersion", "v1"},
               {"kind", "Event"},
               {"metadata", {{"name", name}, {"namespace", ns}}},
               {"involvedObject", p.involved},
               {"reason", p.reason},
               {"message", p.message},
               {"type", type},
               {"source", {{"component", opts_.component}}},
               {"firstTimestamp", Timestamp(p.at)},
               {"lastTimestamp", Timestamp(p.at)},
               {"count", 1},
               {"reportingComponent", opts_.component},
               {"reportingInstance", opts_.host}};
    if (!opts_.host.empty()) ev["source"]["host"] = opts_.host;
    absl::StatusOr<Json> res = client_->Create(EventResource(), ns, ev);
    if (!res.ok()) {
      log->warn("create event {} for {}: {}", p.reason, p.involved.value("name", ""), res.status());
      absl::MutexLock lock(&mu_);
      ++stats_.failed;
      return;
    }
    if (aggregates_.size() >= opts_.max_tracked_objects) {
      // Bounded cache: drop entries outside the aggregation window, or everything if needed.
      absl::erase_if(aggregates_, [&](const auto& kv) {
        return p.at - kv.second.last >= opts_.aggregation_window;
      });
      if (aggregates_.size() >= opts_.max_tracked_objects) aggregates_.clear();
    }
    aggregates_[agg_key] = Aggregate{ns, name, 1, Timestamp(p.at), p.at};
    created = true;
  }
  absl::MutexLock lock(&mu_);
  if (created) ++stats_.created;
  if (patched) ++stats_.patched;
}

}  // namespace kruise::kube
