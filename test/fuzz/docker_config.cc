// daemon::CredentialKeyring (daemon/imagepull/credential_keyring.h): docker config files and
// kubernetes.io/dockerconfigjson / dockercfg pull secrets. Properties:
//  - reading a config allocates a bounded multiple of it;
//  - an error never carries a credential (password, auth) from the config;
//  - NormalizeRegistryKey is idempotent;
//  - Lookup returns only credentials whose key matches the repository, most specific first.
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "daemon/imagepull/credential_keyring.h"
#include "test/fuzz/fuzz_util.h"

using kruise::daemon::CredentialKeyring;
using kruise::daemon::NormalizeRegistryKey;
using kruise::daemon::RegistryKeyMatches;
using kruise::fuzz::AllocationMeter;
using Json = nlohmann::json;

namespace {

// Every credential-looking string in `doc` (long enough not to appear by chance), and every key.
void Collect(const Json& doc, std::vector<std::string>* secrets, std::vector<std::string>* keys) {
  if (doc.is_object()) {
    for (const auto& [k, v] : doc.items()) {
      keys->push_back(k);
      if (v.is_string() && (k == "password" || k == "auth" || k == "identitytoken")) {
        const std::string& s = v.get_ref<const std::string&>();
        if (s.size() >= 6) secrets->push_back(s);
        std::string decoded;
        if (k == "auth" && absl::Base64Unescape(s, &decoded)) {
          size_t colon = decoded.find(':');
          if (colon != std::string::npos && decoded.size() - colon > 6) {
            secrets->push_back(decoded.substr(colon + 1));
          }
        }
      }
      Collect(v, secrets, keys);
    }
  } else if (doc.is_array()) {
    for (const Json& v : doc) Collect(v, secrets, keys);
  }
}

void CheckNoSecret(const absl::Status& st, const Json& doc) {
  if (st.ok()) return;
  std::vector<std::string> secrets, keys;
  Collect(doc, &secrets, &keys);
  const std::string message(st.message());
  for (const std::string& s : secrets) {
    bool named = false;  // keys are not secret and are named in messages
    for (const std::string& k : keys) named = named || k.find(s) != std::string::npos;
    FUZZ_CHECK(named || message.find(s) == std::string::npos)
        << "error message carries a credential: " << message;
  }
}

void CheckLookup(const CredentialKeyring& ring, const std::string& repository) {
  const std::string repo = NormalizeRegistryKey(repository);
  std::vector<kruise::daemon::RegistryCredential> found = ring.Lookup(repository);
  for (size_t i = 0; i < found.size(); ++i) {
    FUZZ_CHECK(RegistryKeyMatches(found[i].key, repo))
        << "key \"" << found[i].key << "\" returned for \"" << repo << "\"";
    if (i > 0) {
      FUZZ_CHECK(found[i - 1].key >= found[i].key) << "\"" << found[i - 1].key << "\" before \""
                                                   << found[i].key << "\" for \"" << repo << "\"";
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static AllocationMeter meter;
  if (size == 0) return 0;
  // First byte: which reader; the rest is the document.
  const char mode = static_cast<char>(data[0]);
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  CredentialKeyring ring;
  absl::Status st;
  Json doc = Json::parse(text, nullptr, false);
  switch (mode) {
    case 'j':  // ~/.docker/config.json, .dockerconfigjson
      meter.Bound("AddDockerConfigJson", text.size(), 64, 64 << 10,
                  [&] { st = ring.AddDockerConfigJson(text, "fuzz"); });
      break;
    case 'c':  // legacy .dockercfg
      meter.Bound("AddDockerCfg", text.size(), 64, 64 << 10,
                  [&] { st = ring.AddDockerCfg(text, "fuzz"); });
      break;
    case 's': {  // a Secret wrapping the document, as the API returns it
      Json secret = {{"metadata", {{"namespace", "ns"}, {"name", "pull"}}},
                     {"type", "kubernetes.io/dockerconfigjson"},
                     {"data", {{".dockerconfigjson", absl::Base64Escape(text)}}}};
      st = ring.AddSecret(secret);
      break;
    }
    default:  // a Secret object as it is
      st = ring.AddSecret(doc.is_discarded() ? Json() : doc);
      break;
  }
  if (!doc.is_discarded()) CheckNoSecret(st, doc);

  std::vector<std::string> keys, secrets;
  if (!doc.is_discarded()) Collect(doc, &secrets, &keys);
  for (const std::string& k : keys) {
    const std::string n = NormalizeRegistryKey(k);
    FUZZ_CHECK(NormalizeRegistryKey(n) == n)
        << "NormalizeRegistryKey(\"" << k << "\") = \"" << n << "\", normalised again \""
        << NormalizeRegistryKey(n) << "\"";
  }
  if (!st.ok()) return 0;
  CheckLookup(ring, "docker.io/library/busybox");
  for (size_t i = 0; i < keys.size() && i < 16; ++i) {
    const std::string n = NormalizeRegistryKey(keys[i]);
    if (n.empty()) continue;
    CheckLookup(ring, n);
    CheckLookup(ring, n + "/app");
  }
  return 0;
}
