#include "manager/webhook/admission.h"

#include <stdexcept>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manager/webhook/pod_handlers.h"

namespace kruise::manager::webhook {
namespace {

using ::testing::HasSubstr;

Json Review(const std::string& api_version, Json object, Json old_object = nullptr) {
  Json r = {{"apiVersion", api_version},
            {"kind", "AdmissionReview"},
            {"request",
             {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
              {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
              {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
              {"subResource", "status"},
              {"namespace", "load"},
              {"name", "p1"},
              {"operation", "UPDATE"},
              {"userInfo",
               {{"username", "alice"},
                {"uid", "u1"},
                {"groups", {"g1", "g2"}},
                {"extra", {{"k", {"v"}}}}}},
              {"dryRun", true}}}};
  if (!object.is_null()) r["request"]["object"] = std::move(object);
  if (!old_object.is_null()) r["request"]["oldObject"] = std::move(old_object);
  return r;
}

Json Pod(bool with_labels) {
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p1"}, {"namespace", "load"}}},
              {"spec", {{"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
  if (with_labels) pod["metadata"]["labels"] = {{"app", "x"}};
  return pod;
}

TEST(AdmissionDecodeTest, DecodesEveryFieldV1AndV1beta1) {
  for (const std::string v : {"admission.k8s.io/v1", "admission.k8s.io/v1beta1"}) {
    auto req = DecodeAdmissionReview(Review(v, Pod(true), Pod(false)).dump());
    ASSERT_TRUE(req.ok()) << req.status();
    EXPECT_EQ(req->api_version, v);
    EXPECT_EQ(req->uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    EXPECT_EQ(req->kind.kind, "Pod");
    EXPECT_EQ(req->kind.version, "v1");
    EXPECT_EQ(req->resource.resource, "pods");
    EXPECT_EQ(req->sub_resource, "status");
    EXPECT_EQ(req->namespace_, "load");
    EXPECT_EQ(req->name, "p1");
    EXPECT_EQ(req->operation, "UPDATE");
    EXPECT_EQ(req->user_info.username, "alice");
    EXPECT_EQ(req->user_info.uid, "u1");
    EXPECT_THAT(req->user_info.groups, ::testing::ElementsAre("g1", "g2"));
    EXPECT_EQ(req->user_info.extra["k"][0], "v");
    EXPECT_TRUE(req->dry_run);
    EXPECT_EQ(req->object, Pod(true));
    EXPECT_EQ(req->old_object, Pod(false));
  }
}

TEST(AdmissionDecodeTest, RejectsMalformedReviewsWithClearMessages) {
  struct Case {
    std::string body;
    std::string want;
  } cases[] = {
      {"{not json", "not valid JSON"},
      {"[]", "must be an object"},
      {R"({"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"a"}})",
       "unsupported AdmissionReview apiVersion"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"a"}})",
       "kind must be AdmissionReview"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})", "has no request"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}})",
       "uid is required"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}})",
       "request.uid must be a string"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","kind":3}})",
       "request.kind must be an object"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","dryRun":"yes"}})",
       "dryRun must be a boolean"},
  };
  for (const Case& c : cases) {
    auto req = DecodeAdmissionReview(c.body);
    ASSERT_FALSE(req.ok()) << c.body;
    EXPECT_EQ(req.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(req.status().message()), HasSubstr(c.want)) << c.body;
  }
}

