#include "manager/webhook/pod_webhook.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manager/webhook/fail_open.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace kruise::manager::webhook {
namespace {

using ::testing::HasSubstr;

Json PodOwnedBy(const std::string& api_version, const std::string& kind, bool controller) {
  Json pod = Json::parse(R"({
    "metadata": {"name": "web-0", "namespace": "default"},
    "spec": {"containers": [{"name": "app", "image": "nginx"}]}
  })");
  if (!api_version.empty()) {
    pod["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", api_version},
                                                       {"kind", kind},
                                                       {"name", "web"},
                                                       {"uid", "u1"},
                                                       {"controller", controller}}});
  }
  return pod;
}

AdmissionRequest CreatePodRequest(Json pod, std::string ns = "default") {
  AdmissionRequest req;
  req.operation = "CREATE";
  req.namespace_ = std::move(ns);
  req.resource = {"", "v1", "pods"};
  req.object = std::move(pod);
  return req;
}

std::unique_ptr<PodMutatingHandler> Handler(bool all_pods) {
  std::vector<std::unique_ptr<PodMutator>> chain;
  chain.push_back(std::make_unique<ReadinessGateInjector>(all_pods));
  PodMutatingHandler::Options opts;
  opts.excluded_namespaces.push_back("kruise-system");
  return std::make_unique<PodMutatingHandler>(std::move(chain), opts);
}

// The pod after applying the response's patch (the original when there is none).
Json Apply(const Json& pod, const AdmissionResponse& resp) {
  if (!resp.patch) return pod;
  return pod.patch(Json::parse(*resp.patch));
}

TEST(IsPodOwnedByKruiseTest, OnlyTheControllerReferenceOfTheKruiseGroupCounts) {
  EXPECT_TRUE(IsPodOwnedByKruise(PodOwnedBy("apps.kruise.io/v1alpha1", "CloneSet", true)));
  EXPECT_TRUE(IsPodOwnedByKruise(PodOwnedBy("apps.kruise.io/v1beta1", "StatefulSet", true)));
  EXPECT_FALSE(IsPodOwnedByKruise(PodOwnedBy("apps.kruise.io/v1alpha1", "CloneSet", false)));
  EXPECT_FALSE(IsPodOwnedByKruise(PodOwnedBy("apps/v1", "ReplicaSet", true)));
  EXPECT_FALSE(IsPodOwnedByKruise(PodOwnedBy("v1", "Node", true)));
  EXPECT_FALSE(IsPodOwnedByKruise(PodOwnedBy("", "", false)));
  EXPECT_FALSE(IsPodOwnedByKruise(Json::parse(R"({"metadata": {"ownerReferences": "x"}})")));
}

struct GateCase {
  const char* name;
  Json pod;
  bool all_pods;
  bool want_patch;
};

TEST(PodMutatingHandlerTest, InjectsKruisePodReadyWhereOpenKruiseDoes) {
  Json with_gate = PodOwnedBy("apps.kruise.io/v1alpha1", "CloneSet", true);
  with_gate["spec"]["readinessGates"] = Json::array({{{"conditionType", "KruisePodReady"}}});
  const GateCase cases[] = {
      {"cloneset pod", PodOwnedBy("apps.kruise.io/v1alpha1", "CloneSet", true), false, true},
      {"deployment pod", PodOwnedBy("apps/v1", "ReplicaSet", true), false, false},
      {"bare pod", PodOwnedBy("", "", false), false, false},
      {"bare pod, KruisePodReadinessGate on", PodOwnedBy("", "", false), true, true},
      {"gate already there", with_gate, true, false},
  };
  for (const GateCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto handler = Handler(c.all_pods);
    AdmissionResponse resp = handler->Handle(CreatePodRequest(c.pod));
    EXPECT_TRUE(resp.allowed);
    EXPECT_EQ(resp.patch.has_value(), c.want_patch);
    Json after = Apply(c.pod, resp);
    int gates = 0;
    for (const Json& g : after["spec"].value("readinessGates", Json::array())) {
      gates += g.value("conditionType", "") == "KruisePodReady";
    }
    EXPECT_EQ(gates, c.want_patch || c.pod["spec"].contains("readinessGates") ? 1 : 0);
    // Nothing else changes.
    after["spec"].erase("readinessGates");
    Json before = c.pod;
    before["spec"].erase("readinessGates");
    EXPECT_EQ(after, before);
  }
}

