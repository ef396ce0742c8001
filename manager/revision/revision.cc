#include "manager/revision/revision.h"

#include "absl/strings/str_cat.h"
#include "kube/object.h"

namespace kruise::manager::revision {
namespace {

using Json = nlohmann::json;

uint32_t Fnv1a(uint32_t hash, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    hash ^= p[i];
    hash *= 16777619u;
  }
  return hash;
}

}  // namespace

std::string TemplateHash(const Json& pod_template, std::optional<int32_t> collision_count) {
  const std::string canonical = pod_template.dump();  // nlohmann's objects keep keys sorted
  uint32_t hash = Fnv1a(2166136261u, canonical.data(), canonical.size());
  if (collision_count) {
    const uint32_t c = static_cast<uint32_t>(*collision_count);
    const unsigned char bytes[4] = {
        static_cast<unsigned char>(c), static_cast<unsigned char>(c >> 8),
        static_cast<unsigned char>(c >> 16), static_cast<unsigned char>(c >> 24)};
    hash = Fnv1a(hash, bytes, sizeof bytes);
  }
  // Kubernetes' rand.SafeEncodeString over the decimal digits.
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string out = std::to_string(hash);
  for (char& ch : out) ch = kAlphabet[static_cast<unsigned char>(ch) % (sizeof kAlphabet - 1)];
  return out;
}

std::string RevisionName(const std::string& owner_name, const std::string& hash) {
  return absl::StrCat(owner_name, "-", hash);
}

Json NewControllerRevision(const Json& owner, const Json& pod_template, int64_t revision,
                           std::optional<int32_t> collision_count) {
  const Json* found_meta = kube::FindPath(owner, {"metadata"});
  const Json meta = found_meta != nullptr && found_meta->is_object() ? *found_meta : Json::object();
  const std::string owner_name = meta.value("name", "");
  const std::string hash = TemplateHash(pod_template, collision_count);
  Json labels = Json::object();
  if (const Json* l = kube::FindPath(pod_template, {"metadata", "labels"});
      l != nullptr && l->is_object()) {
    labels = *l;
  }
  labels[kControllerRevisionHashLabel] = hash;
  Json patched = pod_template;
  patched["$patch"] = "replace";
  return {{"apiVersion", "apps/v1"},
          {"kind", "ControllerRevision"},
          {"metadata",
           {{"name", RevisionName(owner_name, hash)},
            {"namespace", meta.value("namespace", "")},
            {"labels", std::move(labels)},
            {"ownerReferences",
             {{{"apiVersion", owner.value("apiVersion", "")},
               {"kind", owner.value("kind", "")},
               {"name", owner_name},
               {"uid", meta.value("uid", "")},
               {"controller", true},
               {"blockOwnerDeletion", true}}}}}},
          {"data", {{"spec", {{"template", std::move(patched)}}}}},
          {"revision", revision}};
}

Json RevisionTemplate(const Json& revision) {
  if (!revision.is_object() || !revision.contains("data")) return nullptr;
  const Json& data = revision["data"];
  if (!data.is_object() || !data.contains("spec") || !data["spec"].is_object() ||
      !data["spec"].contains("template")) {
    return nullptr;
  }
  Json t = data["spec"]["template"];
  if (t.is_object()) t.erase("$patch");
  return t;
}

std::vector<std::string> RevisionsToPrune(const std::vector<std::string>& sorted_names, int limit,
                                          const std::set<std::string>& keep) {
  std::vector<std::string> out;
  if (limit < 0) return out;
  int excess = static_cast<int>(sorted_names.size()) - limit;
  for (size_t i = 0; excess > 0 && i + 1 < sorted_names.size(); ++i) {
    if (keep.count(sorted_names[i])) continue;
    out.push_back(sorted_names[i]);
    --excess;
  }
  return out;
}

}  // namespace kruise::manager::revision
