#pragma once

// Compact object keys for the informer store. Kubernetes objects repeat the same field names in
// every object ("lastTransitionTime", "containerID", "ownerReferences", ...); in MessagePack each
// occurrence costs its full length. The store rewrites the object keys found in a fixed table to
// two-byte codes before encoding and restores them after decoding, which takes about a quarter off
// a cached pod without changing what callers see.
//
// Encoding of a key k:
//   k in the table at index i (< 255)  → "\x01" + char(i + 1)
//   k starting with '\x01' or '\x02'   → "\x02" + k   (escape; never seen in real objects)
//   anything else                      → k unchanged
// The table only ever grows at the end: reordering it would not corrupt anything in memory (the
// store is never persisted) but keeps the codes stable for readers of a core dump.
//
// Thread-safety: stateless functions over an immutable table.

#include "kube/client.h"

namespace kruise::kube {

// A copy of `obj` with object keys compacted (recursively, including inside arrays).
Json CompactKeys(const Json& obj);
// Inverse of CompactKeys, in place.
void ExpandKeys(Json& obj);

}  // namespace kruise::kube