TEST(AdmissionDecodeTest, KeepsEveryValueExceptManagedFieldsOfTheObjects) {
  Json object = Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p\u00e9-0", "namespace": "default", "labels": {"a": "b"},
                 "managedFields": [{"manager": "kubectl", "operation": "Update",
                                    "fieldsV1": {"f:metadata": {}}}]},
    "spec": {"priority": -2147483648, "big": 18446744073709551615, "ratio": 0.25,
             "exp": 1e300, "flag": false, "none": null, "empty": {}, "list": [],
             "nested": [[1, "two", {"three": [true]}]], "quote": "a\"b\\c\n\t\u0001"}
  })");
  Json old_object = object;
  Json review = Review("admission.k8s.io/v1", object, old_object);
  review["request"]["options"] = {{"managedFields", "kept: not an object's metadata"}};
  auto req = DecodeAdmissionReview(review.dump());
  ASSERT_TRUE(req.ok()) << req.status();
  Json want = object;
  want["metadata"].erase("managedFields");
  EXPECT_EQ(req->object, want);
  EXPECT_EQ(req->old_object, want);
  EXPECT_EQ(req->object["spec"]["big"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(req->object["spec"]["priority"].get<int64_t>(), -2147483648ll);
  EXPECT_EQ(req->object["metadata"]["name"], "p\xc3\xa9-0");  // the escape, decoded to UTF-8
}

// Found by test/fuzz/admission_review.cc: simdjson rejects integers beyond 64 bits, which the API
// server writes for a large float64 (Go prints 1e20 as 100000000000000000000), so such a review
// was answered 400. They decode as doubles, as nlohmann and Go read them.
TEST(AdmissionDecodeTest, IntegersBeyond64BitsAreDoubles) {
  const std::string body =
      R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "operation": "CREATE",
        "object": {"metadata": {"name": "ws", "managedFields": [{"manager": "kubectl"}]},
                   "spec": {"big": 100000000000000000000, "small": -9223372036854775809,
                            "fits": 18446744073709551615}}}})";
  auto req = DecodeAdmissionReview(body);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->uid, "u-1");
  EXPECT_EQ(req->object["spec"]["big"], Json(1e20));
  EXPECT_TRUE(req->object["spec"]["big"].is_number_float());
  EXPECT_EQ(req->object["spec"]["small"], Json(-9223372036854775809.0));
  EXPECT_EQ(req->object["spec"]["fits"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_FALSE(req->object["metadata"].contains("managedFields"));
  // Still refused: a number out of double's range, trailing bytes after a NUL, too deep.
  const std::string head = R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",)"
                           R"( "request": {"uid": "u", "object": {"x": )";
  const std::vector<std::string> refused = {
      head + "1e999}}}",
      head + "100000000000000000000}}}" + std::string(1, '\0') + "junk",
      head + "100000000000000000000, \"deep\": " + std::string(2000, '[') + std::string(2000, ']') +
          "}}}",
  };
  ASSERT_TRUE(DecodeAdmissionReview(head + "1}}}").ok());
  for (const std::string& bad : refused) {
    EXPECT_EQ(DecodeAdmissionReview(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad.substr(0, 120);
  }
}

// Found by test/fuzz/admission_review.cc: with a key given twice the first value won, where Go's
// encoding/json and nlohmann (every other JSON we read) keep the last.
TEST(AdmissionDecodeTest, RepeatedKeyKeepsTheLastValue) {
  auto req = DecodeAdmissionReview(R"({"apiVersion": "admission.k8s.io/v1beta1",
      "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {
      "uid": "first", "uid": "second", "operation": "CREATE",
      "object": {"metadata": {"name": "a", "name": "b"}, "metadata": {"name": "c"}, "x": 1, "x": 2}}})");
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->api_version, "admission.k8s.io/v1");
  EXPECT_EQ(req->uid, "second");
  EXPECT_EQ(req->object, Json::parse(R"({"metadata": {"name": "c"}, "x": 2})"));
}

TEST(AdmissionEncodeTest, EchoesVersionUidAndStatus) {
  AdmissionRequest req;
  req.api_version = "admission.k8s.io/v1beta1";
  req.uid = "u-1";
  AdmissionResponse denied = Denied(403, "no way", "Forbidden");
  denied.warnings = {"careful"};
  Json out = EncodeAdmissionReview(req, denied);
  EXPECT_EQ(out["apiVersion"], "admission.k8s.io/v1beta1");
  EXPECT_EQ(out["kind"], "AdmissionReview");
  EXPECT_EQ(out["response"]["uid"], "u-1");
  EXPECT_EQ(out["response"]["allowed"], false);
  EXPECT_EQ(out["response"]["status"]["code"], 403);
  EXPECT_EQ(out["response"]["status"]["message"], "no way");
  EXPECT_EQ(out["response"]["status"]["reason"], "Forbidden");
  EXPECT_EQ(out["response"]["warnings"][0], "careful");
  EXPECT_FALSE(out["response"].contains("patch"));
  Json allowed = EncodeAdmissionReview(req, Allowed());
  EXPECT_EQ(allowed["response"]["allowed"], true);
  EXPECT_FALSE(allowed["response"].contains("status"));
  // Quotes, control characters and bytes that are not UTF-8 (a pod's own text echoed in a
  // message) still give valid JSON; the invalid byte becomes U+FFFD.
  req.uid = "u-\"2\"";
  Json odd = EncodeAdmissionReview(req, Denied(422, "bad \"name\"\n\xff", ""));
  EXPECT_EQ(odd["response"]["uid"], "u-\"2\"");
  EXPECT_EQ(odd["response"]["status"]["message"], "bad \"name\"\n\xef\xbf\xbd");
}

