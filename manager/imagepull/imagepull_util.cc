#include "manager/imagepull/imagepull_util.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/image_ref.h"
#include "kube/object.h"

namespace kruise::manager {

absl::StatusOr<ImageNameTag> SplitImageNameTag(absl::string_view image) {
  auto ref = ParseImageReference(image);
  if (!ref.ok()) return ref.status();
  ImageNameTag out;
  if (ref->registry == "docker.io") {
    constexpr absl::string_view kLibrary = "library/";
    absl::string_view repo = ref->repository;
    if (absl::StartsWith(repo, kLibrary) && !absl::StrContains(repo.substr(kLibrary.size()), "/")) {
      repo.remove_prefix(kLibrary.size());
    }
    out.name = std::string(repo);
  } else {
    out.name = ref->RepositoryWithRegistry();
  }
  out.tag = !ref->digest.empty() ? ref->digest : (ref->tag.empty() ? "latest" : ref->tag);
  return out;
}

namespace {

// The kept metadata fields of `obj` (see CompactPodForImagePullJobs).
kube::Json KeptMetadata(const kube::Json& obj) {
  kube::Json meta = kube::Json::object();
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return meta;
  for (const char* f :
       {"name", "namespace", "uid", "resourceVersion", "labels", "deletionTimestamp"}) {
    if (auto it = m->find(f); it != m->end() && !it->is_null()) meta[f] = *it;
  }
  return meta;
}

// `obj` reduced to apiVersion, kind and the kept metadata.
kube::Json Skeleton(const kube::Json& obj) {
  kube::Json out = {{"metadata", KeptMetadata(obj)}};
  for (const char* f : {"apiVersion", "kind"}) {
    if (auto it = obj.find(f); it != obj.end() && it->is_string()) out[f] = *it;
  }
  return out;
}

}  // namespace

void CompactPodForImagePullJobs(kube::Json& pod) {
  if (!pod.is_object()) return;
  kube::Json out = Skeleton(pod);
  if (const kube::Json* n = kube::FindPath(pod, {"spec", "nodeName"}); n && n->is_string()) {
    out["spec"]["nodeName"] = *n;
  }
  if (const kube::Json* p = kube::FindPath(pod, {"status", "phase"}); p && p->is_string()) {
    out["status"]["phase"] = *p;
  }
  pod = std::move(out);
}

bool IsImagePullJobRef(const kube::Json& ref) {
  if (!ref.is_object()) return false;
  const std::string api_version = ref.value("apiVersion", "");
  return ref.value("kind", "") == "ImagePullJob" &&
         absl::StartsWith(api_version, "apps.kruise.io/");
}

}  // namespace kruise::manager
