#include "test/e2e/testbed_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace kruise::testing {
namespace {

struct FdCloser {
  void operator()(int* fd) const {
    if (*fd >= 0) {
      close(*fd);
    }
    delete fd;
  }
};
using UniqueFd = std::unique_ptr<int, FdCloser>;

UniqueFd MakeFd(int fd) { return UniqueFd(new int(fd)); }

struct FileActions {
  posix_spawn_file_actions_t actions;
  FileActions() { posix_spawn_file_actions_init(&actions); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
};

}  // namespace

absl::StatusOr<int> RunCommand(const std::vector<std::string>& argv, std::string* output) {
  if (argv.empty()) {
    return absl::InvalidArgumentError("empty command");
  }
  UniqueFd read_end = MakeFd(-1);
  UniqueFd write_end = MakeFd(-1);
  if (output != nullptr) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      return absl::InternalError(std::string("pipe2: ") + std::strerror(errno));
    }
    read_end = MakeFd(fds[0]);
    write_end = MakeFd(fds[1]);
  }
  FileActions fa;
  posix_spawn_file_actions_addopen(&fa.actions, 0, "/dev/null", O_RDONLY, 0);
  if (output != nullptr) {
    posix_spawn_file_actions_adddup2(&fa.actions, *write_end, 1);
    posix_spawn_file_actions_adddup2(&fa.actions, *write_end, 2);
  } else {
    posix_spawn_file_actions_addopen(&fa.actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa.actions, 2, "/dev/null", O_WRONLY, 0);
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa.actions, nullptr, args.data(), environ);
  if (rc != 0) {
    return absl::InternalError("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  write_end.reset();
  if (output != nullptr) {
    output->clear();
    char buf[4096];
    while (true) {
      const ssize_t n = read(*read_end, buf, sizeof(buf));
      if (n > 0) {
        output->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        break;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(std::string("waitpid: ") + std::strerror(errno));
    }
  }
  if (WIFSIGNALED(status)) {
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

std::vector<std::string> SplitCommandLine(const std::string& line) {
  return absl::StrSplit(line, ' ', absl::SkipWhitespace());
}

absl::StatusOr<std::vector<TestbedImage>> ReadImagesFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError("cannot read " + path);
  }
  std::vector<TestbedImage> images;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (fields.size() < 3) {
      continue;
    }
    TestbedImage image;
    image.name_tag = fields[0];
    image.blobs.assign(fields.begin() + 1, fields.end());
    images.push_back(std::move(image));
  }
  if (images.empty()) {
    return absl::NotFoundError(path + " lists no images");
  }
  return images;
}

absl::StatusOr<std::set<std::string>> ContentDigests(const std::vector<std::string>& ctr) {
  std::vector<std::string> argv = ctr;
  argv.insert(argv.end(), {"content", "ls", "-q"});
  std::string out;
  absl::StatusOr<int> rc = RunCommand(argv, &out);
  if (!rc.ok()) {
    return rc.status();
  }
  if (*rc != 0) {
    return absl::UnavailableError("ctr content ls failed: " + out);
  }
  std::set<std::string> digests;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipWhitespace())) {
    digests.insert(std::string(absl::StripAsciiWhitespace(line)));
  }
  return digests;
}

std::vector<int> ShimPids(const std::string& socket, const std::string& id) {
  std::vector<int> pids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::ifstream in(entry.path() / "cmdline");
    std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> args = absl::StrSplit(raw, '\0');
    if (args.empty() || args[0].find("containerd-shim") == std::string::npos) {
      continue;
    }
    bool address_matches = false;
    bool id_matches = id.empty();
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      address_matches = address_matches || (args[i] == "-address" && args[i + 1] == socket);
      id_matches = id_matches || (args[i] == "-id" && args[i + 1] == id);
    }
    if (address_matches && id_matches) {
      pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

}  // namespace kruise::testing
