#include "kube/pod_defaults.h"

#include <cstdint>
#include <utility>

#include "nlohmann/json.hpp"

namespace kruise::kube {

namespace json_defaults {

using Json = nlohmann::json;

bool Absent(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null();
}

void DefaultIfUnset(Json* obj, const char* key, Json value) {
  if (Absent(*obj, key)) (*obj)[key] = std::move(value);
}

void DefaultIfEmptyString(Json* obj, const char* key, const std::string& value) {
  auto it = obj->find(key);
  if (it == obj->end() || it->is_null() ||
      (it->is_string() && it->get_ref<const std::string&>().empty())) {
    (*obj)[key] = value;
  }
}

Json* ObjectMember(Json* obj, const char* key) {
  if (Absent(*obj, key)) (*obj)[key] = Json::object();
  Json& v = (*obj)[key];
  return v.is_object() ? &v : nullptr;
}

Json* ExistingObject(Json* obj, const char* key) {
  auto it = obj->find(key);
  return it != obj->end() && it->is_object() ? &*it : nullptr;
}

void ForEachObject(Json* obj, const char* key, absl::FunctionRef<void(Json*)> fn) {
  auto it = obj->find(key);
  if (it == obj->end() || !it->is_array()) return;
  for (Json& e : *it) {
    if (e.is_object()) fn(&e);
  }
}

}  // namespace json_defaults

// Named, not anonymous: kruise_kube is a unity build.
namespace pod_defaults {

using Json = nlohmann::json;
using namespace json_defaults;  // NOLINT(build/namespaces): the building blocks above

void DefaultIfZero(Json* obj, const char* key, int64_t value) {
  auto it = obj->find(key);
  if (it == obj->end() || it->is_null() || (it->is_number() && it->get<double>() == 0)) {
    (*obj)[key] = value;
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
  if (nlohmann::json* ref = json_defaults::ExistingObject(owner, "fieldRef")) {
    json_defaults::DefaultIfEmptyString(ref, "apiVersion", "v1");
  }
}

void DefaultContainerFields(nlohmann::json* c, bool host_network) {
  json_defaults::DefaultIfEmptyString(c, "terminationMessagePath", "/dev/termination-log");
  json_defaults::DefaultIfEmptyString(c, "terminationMessagePolicy", "File");
  json_defaults::ForEachObject(c, "ports", [host_network](nlohmann::json* port) {
    json_defaults::DefaultIfEmptyString(port, "protocol", "TCP");
    if (host_network) {
      auto cp = port->find("containerPort");
      if (cp != port->end() && cp->is_number_integer()) {
        pod_defaults::DefaultIfZero(port, "hostPort", cp->get<int64_t>());
      }
    }
  });
  json_defaults::ForEachObject(c, "env", [](nlohmann::json* env) {
    if (nlohmann::json* from = json_defaults::ExistingObject(env, "valueFrom")) {
      DefaultFieldRef(from);
    }
  });
  pod_defaults::DefaultProbe(c, "livenessProbe");
  pod_defaults::DefaultProbe(c, "readinessProbe");
  pod_defaults::DefaultProbe(c, "startupProbe");
  if (nlohmann::json* lifecycle = json_defaults::ExistingObject(c, "lifecycle")) {
    if (nlohmann::json* h = json_defaults::ExistingObject(lifecycle, "postStart")) {
      pod_defaults::DefaultHttpGet(h);
    }
    if (nlohmann::json* h = json_defaults::ExistingObject(lifecycle, "preStop")) {
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
  if (nlohmann::json* hp = json_defaults::ExistingObject(v, "hostPath")) {
    json_defaults::DefaultIfUnset(hp, "type", "");
  }
  for (const char* key : {"secret", "configMap"}) {
    if (nlohmann::json* src = json_defaults::ExistingObject(v, key)) {
      json_defaults::DefaultIfUnset(src, "defaultMode", 420);
    }
  }
  if (nlohmann::json* dapi = json_defaults::ExistingObject(v, "downwardAPI")) {
    json_defaults::DefaultIfUnset(dapi, "defaultMode", 420);
    json_defaults::ForEachObject(dapi, "items", DefaultFieldRef);
  }
  if (nlohmann::json* projected = json_defaults::ExistingObject(v, "projected")) {
    json_defaults::DefaultIfUnset(projected, "defaultMode", 420);
    json_defaults::ForEachObject(projected, "sources", [](nlohmann::json* source) {
      if (nlohmann::json* dapi = json_defaults::ExistingObject(source, "downwardAPI")) {
        json_defaults::ForEachObject(dapi, "items", DefaultFieldRef);
      }
      if (nlohmann::json* token = json_defaults::ExistingObject(source, "serviceAccountToken")) {
        json_defaults::DefaultIfUnset(token, "expirationSeconds", 3600);
      }
    });
  }
}

}  // namespace kruise::kube
