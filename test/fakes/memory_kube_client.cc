#include "test/fakes/memory_kube_client.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kube/errors.h"

namespace kruise::testing {
namespace {

using kube::Json;

absl::Status ApiError(absl::StatusCode code, const std::string& reason, const std::string& msg) {
  absl::Status st(code, absl::StrCat(reason, ": ", msg));
  st.SetPayload(kube::kReasonPayload, absl::Cord(reason));
  return st;
}

std::string StrField(const Json& obj, const char* a, const char* b) {
  if (!obj.is_object()) return "";
  auto x = obj.find(a);
  if (x == obj.end() || !x->is_object()) return "";
  auto y = x->find(b);
  if (y == x->end() || !y->is_string()) return "";
  return y->get<std::string>();
}

std::string KeyOf(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

// Equality selectors only: "k=v", "k==v", "k!=v", comma separated.
bool MatchesSelector(const std::string& selector,
                     const std::function<std::optional<std::string>(const std::string&)>& get) {
  if (selector.empty()) return true;
  for (absl::string_view term : absl::StrSplit(selector, ',', absl::SkipEmpty())) {
    bool negate = false;
    size_t pos = term.find("!=");
    size_t vlen = 2;
    if (pos != absl::string_view::npos) {
      negate = true;
    } else if ((pos = term.find("==")) == absl::string_view::npos) {
      pos = term.find('=');
      vlen = 1;
    }
    if (pos == absl::string_view::npos) {
      // Bare key: existence.
      if (!get(std::string(term))) return false;
      continue;
    }
    std::string key(term.substr(0, pos));
    std::string want(term.substr(pos + vlen));
    auto have = get(key);
    const bool eq = have && *have == want;
    if (eq == negate) return false;
  }
  return true;
}

bool Matches(const Json& obj, const kube::ListOptions& opts) {
  auto label = [&](const std::string& k) -> std::optional<std::string> {
    const Json* labels = nullptr;
    if (obj.contains("metadata") && obj["metadata"].contains("labels")) {
      labels = &obj["metadata"]["labels"];
    }
    if (!labels || !labels->is_object()) return std::nullopt;
    auto it = labels->find(k);
    if (it == labels->end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  auto field = [&](const std::string& path) -> std::optional<std::string> {
    const Json* cur = &obj;
    for (absl::string_view part : absl::StrSplit(path, '.')) {
      if (!cur->is_object()) return std::string();
      auto it = cur->find(std::string(part));
      if (it == cur->end()) return std::string();
      cur = &*it;
    }
    return cur->is_string() ? cur->get<std::string>() : std::string();
  };
  return MatchesSelector(opts.label_selector, label) && MatchesSelector(opts.field_selector, field);
}

int64_t ParseRv(const std::string& s) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(s, &v)) return -1;
  return v;
}

}  // namespace

MemoryKubeClient::MemoryKubeClient(Clock* clock) : clock_(clock) {}

MemoryKubeClient::~MemoryKubeClient() {
  CloseWatches();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](MemoryKubeClient* c) ABSL_NO_THREAD_SAFETY_ANALYSIS { return c->open_watches_ == 0; },
      this));
}

std::string MemoryKubeClient::ResourceKey(const kube::Resource& r) {
  return r.group + "/" + r.resource;
}

absl::Status MemoryKubeClient::TakeInjectedLocked(const std::string& verb) {
  ++calls_[verb];
  auto it = injected_.find(verb);
  if (it == injected_.end() || it->second.empty()) return absl::OkStatus();
  auto& [status, times] = it->second.front();
  absl::Status st = status;
  if (times > 0 && --times == 0) it->second.pop_front();
  return st;
}

void MemoryKubeClient::RecordLocked(const kube::Resource& r, kube::WatchEvent::Type type,
                                    const Json& obj) {
  log_.push_back(Event{rv_, ResourceKey(r), type, obj});
}

absl::StatusOr<Json> MemoryKubeClient::Get(const kube::Resource& r, const std::string& ns,
                                           const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = TakeInjectedLocked("get"); !st.ok()) return st;
  auto& objs = objects_[ResourceKey(r)];
  auto it = objs.find(KeyOf(r.namespaced ? ns : "", name));
  if (it == objs.end()) {
    return ApiError(absl::StatusCode::kNotFound, "NotFound",
                    absl::StrCat(r.resource, " \"", name, "\" not found"));
  }
  return it->second;
}