TEST(PodMutatingHandlerTest, AppendsToExistingReadinessGates) {
  Json pod = PodOwnedBy("apps.kruise.io/v1alpha1", "CloneSet", true);
  pod["spec"]["readinessGates"] = Json::array({{{"conditionType", "example.com/lb"}}});
  AdmissionResponse resp = Handler(false)->Handle(CreatePodRequest(pod));
  ASSERT_TRUE(resp.patch.has_value());
  Json after = Apply(pod, resp);
  EXPECT_EQ(after["spec"]["readinessGates"], Json::parse(R"([{"conditionType": "example.com/lb"},
                            {"conditionType": "KruisePodReady"}])"));
}

TEST(PodMutatingHandlerTest, NeverTouchesExcludedNamespacesOtherOperationsOrSubresources) {
  auto handler = Handler(true);
  Json pod = PodOwnedBy("apps.kruise.io/v1alpha1", "CloneSet", true);
  EXPECT_FALSE(handler->Handle(CreatePodRequest(pod, "kube-system")).patch.has_value());
  EXPECT_FALSE(handler->Handle(CreatePodRequest(pod, "kruise-system")).patch.has_value());
  AdmissionRequest update = CreatePodRequest(pod);
  update.operation = "UPDATE";
  update.old_object = pod;
  EXPECT_FALSE(handler->Handle(update).patch.has_value());
  AdmissionRequest binding = CreatePodRequest(pod);
  binding.sub_resource = "binding";
  EXPECT_FALSE(handler->Handle(binding).patch.has_value());
  EXPECT_TRUE(handler->Handle(CreatePodRequest(pod, "default")).patch.has_value());
}

TEST(PodMutatingHandlerTest, BadInputIsDeniedWithAMessage) {
  auto handler = Handler(true);
  AdmissionResponse not_pod = handler->Handle(CreatePodRequest(Json("a string")));
  EXPECT_FALSE(not_pod.allowed);
  EXPECT_EQ(not_pod.result.code, 400);

  Json pod = PodOwnedBy("", "", false);
  pod["spec"]["readinessGates"] = "KruisePodReady";
  AdmissionResponse bad_gates = handler->Handle(CreatePodRequest(pod));
  EXPECT_FALSE(bad_gates.allowed);
  EXPECT_EQ(bad_gates.result.code, 422);
  EXPECT_THAT(bad_gates.result.message, HasSubstr("readinessGates is not a list"));
  EXPECT_THAT(bad_gates.result.message, HasSubstr("readiness-gate"));
}

// A mutator that records the pod it saw: later mutators see earlier ones' edits.
class LabelMutator final : public PodMutator {
 public:
  LabelMutator(std::string key, std::vector<std::string>* seen)
      : key_(std::move(key)), seen_(seen) {}
  absl::string_view Name() const override { return key_; }
  absl::Status Mutate(const AdmissionRequest&, PodEdit* edit,
                      std::vector<std::string>*) const override {
    Json& labels = (*edit->Mutable())["metadata"]["labels"];
    if (labels.is_null()) labels = Json::object();
    std::string keys;
    for (auto it = labels.begin(); it != labels.end(); ++it) keys += it.key() + ",";
    seen_->push_back(keys);
    labels[key_] = "true";
    return absl::OkStatus();
  }

 private:
  std::string key_;
  std::vector<std::string>* seen_;
};

TEST(PodMutatingHandlerTest, RunsTheChainInOrderOnOneCopy) {
  std::vector<std::string> seen;
  std::vector<std::unique_ptr<PodMutator>> chain;
  chain.push_back(std::make_unique<LabelMutator>("first", &seen));
  chain.push_back(std::make_unique<LabelMutator>("second", &seen));
  PodMutatingHandler handler(std::move(chain), {});
  Json pod = PodOwnedBy("", "", false);
  AdmissionResponse resp = handler.Handle(CreatePodRequest(pod));
  ASSERT_TRUE(resp.patch.has_value());
  EXPECT_EQ(seen, (std::vector<std::string>{"", "first,"}));
  Json after = Apply(pod, resp);
  EXPECT_EQ(after["metadata"]["labels"], Json::parse(R"({"first": "true", "second": "true"})"));
}

// Reads the pod, warns, never edits it.
class WarnOnly final : public PodMutator {
 public:
  absl::string_view Name() const override { return "warn"; }
  absl::Status Mutate(const AdmissionRequest&, PodEdit* edit,
                      std::vector<std::string>* warnings) const override {
    warnings->push_back(absl::StrCat("saw ", edit->pod()["metadata"].value("name", "")));
    return absl::OkStatus();
  }
};

