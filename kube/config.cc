#include "kube/config.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace kruise::kube {
namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string ResolvePath(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p.front() == '/' || base_dir.empty()) return p;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

// Reads a scalar string field of a map node; "" when absent. Errors when present but not a scalar.
absl::StatusOr<std::string> ScalarField(const YAML::Node& map, const char* key,
                                        const std::string& where) {
  YAML::Node n = map[key];
  if (!n || n.IsNull()) return std::string();
  if (!n.IsScalar()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": expected a string"));
  }
  return n.Scalar();
}

absl::StatusOr<std::string> DecodeBase64Field(const std::string& value, const std::string& where) {
  std::string out;
  std::string compact;
  for (char c : value) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) compact.push_back(c);
  }
  if (!absl::Base64Unescape(compact, &out)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not valid base64"));
  }
  return out;
}

// Finds the entry named `name` in a kubeconfig list (clusters/users/contexts) and returns its
// `field` map.
absl::StatusOr<YAML::Node> FindNamed(const YAML::Node& root, const char* list, const char* field,
                                     const std::string& name, const std::string& file) {
  YAML::Node entries = root[list];
  if (!entries || entries.IsNull()) {
    return absl::NotFoundError(
        absl::StrCat(file, ": no \"", list, "\" list (looking for \"", name, "\")"));
  }
  if (!entries.IsSequence()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": \"", list, "\" is not a list"));
  }
  for (const YAML::Node& e : entries) {
    if (!e.IsMap()) continue;
    YAML::Node n = e["name"];
    if (n && n.IsScalar() && n.Scalar() == name) {
      YAML::Node f = e[field];
      if (!f || f.IsNull()) return YAML::Node(YAML::NodeType::Map);
      if (!f.IsMap()) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ": ", list, "[name=", name, "].", field, " is not a map"));
      }
      return f;
    }
  }
  return absl::NotFoundError(absl::StrCat(file, ": ", list, " has no entry named \"", name, "\""));
}

