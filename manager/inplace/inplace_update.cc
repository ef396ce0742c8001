#include "manager/inplace/inplace_update.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "kube/object.h"

namespace kruise::manager::inplace {
namespace {

using Json = nlohmann::json;

// j[key], or null when j is not an object or has no such member.
const Json& Member(const Json& j, const char* key) {
  static const Json kNull;
  const Json* found = kube::FindPath(j, {key});
  return found != nullptr ? *found : kNull;
}

// The merge patch turning map `from` into map `to` (labels or annotations): changed and new keys
// with their values, removed keys as null.
Json MapPatch(const Json& from, const Json& to) {
  Json patch = Json::object();
  if (to.is_object()) {
    for (const auto& [k, v] : to.items()) {
      if (!from.is_object() || !from.contains(k) || from[k] != v) patch[k] = v;
    }
  }
  if (from.is_object()) {
    for (const auto& [k, v] : from.items()) {
      if (!to.is_object() || !to.contains(k)) patch[k] = nullptr;
    }
  }
  return patch;
}

// The first path where `a` and `b` differ, for a readable reason ("spec.containers[0].env").
std::string FirstDifference(const Json& a, const Json& b, const std::string& path) {
  if (a.type() != b.type()) return path;
  if (a.is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : a.items()) keys.insert(k);
    for (const auto& [k, v] : b.items()) keys.insert(k);
    for (const std::string& k : keys) {
      const Json& x = Member(a, k.c_str());
      const Json& y = Member(b, k.c_str());
      if (x != y) return FirstDifference(x, y, path.empty() ? k : absl::StrCat(path, ".", k));
    }
    return path;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return path;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i]) return FirstDifference(a[i], b[i], absl::StrCat(path, "[", i, "]"));
    }
  }
  return path;
}

// The template without what may change in place: the pod's labels and annotations and the
// regular containers' images.
Json WithoutInPlaceFields(const Json& tmpl) {
  Json out = tmpl.is_object() ? tmpl : Json::object();
  // Absent metadata and metadata with only labels/annotations compare equal once stripped.
  if (!out.contains("metadata") || out["metadata"].is_null()) out["metadata"] = Json::object();
  if (out["metadata"].is_object()) {
    out["metadata"].erase("labels");
    out["metadata"].erase("annotations");
  }
  if (out.contains("spec") && out["spec"].is_object() && out["spec"].contains("containers") &&
      out["spec"]["containers"].is_array()) {
    for (Json& c : out["spec"]["containers"]) {
      if (c.is_object()) c.erase("image");
    }
  }
  return out;
}

const Json* ContainerStatus(const Json& pod, const std::string& name) {
  const Json* statuses = kube::FindPath(pod, {"status", "containerStatuses"});
  if (statuses == nullptr || !statuses->is_array()) return nullptr;
  for (const Json& s : *statuses) {
    if (s.is_object() && s.value("name", "") == name) return &s;
  }
  return nullptr;
}

std::string SpecImage(const Json& pod, const std::string& name) {
  const Json* containers = kube::FindPath(pod, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array()) return "";
  for (const Json& c : *containers) {
    if (c.is_object() && c.value("name", "") == name) return c.value("image", "");
  }
  return "";
}

}  // namespace

std::optional<InPlaceUpdateSpec> CalculateInPlaceUpdate(const Json& old_template,
                                                        const Json& new_template,
                                                        const std::string& new_revision,
                                                        std::string* why_not) {
  const Json old_rest = WithoutInPlaceFields(old_template);
  const Json new_rest = WithoutInPlaceFields(new_template);
  if (old_rest != new_rest) {
    if (why_not != nullptr) {
      *why_not = absl::StrCat(FirstDifference(old_rest, new_rest, ""),
                              " changed: only container images and pod labels and annotations "
                              "can change in place");
    }
    return std::nullopt;
  }
  InPlaceUpdateSpec spec;
  spec.revision = new_revision;
  // Equal once images are removed, so both have the same containers in the same order.
  const Json* old_containers = kube::FindPath(old_template, {"spec", "containers"});
  const Json* new_containers = kube::FindPath(new_template, {"spec", "containers"});
  if (old_containers != nullptr && new_containers != nullptr && old_containers->is_array() &&
      new_containers->is_array()) {
    for (size_t i = 0; i < new_containers->size() && i < old_containers->size(); ++i) {
      const Json& o = (*old_containers)[i];
      const Json& n = (*new_containers)[i];
      if (!n.is_object()) continue;
      const std::string image = n.value("image", "");
      if (!o.is_object() || o.value("image", "") != image) {
        spec.container_images[n.value("name", "")] = image;
      }
    }
  }
  const Json& old_meta = Member(old_template, "metadata");
  const Json& new_meta = Member(new_template, "metadata");
  for (const char* field : {"labels", "annotations"}) {
    Json patch = MapPatch(Member(old_meta, field), Member(new_meta, field));
    if (!patch.empty()) spec.metadata_patch[field] = std::move(patch);
  }
  return spec;
}