absl::StatusOr<kube::ListResult> MemoryKubeClient::List(const kube::Resource& r,
                                                        const std::string& ns,
                                                        const kube::ListOptions& opts) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = TakeInjectedLocked("list"); !st.ok()) return st;
  kube::ListResult result;
  std::string after;
  int64_t list_rv = rv_;
  if (!opts.continue_token.empty()) {
    // "<rv>|<last key>"
    size_t bar = opts.continue_token.find('|');
    if (bar == std::string::npos) {
      return ApiError(absl::StatusCode::kInvalidArgument, "BadRequest", "bad continue token");
    }
    list_rv = ParseRv(opts.continue_token.substr(0, bar));
    after = opts.continue_token.substr(bar + 1);
    if (list_rv < compacted_rv_) {
      return ApiError(absl::StatusCode::kOutOfRange, "Expired",
                      "The provided continue parameter is too old");
    }
  }
  const auto& objs = objects_[ResourceKey(r)];
  auto it = after.empty() ? objs.begin() : objs.upper_bound(after);
  for (; it != objs.end(); ++it) {
    const Json& obj = it->second;
    if (r.namespaced && !ns.empty() && StrField(obj, "metadata", "namespace") != ns) continue;
    if (!Matches(obj, opts)) continue;
    if (opts.limit > 0 && static_cast<int64_t>(result.items.size()) >= opts.limit) {
      result.continue_token = absl::StrCat(list_rv, "|", std::prev(it)->first);
      break;
    }
    result.items.push_back(obj);
  }
  // Pages after the first are served from the current state (a simplification: the real server
  // serves a consistent snapshot at list_rv).
  result.resource_version = std::to_string(list_rv);
  return result;
}

absl::StatusOr<Json> MemoryKubeClient::Create(const kube::Resource& r, const std::string& ns,
                                              const Json& obj) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = TakeInjectedLocked("create"); !st.ok()) return st;
  if (!obj.is_object()) {
    return ApiError(absl::StatusCode::kInvalidArgument, "BadRequest", "object expected");
  }
  Json stored = obj;
  Json& meta = stored["metadata"];
  if (!meta.is_object()) meta = Json::object();
  std::string name = StrField(stored, "metadata", "name");
  if (name.empty()) {
    std::string gen = StrField(stored, "metadata", "generateName");
    if (gen.empty()) {
      return ApiError(absl::StatusCode::kInvalidArgument, "Invalid",
                      "name or generateName required");
    }
    name = absl::StrCat(gen, "x", ++uid_seq_);
    meta["name"] = name;
  }
  const std::string effective_ns = r.namespaced ? ns : "";
  if (r.namespaced) {
    if (effective_ns.empty()) {
      return ApiError(absl::StatusCode::kInvalidArgument, "BadRequest", "namespace required");
    }
    meta["namespace"] = effective_ns;
  }
  auto& objs = objects_[ResourceKey(r)];
  const std::string key = KeyOf(effective_ns, name);
  if (objs.contains(key)) {
    return ApiError(absl::StatusCode::kAlreadyExists, "AlreadyExists",
                    absl::StrCat(r.resource, " \"", name, "\" already exists"));
  }
  ++rv_;
  meta["resourceVersion"] = std::to_string(rv_);
  meta["uid"] = absl::StrCat("uid-", ++uid_seq_);
  meta["generation"] = 1;
  meta["creationTimestamp"] =
      absl::FormatTime("%Y-%m-%d%ET%H:%M:%SZ", clock_->Now(), absl::UTCTimeZone());
  if (!stored.contains("apiVersion")) stored["apiVersion"] = r.ApiVersion();
  if (!stored.contains("kind")) stored["kind"] = r.kind;
  objs[key] = stored;
  RecordLocked(r, kube::WatchEvent::Type::kAdded, stored);
  return stored;
}