absl::StatusOr<RestConfig> ParseKubeconfig(const YAML::Node& root, const std::string& path,
                                           const std::string& context_override) {
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a kubeconfig (expected a map)"));
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  std::string ctx_name = context_override;
  if (ctx_name.empty()) {
    ASSIGN_OR_RETURN(ctx_name, ScalarField(root, "current-context", path));
    if (ctx_name.empty()) {
      return absl::NotFoundError(
          absl::StrCat(path, ": current-context is not set and no context was given"));
    }
  }
  ASSIGN_OR_RETURN(YAML::Node ctx, FindNamed(root, "contexts", "context", ctx_name, path));
  const std::string ctx_where = absl::StrCat(path, ": contexts[name=", ctx_name, "].context");
  ASSIGN_OR_RETURN(std::string cluster_name, ScalarField(ctx, "cluster", ctx_where));
  ASSIGN_OR_RETURN(std::string user_name, ScalarField(ctx, "user", ctx_where));
  if (cluster_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx_where, ".cluster is missing"));
  }

  RestConfig cfg;
  cfg.source = absl::StrCat("kubeconfig ", path, " context ", ctx_name);
  ASSIGN_OR_RETURN(cfg.default_namespace, ScalarField(ctx, "namespace", ctx_where));

  ASSIGN_OR_RETURN(YAML::Node cluster, FindNamed(root, "clusters", "cluster", cluster_name, path));
  const std::string cl_where = absl::StrCat(path, ": clusters[name=", cluster_name, "].cluster");
  ASSIGN_OR_RETURN(cfg.host, ScalarField(cluster, "server", cl_where));
  if (cfg.host.empty())
    return absl::InvalidArgumentError(absl::StrCat(cl_where, ".server is missing"));
  while (absl::EndsWith(cfg.host, "/")) cfg.host.pop_back();
  if (!absl::StartsWith(cfg.host, "https://") && !absl::StartsWith(cfg.host, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat(cl_where, ".server \"", cfg.host, "\" must start with https:// or http://"));
  }
  ASSIGN_OR_RETURN(std::string ca_data_b64,
                   ScalarField(cluster, "certificate-authority-data", cl_where));
  if (!ca_data_b64.empty()) {
    ASSIGN_OR_RETURN(cfg.ca_data,
                     DecodeBase64Field(ca_data_b64, cl_where + ".certificate-authority-data"));
  } else {
    ASSIGN_OR_RETURN(std::string ca_file, ScalarField(cluster, "certificate-authority", cl_where));
    cfg.ca_file = ResolvePath(dir, ca_file);
  }
  if (YAML::Node insecure = cluster["insecure-skip-tls-verify"]; insecure && !insecure.IsNull()) {
    bool v = false;
    if (!insecure.IsScalar() || !YAML::convert<bool>::decode(insecure, v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(cl_where, ".insecure-skip-tls-verify: expected true or false"));
    }
    cfg.insecure_skip_tls_verify = v;
  }

  if (!user_name.empty()) {
    ASSIGN_OR_RETURN(YAML::Node user, FindNamed(root, "users", "user", user_name, path));
    const std::string u_where = absl::StrCat(path, ": users[name=", user_name, "].user");
    if (user["exec"] || user["auth-provider"]) {
      return absl::UnimplementedError(
          absl::StrCat(u_where, ": exec and auth-provider credentials are not supported"));
    }
    ASSIGN_OR_RETURN(cfg.bearer_token, ScalarField(user, "token", u_where));
    ASSIGN_OR_RETURN(std::string token_file, ScalarField(user, "tokenFile", u_where));
    // As in kubectl: an inline token takes precedence over tokenFile.
    if (cfg.bearer_token.empty()) cfg.bearer_token_file = ResolvePath(dir, token_file);
    ASSIGN_OR_RETURN(std::string cert_b64, ScalarField(user, "client-certificate-data", u_where));
    ASSIGN_OR_RETURN(std::string key_b64, ScalarField(user, "client-key-data", u_where));
    if (!cert_b64.empty()) {
      ASSIGN_OR_RETURN(cfg.client_cert_data,
                       DecodeBase64Field(cert_b64, u_where + ".client-certificate-data"));
    } else {
      ASSIGN_OR_RETURN(std::string f, ScalarField(user, "client-certificate", u_where));
      cfg.client_cert_file = ResolvePath(dir, f);
    }
    if (!key_b64.empty()) {
      ASSIGN_OR_RETURN(cfg.client_key_data,
                       DecodeBase64Field(key_b64, u_where + ".client-key-data"));
    } else {
      ASSIGN_OR_RETURN(std::string f, ScalarField(user, "client-key", u_where));
      cfg.client_key_file = ResolvePath(dir, f);
    }
    const bool has_cert = !cfg.client_cert_data.empty() || !cfg.client_cert_file.empty();
    const bool has_key = !cfg.client_key_data.empty() || !cfg.client_key_file.empty();
    if (has_cert != has_key) {
      return absl::InvalidArgumentError(
          absl::StrCat(u_where, ": client-certificate and client-key must be given together"));
    }
  }
  // A token file that does not exist is a configuration error worth reporting at load time.
  if (!cfg.bearer_token_file.empty() && !FileExists(cfg.bearer_token_file)) {
    return absl::NotFoundError(
        absl::StrCat(path, ": tokenFile ", cfg.bearer_token_file, " does not exist"));
  }
  for (const std::string* f : {&cfg.ca_file, &cfg.client_cert_file, &cfg.client_key_file}) {
    if (!f->empty() && !FileExists(*f)) {
      return absl::NotFoundError(absl::StrCat(path, ": referenced file ", *f, " does not exist"));
    }
  }
  return cfg;
}

std::string BracketHost(const std::string& host) {
  if (host.find(':') != std::string::npos && host.front() != '[') return "[" + host + "]";
  return host;
}

int64_t MtimeNs(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  return ss.str();
}

