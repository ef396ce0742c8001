#include "manager/sidecarset/sidecarset_webhook.h"

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/sidecarset/sidecarset_admission.h"
#include "manager/sidecarset/sidecarset_revision.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::sidecarset {

using Json = nlohmann::json;

std::shared_ptr<const SidecarSetCache::Snapshot> SidecarSetCache::Snapshot::Of(Sets sets) {
  auto out = std::make_shared<Snapshot>();
  out->sets = std::move(sets);
  for (const auto& [name, entry] : out->sets) entry->matcher.IndexInto(&out->index, entry.get());
  return out;
}

SidecarSetCache::SidecarSetCache(std::string manager_namespace)
    : manager_namespace_(std::move(manager_namespace)),
      sets_(Snapshot::Of({})),
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
  absl::MutexLock write(&write_mu_);
  std::shared_ptr<const Entry> entry = MakeEntry(std::move(defaulted));
  Publish([&](Sets* sets) {
    (*sets)[name] = std::move(entry);
    return true;
  });
}

void SidecarSetCache::Publish(absl::FunctionRef<bool(Sets*)> change) {
  Sets next;
  {
    absl::MutexLock lock(&mu_);
    next = sets_->sets;
  }
  if (!change(&next)) return;
  std::shared_ptr<const Snapshot> snapshot = Snapshot::Of(std::move(next));
  absl::MutexLock lock(&mu_);
  sets_ = std::move(snapshot);
}

std::shared_ptr<const SidecarSetCache::Entry> SidecarSetCache::MakeEntry(
    std::shared_ptr<const Json> base) const {
  std::vector<Json> revisions;
  if (auto it = revisions_.find(kube::Name(*base)); it != revisions_.end()) {
    for (const auto& [name, r] : it->second) revisions.push_back(r);
  }
  revisions = RevisionsOfSidecarSet(*base, revisions);
  Json latest = *base;
  latest["status"]["latestRevision"] = LatestSidecarSetRevisionName(*base, revisions);
  auto set = std::make_shared<const Json>(std::move(latest));
  std::shared_ptr<const Json> history;
  std::string missing;
  if (kube::FindPath(*base, {"spec", "injectionStrategy", "revision"}) != nullptr) {
    if (const Json* r = FindInjectionRevision(*base, revisions)) {
      history =
          std::make_shared<const Json>(DefaultSidecarSet(RestoreSidecarSetRevision(*base, *r)));
    } else {
      missing = MissingInjectionRevisionMessage(*base);
    }
  }
  return std::make_shared<const Entry>(Entry{SidecarSetMatcher(*base), std::move(base),
                                             std::move(set), std::move(history),
                                             std::move(missing)});
}

void SidecarSetCache::RebuildSet(const std::string& set_name) {
  std::shared_ptr<const Json> base;
  {
    absl::MutexLock lock(&mu_);
    auto it = sets_->sets.find(set_name);
    if (it == sets_->sets.end()) return;
    base = it->second->base;
  }
  std::shared_ptr<const Entry> entry = MakeEntry(std::move(base));
  Publish([&](Sets* sets) {
    (*sets)[set_name] = std::move(entry);
    return true;
  });
}

void SidecarSetCache::UpsertRevision(const Json& revision) {
  std::optional<std::string> set_name = kube::Label(revision, kSidecarSetNameLabel);
  if (!set_name || set_name->empty() || kube::Name(revision).empty()) return;
  absl::MutexLock write(&write_mu_);
  revisions_[*set_name][kube::Name(revision)] = revision;
  RebuildSet(*set_name);
}

void SidecarSetCache::RemoveRevision(const Json& revision) {
  std::optional<std::string> set_name = kube::Label(revision, kSidecarSetNameLabel);
  if (!set_name) return;
  absl::MutexLock write(&write_mu_);
  auto it = revisions_.find(*set_name);
  if (it == revisions_.end() || it->second.erase(kube::Name(revision)) == 0) return;
  if (it->second.empty()) revisions_.erase(it);
  RebuildSet(*set_name);
}

