#include "cri/discovery.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "cri/grpc_cri.h"

namespace kruise::cri {
namespace {

std::string JoinPath(absl::string_view dir, absl::string_view rel) {
  if (dir.empty()) {
    return std::string(rel);
  }
  if (absl::EndsWith(dir, "/")) {
    return absl::StrCat(dir, rel);
  }
  return absl::StrCat(dir, "/", rel);
}

const char* FileTypeName(mode_t mode) {
  if (S_ISREG(mode)) return "regular file";
  if (S_ISDIR(mode)) return "directory";
  if (S_ISLNK(mode)) return "symlink";
  if (S_ISFIFO(mode)) return "fifo";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  return "unknown file type";
}

// Why a probe failed, in a few words plus the runtime's message where it helps.
std::string DescribeProbeFailure(const absl::Status& status, absl::Duration timeout) {
  absl::string_view msg = status.message();
  if (absl::StrContains(absl::AsciiStrToLower(msg), "connection refused")) {
    return "connection refused (nobody listening)";
  }
  if (absl::IsDeadlineExceeded(status)) {
    return absl::StrCat("timeout after ", absl::FormatDuration(timeout), " (", msg, ")");
  }
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", msg);
}

std::string SummariseImageFs(const ::runtime::v1::ImageFsInfoResponse& fs) {
  std::vector<std::string> parts;
  for (const auto& usage : fs.image_filesystems()) {
    parts.push_back(absl::StrCat(usage.fs_id().mountpoint(), ": ", usage.used_bytes().value(),
                                 " bytes, ", usage.inodes_used().value(), " inodes"));
  }
  if (parts.empty()) {
    return "no image filesystem reported";
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace

const std::vector<std::string>& DefaultRuntimeCandidates() {
  static const std::vector<std::string> kCandidates = {
      "containerd/containerd.sock",
      "containerd.sock",
      "crio/crio.sock",
      "crio.sock",
      "cri-dockerd.sock",
      "cri-dockerd/cri-dockerd.sock",
  };
  return kCandidates;
}

RuntimeProber GrpcProber(Clock* clock) {
  return [clock](const std::string& socket_path,
                 absl::Duration timeout) -> absl::StatusOr<ProbeResult> {
    GrpcCriOptions options;
    options.default_timeout = timeout;
    options.clock = clock;
    absl::StatusOr<CriClients> cri = ConnectCri(absl::StrCat("unix://", socket_path), options);
    if (!cri.ok()) {
      return cri.status();
    }
    ProbeResult result;
    absl::StatusOr<::runtime::v1::VersionResponse> version = cri->runtime->Version();
    if (!version.ok()) {
      return absl::Status(version.status().code(),
                          absl::StrCat("Version failed: ", version.status().message()));
    }
    result.version = *std::move(version);
    absl::StatusOr<::runtime::v1::ImageFsInfoResponse> fs = cri->images->ImageFsInfo();
    if (!fs.ok()) {
      return absl::Status(fs.status().code(),
                          absl::StrCat("ImageFsInfo failed: ", fs.status().message()));
    }
    result.image_fs = *std::move(fs);
    return result;
  };
}

absl::StatusOr<DiscoveredRuntime> DiscoverRuntime(const DiscoveryOptions& options) {
  auto log = Logger("cri");
  std::vector<std::string> paths;
  if (!options.socket_override.empty()) {
    absl::string_view override_path = options.socket_override;
    if (!absl::ConsumePrefix(&override_path, "unix://")) {
      absl::ConsumePrefix(&override_path, "unix:");
    }
    if (override_path.empty() || absl::StrContains(override_path, "://")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CRI socket override \"", options.socket_override, "\" is not a unix socket path"));
    }
    paths.push_back(absl::StartsWith(override_path, "/")
                        ? std::string(override_path)
                        : JoinPath(options.host_run_dir, override_path));
  } else {
    for (const std::string& rel : DefaultRuntimeCandidates()) {
      paths.push_back(JoinPath(options.host_run_dir, rel));
    }
  }

  RuntimeProber prober = options.prober ? options.prober : GrpcProber(options.clock);
  std::vector<std::string> failures;
  bool any_exists = false;
  for (const std::string& path : paths) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      int err = errno;
      if (err == ENOENT || err == ENOTDIR) {
        failures.push_back(absl::StrCat(path, ": missing"));
      } else {
        any_exists = true;
        failures.push_back(absl::StrCat(path, ": ", std::strerror(err)));
      }
      continue;
    }
    any_exists = true;
    if (!S_ISSOCK(st.st_mode)) {
      failures.push_back(absl::StrCat(path, ": not a socket (", FileTypeName(st.st_mode), ")"));
      continue;
    }
    absl::StatusOr<ProbeResult> probe = prober(path, options.probe_timeout);
    if (!probe.ok()) {
      failures.push_back(
          absl::StrCat(path, ": ", DescribeProbeFailure(probe.status(), options.probe_timeout)));
      log->debug("CRI candidate {} rejected: {}", path, probe.status());
      continue;
    }
    DiscoveredRuntime rt;
    rt.socket_path = path;
    rt.endpoint = absl::StrCat("unix://", path);
    rt.runtime_name = probe->version.runtime_name();
    rt.runtime_version = probe->version.runtime_version();
    rt.runtime_api_version = probe->version.runtime_api_version();
    rt.image_fs = std::move(probe->image_fs);
    rt.image_fs_summary = SummariseImageFs(rt.image_fs);
    if (!failures.empty()) {
      log->info("skipped CRI candidates: {}", absl::StrJoin(failures, "; "));
    }
    log->info("found CRI runtime {} {} (API {}) at {}", rt.runtime_name, rt.runtime_version,
              rt.runtime_api_version, rt.socket_path);
    return rt;
  }
  std::string message =
      absl::StrCat("no working CRI runtime socket (tried ", paths.size(), " path",
                   paths.size() == 1 ? "" : "s", "): ", absl::StrJoin(failures, "; "));
  if (!any_exists) {
    return absl::NotFoundError(message);
  }
  return absl::UnavailableError(message);
}

}  // namespace kruise::cri
