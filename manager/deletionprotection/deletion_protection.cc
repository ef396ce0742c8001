#include "manager/deletionprotection/deletion_protection.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kube/object.h"
#include "kube/resources.h"

namespace kruise::manager::deletionprotection {
namespace {

using Json = nlohmann::json;

constexpr char kExcludedNamespace[] = "kube-system";

std::string Denial(const Target& t) {
  return absl::StrCat("deletion of ", t.kind_name, " ", t.name, " is forbidden by ", kLabel, "=",
                      t.label_value);
}

// Counts the objects of `r` in `ns` ("" = all) for which `counts` holds, page by page.
absl::StatusOr<int64_t> Count(kube::KubeClient* client, const kube::Resource& r,
                              const std::string& ns, int64_t page_size,
                              const std::function<bool(const Json&)>& counts) {
  kube::ListOptions opts;
  opts.limit = page_size;
  int64_t n = 0;
  do {
    auto page = client->List(r, ns, opts);
    if (!page.ok()) {
      return Annotate(page.status(), absl::StrCat("listing ", r.resource,
                                                  r.group.empty() ? "" : "." + r.group));
    }
    for (const Json& item : page->items) n += counts(item) ? 1 : 0;
    opts.continue_token = page->continue_token;
  } while (!opts.continue_token.empty());
  return n;
}

std::string Phase(const Json& obj) {
  auto status = obj.find("status");
  if (status == obj.end() || !status->is_object()) return "";
  auto phase = status->find("phase");
  return phase != status->end() && phase->is_string() ? phase->get<std::string>() : "";
}

}  // namespace

Protection ProtectionOf(const Json& obj) {
  std::optional<std::string> v = kube::Label(obj, kLabel);
  if (!v) return Protection::kNone;
  if (*v == "Always") return Protection::kAlways;
  if (*v == "Cascading") return Protection::kCascading;
  return Protection::kNone;
}

GuardedKind GuardedKindOf(const webhook::GroupVersionKind& gvk) {
  const std::string& g = gvk.group;
  const std::string& k = gvk.kind;
  if (g.empty() && k == "Namespace") return GuardedKind::kNamespace;
  if (g == "apiextensions.k8s.io" && k == "CustomResourceDefinition") {
    return GuardedKind::kCustomResourceDefinition;
  }
  if (g == "apps" && (k == "Deployment" || k == "ReplicaSet" || k == "StatefulSet")) {
    return GuardedKind::kWorkload;
  }
  if (g == "apps.kruise.io" &&
      (k == "CloneSet" || k == "StatefulSet" || k == "UnitedDeployment")) {
    return GuardedKind::kWorkload;
  }
  if ((g.empty() && k == "Service") || (g == "networking.k8s.io" && k == "Ingress")) {
    return GuardedKind::kAlwaysOnly;
  }
  return GuardedKind::kNotGuarded;
}

bool NeedsDependents(const Target& t) {
  if (t.being_deleted || t.label_value != "Cascading") return false;
  return t.kind == GuardedKind::kNamespace || t.kind == GuardedKind::kCustomResourceDefinition ||
         t.kind == GuardedKind::kWorkload;
}

Verdict DecideDeletion(const Target& t, const Dependents& deps, bool crd_cascading) {
  if (t.kind == GuardedKind::kNotGuarded || t.being_deleted) return {};
  if (t.label_value == "Always") {
    return {false, 403, absl::StrCat(Denial(t), ": remove the label to delete it")};
  }
  if (t.label_value != "Cascading") return {};
  switch (t.kind) {
    case GuardedKind::kNamespace:
      if (deps.active_pods > 0) {
        return {false, 403,
                absl::StrCat(Denial(t), " while it has ", deps.active_pods,
                             " active pod(s): delete them or remove the label first")};
      }
      if (deps.bound_pvcs > 0) {
        return {false, 403,
                absl::StrCat(Denial(t), " while it has ", deps.bound_pvcs,
                             " Bound PersistentVolumeClaim(s): delete them or remove the label "
                             "first")};
      }
      return {};
    case GuardedKind::kCustomResourceDefinition:
      if (!crd_cascading) {
        return {false, 403,
                absl::StrCat(Denial(t),
                             ": the DeletionProtectionForCRDCascadingGate feature gate is off, so "
                             "Cascading cannot be checked; remove the label to delete it")};
      }
      if (deps.active_crs > 0) {
        return {false, 403,
                absl::StrCat(Denial(t), " while ", deps.active_crs,
                             " custom resource(s) of it exist: delete them or remove the label "
                             "first")};
      }
      return {};
    case GuardedKind::kWorkload:
      if (deps.replicas > 0) {
        return {false, 403,
                absl::StrCat(Denial(t), " while spec.replicas is ", deps.replicas,
                             " (> 0): scale it to 0 or remove the label first")};
      }
      return {};
    case GuardedKind::kAlwaysOnly:
    case GuardedKind::kNotGuarded:
      return {};
  }
  return {};
}

absl::StatusOr<kube::Resource> CustomResourceOf(const Json& crd) {
  const Json spec = crd.value("spec", Json::object());
  if (!spec.is_object()) return absl::InvalidArgumentError("CRD without spec");
  const Json names = spec.value("names", Json::object());
  kube::Resource r;
  r.group = spec.value("group", "");
  r.resource = names.is_object() ? names.value("plural", "") : "";
  r.kind = names.is_object() ? names.value("kind", "") : "";
  r.namespaced = spec.value("scope", "Namespaced") != "Cluster";
  const Json versions = spec.value("versions", Json::array());
  if (versions.is_array()) {
    for (const Json& v : versions) {
      if (v.is_object() && v.value("storage", false)) r.version = v.value("name", "");
    }
    for (const Json& v : versions) {
      if (r.version.empty() && v.is_object() && v.value("served", false)) {
        r.version = v.value("name", "");
      }
    }
  }
  if (r.version.empty()) r.version = spec.value("version", "");  // apiextensions v1beta1
  if (r.group.empty() || r.resource.empty() || r.version.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("CRD ", kube::Name(crd),
                                                   " names no group, plural or version"));
  }
  return r;
}

