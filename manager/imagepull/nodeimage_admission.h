#pragma once

// NodeImage defaulting and validation as OpenKruise's NodeImage webhooks do them, as pure
// functions over the raw object (issue 13). They make a NodeImage edited by hand (the "NodeImage
// (low-level)" way of OpenKruise's manual: `kubectl patch nodeimage/<node>` with a tag) behave as
// one written by an ImagePullJob: the tag gets `createdAt`, so the NodeImage controller keeps it
// until its `ttlSecondsAfterFinished`, and the daemon pulls it with the usual pull policy.
//
// Defaults (OpenKruise SetDefaultsNodeImage): for every spec.images[*].tags[*] without
// `createdAt`, the admission time; without `pullPolicy`, an empty one; then
// pullPolicy.timeoutSeconds 600 and backoffLimit 3 where absent. Nothing else is touched, so
// fields we do not model survive.
//
// Validation (OpenKruise's validating webhook): at most 256 images; image names and tags not
// empty; no tag twice in one image; every tag with `createdAt`, a non-negative `version`, a
// `pullPolicy` and `pullPolicy.ttlSecondsAfterFinished` (the controller's TTL; without it a
// hand-written tag would stay forever). Messages name the image and tag.
//
// Thread-compatible, no state.

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kube/client.h"

namespace kruise::manager {

inline constexpr int kMaxImagesPerNodeImage = 256;

// A copy of `node_image` with the defaults filled in; `now` is written as `createdAt`.
kube::Json DefaultNodeImage(const kube::Json& node_image, absl::Time now);

// OK, or INVALID_ARGUMENT with the first problem, e.g. "pullPolicy.ttlSecondsAfterFinished for
// busybox/v2 must be set". Validates `node_image` as given: default it first.
absl::Status ValidateNodeImage(const kube::Json& node_image);

}  // namespace kruise::manager