absl::StatusOr<RestConfig> InClusterConfig(const InClusterOptions& opts) {
  EnvLookup env = opts.env ? opts.env : ProcessEnv();
  std::optional<std::string> host = env("KUBERNETES_SERVICE_HOST");
  std::optional<std::string> port = env("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return absl::NotFoundError(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
        "set");
  }
  RestConfig cfg;
  cfg.source = "in-cluster";
  cfg.host = absl::StrCat("https://", BracketHost(*host), ":", *port);
  const std::string dir = opts.service_account_dir;
  cfg.bearer_token_file = dir + "/token";
  if (!FileExists(cfg.bearer_token_file)) {
    return absl::NotFoundError(
        absl::StrCat("in-cluster config: token file ", cfg.bearer_token_file, " does not exist"));
  }
  const std::string ca = dir + "/ca.crt";
  if (!FileExists(ca)) {
    return absl::NotFoundError(absl::StrCat("in-cluster config: CA file ", ca, " does not exist"));
  }
  cfg.ca_file = ca;
  if (auto ns = ReadFileToString(dir + "/namespace"); ns.ok()) {
    cfg.default_namespace = std::string(absl::StripAsciiWhitespace(*ns));
  }
  return cfg;
}

absl::StatusOr<RestConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  try {
    YAML::Node root = YAML::Load(text);
    return ParseKubeconfig(root, path, context);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": malformed kubeconfig YAML: ", e.what()));
  }
}

absl::StatusOr<RestConfig> ResolveConfig(const ResolveOptions& opts) {
  if (!opts.kubeconfig_flag.empty()) return LoadKubeconfig(opts.kubeconfig_flag, opts.context);
  EnvLookup env = opts.env ? opts.env : ProcessEnv();
  if (std::optional<std::string> kc = env("KUBECONFIG"); kc && !kc->empty()) {
    for (absl::string_view p : absl::StrSplit(*kc, ':', absl::SkipEmpty())) {
      std::string file(p);
      if (FileExists(file)) return LoadKubeconfig(file, opts.context);
    }
  }
  InClusterOptions ic = opts.in_cluster;
  if (!ic.env) ic.env = env;
  absl::StatusOr<RestConfig> in_cluster = InClusterConfig(ic);
  if (in_cluster.ok() || !absl::IsNotFound(in_cluster.status())) return in_cluster;
  if (std::optional<std::string> home = env("HOME"); home && !home->empty()) {
    std::string file = *home + "/.kube/config";
    if (FileExists(file)) return LoadKubeconfig(file, opts.context);
  }
  return absl::NotFoundError(
      "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, run in a cluster or create "
      "~/.kube/config");
}

BearerTokenSource::BearerTokenSource(std::string static_token, std::string token_file, Clock* clock,
                                     absl::Duration check_interval, absl::Duration max_age)
    : file_(std::move(token_file)),
      clock_(clock),
      check_interval_(check_interval),
      max_age_(max_age),
      token_(std::move(static_token)) {
  have_token_ = !token_.empty();
}

absl::Status BearerTokenSource::ReadLocked() {
  int64_t mtime = MtimeNs(file_);
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(file_));
  token_ = std::string(absl::StripAsciiWhitespace(text));
  have_token_ = true;
  mtime_ns_ = mtime;
  last_read_ = clock_->Now();
  last_check_ = last_read_;
  return absl::OkStatus();
}

absl::StatusOr<std::string> BearerTokenSource::Token() {
  absl::MutexLock lock(&mu_);
  if (file_.empty()) return token_;
  const absl::Time now = clock_->Now();
  bool reread = !have_token_ || now - last_read_ >= max_age_;
  if (!reread && now - last_check_ >= check_interval_) {
    last_check_ = now;
    reread = MtimeNs(file_) != mtime_ns_;
  }
  if (reread) {
    absl::Status s = ReadLocked();
    // Keep serving the previous token if a rotation is in progress; fail only when we have none.
    if (!s.ok() && !have_token_) return s;
  }
  return token_;
}

bool BearerTokenSource::Refresh() {
  absl::MutexLock lock(&mu_);
  if (file_.empty()) return false;
  std::string before = token_;
  if (!ReadLocked().ok()) return false;
  return token_ != before;
}

}  // namespace kruise::kube
