#include "daemon/crr/crr_executor.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "daemon/crr/crr_prestop.h"
#include "kube/object.h"

namespace kruise::daemon {

namespace v1 = ::runtime::v1;
using kube::Json;

namespace {

constexpr char kPodUidCriLabel[] = "io.kubernetes.pod.uid";
constexpr char kContainerNameCriLabel[] = "io.kubernetes.container.name";
constexpr char kRestartCountCriAnnotation[] = "io.kubernetes.container.restartCount";
constexpr char kSyncContainerStatusesAnnotation[] = "crr.apps.kruise.io/sync-container-statuses";

// Same text right after our kill and while the old container stays exited: no extra write.
constexpr char kWaitingForKubelet[] = "container stopped, waiting for kubelet to start a new one";

constexpr char kPending[] = "Pending";
constexpr char kRecreating[] = "Recreating";
constexpr char kSucceeded[] = "Succeeded";
constexpr char kFailed[] = "Failed";
constexpr const char* kCompleted = kCrrPhaseCompleted;

bool IsTerminal(const std::string& phase) { return phase == kSucceeded || phase == kFailed; }

// Reads an integer that may also arrive as a JSON string of digits.
std::optional<int64_t> AsInt(const Json* j) {
  if (j == nullptr) return std::nullopt;
  if (j->is_number_integer()) return j->get<int64_t>();
  if (j->is_number_unsigned()) return static_cast<int64_t>(j->get<uint64_t>());
  if (j->is_string()) {
    int64_t v = 0;
    if (absl::SimpleAtoi(j->get<std::string>(), &v)) return v;
  }
  return std::nullopt;
}

std::string StringField(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

const Json& ArrayAt(const Json& j, std::initializer_list<absl::string_view> path) {
  static const Json* const kEmpty = new Json(Json::array());
  const Json* p = kube::FindPath(j, path);
  return p != nullptr && p->is_array() ? *p : *kEmpty;
}

// Resolves a port (number, digit string or a named port of the container).
absl::StatusOr<int> ResolvePort(const Json* port, const Json& spec_container) {
  if (port == nullptr) return absl::InvalidArgumentError("preStop has no port");
  if (std::optional<int64_t> n = AsInt(port)) return static_cast<int>(*n);
  if (port->is_string()) {
    std::string name = port->get<std::string>();
    for (const Json& p : ArrayAt(spec_container, {"ports"})) {
      if (StringField(p, "name") == name) {
        if (std::optional<int64_t> n = AsInt(kube::FindPath(p, {"containerPort"}))) {
          return static_cast<int>(*n);
        }
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("port \"", name, "\" not found in ports"));
  }
  return absl::InvalidArgumentError("preStop port is neither a number nor a name");
}

std::optional<absl::Time> ConditionTime(const Json& status, const std::string& type) {
  for (const Json& c : ArrayAt(status, {"conditions"})) {
    if (StringField(c, "type") == type && StringField(c, "status") == "True") {
      absl::StatusOr<absl::Time> t = kube::ParseRfc3339(StringField(c, "lastTransitionTime"));
      if (t.ok()) return *t;
    }
  }
  return std::nullopt;
}

struct SnapshotEntry {
  std::string container_id;
  bool ready = false;
};

// The manager's copy of the pod's container statuses: status.containerStatusSnapshot, or the
// v1alpha1 annotation crr.apps.kruise.io/sync-container-statuses (JSON array).
std::map<std::string, SnapshotEntry> ReadSnapshot(const Json& crr) {
  Json entries = ArrayAt(crr, {"status", "containerStatusSnapshot"});
  if (entries.empty()) {
    if (std::optional<std::string> a = kube::Annotation(crr, kSyncContainerStatusesAnnotation)) {
      Json parsed = Json::parse(*a, nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_discarded() && parsed.is_array()) entries = std::move(parsed);
    }
  }
  std::map<std::string, SnapshotEntry> out;
  for (const Json& e : entries) {
    std::string name = StringField(e, "name");
    if (name.empty()) continue;
    SnapshotEntry s;
    s.container_id = CrrExecutor::StripContainerIdScheme(StringField(e, "containerID"));
    auto ready = e.find("ready");
    s.ready = ready != e.end() && ready->is_boolean() && ready->get<bool>();
    out[name] = s;
  }
  return out;
}

// Per spec container, what this step decided.
struct ContainerEval {
  std::string name;
  std::string phase;
  std::string message;
  bool is_killed = false;
  bool killable = false;  // Pending and may be killed now
  int runtime_index = -1;
};

Json StatesToJson(const std::vector<ContainerEval>& evals) {
  Json states = Json::array();
  for (const ContainerEval& e : evals) {
    Json s = {{"name", e.name}, {"phase", e.phase}};
    if (!e.message.empty()) s["message"] = e.message;
    if (e.is_killed) s["isKilled"] = true;
    states.push_back(std::move(s));
  }
  return states;
}

// Merge patch turning `old_status` into `new_status` (top-level keys only; arrays whole).
Json DiffStatus(const Json& old_status, const Json& new_status) {
  Json patch = Json::object();
  for (auto it = new_status.begin(); it != new_status.end(); ++it) {
    auto old = old_status.find(it.key());
    if (old == old_status.end() || *old != it.value()) patch[it.key()] = it.value();
  }
  for (auto it = old_status.begin(); it != old_status.end(); ++it) {
    if (!new_status.contains(it.key())) patch[it.key()] = nullptr;
  }
  return patch;
}

}  // namespace

struct CrrExecutor::RuntimeContainer {
  std::string id;
  std::string sandbox_id;
  std::string name;
  uint32_t attempt = 0;
  int64_t restart_count = 0;
  int64_t created_at = 0;
  v1::ContainerState state = v1::CONTAINER_UNKNOWN;
  int64_t started_at = 0;  // unix nanoseconds, 0 when never started
};

struct CrrExecutor::KillOutcome {
  absl::Status status;
};

CrrExecutor::CrrExecutor(cri::RuntimeService* runtime, Clock* clock, CrrExecutorOptions options)
    : runtime_(runtime), clock_(clock), options_(options) {}

std::string CrrExecutor::StripContainerIdScheme(const std::string& id) {
  size_t pos = id.find("://");
  return pos == std::string::npos ? id : id.substr(pos + 3);
}

absl::StatusOr<std::vector<CrrExecutor::RuntimeContainer>> CrrExecutor::ListPodContainers(
    const std::string& pod_uid) {
  v1::ContainerFilter filter;
  (*filter.mutable_label_selector())[kPodUidCriLabel] = pod_uid;
  absl::StatusOr<std::vector<v1::Container>> listed = runtime_->ListContainers(filter);
  if (!listed.ok()) return Annotate(listed.status(), "list containers of pod " + pod_uid);

  // Newest attempt per container name.
  std::map<std::string, const v1::Container*> newest;
  for (const v1::Container& c : *listed) {
    auto label = c.labels().find(kContainerNameCriLabel);
    std::string name = label != c.labels().end() ? label->second : c.metadata().name();
    const v1::Container*& slot = newest[name];
    if (slot == nullptr || std::make_pair(c.metadata().attempt(), c.created_at()) >
                               std::make_pair(slot->metadata().attempt(), slot->created_at())) {
      slot = &c;
    }
  }
  std::vector<RuntimeContainer> out;
  for (const auto& [name, c] : newest) {
    RuntimeContainer rc;
    rc.id = c->id();
    rc.sandbox_id = c->pod_sandbox_id();
    rc.name = name;
    rc.attempt = c->metadata().attempt();
    rc.restart_count = rc.attempt;
    auto ann = c->annotations().find(kRestartCountCriAnnotation);
    int64_t count = 0;
    if (ann != c->annotations().end() && absl::SimpleAtoi(ann->second, &count)) {
      rc.restart_count = count;
    }
    rc.created_at = c->created_at();
    absl::StatusOr<v1::ContainerStatusResponse> status = runtime_->ContainerStatus(rc.id, false);
    if (!status.ok()) return Annotate(status.status(), "status of container " + rc.id);
    rc.state = status->status().state();
    rc.started_at = status->status().started_at();
    out.push_back(std::move(rc));
  }
  return out;
}

std::string CrrExecutor::DefaultPreStopHost(const std::string& sandbox_id) {
  absl::StatusOr<v1::PodSandboxStatusResponse> sb = runtime_->PodSandboxStatus(sandbox_id, false);
  if (!sb.ok()) return "127.0.0.1";
  const v1::PodSandboxStatus& s = sb->status();
  if (s.linux().namespaces().options().network() == v1::NODE || s.network().ip().empty()) {
    return "127.0.0.1";
  }
  return s.network().ip();
}

CrrExecutor::KillOutcome CrrExecutor::Kill(const Json& crr, const Json& spec_container,
                                           const RuntimeContainer& target,
                                           std::vector<CrrEvent>* events) {
  int64_t grace = options_.default_grace_seconds;
  if (std::optional<int64_t> g =
          AsInt(kube::FindPath(crr, {"spec", "strategy", "terminationGracePeriodSeconds"}));
      g && *g >= 0) {
    grace = *g;
  }
  const std::string& name = target.name;
  events->push_back({"Normal", "Killing", absl::StrCat("Stopping container ", name)});
  absl::Duration hook_timeout = absl::Seconds(std::max(grace, options_.minimum_grace_seconds));
  absl::Time start = clock_->Now();

  absl::Status hook = absl::OkStatus();
  std::string hook_kind;
  const Json* pre_stop = kube::FindPath(spec_container, {"preStop"});
  if (pre_stop != nullptr && pre_stop->is_object()) {
    if (const Json* exec = kube::FindPath(*pre_stop, {"exec"})) {
      hook_kind = "exec";
      std::vector<std::string> cmd;
      for (const Json& arg : ArrayAt(*exec, {"command"})) {
        if (arg.is_string()) cmd.push_back(arg.get<std::string>());
      }
      if (cmd.empty()) {
        hook = absl::InvalidArgumentError("exec preStop has no command");
      } else {
        absl::StatusOr<v1::ExecSyncResponse> r = runtime_->ExecSync(target.id, cmd, hook_timeout);
        if (!r.ok()) {
          hook = r.status();
        } else if (r->exit_code() != 0) {
          hook = absl::UnknownError(absl::StrCat("command exited with ", r->exit_code(), ": ",
                                                 absl::StripAsciiWhitespace(r->stderr())));
        }
      }
    } else if (const Json* http = kube::FindPath(*pre_stop, {"httpGet"})) {
      hook_kind = "httpGet";
      absl::StatusOr<int> port = ResolvePort(kube::FindPath(*http, {"port"}), spec_container);
      if (!port.ok()) {
        hook = port.status();
      } else {
        HttpGetAction action;
        action.scheme = StringField(*http, "scheme");
        action.host = StringField(*http, "host");
        if (action.host.empty()) action.host = DefaultPreStopHost(target.sandbox_id);
        action.port = *port;
        action.path = StringField(*http, "path");
        for (const Json& h : ArrayAt(*http, {"httpHeaders"})) {
          action.headers.emplace_back(StringField(h, "name"), StringField(h, "value"));
        }
        absl::StatusOr<int> code = RunHttpGet(action, hook_timeout);
        if (!code.ok()) {
          hook = code.status();
        } else if (*code >= 400) {
          hook = absl::UnknownError(absl::StrCat("HTTP preStop returned status ", *code));
        }
      }
    } else if (const Json* tcp = kube::FindPath(*pre_stop, {"tcpSocket"})) {
      hook_kind = "tcpSocket";
      absl::StatusOr<int> port = ResolvePort(kube::FindPath(*tcp, {"port"}), spec_container);
      if (!port.ok()) {
        hook = port.status();
      } else {
        std::string host = StringField(*tcp, "host");
        if (host.empty()) host = DefaultPreStopHost(target.sandbox_id);
        hook = DialTcp(host, *port, hook_timeout);
      }
    }
  }
  if (!hook.ok()) {
    events->push_back(
        {"Warning", "FailedPreStopHook",
         absl::StrCat(hook_kind, " preStop of container ", name, " failed: ", hook.message())});
    Logger("crr")->warn("{}: {} preStop of {} failed: {}", kube::NamespacedName(crr), hook_kind,
                        name, hook);
  }

  // Kubelet's rule: what preStop used (whole seconds) comes off the grace period, and the stop
  // always gets at least the minimum (StopContainer(0) would SIGKILL at once).
  int64_t used = absl::ToInt64Seconds(clock_->Now() - start);
  int64_t remaining = std::max(grace - std::max<int64_t>(used, 0), options_.minimum_grace_seconds);
  KillOutcome out;
  out.status = runtime_->StopContainer(target.id, remaining);
  if (!out.status.ok()) {
    events->push_back(
        {"Warning", "FailedKillContainer",
         absl::StrCat("Failed to stop container ", name, ": ", out.status.message())});
  }
  return out;
}

absl::StatusOr<CrrStepResult> CrrExecutor::Reconcile(const Json& crr, absl::Time now) {
  CrrStepResult result;
  const Json* status_ptr = kube::FindPath(crr, {"status"});
  const Json old_status =
      status_ptr != nullptr && status_ptr->is_object() ? *status_ptr : Json::object();
  const std::string phase = StringField(old_status, "phase");
  if (phase == kCompleted) return result;

  Json status = old_status;
  std::optional<absl::Duration> requeue;
  auto requeue_in = [&](absl::Duration d) {
    d = std::max(d, absl::ZeroDuration());
    if (!requeue || d < *requeue) requeue = d;
  };
  auto finish = [&](const std::string& message) {
    status["phase"] = kCompleted;
    status["completionTime"] = kube::FormatRfc3339(now);
    status["message"] = message;
    requeue.reset();
  };
  auto build = [&]() {
    Json patch = DiffStatus(old_status, status);
    if (!patch.empty()) result.status_patch = {{"status", std::move(patch)}};
    result.requeue_after = requeue;
    return result;
  };

  // activeDeadlineSeconds counts from creation.
  std::optional<absl::Time> created = kube::CreationTimestamp(crr);
  std::optional<int64_t> active_deadline =
      AsInt(kube::FindPath(crr, {"spec", "activeDeadlineSeconds"}));
  if (created && active_deadline) {
    absl::Time deadline = *created + absl::Seconds(*active_deadline);
    if (now >= deadline) {
      finish(absl::StrCat("recreation did not finish within activeDeadlineSeconds (",
                          *active_deadline, "s)"));
      return build();
    }
    requeue_in(deadline - now);
  }

  std::optional<std::string> pod_uid = kube::Label(crr, kCrrPodUidLabel);
  if (!pod_uid || pod_uid->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kube::NamespacedName(crr), " has no ", kCrrPodUidLabel, " label"));
  }

