#include "test/e2e/kube/kube_local_env.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kube/resources.h"

namespace kruise::testing {

std::string KubeLocalEnv::EnvFilePath() {
  const char* p = std::getenv("KRUISE_KUBE_LOCAL_ENV");
  return p != nullptr && *p != '\0' ? p : "/tmp/kube-local/env";
}

KubeLocalEnv KubeLocalEnv::Parse(absl::string_view text) {
  KubeLocalEnv env;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    absl::ConsumePrefix(&line, "export ");
    line = absl::StripLeadingAsciiWhitespace(line);
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos || eq == 0) continue;
    std::string key(line.substr(0, eq));
    absl::string_view value = line.substr(eq + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    env.vars_[key] = std::string(value);
  }
  return env;
}

absl::StatusOr<KubeLocalEnv> KubeLocalEnv::Load() {
  const std::string path = EnvFilePath();
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no kube-local env file at ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  KubeLocalEnv env = Parse(ss.str());
  if (env.kubeconfig().empty()) {
    return absl::NotFoundError(absl::StrCat(path, " sets no KUBECONFIG"));
  }
  if (access(env.kubeconfig().c_str(), R_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("kubeconfig ", env.kubeconfig(), " named by ", path, " is not readable"));
  }
  return env;
}

std::string KubeLocalEnv::Get(const std::string& key) const {
  auto it = vars_.find(key);
  return it == vars_.end() ? "" : it->second;
}

std::string KubeLocalEnv::kubectl() const {
  std::string k = Get("KUBE_LOCAL_KUBECTL");
  return k.empty() ? "kubectl" : k;
}

bool KubeE2eRequired() {
  const char* v = std::getenv("KRUISE_E2E_REQUIRED");
  return v != nullptr && std::string(v) == "1";
}

absl::StatusOr<std::unique_ptr<kube::RestKubeClient>> AdminClient(const KubeLocalEnv& env,
                                                                  kube::RestClientOptions options) {
  auto config = kube::LoadKubeconfig(env.kubeconfig());
  if (!config.ok()) return config.status();
  // Tests create hundreds of objects: do not let the client-side throttle dominate their time.
  config->qps = 200;
  config->burst = 400;
  return kube::RestKubeClient::Create(*std::move(config), Clock::Real(), options);
}

std::string RandomName(const std::string& prefix) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  thread_local absl::BitGen gen;
  std::string out = prefix + "-";
  for (int i = 0; i < 8; ++i) {
    out.push_back(kAlphabet[absl::Uniform<size_t>(gen, 0, sizeof(kAlphabet) - 1)]);
  }
  return out;
}

ScopedNamespace::ScopedNamespace(kube::KubeClient* client, const std::string& prefix)
    : client_(client), name_(RandomName(prefix)) {
  kube::Json ns = {
      {"apiVersion", "v1"},
      {"kind", "Namespace"},
      {"metadata",
       {{"name", name_},
        {"labels", {{"kruise-e2e", "true"}, {"kubernetes.io/metadata.name", name_}}}}}};
  status_ = client_->Create(kube::resources::Namespaces(), "", ns).status();
}

ScopedNamespace::~ScopedNamespace() {
  if (!status_.ok()) return;
  kube::DeleteOptions opts;
  opts.propagation_policy = "Background";
  absl::Status st = client_->Delete(kube::resources::Namespaces(), "", name_, opts);
  if (!st.ok() && st.code() != absl::StatusCode::kNotFound) {
    ADD_FAILURE() << "deleting namespace " << name_ << ": " << st;
  }
}

absl::StatusOr<int> RunCommand(const std::vector<std::string>& argv, std::string* output) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (output != nullptr) *output = std::move(out);
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  return 128 + (WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0);
}

}  // namespace kruise::testing
