#include "daemon/imagepull/secret_credentials.h"

#include "absl/strings/str_cat.h"
#include "kube/resources.h"

namespace kruise::daemon {

SecretCredentialSource::SecretCredentialSource(kube::KubeClient* client, Clock* clock,
                                               absl::Duration ttl)
    : client_(client), clock_(clock), ttl_(ttl) {}

absl::StatusOr<std::shared_ptr<const nlohmann::json>> SecretCredentialSource::GetSecret(
    const SecretRef& ref) {
  auto key = std::make_pair(ref.namespace_, ref.name);
  {
    absl::MutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end() && clock_->Now() - it->second.first < ttl_) return it->second.second;
  }
  auto secret = client_->Get(kube::resources::Secrets(), ref.namespace_, ref.name);
  if (!secret.ok()) {
    return absl::Status(secret.status().code(),
                        absl::StrCat("reading pull secret ", ref.namespace_, "/", ref.name, ": ",
                                     secret.status().message()));
  }
  auto shared = std::make_shared<const nlohmann::json>(std::move(*secret));
  absl::MutexLock lock(&mu_);
  cache_[key] = {clock_->Now(), shared};
  return shared;
}

absl::StatusOr<std::vector<RegistryCredential>> SecretCredentialSource::Lookup(
    const std::string& repository, const std::vector<SecretRef>& secrets) {
  CredentialKeyring ring;
  for (const SecretRef& ref : secrets) {
    auto secret = GetSecret(ref);
    if (!secret.ok()) return secret.status();
    absl::Status added = ring.AddSecret(**secret);
    if (!added.ok()) return added;
  }
  return ring.Lookup(repository);
}

}  // namespace kruise::daemon
