// kruise-cri-probe: prints which CRI runtime discovery picks on this host and what it reports.
//
//   kruise-cri-probe [--run-dir /var/run] [--socket containerd/containerd.sock] [--timeout-ms 3000]
//
// Read-only: calls Version, ImageFsInfo, ListImages and containerd's content ListStatuses.
#include <cstdio>
#include <string>

#include "common/flags.h"
#include "cri/discovery.h"
#include "cri/grpc_cri.h"

int main(int argc, char** argv) {
  kruise::Flags app{"Discover the node's CRI runtime and print what it reports"};
  kruise::cri::DiscoveryOptions opts;
  int timeout_ms = 3000;
  app.Add("--run-dir", &opts.host_run_dir, "Host run directory holding runtime sockets");
  app.Add("--socket", &opts.socket_override,
          "Socket to use instead of the candidates (relative to --run-dir or absolute)");
  app.Add("--timeout-ms", &timeout_ms, "Per-call timeout in milliseconds");
  if (auto exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  opts.probe_timeout = absl::Milliseconds(timeout_ms);

  absl::StatusOr<kruise::cri::DiscoveredRuntime> rt = kruise::cri::DiscoverRuntime(opts);
  if (!rt.ok()) {
    std::fprintf(stderr, "discovery failed: %s\n", rt.status().ToString().c_str());
    return 1;
  }
  std::printf("socket:   %s\nruntime:  %s %s (CRI %s)\nimage fs: %s\n", rt->socket_path.c_str(),
              rt->runtime_name.c_str(), rt->runtime_version.c_str(),
              rt->runtime_api_version.c_str(), rt->image_fs_summary.c_str());

  kruise::cri::GrpcCriOptions cri_opts;
  cri_opts.default_timeout = opts.probe_timeout;
  absl::StatusOr<kruise::cri::CriClients> cri = kruise::cri::ConnectCri(rt->endpoint, cri_opts);
  if (!cri.ok()) {
    std::fprintf(stderr, "connect failed: %s\n", cri.status().ToString().c_str());
    return 1;
  }
  auto images = cri->images->ListImages();
  if (images.ok()) {
    std::printf("images:   %zu\n", images->size());
    for (const auto& image : *images) {
      std::printf("  %s %s\n", image.id().c_str(),
                  image.repo_tags_size() > 0 ? image.repo_tags(0).c_str() : "<untagged>");
    }
  } else {
    std::printf("images:   error: %s\n", images.status().ToString().c_str());
  }
  auto active = cri->content->ListStatuses({});
  if (active.ok()) {
    std::printf("active content ingestions: %zu\n", active->size());
  } else {
    std::printf("active content ingestions: error: %s\n", active.status().ToString().c_str());
  }
  return 0;
}
