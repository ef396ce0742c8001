#include "test/fakes/apiserver/fake_apiserver.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <list>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "httplib.h"
#include "test/fakes/apiserver/selectors.h"

namespace kruise::testing {

using apiserver::FieldSelector;
using apiserver::LabelSelector;
using Json = nlohmann::json;

namespace {

// ---- Errors: an absl::Status carrying the HTTP code and Kubernetes reason as a payload. ----

constexpr char kHttpPayload[] = "fake-apiserver/http";

absl::StatusCode CodeFor(int http) {
  switch (http) {
    case 400:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kOutOfRange;
    case 415:
      return absl::StatusCode::kUnimplemented;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status ApiError(int http, const std::string& reason, const std::string& message) {
  absl::StatusCode code = CodeFor(http);
  if (reason == "AlreadyExists") code = absl::StatusCode::kAlreadyExists;
  absl::Status s(code, message);
  s.SetPayload(kHttpPayload, absl::Cord(absl::StrCat(http, " ", reason)));
  return s;
}

std::string ReasonForCode(int http) {
  switch (http) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "InternalError";
  }
}

Json StatusBody(int http, const std::string& reason, const std::string& message) {
  return Json{{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
              {"status", "Failure"}, {"message", message}, {"reason", reason},
              {"code", http}};
}

std::pair<int, std::string> HttpOf(const absl::Status& s) {
  auto payload = s.GetPayload(kHttpPayload);
  if (payload.has_value()) {
    std::string text(*payload);
    std::pair<std::string, std::string> parts = absl::StrSplit(text, absl::MaxSplits(' ', 1));
    int code = 500;
    if (absl::SimpleAtoi(parts.first, &code)) return {code, parts.second};
  }
  return {500, "InternalError"};
}

std::string ResourceKey(const std::string& group, const std::string& resource) {
  return group.empty() ? resource : absl::StrCat(resource, ".", group);
}

std::string FormatTimestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

const Json* WalkPath(const Json& obj, const std::string& path) {
  const Json* cur = &obj;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(std::string(part));
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

std::string FieldString(const Json* v) {
  if (v == nullptr || v->is_null()) return "";
  if (v->is_string()) return v->get<std::string>();
  return v->dump();
}

std::string MetaString(const Json& obj, const char* field) {
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return "";
  auto f = m->find(field);
  if (f == m->end() || !f->is_string()) return "";
  return f->get<std::string>();
}

// Everything outside metadata and status: what `generation` tracks.
Json SpecPart(const Json& obj) {
  Json copy = obj;
  copy.erase("metadata");
  copy.erase("status");
  copy.erase("apiVersion");
  copy.erase("kind");
  return copy;
}

// ---- Stored objects: immutable snapshots shared by the store and the event log. ----

struct StoredObject {
  std::string ns;
  std::string name;
  std::string uid;
  int64_t rv = 0;
  std::string api_version;
  std::map<std::string, std::string> labels;
  std::string node_name;
  std::string phase;
  std::vector<std::string> owner_uids;
  std::string body;  // compact JSON

  Json Parse() const { return Json::parse(body); }
};
using ObjPtr = std::shared_ptr<const StoredObject>;

ObjPtr MakeStored(const Json& obj) {
  auto s = std::make_shared<StoredObject>();
  s->ns = MetaString(obj, "namespace");
  s->name = MetaString(obj, "name");
  s->uid = MetaString(obj, "uid");
  std::string rv = MetaString(obj, "resourceVersion");
  (void)absl::SimpleAtoi(rv, &s->rv);
  if (auto it = obj.find("apiVersion"); it != obj.end() && it->is_string()) {
    s->api_version = it->get<std::string>();
  }
  const Json& meta = obj.at("metadata");
  if (auto it = meta.find("labels"); it != meta.end() && it->is_object()) {
    for (auto& [k, v] : it->items()) {
      if (v.is_string()) s->labels[k] = v.get<std::string>();
    }
  }
  if (auto it = meta.find("ownerReferences"); it != meta.end() && it->is_array()) {
    for (const Json& o : *it) {
      if (o.is_object() && o.contains("uid") && o["uid"].is_string()) {
        s->owner_uids.push_back(o["uid"].get<std::string>());
      }
    }
  }
  s->node_name = FieldString(WalkPath(obj, "spec.nodeName"));
  s->phase = FieldString(WalkPath(obj, "status.phase"));
  s->body = obj.dump();
  return s;
}

enum class EventType { kAdded, kModified, kDeleted };

const char* EventTypeName(EventType t) {
  switch (t) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
  }
  return "ERROR";
}

struct Event {
  int64_t rv;
  EventType type;
  std::string key;  // storage key of the resource
  ObjPtr obj;
};

struct ResourceInfo {
  FakeResource r;
  std::string key;
};

// Filters shared by list and watch.
struct Filter {
  std::string ns;  // "" = all
  LabelSelector labels;
  FieldSelector fields;

  bool Matches(const StoredObject& o) const {
    if (!ns.empty() && o.ns != ns) return false;
    if (!labels.Matches(o.labels)) return false;
    if (fields.empty()) return true;
    std::optional<Json> parsed;
    return fields.Matches([&](const std::string& path) -> std::string {
      if (path == "metadata.name") return o.name;
      if (path == "metadata.namespace") return o.ns;
      if (path == "spec.nodeName") return o.node_name;
      if (path == "status.phase") return o.phase;
      if (!parsed) parsed = o.Parse();
      return FieldString(WalkPath(*parsed, path));
    });
  }
};

// The path of FakeApiServer::Impl::WarmUp()'s request.
constexpr char kWarmUpPath[] = "/fake-apiserver-warm-up";

// One httplib task per connection on its own thread, so any number of watch streams can be open.
class ThreadPerTaskQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    Reap();
    auto done = std::make_shared<std::atomic<bool>>(false);
    threads_.push_back({std::thread([fn = std::move(fn), done] {
                          fn();
                          done->store(true);
                        }),
                        done});
  }
  // Joins every worker once all have finished; false if some still run after `timeout`.
  bool JoinWhenIdle(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        Reap();
        if (threads_.empty()) return true;
      }
      if (absl::Now() >= deadline) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  void shutdown() override {
    std::list<Worker> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      all.swap(threads_);
    }
    for (Worker& w : all) w.thread.join();
  }

 private:
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void Reap() {
    for (auto it = threads_.begin(); it != threads_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = threads_.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::mutex mu_;
  std::list<Worker> threads_;
};

struct ParsedPath {
  enum class Kind { kDiscoveryApi, kDiscoveryApis, kGroup, kGroupVersion, kResource, kOther };
  Kind kind = Kind::kOther;
  std::string group;
  std::string version;
  std::string ns;
  std::string resource;
  std::string name;
  std::string subresource;
  bool legacy_watch = false;
};

}  // namespace

// ---------------------------------------------------------------------------------------------

class FakeApiServer::Impl {
 public:
  explicit Impl(FakeApiServerOptions opts)
      : opts_(std::move(opts)),
        clock_(opts_.clock != nullptr ? opts_.clock : Clock::Real()),
        rng_(std::random_device{}()) {
    bookmark_interval_ = opts_.bookmark_interval;
    if (opts_.register_builtin_resources) RegisterBuiltins();
  }
  ~Impl() { Stop(); }

  absl::Status Start();
  void WarmUp();
  void Stop();
  int port() const { return port_.load(); }
  std::string base_url() const {
    return absl::StrCat(tls_ ? "https" : "http", "://", opts_.host, ":", port_.load());
  }

  void RegisterResource(const FakeResource& r) {
    absl::MutexLock lock(&mu_);
    RegisterLocked(r);
  }

  // Direct store access.
  absl::StatusOr<Json> Seed(const std::string& key, const Json& obj);
  absl::StatusOr<Json> Get(const std::string& key, const std::string& ns,
                           const std::string& name) const;
  absl::StatusOr<Json> Put(const std::string& key, const Json& obj);
  absl::Status Remove(const std::string& key, const std::string& ns, const std::string& name);
  std::vector<Json> List(const std::string& key, const std::string& ns) const;
  int64_t CurrentResourceVersion() const {
    absl::MutexLock lock(&mu_);
    return rv_;
  }