TEST(AdmissionPatchTest, PatchResponseIsBase64JsonPatchThatReproducesTheMutation) {
  Json original = Pod(true);
  Json mutated = original;
  mutated["metadata"]["labels"]["injected"] = "true";
  mutated["spec"]["containers"].push_back({{"name", "side"}, {"image", "s:v1"}});
  mutated["metadata"].erase("namespace");
  AdmissionRequest req;
  req.api_version = "admission.k8s.io/v1";
  req.uid = "u";
  Json out = EncodeAdmissionReview(req, PatchResponse(original, mutated));
  EXPECT_EQ(out["response"]["patchType"], "JSONPatch");
  std::string raw;
  ASSERT_TRUE(absl::Base64Unescape(out["response"]["patch"].get<std::string>(), &raw));
  Json patch = Json::parse(raw);
  ASSERT_TRUE(patch.is_array());
  EXPECT_EQ(original.patch(patch), mutated);
  // No change, no patch.
  EXPECT_FALSE(PatchResponse(original, original).patch.has_value());
}

class Throwing final : public Handler {
 public:
  AdmissionResponse Handle(const AdmissionRequest&) override { throw std::runtime_error("boom"); }
};

TEST(ServeAdmissionTest, MalformedIs400AndHandlerExceptionIsDenial) {
  PodAllowValidator allow;
  HttpReply bad = ServeAdmission(allow, "{\"apiVersion\":1}");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.content_type, "text/plain");
  EXPECT_THAT(bad.body, HasSubstr("bad AdmissionReview"));

  Throwing throwing;
  HttpReply r = ServeAdmission(throwing, Review("admission.k8s.io/v1", Pod(true)).dump());
  EXPECT_EQ(r.status, 200);
  Json out = Json::parse(r.body);
  EXPECT_EQ(out["response"]["allowed"], false);
  EXPECT_EQ(out["response"]["status"]["code"], 500);
  EXPECT_THAT(out["response"]["status"]["message"].get<std::string>(), HasSubstr("boom"));
}

TEST(PodSidecarMutatorTest, AddsSidecarAndLabelWithOrWithoutLabels) {
  PodSidecarMutator mutator;
  for (bool labels : {true, false}) {
    Json pod = Pod(labels);
    HttpReply r = ServeAdmission(mutator, Review("admission.k8s.io/v1", pod).dump());
    ASSERT_EQ(r.status, 200);
    Json out = Json::parse(r.body);
    ASSERT_EQ(out["response"]["allowed"], true);
    std::string raw;
    ASSERT_TRUE(absl::Base64Unescape(out["response"]["patch"].get<std::string>(), &raw));
    Json patched = pod.patch(Json::parse(raw));
    EXPECT_EQ(patched["metadata"]["labels"]["injected"], "true");
    if (labels) {
      EXPECT_EQ(patched["metadata"]["labels"]["app"], "x");
    }
    ASSERT_EQ(patched["spec"]["containers"].size(), 2u);
    EXPECT_EQ(patched["spec"]["containers"][1]["name"], "injected-sidecar");
    EXPECT_EQ(patched["spec"]["containers"][1]["image"], "sidecar:v1");
  }
  // A well-formed envelope with a bad object: denial, not a crash.
  HttpReply r = ServeAdmission(mutator, Review("admission.k8s.io/v1", Json("str")).dump());
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Json::parse(r.body)["response"]["allowed"], false);
}

TEST(HandlerRegistryTest, RegistersOnlyWhenGateIsOn) {
  HandlerRegistry reg;
  EXPECT_TRUE(reg.Register("/mutate-pod", std::make_shared<PodSidecarMutator>()));
  EXPECT_FALSE(
      reg.Register("/validate-pod", std::make_shared<PodAllowValidator>(), [] { return false; }));
  EXPECT_TRUE(
      reg.Register("/validate-x", std::make_shared<PodAllowValidator>(), [] { return true; }));
  EXPECT_TRUE(reg.Has("/mutate-pod"));
  EXPECT_FALSE(reg.Has("/validate-pod"));
  EXPECT_EQ(reg.Find("/nope"), nullptr);
  EXPECT_THAT(reg.Paths(), ::testing::ElementsAre("/mutate-pod", "/validate-x"));
}

