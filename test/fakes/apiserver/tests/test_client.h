#pragma once

// Helpers for driving FakeApiServer over HTTP in tests: JSON requests via cpp-httplib and a
// background watch reader that collects events and can be waited on with a deadline.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace kruise::testing {

struct HttpResult {
  int status = 0;  // 0: transport error
  nlohmann::json body;
  std::string raw;
  httplib::Headers headers;
};

class TestClient {
 public:
  explicit TestClient(const std::string& base_url, const std::string& token = "");

  HttpResult Get(const std::string& path);
  HttpResult Post(const std::string& path, const nlohmann::json& body);
  HttpResult Put(const std::string& path, const nlohmann::json& body);
  HttpResult Patch(const std::string& path, const std::string& content_type,
                   const nlohmann::json& body);
  HttpResult Delete(const std::string& path, const nlohmann::json& body = nullptr);

 private:
  HttpResult Convert(const httplib::Result& r);
  std::string base_url_;
  httplib::Headers headers_;
  httplib::Client client_;
};

// Reads a watch stream on its own thread. Lines are parsed as JSON; a line that does not parse
// is recorded in `bad_lines` (to observe truncated events).
class WatchReader {
 public:
  WatchReader(const std::string& base_url, const std::string& path_and_query,
              const std::string& token = "");
  ~WatchReader();  // Stop()s

  // Waits until at least `n` events arrived or `timeout` passed; returns whether they did.
  bool WaitForEvents(size_t n, absl::Duration timeout = absl::Seconds(10));
  // Waits until the stream ended (server closed it); returns whether it did.
  bool WaitForEnd(absl::Duration timeout = absl::Seconds(10));
  std::vector<nlohmann::json> events() const;
  std::vector<std::string> bad_lines() const;
  bool ended() const;
  int http_status() const;
  // Whether the transfer ended with a complete chunked body (false after an abrupt close).
  bool clean_end() const;
  void Stop();

 private:
  void Run(std::string path);

  httplib::Client client_;
  httplib::Headers headers_;
  mutable absl::Mutex mu_;
  std::string buffer_ ABSL_GUARDED_BY(mu_);
  std::vector<nlohmann::json> events_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> bad_lines_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool clean_ ABSL_GUARDED_BY(mu_) = false;
  int status_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kruise::testing