absl::StatusOr<Json> MemoryKubeClient::StoreUpdateLocked(const kube::Resource& r,
                                                         const std::string& key, Json obj,
                                                         const std::string& expected_rv) {
  auto& objs = objects_[ResourceKey(r)];
  auto it = objs.find(key);
  if (it == objs.end()) {
    return ApiError(absl::StatusCode::kNotFound, "NotFound", absl::StrCat(key, " not found"));
  }
  const std::string current_rv = StrField(it->second, "metadata", "resourceVersion");
  if (!expected_rv.empty() && expected_rv != current_rv) {
    return ApiError(absl::StatusCode::kAborted, "Conflict",
                    absl::StrCat("Operation cannot be fulfilled on ", r.resource, " \"", key,
                                 "\": the object has been modified"));
  }
  // Identity fields are the server's.
  for (const char* f : {"uid", "creationTimestamp", "name", "namespace"}) {
    if (it->second["metadata"].contains(f)) obj["metadata"][f] = it->second["metadata"][f];
  }
  ++rv_;
  obj["metadata"]["resourceVersion"] = std::to_string(rv_);
  it->second = obj;
  RecordLocked(r, kube::WatchEvent::Type::kModified, obj);
  return obj;
}

absl::StatusOr<Json> MemoryKubeClient::Update(const kube::Resource& r, const std::string& ns,
                                              const Json& obj, const std::string& subresource) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = TakeInjectedLocked("update"); !st.ok()) return st;
  const std::string key = KeyOf(r.namespaced ? ns : "", StrField(obj, "metadata", "name"));
  auto& objs = objects_[ResourceKey(r)];
  auto it = objs.find(key);
  if (it == objs.end()) {
    return ApiError(absl::StatusCode::kNotFound, "NotFound", absl::StrCat(key, " not found"));
  }
  Json next = obj;
  if (subresource == "status") {
    next = it->second;
    if (obj.contains("status")) next["status"] = obj["status"];
  }
  return StoreUpdateLocked(r, key, std::move(next), StrField(obj, "metadata", "resourceVersion"));
}

absl::StatusOr<Json> MemoryKubeClient::Patch(const kube::Resource& r, const std::string& ns,
                                             const std::string& name, kube::PatchType type,
                                             const Json& patch, const std::string& subresource) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = TakeInjectedLocked("patch"); !st.ok()) return st;
  const std::string key = KeyOf(r.namespaced ? ns : "", name);
  auto& objs = objects_[ResourceKey(r)];
  auto it = objs.find(key);
  if (it == objs.end()) {
    return ApiError(absl::StatusCode::kNotFound, "NotFound", absl::StrCat(key, " not found"));
  }
  Json next = it->second;
  std::string expected_rv;
  try {
    if (type == kube::PatchType::kJson) {
      next = next.patch(patch);
    } else {
      next.merge_patch(patch);
      expected_rv = StrField(patch, "metadata", "resourceVersion");
    }
  } catch (const Json::exception& e) {
    return ApiError(absl::StatusCode::kInvalidArgument, "BadRequest", e.what());
  }
  if (subresource == "status") {
    Json only = it->second;
    if (next.contains("status")) only["status"] = next["status"];
    next = std::move(only);
  }
  return StoreUpdateLocked(r, key, std::move(next), expected_rv);
}

absl::Status MemoryKubeClient::Delete(const kube::Resource& r, const std::string& ns,
                                      const std::string& name, const kube::DeleteOptions& opts) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = TakeInjectedLocked("delete"); !st.ok()) return st;
  auto& objs = objects_[ResourceKey(r)];
  auto it = objs.find(KeyOf(r.namespaced ? ns : "", name));
  if (it == objs.end()) {
    return ApiError(absl::StatusCode::kNotFound, "NotFound", absl::StrCat(name, " not found"));
  }
  if ((opts.precondition_uid &&
       *opts.precondition_uid != StrField(it->second, "metadata", "uid")) ||
      (opts.precondition_resource_version &&
       *opts.precondition_resource_version !=
           StrField(it->second, "metadata", "resourceVersion"))) {
    return ApiError(absl::StatusCode::kAborted, "Conflict", "precondition failed");
  }
  Json obj = it->second;
  objs.erase(it);
  ++rv_;
  obj["metadata"]["resourceVersion"] = std::to_string(rv_);
  RecordLocked(r, kube::WatchEvent::Type::kDeleted, obj);
  return absl::OkStatus();
}