absl::StatusOr<Dependents> DeletionProtectionHandler::ReadDependents(GuardedKind kind,
                                                                     const Json& obj) {
  Dependents d;
  switch (kind) {
    case GuardedKind::kNamespace: {
      const kube::Resource pods = kube::resources::Pods();
      ASSIGN_OR_RETURN(d.active_pods,
                       Count(client_, pods, kube::Name(obj), opts_.page_size, [](const Json& p) {
                         const std::string phase = Phase(p);
                         return phase != "Succeeded" && phase != "Failed" &&
                                !kube::IsBeingDeleted(p);
                       }));
      if (d.active_pods > 0) return d;
      const kube::Resource pvcs = kube::resources::PersistentVolumeClaims();
      ASSIGN_OR_RETURN(d.bound_pvcs,
                       Count(client_, pvcs, kube::Name(obj), opts_.page_size, [](const Json& c) {
                         return Phase(c) == "Bound" && !kube::IsBeingDeleted(c);
                       }));
      return d;
    }
    case GuardedKind::kCustomResourceDefinition: {
      ASSIGN_OR_RETURN(kube::Resource r, CustomResourceOf(obj));
      ASSIGN_OR_RETURN(d.active_crs,
                       Count(client_, r, "", opts_.page_size,
                             [](const Json& o) { return !kube::IsBeingDeleted(o); }));
      return d;
    }
    case GuardedKind::kWorkload: {
      const Json spec = obj.value("spec", Json::object());
      if (spec.is_object()) d.replicas = kube::IntField(spec, "replicas", 0);
      return d;
    }
    default:
      return d;
  }
}

webhook::AdmissionResponse DeletionProtectionHandler::Handle(
    const webhook::AdmissionRequest& req) {
  if (!opts_.enabled || req.operation != "DELETE" || !req.sub_resource.empty()) {
    return webhook::Allowed();
  }
  if (!req.old_object.is_object()) return webhook::Allowed();  // Kubernetes < 1.16
  Target t;
  t.kind = GuardedKindOf(req.kind);
  if (t.kind == GuardedKind::kNotGuarded) return webhook::Allowed();
  const Json& obj = req.old_object;
  const std::string ns = kube::Namespace(obj);
  if (ns == kExcludedNamespace ||
      (t.kind == GuardedKind::kNamespace && kube::Name(obj) == kExcludedNamespace)) {
    return webhook::Allowed();
  }
  t.kind_name = req.kind.kind;
  t.name = kube::NamespacedName(obj);
  t.label_value = kube::Label(obj, kLabel).value_or("");
  t.being_deleted = kube::IsBeingDeleted(obj);
  Dependents deps;
  if (NeedsDependents(t) &&
      !(t.kind == GuardedKind::kCustomResourceDefinition && !opts_.crd_cascading)) {
    auto read = ReadDependents(t.kind, obj);
    if (!read.ok()) {
      Logger("deletionprotection")
          ->warn("DELETE of {} {} denied: {}", t.kind_name, t.name, read.status());
      return webhook::Denied(
          500, absl::StrCat(Denial(t), ": cannot tell whether anything would go with it (",
                            read.status().message(), "); try again or remove the label"),
          "InternalError");
    }
    deps = *read;
  }
  Verdict v = DecideDeletion(t, deps, opts_.crd_cascading);
  if (v.allowed) return webhook::Allowed();
  Logger("deletionprotection")
      ->info("DELETE of {} {} by {} denied: {}", t.kind_name, t.name, req.user_info.username,
             v.message);
  return webhook::Denied(v.code, v.message, "Forbidden");
}

void RegisterDeletionProtectionHandler(webhook::HandlerRegistry* registry,
                                       kube::KubeClient* client, const HandlerOptions& opts) {
  registry->Register(kValidatePath, std::make_shared<DeletionProtectionHandler>(client, opts));
}

}  // namespace kruise::manager::deletionprotection
