#pragma once

// FakeCriServer: an in-process CRI runtime (runtime.v1 RuntimeService + ImageService, and
// containerd's content ListStatuses) on a unix socket, for integration tests of cri/ and of code
// built on it.
//
//   ASSIGN_OR_RETURN(auto server, kruise::testing::FakeCriServer::Start());
//   auto cri = kruise::cri::ConnectCri(server->endpoint());
//   server->InjectError("PullImage", absl::UnavailableError("registry down"));
//   server->SetHang("ImageStatus", true);   // calls park until ReleaseHangs() or cancelled
//
// State model: images (PullImage adds one with id ImageIdFor(ref); lookups by name, tag, digest
// reference or id), sandboxes and containers (create/start/stop/remove, states, exit codes,
// attempts, labels, filters). CreateContainer requires the image to be present.
//
// Method names are the RPC names: "Version", "PullImage", "ListStatuses", ...
// Every RPC first records the call, then applies (in order) the method's latency, its hang
// switch, then pops one injected error if queued. Waits end early when the client cancels or its
// deadline passes, or when the server shuts down.
//
// Thread-safe: all methods may be called from the test thread while RPCs run.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "google/protobuf/message.h"
#include "proto/cri_api.pb.h"

namespace grpc {
class Server;
class ServerContext;
}  // namespace grpc

namespace kruise::testing {

namespace v1 = ::runtime::v1;

class FakeCriServer {
 public:
  struct Options {
    // Empty: a fresh temporary directory holding "cri.sock" (removed on destruction).
    std::string socket_path;
    std::string runtime_name = "fake-cri";
    std::string runtime_version = "1.0.0";
    std::string runtime_api_version = "v1";
    // Clock for latencies, hangs and pull durations. Real by default.
    Clock* clock = Clock::Real();
  };

  struct RecordedCall {
    std::string method;
    std::shared_ptr<const google::protobuf::Message> request;  // a copy
    std::multimap<std::string, std::string> metadata;          // client metadata
  };

  static absl::StatusOr<std::unique_ptr<FakeCriServer>> Start(Options options);
  static absl::StatusOr<std::unique_ptr<FakeCriServer>> Start() { return Start(Options()); }
  ~FakeCriServer();

  FakeCriServer(const FakeCriServer&) = delete;
  FakeCriServer& operator=(const FakeCriServer&) = delete;

  // Stops serving (releases every hang first); calls in flight or arriving meanwhile fail
  // UNAVAILABLE, as against a runtime going away. Idempotent; the destructor calls it.
  void Shutdown();

  const std::string& socket_path() const { return socket_path_; }
  std::string endpoint() const { return "unix://" + socket_path_; }

  // ---- Error injection ----
  // Queues `status` to be returned by the next call(s) of `method` (FIFO, one per call).
  void InjectError(const std::string& method, absl::Status status);
  // Adds `latency` before every call of `method` answers (ZeroDuration removes it).
  void SetLatency(const std::string& method, absl::Duration latency);
  // While on, calls of `method` park until switched off, ReleaseHangs(), cancellation or shutdown.
  void SetHang(const std::string& method, bool hang);
  // Switches every hang off and wakes parked calls.
  void ReleaseHangs();
  // Waits until at least `n` calls of `method` are parked in a hang, or `timeout` passes.
  bool WaitForHungCalls(const std::string& method, int n, absl::Duration timeout);
  // Replaces the Version answer (e.g. to emulate another runtime).
  void SetVersion(const std::string& runtime_name, const std::string& runtime_version);

  // ---- Hooks ----
  // Called for every PullImage after latency/hang/injected errors; a non-OK result is returned
  // to the client (e.g. assert credentials: return PermissionDenied when auth is wrong).
  using PullHook = std::function<absl::Status(const v1::PullImageRequest&)>;
  void SetPullHook(PullHook hook);
  // Makes each PullImage take `duration`; meanwhile ListStatuses reports one in-flight ingestion
  // per pull ("layer-" + ImageIdFor(ref)), its offset growing linearly to `total_bytes`.
  void SetPullDuration(absl::Duration duration, int64_t total_bytes);
  // Waits until at least `n` pulls are in flight (see SetPullDuration), or `timeout` passes.
  bool WaitForInFlightPulls(int n, absl::Duration timeout);
  // Answers ExecSync (default: exit 0, stdout = the command joined with spaces, plus "\n").
  using ExecHandler = std::function<v1::ExecSyncResponse(const v1::ExecSyncRequest&)>;
  void SetExecHandler(ExecHandler handler);

