#include "manager/webhook/crr_handlers.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise::manager::webhook {
namespace {

using ::testing::HasSubstr;

class MapPodReader : public PodReader {
 public:
  absl::StatusOr<Json> GetPod(const std::string& ns, const std::string& name) override {
    auto it = pods.find(ns + "/" + name);
    if (it == pods.end()) return absl::NotFoundError("pods \"" + name + "\" not found");
    return it->second;
  }
  std::map<std::string, Json> pods;
};

Json Pod() {
  return Json::parse(R"({
    "metadata": {"name": "web-0", "namespace": "default", "uid": "pod-uid-1"},
    "spec": {
      "nodeName": "node-a",
      "terminationGracePeriodSeconds": 45,
      "containers": [
        {"name": "app", "image": "nginx",
         "ports": [{"name": "http", "containerPort": 80}],
         "lifecycle": {"preStop": {"httpGet": {"path": "/quit", "port": "http"}}}},
        {"name": "sidecar", "image": "busybox",
         "ports": [{"containerPort": 9000}],
         "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}}},
        {"name": "plain", "image": "busybox"}
      ]
    },
    "status": {
      "phase": "Running",
      "containerStatuses": [
        {"name": "app", "containerID": "containerd://aaa", "restartCount": 2},
        {"name": "sidecar", "containerID": "containerd://bbb", "restartCount": 0},
        {"name": "plain", "containerID": "", "restartCount": 0}
      ]
    }
  })");
}

Json Crr(Json spec) {
  return {{"apiVersion", "apps.kruise.io/v1alpha1"},
          {"kind", "ContainerRecreateRequest"},
          {"metadata", {{"name", "crr-1"}, {"namespace", "default"}}},
          {"spec", std::move(spec)}};
}

AdmissionRequest Create(const Json& obj) {
  AdmissionRequest r;
  r.operation = "CREATE";
  r.namespace_ = "default";
  r.name = "crr-1";
  r.object = obj;
  return r;
}

// Applies the response's patch to the request object.
Json Apply(const AdmissionRequest& req, const AdmissionResponse& resp) {
  if (!resp.patch) return req.object;
  return req.object.patch(Json::parse(*resp.patch));
}

class CrrMutatorTest : public ::testing::Test {
 protected:
  void SetUp() override { reader_.pods["default/web-0"] = Pod(); }
  MapPodReader reader_;
  CrrMutator mutator_{&reader_};
};

TEST_F(CrrMutatorTest, DefaultsLabelsAndCopiesFromThePod) {
  AdmissionRequest req = Create(
      Crr({{"podName", "web-0"}, {"containers", {{{"name", "app"}}, {{"name", "sidecar"}}}}}));
  AdmissionResponse resp = mutator_.Handle(req);
  ASSERT_TRUE(resp.allowed) << resp.result.message;
  Json out = Apply(req, resp);
  const Json& labels = out["metadata"]["labels"];
  EXPECT_EQ(labels["crr.apps.kruise.io/node-name"], "node-a");
  EXPECT_EQ(labels["crr.apps.kruise.io/pod-uid"], "pod-uid-1");
  EXPECT_EQ(labels["crr.apps.kruise.io/active"], "true");
  EXPECT_EQ(out["spec"]["strategy"]["failurePolicy"], "Fail");
  EXPECT_EQ(out["spec"]["strategy"]["terminationGracePeriodSeconds"], 45);
  const Json& app = out["spec"]["containers"][0];
  EXPECT_EQ(app["statusContext"]["containerID"], "containerd://aaa");
  EXPECT_EQ(app["statusContext"]["restartCount"], 2);
  EXPECT_EQ(app["preStop"]["httpGet"]["path"], "/quit");
  EXPECT_EQ(app["ports"][0]["name"], "http");  // httpGet preStop: ports copied
  const Json& sidecar = out["spec"]["containers"][1];
  EXPECT_EQ(sidecar["preStop"]["exec"]["command"][0], "sleep");
  EXPECT_FALSE(sidecar.contains("ports"));  // exec preStop: no ports needed
  EXPECT_EQ(sidecar["statusContext"]["containerID"], "containerd://bbb");
}

TEST_F(CrrMutatorTest, KeepsExplicitStrategy) {
  AdmissionRequest req = Create(
      Crr({{"podName", "web-0"},
           {"containers", {{{"name", "app"}}}},
           {"strategy", {{"failurePolicy", "Ignore"}, {"terminationGracePeriodSeconds", 5}}}}));
  AdmissionResponse resp = mutator_.Handle(req);
  ASSERT_TRUE(resp.allowed) << resp.result.message;
  Json out = Apply(req, resp);
  EXPECT_EQ(out["spec"]["strategy"]["failurePolicy"], "Ignore");
  EXPECT_EQ(out["spec"]["strategy"]["terminationGracePeriodSeconds"], 5);
}

struct RejectCase {
  std::string name;
  Json spec;
  std::function<void(Json& pod)> pod_change;  // may be null
  std::string message;
};

TEST_F(CrrMutatorTest, Rejections) {
  const Json one = Json::array({{{"name", "app"}}});
  std::vector<RejectCase> cases = {
      {"no pod name", {{"containers", one}}, nullptr, "spec.podName is required"},
      {"no containers",
       {{"podName", "web-0"}, {"containers", Json::array()}},
       nullptr,
       "at least one container"},
      {"duplicate",
       {{"podName", "web-0"}, {"containers", {{{"name", "app"}}, {{"name", "app"}}}}},
       nullptr,
       "duplicated container name app"},
      {"unknown container",
       {{"podName", "web-0"}, {"containers", {{{"name", "nope"}}}}},
       nullptr,
       "container nope is not in pod default/web-0"},
      {"missing pod",
       {{"podName", "web-9"}, {"containers", one}},
       nullptr,
       "not found pod default/web-9"},
      {"unscheduled",
       {{"podName", "web-0"}, {"containers", one}},
       [](Json& p) { p["spec"].erase("nodeName"); },
       "is not scheduled"},
      {"terminating",
       {{"podName", "web-0"}, {"containers", one}},
       [](Json& p) { p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"; },
       "is not active"},
      {"finished",
       {{"podName", "web-0"}, {"containers", one}},
       [](Json& p) { p["status"]["phase"] = "Succeeded"; },
       "is not active"},
      {"deadline below 3",
       {{"podName", "web-0"}, {"containers", one}, {"activeDeadlineSeconds", 2}},
       nullptr,
       "activeDeadlineSeconds must be at least 3"},
      {"bad failure policy",
       {{"podName", "web-0"}, {"containers", one}, {"strategy", {{"failurePolicy", "Retry"}}}},
       nullptr,
       "failurePolicy must be Fail or Ignore"},
      {"negative grace",
       {{"podName", "web-0"},
        {"containers", one},
        {"strategy", {{"unreadyGracePeriodSeconds", -1}}}},
       nullptr,
       "unreadyGracePeriodSeconds must not be negative"},
      {"negative ttl",
       {{"podName", "web-0"}, {"containers", one}, {"ttlSecondsAfterFinished", -5}},
       nullptr,
       "ttlSecondsAfterFinished must not be negative"},
      {"not started",
       {{"podName", "web-0"}, {"containers", {{{"name", "plain"}}}}},
       nullptr,
       "has no containerID"},
  };
  for (const RejectCase& c : cases) {
    SCOPED_TRACE(c.name);
    reader_.pods["default/web-0"] = Pod();
    if (c.pod_change) c.pod_change(reader_.pods["default/web-0"]);
    AdmissionResponse resp = mutator_.Handle(Create(Crr(c.spec)));
    EXPECT_FALSE(resp.allowed);
    EXPECT_THAT(resp.result.message, HasSubstr(c.message));
  }
}

TEST_F(CrrMutatorTest, DeadlineOfThreeIsFineAndUpdatesPassThrough) {
  AdmissionResponse ok = mutator_.Handle(Create(Crr(
      {{"podName", "web-0"}, {"containers", {{{"name", "app"}}}}, {"activeDeadlineSeconds", 3}})));
  EXPECT_TRUE(ok.allowed) << ok.result.message;
  AdmissionRequest update = Create(Crr({{"podName", "nope"}}));
  update.operation = "UPDATE";
  AdmissionResponse resp = mutator_.Handle(update);
  EXPECT_TRUE(resp.allowed);
  EXPECT_FALSE(resp.patch.has_value());
}

TEST(CrrValidatorTest, SpecAndIdentityLabelsAreImmutable) {
  CrrValidator v;
  Json old_obj = Crr({{"podName", "web-0"}, {"containers", {{{"name", "app"}}}}});
  old_obj["metadata"]["labels"] = {{"crr.apps.kruise.io/pod-uid", "u1"},
                                   {"crr.apps.kruise.io/node-name", "n1"},
                                   {"crr.apps.kruise.io/active", "true"}};
  struct Case {
    std::string name;
    std::function<void(Json&)> change;
    bool allowed;
    std::string message;
  };
  std::vector<Case> cases = {
      {"status only",
       [](Json& o) {
         o["status"] = {{"phase", "Recreating"}};
       },
       true, ""},
      {"active label dropped",
       [](Json& o) { o["metadata"]["labels"].erase("crr.apps.kruise.io/active"); }, true, ""},
      {"spec changed", [](Json& o) { o["spec"]["podName"] = "web-1"; }, false, "immutable"},
      {"strategy added",
       [](Json& o) {
         o["spec"]["strategy"] = {{"forceRecreate", true}};
       },
       false, "immutable"},
      {"pod uid changed",
       [](Json& o) { o["metadata"]["labels"]["crr.apps.kruise.io/pod-uid"] = "u2"; }, false,
       "crr.apps.kruise.io/pod-uid is immutable"},
      {"node changed",
       [](Json& o) { o["metadata"]["labels"].erase("crr.apps.kruise.io/node-name"); }, false,
       "crr.apps.kruise.io/node-name is immutable"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    AdmissionRequest r;
    r.operation = "UPDATE";
    r.old_object = old_obj;
    r.object = old_obj;
    c.change(r.object);
    AdmissionResponse resp = v.Handle(r);
    EXPECT_EQ(resp.allowed, c.allowed) << resp.result.message;
    if (!c.allowed) {
      EXPECT_THAT(resp.result.message, HasSubstr(c.message));
    }
  }
  AdmissionRequest bad = Create(Crr({{"podName", "web-0"}, {"containers", Json::array()}}));
  EXPECT_FALSE(v.Handle(bad).allowed);
  AdmissionRequest del;
  del.operation = "DELETE";
  EXPECT_TRUE(v.Handle(del).allowed);
}

TEST(CrrHandlersTest, RegisteredOnBothPathFormsWhenEnabled) {
  MapPodReader reader;
  HandlerRegistry on, off;
  RegisterCrrHandlers(&on, &reader);
  RegisterCrrHandlers(&off, &reader, [] { return false; });
  for (const char* p :
       {kCrrMutatePath, kCrrValidatePath, kCrrMutatePathVersionless, kCrrValidatePathVersionless}) {
    EXPECT_TRUE(on.Has(p)) << p;
    EXPECT_FALSE(off.Has(p)) << p;
  }
}

}  // namespace
}  // namespace kruise::manager::webhook
