#include "kube/pod_defaults.h"

#include <cstdint>
#include <utility>

#include "nlohmann/json.hpp"

namespace kruise::kube {
// Named, not anonymous: kruise_kube is a unity build.
namespace pod_defaults {

using Json = nlohmann::json;

bool Absent(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null();
}

void DefaultIfUnset(Json* obj, const char* key, Json value) {
  if (Absent(*obj, key)) (*obj)[key] = std::move(value);
}

void DefaultIfEmptyString(Json* obj, const char* key, const char* value) {
  auto it = obj->find(key);
  if (it == obj->end() || it->is_null() ||
      (it->is_string() && it->get_ref<const std::string&>().empty())) {
    (*obj)[key] = value;
  }
}

void DefaultIfZero(Json* obj, const char* key, int64_t value) {
  auto it = obj->find(key);
  if (it == obj->end() || it->is_null() || (it->is_number() && it->get<double>() == 0)) {
    (*obj)[key] = value;
  }
}

// An existing object member; nullptr when absent or not an object.
Json* ExistingObject(Json* obj, const char* key) {
  auto it = obj->find(key);
  return it != obj->end() && it->is_object() ? &*it : nullptr;
}

// Calls `fn` on every object element of the array member `key`.
template <typename Fn>
void ForEachObject(Json* obj, const char* key, Fn fn) {
  auto it = obj->find(key);
  if (it == obj->end() || !it->is_array()) return;
  for (Json& e : *it) {
    if (e.is_object()) fn(&e);
  }
}

void DefaultHttpGet(Json* handler) {
  if (Json* get = ExistingObject(handler, "httpGet")) {
    DefaultIfEmptyString(get, "path", "/");
    DefaultIfEmptyString(get, "scheme", "HTTP");
  }
}

void DefaultProbe(Json* container, const char* key) {
  Json* probe = ExistingObject(container, key);
  if (probe == nullptr) return;
  DefaultIfZero(probe, "timeoutSeconds", 1);
  DefaultIfZero(probe, "periodSeconds", 10);
  DefaultIfZero(probe, "successThreshold", 1);
  DefaultIfZero(probe, "failureThreshold", 3);
  DefaultHttpGet(probe);
}

}  // namespace pod_defaults

std::string DefaultPullPolicy(const nlohmann::json& image) {
  if (!image.is_string() || image.get_ref<const std::string&>().empty()) return "IfNotPresent";
  std::string ref = image.get<std::string>();
  bool digest = false;
  if (size_t at = ref.find('@'); at != std::string::npos) {
    digest = true;
    ref.resize(at);
  }
  std::string tag;
  const size_t slash = ref.rfind('/');
  const size_t colon = ref.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    tag = ref.substr(colon + 1);
  }
  if (tag.empty() && !digest) tag = "latest";
  return tag == "latest" ? "Always" : "IfNotPresent";
}

void DefaultFieldRef(nlohmann::json* owner) {
  if (nlohmann::json* ref = pod_defaults::ExistingObject(owner, "fieldRef")) {
    pod_defaults::DefaultIfEmptyString(ref, "apiVersion", "v1");
  }
}

void DefaultContainerFields(nlohmann::json* c, bool host_network) {
  pod_defaults::DefaultIfEmptyString(c, "terminationMessagePath", "/dev/termination-log");
  pod_defaults::DefaultIfEmptyString(c, "terminationMessagePolicy", "File");
  pod_defaults::ForEachObject(c, "ports", [host_network](nlohmann::json* port) {
    pod_defaults::DefaultIfEmptyString(port, "protocol", "TCP");
    if (host_network) {
      auto cp = port->find("containerPort");
      if (cp != port->end() && cp->is_number_integer()) {
        pod_defaults::DefaultIfZero(port, "hostPort", cp->get<int64_t>());
      }
    }
  });
  pod_defaults::ForEachObject(c, "env", [](nlohmann::json* env) {
    if (nlohmann::json* from = pod_defaults::ExistingObject(env, "valueFrom")) {
      DefaultFieldRef(from);
    }
  });
  pod_defaults::DefaultProbe(c, "livenessProbe");
  pod_defaults::DefaultProbe(c, "readinessProbe");
  pod_defaults::DefaultProbe(c, "startupProbe");
  if (nlohmann::json* lifecycle = pod_defaults::ExistingObject(c, "lifecycle")) {
    if (nlohmann::json* h = pod_defaults::ExistingObject(lifecycle, "postStart")) {
      pod_defaults::DefaultHttpGet(h);
    }
    if (nlohmann::json* h = pod_defaults::ExistingObject(lifecycle, "preStop")) {
      pod_defaults::DefaultHttpGet(h);
    }
  }
}

void DefaultVolumeFields(nlohmann::json* v) {
  bool has_source = false;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (it.key() != "name" && !it->is_null()) has_source = true;
  }
  if (!has_source) (*v)["emptyDir"] = nlohmann::json::object();
  if (nlohmann::json* hp = pod_defaults::ExistingObject(v, "hostPath")) {
    pod_defaults::DefaultIfUnset(hp, "type", "");
  }
  for (const char* key : {"secret", "configMap"}) {
    if (nlohmann::json* src = pod_defaults::ExistingObject(v, key)) {
      pod_defaults::DefaultIfUnset(src, "defaultMode", 420);
    }
  }
  if (nlohmann::json* dapi = pod_defaults::ExistingObject(v, "downwardAPI")) {
    pod_defaults::DefaultIfUnset(dapi, "defaultMode", 420);
    pod_defaults::ForEachObject(dapi, "items", DefaultFieldRef);
  }
  if (nlohmann::json* projected = pod_defaults::ExistingObject(v, "projected")) {
    pod_defaults::DefaultIfUnset(projected, "defaultMode", 420);
    pod_defaults::ForEachObject(projected, "sources", [](nlohmann::json* source) {
      if (nlohmann::json* dapi = pod_defaults::ExistingObject(source, "downwardAPI")) {
        pod_defaults::ForEachObject(dapi, "items", DefaultFieldRef);
      }
      if (nlohmann::json* token = pod_defaults::ExistingObject(source, "serviceAccountToken")) {
        pod_defaults::DefaultIfUnset(token, "expirationSeconds", 3600);
      }
    });
  }
}

}  // namespace kruise::kube