  // Enter Recreating and record when (a status condition; see the header).
  status["phase"] = kRecreating;
  if (phase != kRecreating) status.erase("message");
  std::optional<absl::Time> recreating_since = ConditionTime(status, kCrrRecreatingCondition);
  if (!recreating_since) {
    Json conditions = ArrayAt(status, {"conditions"});
    Json kept = Json::array();
    for (const Json& c : conditions) {
      if (StringField(c, "type") != kCrrRecreatingCondition) kept.push_back(c);
    }
    kept.push_back({{"type", kCrrRecreatingCondition},
                    {"status", "True"},
                    {"reason", "RecreateStarted"},
                    {"message", "the node agent started recreating containers"},
                    {"lastTransitionTime", kube::FormatRfc3339Nano(now)}});
    status["conditions"] = std::move(kept);
    recreating_since = now;
  }

  const Json* strategy = kube::FindPath(crr, {"spec", "strategy"});
  const Json no_strategy = Json::object();
  const Json& strat = strategy != nullptr && strategy->is_object() ? *strategy : no_strategy;
  auto flag = [&](const char* key) {
    auto it = strat.find(key);
    return it != strat.end() && it->is_boolean() && it->get<bool>();
  };
  const bool ordered = flag("orderedRecreate");
  const bool force = flag("forceRecreate");
  const bool ignore_failures = StringField(strat, "failurePolicy") == "Ignore";
  const int64_t min_started =
      std::max<int64_t>(AsInt(kube::FindPath(strat, {"minStartedSeconds"})).value_or(0), 0);