InPlaceUpdateState NewInPlaceUpdateState(const Json& pod, const InPlaceUpdateSpec& spec,
                                         absl::Time now) {
  InPlaceUpdateState state;
  state.revision = spec.revision;
  state.update_timestamp = now;
  state.update_images = !spec.container_images.empty();
  for (const auto& [name, image] : spec.container_images) {
    LastContainerStatus last;
    if (const Json* s = ContainerStatus(pod, name)) {
      last.image_id = s->value("imageID", "");
      last.container_id = s->value("containerID", "");
      last.restart_count = s->value("restartCount", int64_t{0});
    }
    state.last_container_statuses[name] = std::move(last);
  }
  return state;
}

std::string FormatInPlaceUpdateState(const InPlaceUpdateState& state) {
  Json last = Json::object();
  for (const auto& [name, s] : state.last_container_statuses) {
    Json j = {{"imageID", s.image_id}};
    if (!s.container_id.empty()) j["containerID"] = s.container_id;
    j["restartCount"] = s.restart_count;
    last[name] = std::move(j);
  }
  Json j = {{"revision", state.revision},
            {"updateTimestamp", kube::FormatRfc3339(state.update_timestamp)},
            {"lastContainerStatuses", std::move(last)}};
  if (state.update_images) j["updateImages"] = true;
  return j.dump();
}

absl::StatusOr<InPlaceUpdateState> ParseInPlaceUpdateState(const std::string& annotation) {
  const Json j = Json::parse(annotation, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kInPlaceUpdateStateAnnotation, " is not a JSON object"));
  }
  InPlaceUpdateState state;
  const Json& revision = Member(j, "revision");
  if (!revision.is_string() || revision.get<std::string>().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kInPlaceUpdateStateAnnotation, ": revision is missing"));
  }
  state.revision = revision.get<std::string>();
  if (const Json& ts = Member(j, "updateTimestamp"); ts.is_string()) {
    auto t = kube::ParseRfc3339(ts.get<std::string>());
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kInPlaceUpdateStateAnnotation, ": updateTimestamp: ", t.status().message()));
    }
    state.update_timestamp = *t;
  }
  if (const Json& last = Member(j, "lastContainerStatuses"); last.is_object()) {
    for (const auto& [name, s] : last.items()) {
      if (!s.is_object()) {
        return absl::InvalidArgumentError(absl::StrCat(
            kInPlaceUpdateStateAnnotation, ": lastContainerStatuses.", name, " is not an object"));
      }
      LastContainerStatus l;
      const Json& id = Member(s, "imageID");
      const Json& cid = Member(s, "containerID");
      const Json& restarts = Member(s, "restartCount");
      if (id.is_string()) l.image_id = id.get<std::string>();
      if (cid.is_string()) l.container_id = cid.get<std::string>();
      if (restarts.is_number_integer()) l.restart_count = restarts.get<int64_t>();
      state.last_container_statuses[name] = std::move(l);
    }
  }
  if (const Json& u = Member(j, "updateImages"); u.is_boolean())
    state.update_images = u.get<bool>();
  return state;
}

bool InPlaceUpdateCompleted(const Json& pod, const InPlaceUpdateState& state,
                            const std::map<std::string, std::string>& container_images,
                            std::string* waiting_for) {
  auto waiting = [&](const std::string& why) {
    if (waiting_for != nullptr) *waiting_for = why;
    return false;
  };
  for (const auto& [name, image] : container_images) {
    if (SpecImage(pod, name) != image) {
      return waiting(absl::StrCat("container ", name, ": spec image is not ", image, " yet"));
    }
    const Json* s = ContainerStatus(pod, name);
    if (s == nullptr) return waiting(absl::StrCat("container ", name, ": no status"));
    auto last = state.last_container_statuses.find(name);
    if (last == state.last_container_statuses.end()) {
      return waiting(absl::StrCat("container ", name, ": not in the recorded state"));
    }
    const std::string container_id = s->value("containerID", "");
    const int64_t restarts = s->value("restartCount", int64_t{0});
    // A restart, whatever the digest: a new container, or the same one counted once more.
    const bool restarted = (!container_id.empty() && container_id != last->second.container_id) ||
                           restarts > last->second.restart_count;
    if (!restarted) {
      return waiting(absl::StrCat("container ", name, ": not restarted by the kubelet yet"));
    }
    // A restart that began before the update was recorded (a crash just before the patch) ran
    // the old spec; the kubelet restarts the container again for the new one.
    if (const Json* started = kube::FindPath(*s, {"state", "running", "startedAt"});
        started != nullptr && started->is_string()) {
      auto t = kube::ParseRfc3339(started->get<std::string>());
      if (t.ok() && *t < absl::FromUnixSeconds(absl::ToUnixSeconds(state.update_timestamp))) {
        return waiting(absl::StrCat("container ", name, ": its restart predates the update"));
      }
    }
  }
  return true;
}

}  // namespace kruise::manager::inplace
