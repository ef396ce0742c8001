#pragma once

// PodUnavailableBudget admission as pure functions (issue 17), after OpenKruise's
// pkg/webhook/podunavailablebudget/validating and pkg/control/pubcontrol:
//
// The PUB's own webhook (validating only: OpenKruise has no PUB defaulting) refuses what
// PubProblems (pub_budget.h) finds, and a PUB in conflict with another PUB of its namespace
// (PubConflicts): a pod must be guarded by one budget only. Two PUBs conflict when
//  - both have a targetRef naming the same workload: same API group (the version does not
//    matter), kind and name;
//  - both have a selector and the selectors overlap loosely (SelectorsLooselyOverlap).
// A selector PUB and a targetRef PUB never conflict (OpenKruise does not compare them either,
// although they may select the same pods: the pod webhook then uses the first by name).
//
// Which PUB guards a pod (PubCoversPod): a selector PUB when its selector matches the pod's
// labels; a targetRef PUB when the pod's controller is the workload: same group, kind and name,
// or for an apps/v1 Deployment the ReplicaSet `<deployment>-<pod-template-hash label>` (the
// Deployment controller's naming), so no ReplicaSet is read. OpenKruise instead records the PUB
// in the pod's `kruise.io/related-pub` annotation at pod creation and only guards annotated pods;
// here every pod is matched at admission, so pods created before their PUB are guarded too.
//
// Thread-compatible, no state; never throws.

#include <memory>
#include <string>
#include <vector>

#include "manager/pub/pub_budget.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::pub {

// OpenKruise's IsSelectorLooseOverlap over two metav1.LabelSelector objects: matchLabels read as
// `In [value]` (overriding an expression on the same key); the selectors overlap only when they
// constrain exactly the same keys and each key's two requirements can both hold (In/In share a
// value; In/NotIn: the In values are not all excluded; Exists with In, NotIn or Exists; NotIn with
// Exists, DoesNotExist or NotIn; DoesNotExist with DoesNotExist or NotIn). Selectors on
// different keys never overlap by this test (a=b and c=d may select the same pod: OpenKruise's
// choice, kept). Non-objects never overlap.
bool SelectorsLooselyOverlap(const nlohmann::json& a, const nlohmann::json& b);

// Problems of `pub` against the other PUBs of its namespace (`others`; the one of the same name
// is skipped, so an UPDATE does not conflict with its stored self). At most one line, for the
// first conflicting PUB in `others`' order, as "spec.targetRef: ..." or "spec.selector: ...".
std::vector<std::string> PubConflicts(const nlohmann::json& pub,
                                      const std::vector<std::shared_ptr<const nlohmann::json>>& others);

// Whether `pub` guards `pod` (see the top). `pod` must carry its full ownerReferences for a
// targetRef PUB (admission objects do).
bool PubCoversPod(const Pub& pub, const nlohmann::json& pod);

// The pod controller kinds a targetRef can own pods through: "ReplicaSet" for an apps/v1
// Deployment, the target's kind otherwise.
std::string OwnerKindOfTarget(const TargetRef& ref);

// The API group of "group/version" ("" for "v1").
std::string GroupOf(const std::string& api_version);

}  // namespace kruise::manager::pub
