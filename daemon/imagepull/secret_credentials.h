#pragma once

// SecretCredentialSource: credentials for a pull from the Secrets a NodeImage references (the
// manager copies them into kruise-daemon-config; the daemon may read Secrets only there).
// Secrets are read through the API and cached for `ttl`, so a burst of pulls reads each once;
// a rotated secret is picked up after the TTL. Contents never reach logs or statuses.
//
// Thread-safe.

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "daemon/imagepull/image_puller.h"
#include "kube/client.h"

namespace kruise::daemon {

class SecretCredentialSource final : public CredentialSource {
 public:
  SecretCredentialSource(kube::KubeClient* client, Clock* clock,
                         absl::Duration ttl = absl::Minutes(5));

  absl::StatusOr<std::vector<RegistryCredential>> Lookup(
      const std::string& repository, const std::vector<SecretRef>& secrets) override;

 private:
  absl::StatusOr<std::shared_ptr<const nlohmann::json>> GetSecret(const SecretRef& ref);

  kube::KubeClient* const client_;
  Clock* const clock_;
  const absl::Duration ttl_;
  absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>,
           std::pair<absl::Time, std::shared_ptr<const nlohmann::json>>>
      cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kruise::daemon
