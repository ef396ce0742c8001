#include "manager/sidecarset/sidecarset_webhook.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/sidecarset/sidecarset_admission.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::sidecarset {

using Json = nlohmann::json;

SidecarSetCache::SidecarSetCache(std::string manager_namespace)
    : manager_namespace_(std::move(manager_namespace)),
      sets_(std::make_shared<const Sets>()),
      namespaces_(std::make_shared<const Namespaces>()) {}

void SidecarSetCache::UpsertSidecarSet(const Json& sidecarset) {
  const std::string name = kube::Name(sidecarset);
  if (name.empty()) return;
  // Default, hash and parse outside the lock, once per change: SidecarSet changes are rare,
  // admissions are not. A set that bypassed our webhook (no hash annotations) gets the computed
  // hashes here, as SidecarSetRecordedHash would compute them on every admission.
  Json set = DefaultSidecarSet(sidecarset);
  for (auto [key, hash] : {std::pair{kSidecarSetHashAnnotation, &SidecarSetHash},
                           std::pair{kSidecarSetHashWithoutImageAnnotation,
                                     &SidecarSetHashWithoutImage}}) {
    std::optional<std::string> recorded = kube::Annotation(set, key);
    if (recorded && !recorded->empty()) continue;
    Json& annotations = set["metadata"]["annotations"];
    if (annotations.is_null()) annotations = Json::object();
    if (annotations.is_object()) annotations[key] = hash(set);
  }
  auto defaulted = std::make_shared<const Json>(std::move(set));
  auto entry = std::make_shared<const Entry>(Entry{SidecarSetMatcher(*defaulted), defaulted});
  absl::MutexLock lock(&mu_);
  auto next = std::make_shared<Sets>(*sets_);
  (*next)[name] = std::move(entry);
  sets_ = std::move(next);
}

void SidecarSetCache::RemoveSidecarSet(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (!sets_->count(name)) return;
  auto next = std::make_shared<Sets>(*sets_);
  next->erase(name);
  sets_ = std::move(next);
}

void SidecarSetCache::UpsertNamespace(const Json& ns) {
  const std::string name = kube::Name(ns);
  if (name.empty()) return;
  auto labels_only = std::make_shared<const Json>(
      Json{{"metadata", {{"name", name}, {"labels", kube::Labels(ns)}}}});
  absl::MutexLock lock(&mu_);
  auto next = std::make_shared<Namespaces>(*namespaces_);
  (*next)[name] = std::move(labels_only);
  namespaces_ = std::move(next);
}

void SidecarSetCache::RemoveNamespace(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (!namespaces_->count(name)) return;
  auto next = std::make_shared<Namespaces>(*namespaces_);
  next->erase(name);
  namespaces_ = std::move(next);
}

void SidecarSetCache::Attach(kube::Informer* sidecarsets, kube::Informer* namespaces) {
  sidecarsets->AddEventHandler({
      .on_add = [this](const Json& s) { UpsertSidecarSet(s); },
      .on_update = [this](const Json&, const Json& s) { UpsertSidecarSet(s); },
      .on_delete = [this](const Json& s, bool) { RemoveSidecarSet(kube::Name(s)); },
  });
  namespaces->AddEventHandler({
      .on_add = [this](const Json& n) { UpsertNamespace(n); },
      .on_update = [this](const Json&, const Json& n) { UpsertNamespace(n); },
      .on_delete = [this](const Json& n, bool) { RemoveNamespace(kube::Name(n)); },
  });
}

size_t SidecarSetCache::size() const {
  absl::MutexLock lock(&mu_);
  return sets_->size();
}

std::vector<std::shared_ptr<const Json>> SidecarSetCache::Matching(
    const Json& pod, const std::string& request_namespace) const {
  std::shared_ptr<const Sets> sets;
  std::shared_ptr<const Namespaces> namespaces;
  {
    absl::MutexLock lock(&mu_);
    sets = sets_;
    namespaces = namespaces_;
  }
  std::vector<std::shared_ptr<const Json>> out;
  if (sets->empty()) return out;
  PodFacts facts = PodFacts::Of(pod, manager_namespace_);
  if (kube::Namespace(pod).empty() && !request_namespace.empty()) {
    // A pod created with generateName through a namespaced URL often names no namespace itself.
    facts.namespace_ = request_namespace;
    if (request_namespace == "kube-system" || request_namespace == manager_namespace_) {
      facts.injectable = false;
    }
  }
  if (!facts.injectable) return out;
  const Json* ns = nullptr;
  if (auto it = namespaces->find(facts.namespace_); it != namespaces->end()) ns = it->second.get();
  for (const auto& [name, entry] : *sets) {  // std::map: sorted by name
    if (entry->matcher.Matches(facts, ns)) out.push_back(entry->set);
  }
  return out;
}

kube::InformerOptions SidecarSetInformerOptions() {
  kube::InformerOptions o;
  o.resource = kube::resources::SidecarSets();
  return o;
}

kube::InformerOptions NamespaceInformerOptions() {
  kube::InformerOptions o;
  o.resource = kube::resources::Namespaces();
  o.transform = kube::KeepOnlyMetadata({"labels"});
  return o;
}

bool SidecarSetInjector::Applies(const webhook::AdmissionRequest& request, const Json& pod) const {
  return request.operation == "CREATE" && !cache_->Matching(pod, request.namespace_).empty();
}

absl::Status SidecarSetInjector::Mutate(const webhook::AdmissionRequest& request, Json* pod,
                                        std::vector<std::string>* warnings) const {
  std::vector<std::shared_ptr<const Json>> matching = cache_->Matching(*pod, request.namespace_);
  if (matching.empty()) return absl::OkStatus();
  std::vector<const Json*> sets;
  sets.reserve(matching.size());
  for (const auto& s : matching) {
    sets.push_back(s.get());
    if (kube::FindPath(*s, {"spec", "injectionStrategy", "revision"}) != nullptr) {
      warnings->push_back(absl::StrCat("SidecarSet ", kube::Name(*s),
                                       ": injectionStrategy.revision is not supported yet; its "
                                       "latest spec was injected"));
    }
  }
  absl::StatusOr<InjectionResult> result = InjectSidecarsNoCopy(pod, sets, clock_->Now(), /*sets_defaulted=*/true);
  if (!result.ok()) return result.status();
  for (std::string& note : result->notes) {
    warnings->push_back(absl::StrCat("sidecarset injection: ", note));
  }
  return absl::OkStatus();
}

}  // namespace kruise::manager::sidecarset
