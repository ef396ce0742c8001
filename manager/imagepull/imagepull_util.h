#pragma once

// Shared vocabulary of the ImagePullJob family: names, annotations and the image name/tag split
// NodeImages use. Pure functions, thread-compatible.

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kube/client.h"

namespace kruise::manager {

// Finalizer that keeps an ImagePullJob until its pull-secret copies were released.
inline constexpr char kProtectionFinalizer[] = "apps.kruise.io/deletion-protection";
// NodeImages with this label are kept even without a Node (tests, virtual setups).
inline constexpr char kFakeNodeImageLabel[] = "apps.kruise.io/fake-nodeimage";
// Nodes of this type run no kruise-daemon: no NodeImage.
inline constexpr char kVirtualKubeletLabel[] = "type";
inline constexpr char kVirtualKubeletValue[] = "virtual-kubelet";

// Pull-secret copies in the daemon config namespace.
inline constexpr char kSourceSecretKeyAnnotation[] = "imagepulljobs.kruise.io/source-key";
inline constexpr char kSourceSecretUidLabel[] = "imagepulljobs.kruise.io/source-uid";
inline constexpr char kReferencesAnnotation[] = "imagepulljobs.kruise.io/references";

// NodeImage tag status messages written by the manager's watchdog.
inline constexpr char kNotRespondedMessage[] = "node has not responded for a long time";
inline constexpr char kDeadlineExceededMessage[] = "pulling exceeds the activeDeadlineSeconds";

// How a NodeImage names an image: the familiar repository name ("busybox", "gcr.io/x/y",
// "127.0.0.1:5000/team/app") and the tag, or the digest when the reference has one
// ("sha256:..."); "latest" when neither was given. INVALID_ARGUMENT for unparsable references.
struct ImageNameTag {
  std::string name;
  std::string tag;
};
absl::StatusOr<ImageNameTag> SplitImageNameTag(absl::string_view image);

// True for apiVersion "apps.kruise.io/<any>" and kind ImagePullJob.
bool IsImagePullJobRef(const kube::Json& ref);

// The informer transform (kube::TransformFunc) of the group's Pod cache (ImagePullJob podSelector
// targets and the pod-moved predicate): apiVersion, kind and metadata name, namespace, uid,
// resourceVersion, labels and deletionTimestamp, spec.nodeName and status.phase, so 30k Pods stay
// small in memory. Nodes come from the manager's one node cache (kube::CompactNodeForManager).
void CompactPodForImagePullJobs(kube::Json& pod);

}  // namespace kruise::manager