TEST(JsonPatchDiffTest, AppliedToTheOriginalGivesTheMutatedDocument) {
  const Json pod = Json::parse(R"({"metadata": {"name": "p", "labels": {"a/b": "1", "c~d": "2"}},
    "spec": {"containers": [{"name": "app", "image": "nginx:1", "env": [{"name": "X"}]}],
             "volumes": [{"name": "v", "emptyDir": {}}]}})");
  std::vector<std::pair<std::string, Json>> cases;
  Json sidecar_first = pod;
  sidecar_first["spec"]["containers"].insert(sidecar_first["spec"]["containers"].begin(),
                                             Json{{"name", "log"}, {"image", "fluentd:1"}});
  cases.emplace_back("container inserted in front", sidecar_first);
  Json edited = pod;
  edited["metadata"]["labels"]["a/b"] = "9";
  edited["metadata"]["labels"].erase("c~d");
  edited["metadata"]["annotations"] = {{"k", "v"}};
  edited["spec"]["containers"][0]["image"] = "nginx:2";
  cases.emplace_back("escaped keys, removal, addition, nested replace", edited);
  Json two_after = pod;
  two_after["spec"]["containers"].push_back(Json{{"name", "log"}, {"image", "fluentd:1"}});
  two_after["spec"]["containers"].push_back(Json{{"name", "proxy"}, {"image", "envoy:1"}});
  two_after["spec"]["volumes"].push_back(Json{{"name", "logs"}, {"emptyDir", Json::object()}});
  cases.emplace_back("containers and a volume appended", two_after);
  Json three = two_after;
  three["spec"]["containers"].insert(three["spec"]["containers"].begin() + 1,
                                     Json{{"name", "mid"}, {"image", "busybox"}});
  cases.emplace_back("a run inserted in the middle", three);
  Json reordered = two_after;
  std::swap(reordered["spec"]["containers"][1], reordered["spec"]["containers"][2]);
  reordered["spec"]["containers"].erase(reordered["spec"]["containers"].begin());
  cases.emplace_back("shrunk and reordered", reordered);
  Json retyped = pod;
  retyped["spec"]["volumes"] = "none";
  cases.emplace_back("type change", retyped);
  cases.emplace_back("root replaced", Json::array({1, 2}));
  for (const auto& [what, mutated] : cases) {
    Json ops = JsonPatchDiff(pod, mutated);
    EXPECT_EQ(pod.patch(ops), mutated) << what << ": " << ops.dump();
    // And back: the runs removed again.
    Json back = JsonPatchDiff(mutated, pod);
    EXPECT_EQ(mutated.patch(back), pod) << what << " reversed: " << back.dump();
  }
  EXPECT_EQ(JsonPatchDiff(pod, pod), Json::array());
  // A sidecar in front of the app container: one add, not a rewrite of the list.
  EXPECT_EQ(JsonPatchDiff(pod, sidecar_first),
            Json::parse(R"([{"op": "add", "path": "/spec/containers/0",
                             "value": {"name": "log", "image": "fluentd:1"}}])"));
  EXPECT_EQ(JsonPatchDiff(two_after, pod),
            Json::parse(R"([{"op": "remove", "path": "/spec/containers/1"},
                            {"op": "remove", "path": "/spec/containers/1"},
                            {"op": "remove", "path": "/spec/volumes/1"}])"));
  EXPECT_EQ(JsonPatchDiff(two_after, three),
            Json::parse(R"([{"op": "add", "path": "/spec/containers/1",
                             "value": {"name": "mid", "image": "busybox"}}])"));
  // Not one contiguous run: the list replaced whole.
  const Json shrunk = JsonPatchDiff(two_after, reordered);
  ASSERT_EQ(shrunk.size(), 1u) << shrunk.dump();
  EXPECT_EQ(shrunk[0]["op"], "replace");
  EXPECT_EQ(shrunk[0]["path"], "/spec/containers");
  EXPECT_EQ(JsonPatchDiff(pod, edited).size(), 4u) << JsonPatchDiff(pod, edited).dump();
}

}  // namespace
}  // namespace kruise::manager::webhook
