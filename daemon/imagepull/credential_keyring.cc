#include "daemon/imagepull/credential_keyring.h"

#include <fnmatch.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kruise::daemon {
namespace {

struct HostPath {
  std::string host;  // without port
  std::string port;
  std::string path;  // "" or "/a/b"
};

HostPath SplitHostPath(absl::string_view s) {
  HostPath hp;
  size_t slash = s.find('/');
  absl::string_view hostport = s.substr(0, slash);
  if (slash != absl::string_view::npos) hp.path = std::string(s.substr(slash));
  // Bracketed IPv6 literals keep their colons.
  size_t colon = hostport.rfind(':');
  size_t bracket = hostport.rfind(']');
  if (colon != absl::string_view::npos && (bracket == absl::string_view::npos || colon > bracket)) {
    hp.host = std::string(hostport.substr(0, colon));
    hp.port = std::string(hostport.substr(colon + 1));
  } else {
    hp.host = std::string(hostport);
  }
  while (hp.path.size() > 1 && hp.path.back() == '/') hp.path.pop_back();
  if (hp.path == "/") hp.path.clear();
  return hp;
}

std::string StringAt(const nlohmann::json& obj, const char* section, const char* key) {
  auto s = obj.find(section);
  if (s == obj.end() || !s->is_object()) return "";
  auto v = s->find(key);
  return v != s->end() && v->is_string() ? v->get<std::string>() : "";
}

bool IsDockerHubAlias(absl::string_view host) {
  return host == "docker.io" || host == "index.docker.io" || host == "registry-1.docker.io";
}

}  // namespace

std::string NormalizeRegistryKey(absl::string_view key) {
  absl::string_view k = key;
  if (!absl::ConsumePrefix(&k, "https://")) absl::ConsumePrefix(&k, "http://");
  if (k.empty()) return "";
  HostPath hp = SplitHostPath(k);
  if (hp.host.empty()) return "";
  // The docker client treats "<host>/v1/" and "<host>/v2/" as the host itself.
  if (hp.path == "/v1" || hp.path == "/v2") {
    hp.path.clear();
  } else if (absl::StartsWith(hp.path, "/v1/") || absl::StartsWith(hp.path, "/v2/")) {
    hp.path = hp.path.substr(3);
  }
  std::string host = absl::AsciiStrToLower(hp.host);
  if (IsDockerHubAlias(host) && hp.port.empty()) host = "docker.io";
  std::string out = host;
  if (!hp.port.empty()) absl::StrAppend(&out, ":", hp.port);
  absl::StrAppend(&out, hp.path);
  return out;
}

bool RegistryKeyMatches(absl::string_view key, absl::string_view repository) {
  HostPath k = SplitHostPath(key);
  HostPath r = SplitHostPath(repository);
  if (k.port != r.port) return false;
  std::vector<std::string> kp = absl::StrSplit(k.host, '.');
  std::vector<std::string> rp = absl::StrSplit(absl::AsciiStrToLower(r.host), '.');
  if (kp.size() != rp.size()) return false;
  for (size_t i = 0; i < kp.size(); ++i) {
    if (fnmatch(kp[i].c_str(), rp[i].c_str(), 0) != 0) return false;
  }
  if (k.path.empty()) return true;
  // Path prefix on component boundaries: "/team" matches "/team/app", not "/teamx".
  return r.path == k.path || absl::StartsWith(r.path, k.path + "/");
}

absl::Status CredentialKeyring::AddAuths(const nlohmann::json& auths, absl::string_view source) {
  if (!auths.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": docker config \"auths\" must be an object"));
  }
  for (const auto& [raw_key, entry] : auths.items()) {
    std::string key = NormalizeRegistryKey(raw_key);
    if (key.empty() || !entry.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": unusable docker config entry \"", raw_key, "\""));
    }
    RegistryCredential cred;
    cred.key = key;
    cred.source = std::string(source);
    if (auto it = entry.find("username"); it != entry.end() && it->is_string()) {
      cred.username = it->get<std::string>();
    }
    if (auto it = entry.find("password"); it != entry.end() && it->is_string()) {
      cred.password = it->get<std::string>();
    }
    if (auto it = entry.find("auth"); it != entry.end() && it->is_string() &&
                                      !it->get<std::string>().empty() && cred.username.empty()) {
      std::string decoded;
      if (!absl::Base64Unescape(it->get<std::string>(), &decoded)) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": docker config entry \"", raw_key,
                                                       "\" has an \"auth\" that is not base64"));
      }
      size_t colon = decoded.find(':');
      if (colon == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": docker config entry \"", raw_key,
                                                       "\" has an \"auth\" without user:password"));
      }
      cred.username = decoded.substr(0, colon);
      cred.password = decoded.substr(colon + 1);
    }
    if (cred.username.empty() && cred.password.empty()) continue;  // e.g. credsStore-only entries
    entries_.push_back({key, std::move(cred)});
  }
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.key > b.key; });
  return absl::OkStatus();
}

absl::Status CredentialKeyring::AddDockerConfigJson(absl::string_view json,
                                                    absl::string_view source) {
  nlohmann::json doc = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": docker config is not a JSON object"));
  }
  auto it = doc.find("auths");
  if (it == doc.end()) return absl::OkStatus();  // a config with no credentials
  return AddAuths(*it, source);
}

absl::Status CredentialKeyring::AddDockerCfg(absl::string_view json, absl::string_view source) {
  nlohmann::json doc = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": .dockercfg is not a JSON object"));
  }
  return AddAuths(doc, source);
}

absl::Status CredentialKeyring::AddSecret(const nlohmann::json& secret) {
  if (!secret.is_object()) return absl::InvalidArgumentError("pull secret is not an object");
  std::string source = absl::StrCat(StringAt(secret, "metadata", "namespace"), "/",
                                    StringAt(secret, "metadata", "name"));
  auto type_it = secret.find("type");
  std::string type =
      type_it != secret.end() && type_it->is_string() ? type_it->get<std::string>() : "";
  const char* field = nullptr;
  bool is_json = false;
  if (type == "kubernetes.io/dockerconfigjson") {
    field = ".dockerconfigjson";
    is_json = true;
  } else if (type == "kubernetes.io/dockercfg") {
    field = ".dockercfg";
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "secret ", source, " has type \"", type,
        "\"; pull secrets must be kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg"));
  }
  auto data = secret.find("data");
  if (data == secret.end() || !data->is_object() || !data->contains(field) ||
      !(*data)[field].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("secret ", source, " has no data key ", field));
  }
  std::string decoded;
  if (!absl::Base64Unescape((*data)[field].get<std::string>(), &decoded)) {
    return absl::InvalidArgumentError(
        absl::StrCat("secret ", source, ": data key ", field, " is not base64"));
  }
  return is_json ? AddDockerConfigJson(decoded, source) : AddDockerCfg(decoded, source);
}

std::vector<RegistryCredential> CredentialKeyring::Lookup(absl::string_view repository) const {
  std::string repo = NormalizeRegistryKey(repository);
  std::vector<RegistryCredential> out;
  for (const Entry& e : entries_) {
    if (RegistryKeyMatches(e.key, repo)) out.push_back(e.credential);
  }
  return out;
}

}  // namespace kruise::daemon
