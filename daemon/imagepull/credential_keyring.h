#pragma once

// CredentialKeyring: registry credentials from Kubernetes pull secrets and docker config files,
// matched to an image the way the kubelet's keyring does:
//
//  - keys may carry a scheme and a /v1/ or /v2/ suffix ("https://index.docker.io/v1/"), which are
//    dropped; what remains is "host[:port][/path]";
//  - a key matches an image repository when the host names have the same number of dot-separated
//    parts and each part matches as a glob ("*.example.com"), the ports are equal, and the key's
//    path is a prefix of the repository path;
//  - every matching credential is returned, most specific key first (keys sorted in reverse
//    lexical order, so "quay.io/coreos" comes before "quay.io");
//  - Docker Hub aliases (docker.io, index.docker.io, registry-1.docker.io) are one registry.
//
// An empty lookup result means "pull anonymously". Credentials never appear in logs or statuses:
// error messages name the secret and the key, never the values.
//
// Thread-safety: const methods may be called concurrently; Add* need external synchronisation.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace kruise::daemon {

struct RegistryCredential {
  std::string username;
  std::string password;
  std::string key;     // the normalised docker-config key it came from ("registry.example.com")
  std::string source;  // where it came from ("kruise-daemon-config/pull-secret-abc12"), for logs
};

class CredentialKeyring {
 public:
  // `{"auths": {"<key>": {"username", "password", "auth", ...}}}` (kubernetes.io/dockerconfigjson,
  // ~/.docker/config.json).
  absl::Status AddDockerConfigJson(absl::string_view json, absl::string_view source);
  // Legacy `{"<key>": {...}}` (kubernetes.io/dockercfg, ~/.dockercfg).
  absl::Status AddDockerCfg(absl::string_view json, absl::string_view source);
  // A core/v1 Secret object of type kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg
  // (data values base64-encoded, as the API returns them).
  absl::Status AddSecret(const nlohmann::json& secret);

  // `repository` is a normalised repository with its registry, e.g. "docker.io/library/busybox"
  // or "127.0.0.1:5000/team/app" (no tag or digest).
  std::vector<RegistryCredential> Lookup(absl::string_view repository) const;

  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    std::string key;
    RegistryCredential credential;
  };
  absl::Status AddAuths(const nlohmann::json& auths, absl::string_view source);

  std::vector<Entry> entries_;  // sorted by key, descending (most specific first)
};

// Normalises a docker-config key: drops the scheme and a leading /v1/ or /v2/ path, maps Docker Hub
// aliases to "docker.io". Returns "" for keys that cannot be used.
std::string NormalizeRegistryKey(absl::string_view key);

// Whether the normalised key `key` matches the normalised `repository` (rules above).
bool RegistryKeyMatches(absl::string_view key, absl::string_view repository);

}  // namespace kruise::daemon
