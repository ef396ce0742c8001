#include "manager/controllers/imagepull_util.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cri/image_ref.h"

namespace kruise::manager {

absl::StatusOr<ImageNameTag> SplitImageNameTag(absl::string_view image) {
  auto ref = cri::ParseImageReference(image);
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

bool IsImagePullJobRef(const kube::Json& ref) {
  if (!ref.is_object()) return false;
  const std::string api_version = ref.value("apiVersion", "");
  return ref.value("kind", "") == "ImagePullJob" &&
         absl::StartsWith(api_version, "apps.kruise.io/");
}

}  // namespace kruise::manager