TEST(PodMutatingHandlerTest, NoEditNoPatchButWarningsStillReachTheClient) {
  std::vector<std::unique_ptr<PodMutator>> chain;
  chain.push_back(std::make_unique<WarnOnly>());
  chain.push_back(std::make_unique<ReadinessGateInjector>(/*all_pods=*/false));
  PodMutatingHandler handler(std::move(chain), {});
  Json pod = PodOwnedBy("apps/v1", "ReplicaSet", true);
  pod["metadata"]["name"] = "p1";
  AdmissionResponse resp = handler.Handle(CreatePodRequest(pod));
  EXPECT_TRUE(resp.allowed);
  EXPECT_FALSE(resp.patch.has_value());
  EXPECT_THAT(resp.warnings, ::testing::ElementsAre("saw p1"));
}

// Sends an add of label `key` as a JSON Patch operation.
class OpsMutator final : public PodMutator {
 public:
  explicit OpsMutator(std::string key) : key_(std::move(key)) {}
  absl::string_view Name() const override { return key_; }
  absl::Status Mutate(const AdmissionRequest&, PodEdit* edit,
                      std::vector<std::string>*) const override {
    const bool has_labels = edit->pod()["metadata"].contains("labels");
    Json value = has_labels ? Json("true") : Json{{key_, "true"}};
    edit->AddOps(Json::array({{{"op", "add"},
                               {"path", has_labels ? "/metadata/labels/" + key_ : "/metadata/labels"},
                               {"value", value}}}));
    return absl::OkStatus();
  }

 private:
  std::string key_;
};

TEST(PodMutatingHandlerTest, OperationsAreSentAsTheyAreOrAppliedForLaterEditors) {
  Json pod = PodOwnedBy("", "", false);
  {  // The last mutator's operations, nobody after it reading the pod: sent exactly, no diff.
    std::vector<std::unique_ptr<PodMutator>> chain;
    chain.push_back(std::make_unique<OpsMutator>("a"));
    AdmissionResponse resp = PodMutatingHandler(std::move(chain), {}).Handle(CreatePodRequest(pod));
    ASSERT_TRUE(resp.patch.has_value());
    EXPECT_EQ(Json::parse(*resp.patch),
              Json::parse(R"([{"op": "add", "path": "/metadata/labels", "value": {"a": "true"}}])"));
  }
  {  // Mixed with editors, in either order: every mutator sees the earlier ones' changes.
    std::vector<std::string> seen;
    std::vector<std::unique_ptr<PodMutator>> chain;
    chain.push_back(std::make_unique<OpsMutator>("a"));
    chain.push_back(std::make_unique<LabelMutator>("b", &seen));
    chain.push_back(std::make_unique<OpsMutator>("c"));
    chain.push_back(std::make_unique<LabelMutator>("d", &seen));
    chain.push_back(std::make_unique<OpsMutator>("e"));
    chain.push_back(std::make_unique<OpsMutator>("f"));
    AdmissionResponse resp = PodMutatingHandler(std::move(chain), {}).Handle(CreatePodRequest(pod));
    EXPECT_EQ(seen, (std::vector<std::string>{"a,", "a,b,c,"}));
    EXPECT_EQ(Apply(pod, resp)["metadata"]["labels"],
              Json::parse(R"({"a": "true", "b": "true", "c": "true", "d": "true", "e": "true",
                              "f": "true"})"));
  }
}

}  // namespace
// ---- Issue 33: failurePolicy Ignore -------------------------------------------------------------

// Fails with `status`, or throws when `throw_it`, after editing the pod when `edit_first`.
class FailingMutator final : public PodMutator {
 public:
  FailingMutator(absl::Status status, bool throw_it = false, bool edit_first = false)
      : status_(std::move(status)), throw_it_(throw_it), edit_first_(edit_first) {}
  absl::string_view Name() const override { return "failing"; }
  absl::Status Mutate(const AdmissionRequest&, PodEdit* edit,
                      std::vector<std::string>*) const override {
    if (edit_first_) (*edit->Mutable())["metadata"]["labels"]["half"] = "done";
    if (throw_it_) throw 42;  // not even a std::exception
    return status_;
  }

 private:
  absl::Status status_;
  bool throw_it_;
  bool edit_first_;
};

std::unique_ptr<PodMutatingHandler> FailOpenChain(std::unique_ptr<PodMutator> failing,
                                                  FailOpen* fail_open) {
  std::vector<std::unique_ptr<PodMutator>> chain;
  chain.push_back(std::move(failing));
  chain.push_back(std::make_unique<ReadinessGateInjector>(/*all_pods=*/true));
  PodMutatingHandler::Options opts;
  opts.fail_open = fail_open;
  return std::make_unique<PodMutatingHandler>(std::move(chain), opts);
}