  // ---- State ----
  // Deterministic image id for a reference: "sha256:" + sha256(normalised reference).
  static std::string ImageIdFor(const std::string& ref);
  // Adds an image as if pulled. Returns its id. INVALID_ARGUMENT for a malformed reference.
  absl::StatusOr<std::string> AddImage(const std::string& ref, uint64_t size_bytes = 1 << 20);
  std::vector<v1::Image> Images() const;
  bool HasImage(const std::string& name_or_id) const;
  std::vector<v1::PodSandbox> Sandboxes() const;
  std::vector<v1::Container> Containers() const;
  // Simulates the container's process exiting: state EXITED with `exit_code` and `reason`.
  absl::Status ExitContainer(const std::string& container_id, int32_t exit_code,
                             const std::string& reason);

  // ---- Recorded calls ----
  std::vector<RecordedCall> Calls() const;
  std::vector<RecordedCall> CallsTo(const std::string& method) const;
  int CallCount(const std::string& method) const;
  void ClearCalls();
  // The recorded requests of `method`, typed.
  template <typename Req>
  std::vector<Req> Requests(const std::string& method) const {
    std::vector<Req> out;
    for (const RecordedCall& call : CallsTo(method)) {
      Req req;
      req.CopyFrom(*call.request);
      out.push_back(std::move(req));
    }
    return out;
  }

 private:
  class RuntimeImpl;
  class ImageImpl;
  class ContentImpl;
  friend class RuntimeImpl;
  friend class ImageImpl;
  friend class ContentImpl;

  struct MethodControl {
    std::deque<absl::Status> errors;
    absl::Duration latency = absl::ZeroDuration();
    bool hang = false;
    int hung = 0;
  };
  struct StoredImage {
    v1::Image image;
    std::string normalized;  // reference it was pulled/added as
  };
  struct Sandbox {
    v1::PodSandboxStatus status;
    v1::PodSandboxConfig config;
  };
  struct StoredContainer {
    v1::ContainerStatus status;
    std::string sandbox_id;
  };
  struct InFlightPull {
    std::string ref;
    absl::Time started;
  };

  explicit FakeCriServer(Options options);

  // Records the call and applies latency, hang and injected errors. Returns the status to answer
  // with (OK to proceed).
  absl::Status Enter(const std::string& method, grpc::ServerContext* ctx,
                     const google::protobuf::Message& request);
  // Waits under mu_ until `done` holds, `until` passes, the call is cancelled or shutdown.
  // Returns false when cancelled or shutting down.
  bool WaitLocked(grpc::ServerContext* ctx, absl::Time until, const std::function<bool()>& done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Interrupted(const std::string& what) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StoredImage* FindImageLocked(const std::string& name_or_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string AddImageLocked(const std::string& normalized, uint64_t size, const std::string& id,
                             const std::string& digest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PullImageImpl(grpc::ServerContext* ctx, const v1::PullImageRequest& req,
                             std::string* image_ref);
  int64_t NowNanos() const;

  Options options_;
  std::string socket_path_;
  std::string temp_dir_;  // removed on destruction when we created it
  std::unique_ptr<RuntimeImpl> runtime_;
  std::unique_ptr<ImageImpl> images_;
  std::unique_ptr<ContentImpl> content_;
  std::unique_ptr<grpc::Server> server_;

  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, MethodControl> controls_ ABSL_GUARDED_BY(mu_);
  std::vector<RecordedCall> calls_ ABSL_GUARDED_BY(mu_);
  PullHook pull_hook_ ABSL_GUARDED_BY(mu_);
  ExecHandler exec_handler_ ABSL_GUARDED_BY(mu_);
  absl::Duration pull_duration_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  int64_t pull_total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, InFlightPull> pulls_ ABSL_GUARDED_BY(mu_);
  int next_pull_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, StoredImage> images_by_id_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Sandbox> sandboxes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, StoredContainer> containers_ ABSL_GUARDED_BY(mu_);
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::string runtime_name_ ABSL_GUARDED_BY(mu_);
  std::string runtime_version_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kruise::testing