void SidecarSetCache::RemoveSidecarSet(const std::string& name) {
  absl::MutexLock write(&write_mu_);
  Publish([&](Sets* sets) { return sets->erase(name) > 0; });
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

void SidecarSetCache::Attach(kube::Informer* sidecarsets, kube::Informer* namespaces,
                             kube::Informer* revisions) {
  if (revisions != nullptr) {
    revisions->AddEventHandler({
        .on_add = [this](const Json& r) { UpsertRevision(r); },
        .on_update = [this](const Json&, const Json& r) { UpsertRevision(r); },
        .on_delete = [this](const Json& r, bool) { RemoveRevision(r); },
    });
  }
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
  return sets_->sets.size();
}

std::vector<std::shared_ptr<const Json>> SidecarSetCache::Matching(
    const Json& pod, const std::string& request_namespace) const {
  std::vector<std::shared_ptr<const Json>> out;
  for (Match& m : MatchingWithRevisions(pod, request_namespace)) out.push_back(std::move(m.set));
  return out;
}

std::vector<SidecarSetCache::Match> SidecarSetCache::MatchingWithRevisions(
    const Json& pod, const std::string& request_namespace) const {
  std::shared_ptr<const Snapshot> snapshot;
  std::shared_ptr<const Namespaces> namespaces;
  {
    absl::MutexLock lock(&mu_);
    snapshot = sets_;
    namespaces = namespaces_;
  }
  std::vector<Match> out;
  if (snapshot->sets.empty()) return out;
  PodFacts facts = PodFacts::Of(pod, manager_namespace_);
  if (kube::Namespace(pod).empty() && !request_namespace.empty()) {
    // A pod created with generateName through a namespaced URL often names no namespace itself.
    facts.namespace_ = request_namespace;
    if (request_namespace == "kube-system" || request_namespace == manager_namespace_) {
      facts.injectable = false;
    }
  }
  if (!facts.injectable) return out;
  // The sets this pod's labels can match, then the full test on each, in name order.
  std::vector<const Entry*> candidates = snapshot->index.Candidates(facts.labels);
  if (candidates.empty()) return out;
  std::sort(candidates.begin(), candidates.end(), [](const Entry* a, const Entry* b) {
    return a->matcher.name() < b->matcher.name();
  });
  const Json* ns = nullptr;
  if (auto it = namespaces->find(facts.namespace_); it != namespaces->end()) ns = it->second.get();
  const std::optional<std::map<std::string, std::string>> ns_labels =
      SidecarSetMatcher::NamespaceLabels(ns, facts.namespace_);
  for (const Entry* entry : candidates) {
    if (entry->matcher.Matches(facts, ns_labels)) {
      out.push_back(Match{entry->set, entry->history, entry->missing_revision});
    }
  }
  return out;
}

kube::InformerOptions SidecarSetInformerOptions() {
  kube::InformerOptions o;
  o.resource = kube::resources::SidecarSets();
  return o;
}

kube::InformerOptions SidecarSetRevisionInformerOptions(const std::string& manager_namespace) {
  kube::InformerOptions o;
  o.resource = kube::resources::ControllerRevisions();
  o.ns = manager_namespace;
  o.label_selector = kSidecarSetNameLabel;
  o.indexers[kSidecarSetRevisionIndex] = [](const Json& r) {
    std::vector<std::string> out;
    if (auto set = kube::Label(r, kSidecarSetNameLabel); set && !set->empty()) out.push_back(*set);
    return out;
  };
  return o;
}

kube::InformerOptions NamespaceInformerOptions() {
  kube::InformerOptions o;
  o.resource = kube::resources::Namespaces();
  o.transform = kube::KeepOnlyMetadata({"labels"});
  return o;
}

double SidecarSetInjector::Uniform01() const {
  if (uniform01_) return uniform01_();
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

absl::Status SidecarSetInjector::Mutate(const webhook::AdmissionRequest& request,
                                        webhook::PodEdit* edit,
                                        std::vector<std::string>* warnings) const {
  if (request.operation != "CREATE") return absl::OkStatus();
  std::vector<SidecarSetCache::Match> matching =
      cache_->MatchingWithRevisions(edit->pod(), request.namespace_);
  if (matching.empty()) return absl::OkStatus();
  std::vector<const Json*> sets;
  sets.reserve(matching.size());
  std::optional<std::map<std::string, std::string>> labels;  // read once, only when needed
  for (const SidecarSetCache::Match& m : matching) {
    const Json* chosen = m.set.get();
    if (m.history != nullptr) {
      if (!labels) labels = kube::Labels(edit->pod());
      if (InjectHistoryRevision(*m.set, *labels, Uniform01())) chosen = m.history.get();
    } else if (!m.missing_revision.empty()) {
      warnings->push_back(m.missing_revision);
    }
    sets.push_back(chosen);
  }
  Json ops;
  absl::StatusOr<InjectionResult> result =
      PlanSidecarInjection(edit->pod(), sets, clock_->Now(), /*sets_defaulted=*/true, &ops);
  if (!result.ok()) return result.status();
  edit->AddOps(std::move(ops));
  for (std::string& note : result->notes) {
    warnings->push_back(absl::StrCat("sidecarset injection: ", note));
  }
  return absl::OkStatus();
}

}  // namespace kruise::manager::sidecarset