  void Compact(int64_t rv) {
    absl::MutexLock lock(&mu_);
    compacted_ = std::max(compacted_, std::min(rv, rv_));
    TrimLogLocked();
  }
  int64_t Compacted() const {
    absl::MutexLock lock(&mu_);
    return compacted_;
  }
  int DropWatches(bool truncate) {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (Watcher* w : watchers_) {
      w->drop = true;
      w->truncate = truncate;
      ++n;
    }
    return n;
  }
  void SetLatency(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    latency_ = d;
  }
  void SetPathLatency(const std::string& method, const std::string& path_substring,
                      absl::Duration d) {
    absl::MutexLock lock(&mu_);
    for (auto it = path_latency_.begin(); it != path_latency_.end(); ++it) {
      if (it->method == method && it->path_substring == path_substring) {
        if (d == absl::ZeroDuration()) {
          path_latency_.erase(it);
        } else {
          it->latency = d;
        }
        return;
      }
    }
    if (d != absl::ZeroDuration()) path_latency_.push_back({method, path_substring, d});
  }
  void FailNext(const FakeFailure& f) {
    absl::MutexLock lock(&mu_);
    failures_.push_back(f);
  }
  void RequireToken(const std::string& token) {
    absl::MutexLock lock(&mu_);
    token_ = token;
  }
  void SetBookmarkInterval(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    bookmark_interval_ = d;
    ++bookmark_config_gen_;
  }
  void EmitBookmarkNow() {
    absl::MutexLock lock(&mu_);
    ++bookmark_now_gen_;
  }
  std::vector<RecordedRequest> Requests() const {
    absl::MutexLock lock(&log_mu_);
    return requests_;
  }
  void ClearRequests() {
    absl::MutexLock lock(&log_mu_);
    requests_.clear();
    request_seqs_.clear();
  }
  int64_t RequestCount(const std::string& method, const std::string& sub) const {
    absl::MutexLock lock(&log_mu_);
    int64_t n = 0;
    for (const RecordedRequest& r : requests_) {
      if ((method.empty() || r.method == method) && absl::StrContains(r.path, sub)) ++n;
    }
    return n;
  }
  int OpenWatches() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(watchers_.size());
  }
  int64_t WatchesStarted() const { return watches_started_.load(); }

 private:
  struct Watcher {
    int64_t cursor = 0;
    bool drop = false;
    bool truncate = false;
  };