  bool grace_over = true;
  if (std::optional<int64_t> unready = AsInt(kube::FindPath(strat, {"unreadyGracePeriodSeconds"}));
      unready && *unready > 0) {
    absl::Time grace_start =
        ConditionTime(status, kPreRecreateGraceCondition).value_or(*recreating_since);
    absl::Time grace_end = grace_start + absl::Seconds(*unready);
    if (now < grace_end) {
      grace_over = false;
      requeue_in(grace_end - now);
    }
  }

  ASSIGN_OR_RETURN(std::vector<RuntimeContainer> runtime, ListPodContainers(*pod_uid));
  std::map<std::string, SnapshotEntry> snapshot = ReadSnapshot(crr);
  std::map<std::string, Json> previous;
  for (const Json& s : ArrayAt(old_status, {"containerRecreateStates"})) {
    previous[StringField(s, "name")] = s;
  }

  const Json& spec_containers = ArrayAt(crr, {"spec", "containers"});
  std::vector<ContainerEval> evals;
  for (const Json& sc : spec_containers) {
    ContainerEval e;
    e.name = StringField(sc, "name");
    auto prev = previous.find(e.name);
    if (prev != previous.end()) {
      e.phase = StringField(prev->second, "phase");
      e.message = StringField(prev->second, "message");
      auto killed = prev->second.find("isKilled");
      e.is_killed = killed != prev->second.end() && killed->is_boolean() && killed->get<bool>();
    }
    if (IsTerminal(e.phase)) {
      evals.push_back(std::move(e));
      continue;
    }
    e.message.clear();
    for (size_t i = 0; i < runtime.size(); ++i) {
      if (runtime[i].name == e.name) e.runtime_index = static_cast<int>(i);
    }
    if (e.runtime_index < 0) {
      e.phase = kPending;
      e.message = kCrrNotFoundMessage;
      requeue_in(options_.poll_interval);
      evals.push_back(std::move(e));
      continue;
    }
    const RuntimeContainer& rc = runtime[e.runtime_index];
    std::string old_id =
        StripContainerIdScheme(kube::GetString(sc, {"statusContext", "containerID"}).value_or(""));
    int64_t old_restarts = AsInt(kube::FindPath(sc, {"statusContext", "restartCount"})).value_or(0);
    bool recreated = (!old_id.empty() && rc.id != old_id) || rc.restart_count > old_restarts;
    if (recreated) {
      e.phase = kRecreating;
      if (rc.state != v1::CONTAINER_RUNNING || rc.started_at <= 0) {
        e.message = "waiting for the new container to start";
        requeue_in(options_.poll_interval);
      } else {
        absl::Duration age = now - absl::FromUnixNanos(rc.started_at);
        absl::Duration needed = absl::Seconds(min_started);
        auto snap = snapshot.find(e.name);
        bool ready =
            snap == snapshot.end() || (snap->second.container_id == rc.id && snap->second.ready);
        if (age < needed) {
          e.message = absl::StrCat("waiting for the new container to run ", min_started, "s");
          requeue_in(needed - age);
        } else if (!ready) {
          e.message = "waiting for the new container to be ready";
          requeue_in(options_.poll_interval);
        } else {
          e.phase = kSucceeded;
        }
      }
    } else if (rc.state == v1::CONTAINER_EXITED || rc.state == v1::CONTAINER_UNKNOWN) {
      e.phase = kRecreating;
      e.message = kWaitingForKubelet;
      requeue_in(options_.poll_interval);
    } else if (rc.state == v1::CONTAINER_CREATED && !force) {
      e.phase = kPending;
      e.message = "container has not started yet";
      requeue_in(options_.poll_interval);
    } else {
      e.phase = kPending;
      e.killable = true;
      if (!grace_over) e.message = "waiting for unreadyGracePeriodSeconds to pass";
    }
    evals.push_back(std::move(e));
  }