TEST(PodMutatingHandlerFailOpenTest, InfrastructureErrorAllowsWithAWarningAndTheRestOfTheChain) {
  prometheus::Registry metrics;
  FailOpen fail_open({.metrics = &metrics});
  auto handler = FailOpenChain(
      std::make_unique<FailingMutator>(absl::UnavailableError("API server timed out")),
      &fail_open);
  Json pod = PodOwnedBy("", "", false);
  AdmissionResponse resp = handler->Handle(CreatePodRequest(pod));
  EXPECT_TRUE(resp.allowed) << resp.result.message;
  ASSERT_EQ(resp.warnings.size(), 1u);
  EXPECT_THAT(resp.warnings[0], HasSubstr("failing: pod admitted without it: API server timed out"));
  // The readiness gate after it still ran.
  EXPECT_EQ(Apply(pod, resp)["spec"]["readinessGates"][0]["conditionType"],
            kKruisePodReadyCondition);
  EXPECT_EQ(fail_open.count(), 1);
  EXPECT_THAT(prometheus::TextSerializer().Serialize(metrics.Collect()),
              HasSubstr("kruise_webhook_infrastructure_failures_total{handler=\"failing\","
                        "path=\"/mutate-pod\"} 1"));
}

TEST(PodMutatingHandlerFailOpenTest, PolicyErrorStillDeniesWithItsReason) {
  FailOpen fail_open({});
  auto handler = FailOpenChain(
      std::make_unique<FailingMutator>(absl::FailedPreconditionError(
          "SidecarSets a and b both inject container log with different content")),
      &fail_open);
  AdmissionResponse resp = handler->Handle(CreatePodRequest(PodOwnedBy("", "", false)));
  EXPECT_FALSE(resp.allowed);
  EXPECT_EQ(resp.result.code, 422);
  EXPECT_THAT(resp.result.message, HasSubstr("SidecarSets a and b both inject container log"));
  EXPECT_EQ(fail_open.count(), 0);
}

TEST(PodMutatingHandlerFailOpenTest, ExceptionAllowsThePodUnchanged) {
  FailOpen fail_open({});
  auto handler = FailOpenChain(
      std::make_unique<FailingMutator>(absl::OkStatus(), /*throw_it=*/true, /*edit_first=*/true),
      &fail_open);
  AdmissionResponse resp = handler->Handle(CreatePodRequest(PodOwnedBy("", "", false)));
  EXPECT_TRUE(resp.allowed);
  EXPECT_FALSE(resp.patch.has_value());  // the half-done edit is not sent
  ASSERT_EQ(resp.warnings.size(), 1u);
  EXPECT_THAT(resp.warnings[0], HasSubstr("unknown exception"));
  EXPECT_EQ(fail_open.count(), 1);
}

TEST(PodMutatingHandlerFailOpenTest, WithoutFailOpenInfrastructureErrorsDeny) {
  auto handler = FailOpenChain(
      std::make_unique<FailingMutator>(absl::UnavailableError("API server timed out")), nullptr);
  AdmissionResponse resp = handler->Handle(CreatePodRequest(PodOwnedBy("", "", false)));
  EXPECT_FALSE(resp.allowed);
  EXPECT_EQ(resp.result.code, 500);
}

TEST(ServeAdmissionFailOpenTest, AnyExceptionAllowsOnIgnorePathsAndDeniesElsewhere) {
  FuncHandler throws([](const AdmissionRequest&) -> AdmissionResponse { throw 42; });
  const std::string review = Json::parse(R"({
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {"uid": "u1", "operation": "DELETE", "namespace": "default", "name": "p"}})")
                                 .dump();
  FailOpen fail_open({});
  HttpReply open = ServeAdmission(throws, review, "/validate-pod", &fail_open);
  ASSERT_EQ(open.status, 200);
  Json out = Json::parse(open.body);
  EXPECT_EQ(out["response"]["allowed"], true);
  EXPECT_THAT(out["response"]["warnings"][0].get<std::string>(), HasSubstr("unknown exception"));
  EXPECT_EQ(fail_open.count(), 1);
  HttpReply closed = ServeAdmission(throws, review);
  ASSERT_EQ(closed.status, 200);
  out = Json::parse(closed.body);
  EXPECT_EQ(out["response"]["allowed"], false);
  EXPECT_EQ(out["response"]["status"]["code"], 500);
}

}  // namespace kruise::manager::webhook