absl::Status MemoryKubeClient::Watch(const kube::Resource& r, const std::string& ns,
                                     const kube::ListOptions& opts,
                                     const kube::WatchHandler& handler,
                                     kube::WatchCanceller* canceller) {
  const std::string rkey = ResourceKey(r);
  const std::string want_ns = r.namespaced ? ns : "";
  auto wanted = [&](const Json& obj) {
    if (!want_ns.empty() && StrField(obj, "metadata", "namespace") != want_ns) return false;
    return Matches(obj, opts);
  };
  std::vector<kube::WatchEvent> pending;
  int64_t from;
  size_t cursor = 0;  // index into log_ relative to log_base
  uint64_t gen;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status st = TakeInjectedLocked("watch"); !st.ok()) return st;
    if (opts.resource_version.empty() || opts.resource_version == "0") {
      for (const auto& [key, obj] : objects_[rkey]) {
        if (wanted(obj)) pending.push_back({kube::WatchEvent::Type::kAdded, obj});
      }
      from = rv_;
    } else {
      from = ParseRv(opts.resource_version);
      if (from < 0) {
        return ApiError(absl::StatusCode::kInvalidArgument, "BadRequest",
                        "invalid resourceVersion " + opts.resource_version);
      }
      if (from < compacted_rv_) {
        return ApiError(absl::StatusCode::kOutOfRange, "Expired",
                        absl::StrCat("too old resource version: ", from, " (", compacted_rv_, ")"));
      }
    }
    // Skip history up to `from` (bookmarks recorded before the watch started are skipped too).
    while (cursor < log_.size() && log_[cursor].rv <= from) ++cursor;
    ++open_watches_;
    gen = close_gen_;
  }
  absl::Status result = absl::OkStatus();
  bool stopped_by_handler = false;
  while (!stopped_by_handler) {
    for (auto& ev : pending) {
      if (!handler(std::move(ev))) {
        stopped_by_handler = true;
        break;
      }
    }
    pending.clear();
    if (stopped_by_handler) break;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return cursor < log_.size() || close_gen_ != gen;
      };
      // Poll the canceller: it has no way to wake us.
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(5));
      if (canceller && canceller->cancelled()) break;
      for (; cursor < log_.size(); ++cursor) {
        const Event& e = log_[cursor];
        if (e.type == kube::WatchEvent::Type::kBookmark) {
          if (opts.allow_watch_bookmarks) {
            pending.push_back(
                {e.type, Json{{"kind", r.kind},
                              {"apiVersion", r.ApiVersion()},
                              {"metadata", {{"resourceVersion", std::to_string(e.rv)}}}}});
          }
          continue;
        }
        if (e.resource_key != rkey || !wanted(e.object)) continue;
        pending.push_back({e.type, e.object});
      }
      if (pending.empty() && close_gen_ != gen) {
        result = break_status_;
        break;
      }
    }
  }
  absl::MutexLock lock(&mu_);
  --open_watches_;
  return result;
}

void MemoryKubeClient::Compact() {
  absl::MutexLock lock(&mu_);
  compacted_rv_ = rv_;
  // Keep log indices stable for open watches: entries are only appended; compaction is modelled
  // by compacted_rv_ alone (the memory cost is irrelevant in tests).
}

void MemoryKubeClient::CloseWatches() {
  absl::MutexLock lock(&mu_);
  break_status_ = absl::OkStatus();
  ++close_gen_;
}

void MemoryKubeClient::BreakWatches(absl::Status status) {
  absl::MutexLock lock(&mu_);
  break_status_ = std::move(status);
  ++close_gen_;
}

void MemoryKubeClient::SendBookmark() {
  absl::MutexLock lock(&mu_);
  log_.push_back(Event{rv_, "", kube::WatchEvent::Type::kBookmark, Json()});
}

void MemoryKubeClient::InjectError(const std::string& verb, absl::Status status, int times) {
  absl::MutexLock lock(&mu_);
  injected_[verb].emplace_back(std::move(status), times);
}

void MemoryKubeClient::ClearErrors() {
  absl::MutexLock lock(&mu_);
  injected_.clear();
}

int MemoryKubeClient::CallCount(const std::string& verb) const {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(verb);
  return it == calls_.end() ? 0 : it->second;
}

int MemoryKubeClient::OpenWatches() const {
  absl::MutexLock lock(&mu_);
  return open_watches_;
}

bool MemoryKubeClient::WaitForWatches(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto cond = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return open_watches_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
}

int64_t MemoryKubeClient::CurrentResourceVersion() const {
  absl::MutexLock lock(&mu_);
  return rv_;
}

std::vector<Json> MemoryKubeClient::Objects(const kube::Resource& r) const {
  absl::MutexLock lock(&mu_);
  std::vector<Json> out;
  auto it = objects_.find(ResourceKey(r));
  if (it == objects_.end()) return out;
  for (const auto& [k, v] : it->second) out.push_back(v);
  return out;
}

}  // namespace kruise::testing