  // Write operations (mu_ held). `version` is the API version of the request (for apiVersion).
  enum class UpdateMode { kMain, kStatus, kRaw };
  absl::StatusOr<ObjPtr> CreateLocked(const ResourceInfo& info, const std::string& version,
                                      const std::string& ns, Json obj, bool keep_status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<ObjPtr> UpdateLocked(const ResourceInfo& info, const std::string& ns,
                                      const std::string& name, Json obj, UpdateMode mode)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<ObjPtr> DeleteLocked(const ResourceInfo& info, const std::string& ns,
                                      const std::string& name, const Json& options, bool force)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CascadeLocked(const std::string& owner_uid, int depth) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AppendEventLocked(EventType t, const std::string& key, ObjPtr obj)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TrimLogLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string NewUidLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string RandomSuffixLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RegisterLocked(const FakeResource& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RegisterBuiltins();
  const ResourceInfo* FindByKeyLocked(const std::string& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<ResourceInfo> Lookup(const std::string& group, const std::string& version,
                                     const std::string& resource) const;

  // HTTP.
  void Handle(const httplib::Request& req, httplib::Response& res);
  void Dispatch(const httplib::Request& req, httplib::Response& res);
  void ServeDiscovery(const ParsedPath& p, httplib::Response& res);
  void ServeList(const ResourceInfo& info, const ParsedPath& p, const httplib::Request& req,
                 httplib::Response& res);
  void ServeWatch(const ResourceInfo& info, const ParsedPath& p, const httplib::Request& req,
                  httplib::Response& res);
  bool RunWatch(const ResourceInfo& info, const std::string& version, const Filter& filter,
                const std::string& rv_param, bool bookmarks, int64_t timeout_seconds,
                httplib::DataSink& sink);
  void SendError(httplib::Response& res, const absl::Status& s);
  void SendObject(httplib::Response& res, int code, const ObjPtr& obj,
                  const std::string& api_version);

  static std::string BodyFor(const StoredObject& o, const std::string& api_version);
  static ParsedPath ParsePath(const std::string& path);

  const FakeApiServerOptions opts_;
  Clock* const clock_;
  bool tls_ = false;
  std::atomic<int> port_{0};
  std::unique_ptr<httplib::Server> server_;
  // The server's task queue (httplib makes it on the listen thread; the server owns it).
  std::atomic<ThreadPerTaskQueue*> queue_{nullptr};
  std::thread listen_thread_;
  std::atomic<int64_t> watches_started_{0};
  absl::Mutex listen_mu_;
  bool listen_done_ ABSL_GUARDED_BY(listen_mu_) = true;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t compacted_ ABSL_GUARDED_BY(mu_) = 0;
  // (group, version, resource) → info.
  std::map<std::tuple<std::string, std::string, std::string>, ResourceInfo> resources_
      ABSL_GUARDED_BY(mu_);
  // key → (ns, name) → object.
  std::map<std::string, std::map<std::pair<std::string, std::string>, ObjPtr>> store_
      ABSL_GUARDED_BY(mu_);
  std::deque<Event> log_ ABSL_GUARDED_BY(mu_);  // contiguous: log_[i].rv == log_[0].rv + i
  std::set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
  absl::Duration bookmark_interval_ ABSL_GUARDED_BY(mu_);
  int64_t bookmark_config_gen_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bookmark_now_gen_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration latency_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  struct PathLatency {
    std::string method;
    std::string path_substring;
    absl::Duration latency;
  };
  std::vector<PathLatency> path_latency_ ABSL_GUARDED_BY(mu_);
  std::deque<FakeFailure> failures_ ABSL_GUARDED_BY(mu_);
  std::string token_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex log_mu_;
  std::vector<RecordedRequest> requests_ ABSL_GUARDED_BY(log_mu_);
  std::vector<uint64_t> request_seqs_ ABSL_GUARDED_BY(log_mu_);  // parallel to requests_
  uint64_t request_seq_ ABSL_GUARDED_BY(log_mu_) = 0;
};

// ---- Registration ----

void FakeApiServer::Impl::RegisterLocked(const FakeResource& r) {
  resources_[{r.group, r.version, r.resource}] = ResourceInfo{r, ResourceKey(r.group, r.resource)};
}

void FakeApiServer::Impl::RegisterBuiltins() {
  absl::MutexLock lock(&mu_);
  const std::vector<FakeResource> builtins = {
      {"", "v1", "pods", "Pod", true, true},
      {"", "v1", "nodes", "Node", false, true},
      {"", "v1", "namespaces", "Namespace", false, true},
      {"", "v1", "secrets", "Secret", true, false},
      {"", "v1", "configmaps", "ConfigMap", true, false},
      {"", "v1", "events", "Event", true, false},
      {"", "v1", "services", "Service", true, true},
      {"", "v1", "serviceaccounts", "ServiceAccount", true, false},
      {"", "v1", "endpoints", "Endpoints", true, false},
      {"", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, true},
      {"events.k8s.io", "v1", "events", "Event", true, false},
      {"coordination.k8s.io", "v1", "leases", "Lease", true, false},
      {"apps", "v1", "deployments", "Deployment", true, true},
      {"apps", "v1", "replicasets", "ReplicaSet", true, true},
      {"apps", "v1", "statefulsets", "StatefulSet", true, true},
      {"apps", "v1", "daemonsets", "DaemonSet", true, true},
      {"apps", "v1", "controllerrevisions", "ControllerRevision", true, false},
      {"apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false,
       true},
      {"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
       "MutatingWebhookConfiguration", false, false},
      {"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
       "ValidatingWebhookConfiguration", false, false},
  };
  for (const FakeResource& r : builtins) RegisterLocked(r);
  const std::vector<FakeResource> kruise = {
      {"apps.kruise.io", "", "nodeimages", "NodeImage", false, true},
      {"apps.kruise.io", "", "imagepulljobs", "ImagePullJob", true, true},
      {"apps.kruise.io", "", "imagelistpulljobs", "ImageListPullJob", true, true},
      {"apps.kruise.io", "", "containerrecreaterequests", "ContainerRecreateRequest", true, true},
      {"apps.kruise.io", "", "nodepodprobes", "NodePodProbe", false, true},
      {"apps.kruise.io", "", "podprobemarkers", "PodProbeMarker", true, true},
      {"apps.kruise.io", "", "clonesets", "CloneSet", true, true},
      {"apps.kruise.io", "", "sidecarsets", "SidecarSet", false, true},
      {"apps.kruise.io", "", "broadcastjobs", "BroadcastJob", true, true},
  };
  for (FakeResource r : kruise) {
    for (const char* v : {"v1alpha1", "v1beta1"}) {
      r.version = v;
      RegisterLocked(r);
    }
  }
}

const ResourceInfo* FakeApiServer::Impl::FindByKeyLocked(const std::string& key) const {
  for (const auto& [k, info] : resources_) {
    if (info.key == key) return &info;
  }
  return nullptr;
}

std::optional<ResourceInfo> FakeApiServer::Impl::Lookup(const std::string& group,
                                                        const std::string& version,
                                                        const std::string& resource) const {
  absl::MutexLock lock(&mu_);
  auto it = resources_.find({group, version, resource});
  if (it == resources_.end()) return std::nullopt;
  return it->second;
}

// ---- Store primitives ----

std::string FakeApiServer::Impl::NewUidLocked() {
  uint64_t a = rng_();
  uint64_t b = rng_();
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 10
  std::string hex = absl::StrCat(absl::Hex(a, absl::kZeroPad16), absl::Hex(b, absl::kZeroPad16));
  return absl::StrCat(hex.substr(0, 8), "-", hex.substr(8, 4), "-", hex.substr(12, 4), "-",
                      hex.substr(16, 4), "-", hex.substr(20));
}

std::string FakeApiServer::Impl::RandomSuffixLocked() {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string s;
  for (int i = 0; i < 5; ++i) s.push_back(kAlphabet[rng_() % (sizeof(kAlphabet) - 1)]);
  return s;
}

void FakeApiServer::Impl::AppendEventLocked(EventType t, const std::string& key, ObjPtr obj) {
  log_.push_back(Event{obj->rv, t, key, std::move(obj)});
  while (log_.size() > opts_.max_event_log) {
    compacted_ = std::max(compacted_, log_.front().rv);
    log_.pop_front();
  }
}

void FakeApiServer::Impl::TrimLogLocked() {
  // Keep what open watchers still need; their cursor is not subject to explicit compaction.
  int64_t keep_after = compacted_;
  for (const Watcher* w : watchers_) keep_after = std::min(keep_after, w->cursor);
  while (!log_.empty() && log_.front().rv <= keep_after) log_.pop_front();
}

absl::StatusOr<ObjPtr> FakeApiServer::Impl::CreateLocked(const ResourceInfo& info,
                                                         const std::string& version,
                                                         const std::string& ns, Json obj,
                                                         bool keep_status) {
  if (!obj.is_object()) return ApiError(400, "BadRequest", "the body must be a JSON object");
  Json& meta = obj["metadata"];
  if (!meta.is_object()) meta = Json::object();
  std::string name = MetaString(obj, "name");
  if (info.r.namespaced) {
    std::string body_ns = MetaString(obj, "namespace");
    if (!body_ns.empty() && body_ns != ns) {
      return ApiError(400, "BadRequest",
                      "the namespace of the provided object does not match the namespace sent on "
                      "the request");
    }
    if (ns.empty()) return ApiError(400, "BadRequest", "a namespace is required");
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  auto& objects = store_[info.key];
  if (name.empty()) {
    std::string prefix = MetaString(obj, "generateName");
    if (prefix.empty()) {
      return ApiError(422, "Invalid",
                      absl::StrCat(info.r.kind,
                                   " is invalid: metadata.name: Required value: name or "
                                   "generateName is required"));
    }
    for (int attempt = 0; attempt < 16; ++attempt) {
      name = prefix + RandomSuffixLocked();
      if (objects.count({ns, name}) == 0) break;
    }
    meta["name"] = name;
  }
  if (name.find('/') != std::string::npos || name == "." || name == "..") {
    return ApiError(
        422, "Invalid",
        absl::StrCat(info.r.kind, " \"", name, "\" is invalid: metadata.name: Invalid"));
  }
  if (objects.count({ns, name}) != 0) {
    return ApiError(409, "AlreadyExists",
                    absl::StrCat(info.r.resource, " \"", name, "\" already exists"));
  }
  obj["apiVersion"] = info.r.group.empty() ? info.r.version : info.r.group + "/" + version;
  obj["kind"] = info.r.kind;
  meta["uid"] = NewUidLocked();
  meta["creationTimestamp"] = FormatTimestamp(clock_->Now());
  meta["generation"] = 1;
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  if (!keep_status && info.r.has_status_subresource) obj.erase("status");
  meta["resourceVersion"] = std::to_string(++rv_);
  ObjPtr stored = MakeStored(obj);
  objects[{ns, name}] = stored;
  AppendEventLocked(EventType::kAdded, info.key, stored);
  return stored;
}

absl::StatusOr<ObjPtr> FakeApiServer::Impl::UpdateLocked(const ResourceInfo& info,
                                                         const std::string& ns,
                                                         const std::string& name, Json obj,
                                                         UpdateMode mode) {
  if (!obj.is_object()) return ApiError(400, "BadRequest", "the body must be a JSON object");
  auto& objects = store_[info.key];
  auto it = objects.find({ns, name});
  if (it == objects.end()) {
    return ApiError(404, "NotFound", absl::StrCat(info.r.resource, " \"", name, "\" not found"));
  }
  const ObjPtr old_ptr = it->second;
  Json old = old_ptr->Parse();
  if (!obj["metadata"].is_object()) obj["metadata"] = Json::object();
  std::string body_name = MetaString(obj, "name");
  if (mode != UpdateMode::kRaw && !body_name.empty() && body_name != name) {
    return ApiError(400, "BadRequest",
                    absl::StrCat("the name of the object (", body_name,
                                 ") does not match the name on the URL (", name, ")"));
  }
  std::string body_rv = MetaString(obj, "resourceVersion");
  if (mode != UpdateMode::kRaw && !body_rv.empty() && body_rv != std::to_string(old_ptr->rv)) {
    return ApiError(409, "Conflict",
                    absl::StrCat("Operation cannot be fulfilled on ", info.key, " \"", name,
                                 "\": the object has been modified; please apply your changes to "
                                 "the latest version and try again"));
  }
  std::string body_uid = MetaString(obj, "uid");
  if (mode != UpdateMode::kRaw && !body_uid.empty() && body_uid != old_ptr->uid) {
    return ApiError(409, "Conflict",
                    absl::StrCat("Precondition failed: UID in precondition: ", body_uid,
                                 ", UID in object meta: ", old_ptr->uid));
  }
  Json result;
  if (mode == UpdateMode::kStatus) {
    result = old;
    if (obj.contains("status")) {
      result["status"] = obj["status"];
    } else {
      result.erase("status");
    }
  } else {
    result = std::move(obj);
    if (mode == UpdateMode::kMain && info.r.has_status_subresource) {
      if (old.contains("status")) {
        result["status"] = old["status"];
      } else {
        result.erase("status");
      }
    }
  }
  Json& meta = result["metadata"];
  const Json& old_meta = old["metadata"];
  meta["name"] = name;
  if (info.r.namespaced) {
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  for (const char* f :
       {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"}) {
    if (old_meta.contains(f)) {
      meta[f] = old_meta[f];
    } else {
      meta.erase(f);
    }
  }
  if (!result.contains("apiVersion")) result["apiVersion"] = old["apiVersion"];
  result["kind"] = info.r.kind;
  int64_t generation = old_meta.value("generation", int64_t{1});
  if (SpecPart(old) != SpecPart(result)) ++generation;
  meta["generation"] = generation;
  meta["resourceVersion"] = old_meta.value("resourceVersion", std::string());
  if (result == old) return old_ptr;  // no-op: nothing stored, no event

  bool deleting = meta.contains("deletionTimestamp");
  bool no_finalizers =
      !meta.contains("finalizers") || !meta["finalizers"].is_array() || meta["finalizers"].empty();
  meta["resourceVersion"] = std::to_string(++rv_);
  ObjPtr stored = MakeStored(result);
  if (deleting && no_finalizers) {
    objects.erase(it);
    AppendEventLocked(EventType::kDeleted, info.key, stored);
  } else {
    it->second = stored;
    AppendEventLocked(EventType::kModified, info.key, stored);
  }
  return stored;
}

absl::StatusOr<ObjPtr> FakeApiServer::Impl::DeleteLocked(const ResourceInfo& info,
                                                         const std::string& ns,
                                                         const std::string& name,
                                                         const Json& options, bool force) {
  auto& objects = store_[info.key];
  auto it = objects.find({ns, name});
  if (it == objects.end()) {
    return ApiError(404, "NotFound", absl::StrCat(info.r.resource, " \"", name, "\" not found"));
  }
  const ObjPtr old_ptr = it->second;
  if (options.is_object() && options.contains("preconditions") &&
      options["preconditions"].is_object()) {
    const Json& pre = options["preconditions"];
    if (pre.contains("uid") && pre["uid"].is_string() && pre["uid"] != old_ptr->uid) {
      return ApiError(
          409, "Conflict",
          absl::StrCat("Precondition failed: UID in precondition: ", pre["uid"].get<std::string>(),
                       ", UID in object meta: ", old_ptr->uid));
    }
    if (pre.contains("resourceVersion") && pre["resourceVersion"].is_string() &&
        pre["resourceVersion"] != std::to_string(old_ptr->rv)) {
      return ApiError(409, "Conflict",
                      absl::StrCat("Precondition failed: ResourceVersion in precondition: ",
                                   pre["resourceVersion"].get<std::string>(),
                                   ", ResourceVersion in object meta: ", old_ptr->rv));
    }
  }
  std::string policy;
  if (options.is_object() && options.contains("propagationPolicy") &&
      options["propagationPolicy"].is_string()) {
    policy = options["propagationPolicy"].get<std::string>();
  }
  Json obj = old_ptr->Parse();
  Json& meta = obj["metadata"];
  bool has_finalizers =
      meta.contains("finalizers") && meta["finalizers"].is_array() && !meta["finalizers"].empty();
  ObjPtr result;
  if (has_finalizers && !force) {
    if (meta.contains("deletionTimestamp")) return old_ptr;  // already being deleted
    meta["deletionTimestamp"] = FormatTimestamp(clock_->Now());
    meta["deletionGracePeriodSeconds"] = 0;
    meta["resourceVersion"] = std::to_string(++rv_);
    result = MakeStored(obj);
    it->second = result;
    AppendEventLocked(EventType::kModified, info.key, result);
  } else {
    meta["resourceVersion"] = std::to_string(++rv_);
    result = MakeStored(obj);
    objects.erase(it);
    AppendEventLocked(EventType::kDeleted, info.key, result);
  }
  if (policy == "Background" || policy == "Foreground") CascadeLocked(result->uid, 0);
  return result;
}

void FakeApiServer::Impl::CascadeLocked(const std::string& owner_uid, int depth) {
  if (depth > 16 || owner_uid.empty()) return;
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> victims;
  for (const auto& [key, objects] : store_) {
    for (const auto& [id, obj] : objects) {
      if (std::find(obj->owner_uids.begin(), obj->owner_uids.end(), owner_uid) !=
          obj->owner_uids.end()) {
        victims.push_back({key, id});
      }
    }
  }
  static const Json kBackground = {{"propagationPolicy", "Background"}};
  for (const auto& [key, id] : victims) {
    const ResourceInfo* info = FindByKeyLocked(key);
    if (info == nullptr) continue;
    ResourceInfo copy = *info;
    (void)DeleteLocked(copy, id.first, id.second, kBackground, false);
  }
}

// ---- Direct access ----

absl::StatusOr<Json> FakeApiServer::Impl::Seed(const std::string& key, const Json& obj) {
  absl::MutexLock lock(&mu_);
  const ResourceInfo* info = FindByKeyLocked(key);
  if (info == nullptr) return absl::NotFoundError(absl::StrCat("unknown resource ", key));
  ResourceInfo copy = *info;
  std::string ns = copy.r.namespaced ? MetaString(obj, "namespace") : "";
  if (copy.r.namespaced && ns.empty()) ns = "default";
  std::string version = copy.r.version;
  if (auto it = obj.find("apiVersion"); it != obj.end() && it->is_string()) {
    std::string av = it->get<std::string>();
    size_t slash = av.find('/');
    if (slash != std::string::npos) version = av.substr(slash + 1);
  }
  auto stored = CreateLocked(copy, version, ns, obj, /*keep_status=*/true);
  if (!stored.ok()) return stored.status();
  return (*stored)->Parse();
}

absl::StatusOr<Json> FakeApiServer::Impl::Get(const std::string& key, const std::string& ns,
                                              const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto s = store_.find(key);
  if (s == store_.end()) return absl::NotFoundError(absl::StrCat(key, " \"", name, "\" not found"));
  auto it = s->second.find({ns, name});
  if (it == s->second.end()) {
    return absl::NotFoundError(absl::StrCat(key, " \"", name, "\" not found"));
  }
  return it->second->Parse();
}

absl::StatusOr<Json> FakeApiServer::Impl::Put(const std::string& key, const Json& obj) {
  absl::MutexLock lock(&mu_);
  const ResourceInfo* info = FindByKeyLocked(key);
  if (info == nullptr) return absl::NotFoundError(absl::StrCat("unknown resource ", key));
  ResourceInfo copy = *info;
  std::string ns = copy.r.namespaced ? MetaString(obj, "namespace") : "";
  if (copy.r.namespaced && ns.empty()) ns = "default";
  auto stored = UpdateLocked(copy, ns, MetaString(obj, "name"), obj, UpdateMode::kRaw);
  if (!stored.ok()) return stored.status();
  return (*stored)->Parse();
}

absl::Status FakeApiServer::Impl::Remove(const std::string& key, const std::string& ns,
                                         const std::string& name) {
  absl::MutexLock lock(&mu_);
  const ResourceInfo* info = FindByKeyLocked(key);
  if (info == nullptr) return absl::NotFoundError(absl::StrCat("unknown resource ", key));
  ResourceInfo copy = *info;
  return DeleteLocked(copy, ns, name, Json::object(), /*force=*/true).status();
}

std::vector<Json> FakeApiServer::Impl::List(const std::string& key, const std::string& ns) const {
  std::vector<ObjPtr> ptrs;
  {
    absl::MutexLock lock(&mu_);
    auto s = store_.find(key);
    if (s == store_.end()) return {};
    for (const auto& [id, obj] : s->second) {
      if (ns.empty() || id.first == ns) ptrs.push_back(obj);
    }
  }
  std::vector<Json> out;
  out.reserve(ptrs.size());
  for (const ObjPtr& p : ptrs) out.push_back(p->Parse());
  return out;
}

// ---- HTTP ----

absl::Status FakeApiServer::Impl::Start() {
  if (server_ != nullptr) return absl::FailedPreconditionError("already started");
  if (!opts_.cert_file.empty() && !opts_.key_file.empty()) {
    auto ssl =
        std::make_unique<httplib::SSLServer>(opts_.cert_file.c_str(), opts_.key_file.c_str());
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError("cannot load the TLS certificate/key");
    }
    server_ = std::move(ssl);
    tls_ = true;
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  server_->new_task_queue = [this] {
    auto* queue = new ThreadPerTaskQueue();
    queue_.store(queue);
    return queue;
  };
  server_->set_keep_alive_timeout(2);
  server_->set_tcp_nodelay(true);
  auto handler = [this](const httplib::Request& req, httplib::Response& res) { Handle(req, res); };
  server_->Get(".*", handler);
  server_->Post(".*", handler);
  server_->Put(".*", handler);
  server_->Patch(".*", handler);
  server_->Delete(".*", handler);
  int port = opts_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(opts_.host);
    if (port < 0) return absl::UnavailableError(absl::StrCat("cannot bind ", opts_.host));
  } else if (!server_->bind_to_port(opts_.host, port)) {
    return absl::UnavailableError(absl::StrCat("cannot bind ", opts_.host, ":", port));
  }
  port_.store(port);
  {
    absl::MutexLock lock(&listen_mu_);
    listen_done_ = false;
  }
  listen_thread_ = std::thread([this] {
    server_->listen_after_bind();
    absl::MutexLock lock(&listen_mu_);
    listen_done_ = true;
  });
  WarmUp();
  return absl::OkStatus();
}

// httplib's shared library initialises function-local statics (the request-line regex among
// them) on its first request. Later requests skip the initialisation by checking a guard inline
// in that library, which ThreadSanitizer cannot see (the library is not instrumented), so under
// TSan two workers reading what the first one built were reported as a race. One request served
// and its worker joined before any test request gives the edge TSan needs: the join, then the
// queue's mutex, then the creation of every later worker. Best effort: a failure here is not an
// error (the tests' own requests report it).
void FakeApiServer::Impl::WarmUp() {
  httplib::Client client(base_url());
  client.enable_server_certificate_verification(false);
  client.set_keep_alive(false);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  if (!client.Get(kWarmUpPath)) return;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  ThreadPerTaskQueue* queue = nullptr;
  while ((queue = queue_.load()) == nullptr && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  if (queue != nullptr) queue->JoinWhenIdle(deadline - absl::Now());
}

void FakeApiServer::Impl::Stop() {
  if (server_ == nullptr) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // httplib's stop() is a no-op until the listen thread has marked itself running, so repeat it
  // until that thread has returned.
  {
    absl::MutexLock lock(&listen_mu_);
    while (!listen_done_) {
      server_->stop();
      listen_mu_.AwaitWithTimeout(absl::Condition(&listen_done_), absl::Milliseconds(20));
    }
  }
  if (listen_thread_.joinable()) listen_thread_.join();
  server_.reset();
}

ParsedPath FakeApiServer::Impl::ParsePath(const std::string& path) {
  ParsedPath p;
  std::vector<std::string> seg = absl::StrSplit(path, '/', absl::SkipEmpty());
  size_t i = 0;
  if (seg.empty()) return p;
  if (seg[0] == "api") {
    if (seg.size() == 1) {
      p.kind = ParsedPath::Kind::kDiscoveryApi;
      return p;
    }
    p.version = seg[1];
    i = 2;
  } else if (seg[0] == "apis") {
    if (seg.size() == 1) {
      p.kind = ParsedPath::Kind::kDiscoveryApis;
      return p;
    }
    p.group = seg[1];
    if (seg.size() == 2) {
      p.kind = ParsedPath::Kind::kGroup;
      return p;
    }
    p.version = seg[2];
    i = 3;
  } else {
    return p;
  }
  if (i == seg.size()) {
    p.kind = ParsedPath::Kind::kGroupVersion;
    return p;
  }
  if (seg[i] == "watch") {
    p.legacy_watch = true;
    ++i;
  }
  std::vector<std::string> rest(seg.begin() + i, seg.end());
  if (rest.size() >= 3 && rest[0] == "namespaces" && rest[2] != "status" && rest[2] != "finalize") {
    p.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  if (rest.empty() || rest.size() > 3) return p;
  p.kind = ParsedPath::Kind::kResource;
  p.resource = rest[0];
  if (rest.size() >= 2) p.name = rest[1];
  if (rest.size() == 3) p.subresource = rest[2];
  return p;
}

std::string FakeApiServer::Impl::BodyFor(const StoredObject& o, const std::string& api_version) {
  if (o.api_version == api_version) return o.body;
  Json j = o.Parse();
  j["apiVersion"] = api_version;
  return j.dump();
}

void FakeApiServer::Impl::SendError(httplib::Response& res, const absl::Status& s) {
  auto [code, reason] = HttpOf(s);
  res.status = code;
  res.set_content(StatusBody(code, reason, std::string(s.message())).dump(), "application/json");
}

void FakeApiServer::Impl::SendObject(httplib::Response& res, int code, const ObjPtr& obj,
                                     const std::string& api_version) {
  res.status = code;
  res.set_content(BodyFor(*obj, api_version), "application/json");
}

void FakeApiServer::Impl::Handle(const httplib::Request& req, httplib::Response& res) {
  if (req.path == kWarmUpPath) {  // WarmUp(): not recorded, no injected failure, no latency
    res.set_content("{}", "application/json");
    return;
  }
  std::vector<std::string> q;
  for (const auto& [k, v] : req.params) q.push_back(absl::StrCat(k, "=", v));
  RecordedRequest rec{req.method, req.path, absl::StrJoin(q, "&"), 0};
  std::string path_with_query = rec.query.empty() ? rec.path : rec.path + "?" + rec.query;

  absl::Duration latency;
  std::optional<FakeFailure> failure;
  std::string token;
  {
    absl::MutexLock lock(&mu_);
    latency = latency_;
    for (const PathLatency& pl : path_latency_) {
      if ((pl.method.empty() || pl.method == req.method) &&
          absl::StrContains(path_with_query, pl.path_substring)) {
        latency = pl.latency;
        break;
      }
    }
    token = token_;
    for (auto it = failures_.begin(); it != failures_.end(); ++it) {
      if ((it->method.empty() || it->method == req.method) &&
          absl::StrContains(path_with_query, it->path_substring)) {
        failure = *it;
        if (--it->count <= 0) failures_.erase(it);
        break;
      }
    }
  }
  if (latency > absl::ZeroDuration()) clock_->SleepFor(latency);
  if (failure.has_value()) {
    res.status = failure->http_code;
    if (failure->retry_after_seconds.has_value()) {
      res.set_header("Retry-After", std::to_string(*failure->retry_after_seconds));
    }
    std::string reason = ReasonForCode(failure->http_code);
    res.set_content(failure->raw_body.has_value()
                        ? *failure->raw_body
                        : StatusBody(failure->http_code, reason, "injected failure").dump(),
                    "application/json");
  } else if (!token.empty() && req.get_header_value("Authorization") != "Bearer " + token) {
    res.status = 401;
    res.set_content(StatusBody(401, "Unauthorized", "Unauthorized").dump(), "application/json");
  } else {
    // Logged before it takes effect: a test that sees the effect (a watch event, a GET) also
    // sees the request in RequestCount. Its status is filled in once the reply is made.
    uint64_t seq;
    {
      absl::MutexLock lock(&log_mu_);
      seq = ++request_seq_;
      requests_.push_back(rec);
      request_seqs_.push_back(seq);
    }
    Dispatch(req, res);
    absl::MutexLock lock(&log_mu_);
    for (size_t i = request_seqs_.size(); i-- > 0;) {
      if (request_seqs_[i] == seq) {
        requests_[i].status = res.status;
        break;
      }
    }
    return;
  }
  rec.status = res.status;
  absl::MutexLock lock(&log_mu_);
  requests_.push_back(std::move(rec));
  request_seqs_.push_back(++request_seq_);
}

void FakeApiServer::Impl::ServeDiscovery(const ParsedPath& p, httplib::Response& res) {
  Json out;
  absl::MutexLock lock(&mu_);
  if (p.kind == ParsedPath::Kind::kDiscoveryApi) {
    out = {{"kind", "APIVersions"},
           {"versions", Json::array({"v1"})},
           {"serverAddressByClientCIDRs",
            Json::array({{{"clientCIDR", "0.0.0.0/0"},
                          {"serverAddress", absl::StrCat(opts_.host, ":", port_.load())}}})}};
  } else if (p.kind == ParsedPath::Kind::kDiscoveryApis || p.kind == ParsedPath::Kind::kGroup) {
    std::map<std::string, std::set<std::string>> groups;
    for (const auto& [k, info] : resources_) {
      if (!info.r.group.empty()) groups[info.r.group].insert(info.r.version);
    }
    auto group_json = [](const std::string& g, const std::set<std::string>& versions) {
      Json vs = Json::array();
      for (const std::string& v : versions) {
        vs.push_back({{"groupVersion", g + "/" + v}, {"version", v}});
      }
      return Json{{"name", g}, {"versions", vs}, {"preferredVersion", vs.back()}};
    };
    if (p.kind == ParsedPath::Kind::kGroup) {
      auto it = groups.find(p.group);
      if (it == groups.end()) {
        res.status = 404;
        res.set_content(StatusBody(404, "NotFound",
                                   "the server could not find the requested "
                                   "resource")
                            .dump(),
                        "application/json");
        return;
      }
      out = group_json(it->first, it->second);
      out["kind"] = "APIGroup";
      out["apiVersion"] = "v1";
    } else {
      out = {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", Json::array()}};
      for (const auto& [g, vs] : groups) out["groups"].push_back(group_json(g, vs));
    }
  } else {
    Json list = Json::array();
    for (const auto& [k, info] : resources_) {
      if (info.r.group != p.group || info.r.version != p.version) continue;
      Json verbs = {"create", "delete", "get", "list", "patch", "update", "watch"};
      list.push_back({{"name", info.r.resource},
                      {"singularName", ""},
                      {"namespaced", info.r.namespaced},
                      {"kind", info.r.kind},
                      {"verbs", verbs}});
      if (info.r.has_status_subresource) {
        list.push_back({{"name", info.r.resource + "/status"},
                        {"singularName", ""},
                        {"namespaced", info.r.namespaced},
                        {"kind", info.r.kind},
                        {"verbs", {"get", "patch", "update"}}});
      }
    }
    if (list.empty()) {
      res.status = 404;
      res.set_content(
          StatusBody(404, "NotFound", "the server could not find the requested resource").dump(),
          "application/json");
      return;
    }
    out = {{"kind", "APIResourceList"},
           {"apiVersion", "v1"},
           {"groupVersion", p.group.empty() ? p.version : p.group + "/" + p.version},
           {"resources", list}};
  }
  res.status = 200;
  res.set_content(out.dump(), "application/json");
}

void FakeApiServer::Impl::Dispatch(const httplib::Request& req, httplib::Response& res) {
  if (req.path == "/version") {
    res.set_content(R"({"major":"1","minor":"26","gitVersion":"v1.26.0-kruise-fake",)"
                    R"("platform":"linux/amd64"})",
                    "application/json");
    return;
  }
  if (req.path == "/healthz" || req.path == "/readyz" || req.path == "/livez") {
    res.set_content("ok", "text/plain");
    return;
  }
  ParsedPath p = ParsePath(req.path);
  auto not_found = [&](const std::string& msg) { SendError(res, ApiError(404, "NotFound", msg)); };
  switch (p.kind) {
    case ParsedPath::Kind::kOther:
      return not_found("the server could not find the requested resource");
    case ParsedPath::Kind::kResource:
      break;
    default:
      if (req.method != "GET") {
        return SendError(res, ApiError(405, "MethodNotAllowed", "method not allowed"));
      }
      return ServeDiscovery(p, res);
  }
  std::optional<ResourceInfo> found = Lookup(p.group, p.version, p.resource);
  if (!found.has_value()) {
    return not_found(
        absl::StrCat("the server could not find the requested resource (", p.resource, ")"));
  }
  const ResourceInfo& info = *found;
  const std::string api_version =
      info.r.group.empty() ? info.r.version : info.r.group + "/" + info.r.version;
  if (!info.r.namespaced && !p.ns.empty()) {
    return not_found("the server could not find the requested resource");
  }
  if (!p.subresource.empty() && (p.subresource != "status" || !info.r.has_status_subresource)) {
    return not_found(absl::StrCat("the server could not find the requested resource (", p.resource,
                                  "/", p.subresource, ")"));
  }
  const std::string ns = info.r.namespaced ? p.ns : "";
  const std::string& m = req.method;
  bool watch = p.legacy_watch || req.get_param_value("watch") == "1" ||
               req.get_param_value("watch") == "true";

  auto parse_body = [&](Json* out) -> bool {
    try {
      *out = Json::parse(req.body);
      return true;
    } catch (const std::exception& e) {
      SendError(res, ApiError(400, "BadRequest", absl::StrCat("malformed JSON body: ", e.what())));
      return false;
    }
  };
  auto respond = [&](const absl::StatusOr<ObjPtr>& r, int ok_code) {
    if (!r.ok()) return SendError(res, r.status());
    SendObject(res, ok_code, *r, api_version);
  };

  if (p.name.empty()) {
    if (m == "GET") {
      if (watch) return ServeWatch(info, p, req, res);
      return ServeList(info, p, req, res);
    }
    if (m == "POST") {
      if (info.r.namespaced && ns.empty()) {
        return not_found("the server could not find the requested resource");
      }
      Json body;
      if (!parse_body(&body)) return;
      absl::MutexLock lock(&mu_);
      return respond(CreateLocked(info, info.r.version, ns, std::move(body), false), 201);
    }
    return SendError(res, ApiError(405, "MethodNotAllowed",
                                   absl::StrCat(m, " is not supported on a collection")));
  }
  if (info.r.namespaced && ns.empty()) {
    return not_found("the server could not find the requested resource");
  }
  const UpdateMode mode = p.subresource == "status" ? UpdateMode::kStatus : UpdateMode::kMain;
  if (m == "GET") {
    if (watch) return ServeWatch(info, p, req, res);
    absl::MutexLock lock(&mu_);
    auto& objects = store_[info.key];
    auto it = objects.find({ns, p.name});
    if (it == objects.end()) {
      return SendError(res, ApiError(404, "NotFound",
                                     absl::StrCat(info.r.resource, " \"", p.name, "\" not found")));
    }
    return SendObject(res, 200, it->second, api_version);
  }
  if (m == "PUT") {
    Json body;
    if (!parse_body(&body)) return;
    absl::MutexLock lock(&mu_);
    return respond(UpdateLocked(info, ns, p.name, std::move(body), mode), 200);
  }
  if (m == "PATCH") {
    std::string ct = req.get_header_value("Content-Type");
    ct = std::string(absl::StripAsciiWhitespace(ct.substr(0, ct.find(';'))));
    if (ct != "application/merge-patch+json" && ct != "application/json-patch+json" &&
        ct != "application/strategic-merge-patch+json") {
      return SendError(res, ApiError(415, "UnsupportedMediaType",
                                     absl::StrCat("the body of the request was in an unknown "
                                                  "format - accepted media types include: "
                                                  "application/json-patch+json, "
                                                  "application/merge-patch+json, "
                                                  "application/strategic-merge-patch+json (got ",
                                                  ct, ")")));
    }
    Json patch;
    if (!parse_body(&patch)) return;
    absl::MutexLock lock(&mu_);
    auto& objects = store_[info.key];
    auto it = objects.find({ns, p.name});
    if (it == objects.end()) {
      return SendError(res, ApiError(404, "NotFound",
                                     absl::StrCat(info.r.resource, " \"", p.name, "\" not found")));
    }
    Json current = it->second->Parse();
    Json patched;
    if (ct == "application/json-patch+json") {
      if (!patch.is_array()) {
        return SendError(res, ApiError(400, "BadRequest", "a JSON patch must be an array"));
      }
      try {
        patched = current.patch(patch);
      } catch (const std::exception& e) {
        return SendError(res,
                         ApiError(422, "Invalid",
                                  absl::StrCat("the JSON patch could not be applied: ", e.what())));
      }
    } else {
      if (!patch.is_object()) {
        return SendError(res, ApiError(400, "BadRequest", "a merge patch must be an object"));
      }
      patched = current;
      patched.merge_patch(patch);
    }
    if (!patched.is_object()) {
      return SendError(res, ApiError(422, "Invalid", "the patched object is not an object"));
    }
    return respond(UpdateLocked(info, ns, p.name, std::move(patched), mode), 200);
  }
  if (m == "DELETE") {
    if (!p.subresource.empty()) {
      return SendError(res, ApiError(405, "MethodNotAllowed", "cannot delete a subresource"));
    }
    Json options = Json::object();
    if (!req.body.empty() && !parse_body(&options)) return;
    if (req.has_param("propagationPolicy")) {
      options["propagationPolicy"] = req.get_param_value("propagationPolicy");
    }
    absl::MutexLock lock(&mu_);
    return respond(DeleteLocked(info, ns, p.name, options, false), 200);
  }
  SendError(res, ApiError(405, "MethodNotAllowed", absl::StrCat(m, " is not supported")));
}

namespace {

std::string EncodeContinue(int64_t rv, const std::string& ns, const std::string& name) {
  Json token = {{"v", "meta.k8s.io/v1"}, {"rv", rv}, {"ns", ns}, {"name", name}};
  return absl::WebSafeBase64Escape(token.dump());
}

bool DecodeContinue(const std::string& text, int64_t* rv, std::string* ns, std::string* name) {
  std::string raw;
  if (!absl::WebSafeBase64Unescape(text, &raw)) return false;
  try {
    Json token = Json::parse(raw);
    *rv = token.at("rv").get<int64_t>();
    *ns = token.at("ns").get<std::string>();
    *name = token.at("name").get<std::string>();
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

absl::StatusOr<Filter> FilterFrom(const httplib::Request& req, const std::string& ns) {
  Filter f;
  f.ns = ns;
  auto labels = LabelSelector::Parse(req.get_param_value("labelSelector"));
  if (!labels.ok()) {
    return ApiError(400, "BadRequest",
                    absl::StrCat("unable to parse requirement: ", labels.status().message()));
  }
  f.labels = *std::move(labels);
  auto fields = FieldSelector::Parse(req.get_param_value("fieldSelector"));
  if (!fields.ok()) {
    return ApiError(400, "BadRequest",
                    absl::StrCat("invalid field selector: ", fields.status().message()));
  }
  f.fields = *std::move(fields);
  return f;
}

}  // namespace

void FakeApiServer::Impl::ServeList(const ResourceInfo& info, const ParsedPath& p,
                                    const httplib::Request& req, httplib::Response& res) {
  const std::string api_version =
      info.r.group.empty() ? info.r.version : info.r.group + "/" + info.r.version;
  auto filter = FilterFrom(req, info.r.namespaced ? p.ns : "");
  if (!filter.ok()) return SendError(res, filter.status());
  int64_t limit = 0;
  if (req.has_param("limit") &&
      (!absl::SimpleAtoi(req.get_param_value("limit"), &limit) || limit < 0)) {
    return SendError(res, ApiError(400, "BadRequest", "invalid limit"));
  }
  const std::string cont = req.get_param_value("continue");
  const std::string rv_param = req.get_param_value("resourceVersion");
  const std::string rv_match = req.get_param_value("resourceVersionMatch");
  const bool selectors = !filter->labels.empty() || !filter->fields.empty();

  std::vector<ObjPtr> candidates;  // in key order, after the continue key, in the namespace
  int64_t list_rv;
  {
    absl::MutexLock lock(&mu_);
    list_rv = rv_;
    std::pair<std::string, std::string> start;
    bool has_start = false;
    if (!cont.empty()) {
      int64_t token_rv;
      if (!DecodeContinue(cont, &token_rv, &start.first, &start.second)) {
        return SendError(res, ApiError(400, "BadRequest", "invalid continue token"));
      }
      if (token_rv < compacted_) {
        return SendError(
            res, ApiError(410, "Expired",
                          "The provided continue parameter is too old to display a consistent "
                          "list result. Start a new list without the continue parameter."));
      }
      list_rv = token_rv;
      has_start = true;
    } else if (rv_match == "Exact" && !rv_param.empty()) {
      int64_t want = 0;
      if (absl::SimpleAtoi(rv_param, &want) && want < compacted_) {
        return SendError(
            res, ApiError(410, "Expired",
                          absl::StrCat("too old resource version: ", want, " (", compacted_, ")")));
      }
    }
    auto& objects = store_[info.key];
    auto it = objects.begin();
    if (has_start) {
      it = objects.upper_bound(start);
    } else if (!filter->ns.empty()) {
      it = objects.lower_bound({filter->ns, ""});
    }
    for (; it != objects.end(); ++it) {
      if (!filter->ns.empty() && it->first.first != filter->ns) {
        if (it->first.first > filter->ns) break;
        continue;
      }
      candidates.push_back(it->second);
    }
  }
  // Select the page, then stream it: the bodies are written straight from the stored snapshots,
  // so a 150 MB list costs no big allocation or copy.
  struct Piece {
    ObjPtr obj;
    std::string rewritten;  // when served under another version than stored
  };
  auto pieces = std::make_shared<std::vector<Piece>>();
  size_t i = 0;
  for (; i < candidates.size(); ++i) {
    const ObjPtr& o = candidates[i];
    if (!filter->Matches(*o)) continue;
    if (limit > 0 && static_cast<int64_t>(pieces->size()) == limit) break;
    pieces->push_back({o, o->api_version == api_version ? "" : BodyFor(*o, api_version)});
  }
  Json meta = {{"resourceVersion", std::to_string(list_rv)}};
  if (i < candidates.size() && !pieces->empty()) {
    // More objects remain; with selectors, look whether any of them matches.
    bool more = !selectors;
    for (size_t j = i; j < candidates.size() && !more; ++j) more = filter->Matches(*candidates[j]);
    if (more) {
      const StoredObject& last = *pieces->back().obj;
      meta["continue"] = EncodeContinue(list_rv, last.ns, last.name);
      if (!selectors) meta["remainingItemCount"] = static_cast<int64_t>(candidates.size() - i);
    }
  }
  auto head = std::make_shared<std::string>(
      absl::StrCat(R"({"kind":")", info.r.kind, R"(List","apiVersion":")", api_version,
                   R"(","metadata":)", meta.dump(), R"(,"items":[)"));
  static constexpr char kTail[] = "]}";
  size_t length = head->size() + 2;
  for (const Piece& p : *pieces) {
    length += (p.rewritten.empty() ? p.obj->body.size() : p.rewritten.size()) + 1;
  }
  if (!pieces->empty()) --length;  // n-1 commas
  res.status = 200;
  struct Cursor {
    bool head_done = false;
    size_t next = 0;
  };
  auto cursor = std::make_shared<Cursor>();
  res.set_content_provider(length, "application/json",
                           [head, pieces, cursor](size_t, size_t, httplib::DataSink& sink) {
                             std::string buf;
                             buf.reserve(512 * 1024);
                             if (!cursor->head_done) {
                               buf += *head;
                               cursor->head_done = true;
                             }
                             while (cursor->next < pieces->size() && buf.size() < 256 * 1024) {
                               const Piece& p = (*pieces)[cursor->next];
                               if (cursor->next > 0) buf.push_back(',');
                               buf += p.rewritten.empty() ? p.obj->body : p.rewritten;
                               ++cursor->next;
                             }
                             if (cursor->next == pieces->size()) buf += kTail;
                             return sink.write(buf.data(), buf.size());
                           });
}

void FakeApiServer::Impl::ServeWatch(const ResourceInfo& info, const ParsedPath& p,
                                     const httplib::Request& req, httplib::Response& res) {
  auto filter = FilterFrom(req, info.r.namespaced ? p.ns : "");
  if (!filter.ok()) return SendError(res, filter.status());
  if (!p.name.empty()) {
    // Watching one object: the real server turns this into a metadata.name field selector.
    std::string fs = req.get_param_value("fieldSelector");
    auto merged = FieldSelector::Parse(fs.empty() ? absl::StrCat("metadata.name=", p.name)
                                                  : absl::StrCat(fs, ",metadata.name=", p.name));
    if (!merged.ok()) return SendError(res, ApiError(400, "BadRequest", "invalid selector"));
    filter->fields = *std::move(merged);
  }
  int64_t timeout_seconds = 0;
  if (req.has_param("timeoutSeconds") &&
      !absl::SimpleAtoi(req.get_param_value("timeoutSeconds"), &timeout_seconds)) {
    return SendError(res, ApiError(400, "BadRequest", "invalid timeoutSeconds"));
  }
  std::string abw = req.get_param_value("allowWatchBookmarks");
  bool bookmarks = abw == "true" || abw == "1";
  std::string rv_param = req.get_param_value("resourceVersion");
  int64_t parsed_rv = 0;
  if (!rv_param.empty() && !absl::SimpleAtoi(rv_param, &parsed_rv)) {
    return SendError(res, ApiError(400, "BadRequest", "invalid resourceVersion"));
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-cache, private");
  watches_started_.fetch_add(1);
  const std::string version = info.r.version;
  Filter f = *std::move(filter);
  res.set_chunked_content_provider(
      "application/json", [this, info, version, f, rv_param, bookmarks, timeout_seconds](
                              size_t, httplib::DataSink& sink) {
        return RunWatch(info, version, f, rv_param, bookmarks, timeout_seconds, sink);
      });
}

bool FakeApiServer::Impl::RunWatch(const ResourceInfo& info, const std::string& version,
                                   const Filter& filter, const std::string& rv_param,
                                   bool bookmarks, int64_t timeout_seconds,
                                   httplib::DataSink& sink) {
  const std::string api_version = info.r.group.empty() ? version : info.r.group + "/" + version;
  auto event_line = [&](const char* type, const StoredObject& o) {
    std::string line = absl::StrCat(R"({"type":")", type, R"(","object":)");
    line += o.api_version == api_version ? o.body : BodyFor(o, api_version);
    line += "}\n";
    return line;
  };
  auto error_line = [&](int64_t want, int64_t compacted) {
    Json ev = {{"type", "ERROR"},
               {"object", StatusBody(410, "Expired",
                                     absl::StrCat("too old resource version: ", want, " (",
                                                  compacted, ")"))}};
    return ev.dump() + "\n";
  };
  auto finish = [&](bool clean) {
    if (clean) sink.done();
    return clean;
  };

  Watcher self;
  std::vector<ObjPtr> initial;
  std::string start_error;
  int64_t seen_now_gen;
  int64_t seen_config_gen;
  {
    absl::MutexLock lock(&mu_);
    seen_now_gen = bookmark_now_gen_;
    seen_config_gen = bookmark_config_gen_;
    if (stopping_) return finish(true);
    if (rv_param.empty() || rv_param == "0") {
      for (const auto& [id, obj] : store_[info.key]) {
        if (filter.Matches(*obj)) initial.push_back(obj);
      }
      self.cursor = rv_;
    } else {
      int64_t want = 0;
      (void)absl::SimpleAtoi(rv_param, &want);
      bool evicted = want < rv_ && (log_.empty() || log_.front().rv > want + 1);
      if (want < compacted_ || evicted) {
        start_error = error_line(want, compacted_);
      } else {
        self.cursor = want;
      }
    }
    if (start_error.empty()) watchers_.insert(&self);
  }
  if (!start_error.empty()) return finish(sink.write(start_error.data(), start_error.size()));
  auto unregister = [&] {
    absl::MutexLock lock(&mu_);
    watchers_.erase(&self);
  };
  for (const ObjPtr& o : initial) {
    std::string line = event_line("ADDED", *o);
    if (!sink.write(line.data(), line.size())) {
      unregister();
      return finish(false);
    }
  }
  initial.clear();

  const absl::Time start = clock_->Now();
  const absl::Time timeout_at =
      timeout_seconds > 0 ? start + absl::Seconds(timeout_seconds) : absl::InfiniteFuture();
  absl::Time last_bookmark = start;
  struct WaitArgs {
    Impl* impl;
    Watcher* self;
    int64_t now_gen;
    int64_t config_gen;
  };
  while (true) {
    std::vector<Event> batch;
    bool drop = false;
    bool truncate = false;
    bool stop = false;
    bool expired = false;
    bool bookmark_now = false;
    int64_t expired_compacted = 0;
    {
      absl::MutexLock lock(&mu_);
      absl::Time bookmark_due =
          bookmarks ? last_bookmark + bookmark_interval_ : absl::InfiniteFuture();
      WaitArgs args{this, &self, seen_now_gen, seen_config_gen};
      absl::Condition cond(
          +[](WaitArgs* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            Impl* s = a->impl;
            return s->stopping_ || a->self->drop || s->rv_ > a->self->cursor ||
                   s->bookmark_now_gen_ != a->now_gen || s->bookmark_config_gen_ != a->config_gen;
          },
          &args);
      clock_->AwaitWithDeadline(&mu_, cond, std::min(bookmark_due, timeout_at));
      stop = stopping_;
      drop = self.drop;
      truncate = self.truncate;
      if (bookmark_now_gen_ != seen_now_gen) {
        seen_now_gen = bookmark_now_gen_;
        bookmark_now = bookmarks;
      }
      seen_config_gen = bookmark_config_gen_;
      if (!stop && !drop && rv_ > self.cursor) {
        if (log_.empty() || log_.front().rv > self.cursor + 1) {
          expired = true;
          expired_compacted = compacted_;
        } else {
          size_t idx = static_cast<size_t>(self.cursor + 1 - log_.front().rv);
          size_t end = std::min(log_.size(), idx + 1024);
          for (size_t k = idx; k < end; ++k) {
            if (log_[k].key == info.key) batch.push_back(log_[k]);
          }
          self.cursor = log_[end - 1].rv;
        }
      }
      if (stop || drop || expired) watchers_.erase(&self);
    }
    if (stop) return finish(true);
    if (drop) {
      if (truncate) {
        static constexpr char kPartial[] = R"({"type":"MODIFIED","object":{"kind":"Po)";
        sink.write(kPartial, sizeof(kPartial) - 1);
      }
      return finish(false);
    }
    if (expired) {
      std::string line = error_line(self.cursor, expired_compacted);
      return finish(sink.write(line.data(), line.size()));
    }
    std::string out;
    for (const Event& e : batch) {
      if (filter.Matches(*e.obj)) out += event_line(EventTypeName(e.type), *e.obj);
    }
    const absl::Time now = clock_->Now();
    if (bookmarks) {
      absl::Duration interval;
      {
        absl::MutexLock lock(&mu_);
        interval = bookmark_interval_;
      }
      if (bookmark_now || now >= last_bookmark + interval) {
        Json bm = {{"type", "BOOKMARK"},
                   {"object",
                    {{"kind", info.r.kind},
                     {"apiVersion", api_version},
                     {"metadata", {{"resourceVersion", std::to_string(self.cursor)}}}}}};
        out += bm.dump();
        out += "\n";
        last_bookmark = now;
      }
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) {
      unregister();
      return finish(false);
    }
    if (now >= timeout_at) {
      unregister();
      return finish(true);
    }
  }
}

// ---- Public forwarding ----

FakeApiServer::FakeApiServer(FakeApiServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
FakeApiServer::~FakeApiServer() { Stop(); }
absl::Status FakeApiServer::Start() { return impl_->Start(); }
void FakeApiServer::Stop() { impl_->Stop(); }
int FakeApiServer::port() const { return impl_->port(); }
std::string FakeApiServer::base_url() const { return impl_->base_url(); }
void FakeApiServer::RegisterResource(const FakeResource& r) { impl_->RegisterResource(r); }
absl::StatusOr<Json> FakeApiServer::Seed(const std::string& resource, const Json& obj) {
  return impl_->Seed(resource, obj);
}
absl::StatusOr<Json> FakeApiServer::Get(const std::string& resource, const std::string& ns,
                                        const std::string& name) const {
  return impl_->Get(resource, ns, name);
}
absl::StatusOr<Json> FakeApiServer::Put(const std::string& resource, const Json& obj) {
  return impl_->Put(resource, obj);
}
absl::Status FakeApiServer::Remove(const std::string& resource, const std::string& ns,
                                   const std::string& name) {
  return impl_->Remove(resource, ns, name);
}
std::vector<Json> FakeApiServer::List(const std::string& resource, const std::string& ns) const {
  return impl_->List(resource, ns);
}
int64_t FakeApiServer::CurrentResourceVersion() const { return impl_->CurrentResourceVersion(); }
void FakeApiServer::Compact(int64_t rv) { impl_->Compact(rv); }
void FakeApiServer::CompactNow() { impl_->Compact(impl_->CurrentResourceVersion()); }
int64_t FakeApiServer::CompactedResourceVersion() const { return impl_->Compacted(); }
int FakeApiServer::DropWatches(bool truncate_mid_event) {
  return impl_->DropWatches(truncate_mid_event);
}
void FakeApiServer::SetLatency(absl::Duration d) { impl_->SetLatency(d); }
void FakeApiServer::SetPathLatency(const std::string& method, const std::string& path_substring,
                                   absl::Duration d) {
  impl_->SetPathLatency(method, path_substring, d);
}
void FakeApiServer::FailNext(const FakeFailure& failure) { impl_->FailNext(failure); }
void FakeApiServer::RequireToken(const std::string& token) { impl_->RequireToken(token); }
void FakeApiServer::SetBookmarkInterval(absl::Duration d) { impl_->SetBookmarkInterval(d); }
void FakeApiServer::EmitBookmarkNow() { impl_->EmitBookmarkNow(); }
std::vector<RecordedRequest> FakeApiServer::Requests() const { return impl_->Requests(); }
void FakeApiServer::ClearRequests() { impl_->ClearRequests(); }
int64_t FakeApiServer::RequestCount(const std::string& method,
                                    const std::string& path_substring) const {
  return impl_->RequestCount(method, path_substring);
}
int FakeApiServer::OpenWatches() const { return impl_->OpenWatches(); }
int64_t FakeApiServer::WatchesStarted() const { return impl_->WatchesStarted(); }

}  // namespace kruise::testing