  std::string fail_fast;
  if (grace_over) {
    for (size_t i = 0; i < evals.size(); ++i) {
      ContainerEval& e = evals[i];
      if (e.killable) {
        KillOutcome k = Kill(crr, spec_containers[i], runtime[e.runtime_index], &result.events);
        e.killable = false;
        if (k.status.ok()) {
          e.phase = kRecreating;
          e.is_killed = true;
          e.message = kWaitingForKubelet;
          requeue_in(options_.poll_interval);
        } else {
          e.phase = kFailed;
          e.message = absl::StrCat("kill container error: ", k.status.message());
          if (!ignore_failures) {
            fail_fast =
                absl::StrCat("failed to recreate container ", e.name, ": ", k.status.message());
            break;
          }
        }
      }
      if (ordered && !IsTerminal(e.phase)) break;
    }
  }
  status["containerRecreateStates"] = StatesToJson(evals);

  if (!fail_fast.empty()) {
    finish(fail_fast);
  } else if (std::all_of(evals.begin(), evals.end(),
                         [](const ContainerEval& e) { return IsTerminal(e.phase); })) {
    std::vector<std::string> failed;
    for (const ContainerEval& e : evals) {
      if (e.phase == kFailed) failed.push_back(e.name);
    }
    finish(failed.empty()
               ? absl::StrCat("recreated all ", evals.size(), " containers")
               : absl::StrCat("finished; failed containers: ", absl::StrJoin(failed, ", ")));
  }
  return build();
}

}  // namespace kruise::daemon
