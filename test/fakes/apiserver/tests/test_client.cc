#include "test/fakes/apiserver/tests/test_client.h"

namespace kruise::testing {

using Json = nlohmann::json;

TestClient::TestClient(const std::string& base_url, const std::string& token)
    : base_url_(base_url), client_(base_url) {
  client_.set_read_timeout(30, 0);
  client_.set_connection_timeout(5, 0);
  if (!token.empty()) headers_.emplace("Authorization", "Bearer " + token);
}

HttpResult TestClient::Convert(const httplib::Result& r) {
  HttpResult out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  out.headers = r->headers;
  out.body = Json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  return out;
}

HttpResult TestClient::Get(const std::string& path) { return Convert(client_.Get(path, headers_)); }

HttpResult TestClient::Post(const std::string& path, const Json& body) {
  return Convert(client_.Post(path, headers_, body.dump(), "application/json"));
}

HttpResult TestClient::Put(const std::string& path, const Json& body) {
  return Convert(client_.Put(path, headers_, body.dump(), "application/json"));
}

HttpResult TestClient::Patch(const std::string& path, const std::string& content_type,
                             const Json& body) {
  return Convert(client_.Patch(path, headers_, body.dump(), content_type.c_str()));
}

HttpResult TestClient::Delete(const std::string& path, const Json& body) {
  if (body.is_null()) return Convert(client_.Delete(path, headers_));
  return Convert(client_.Delete(path, headers_, body.dump(), "application/json"));
}

WatchReader::WatchReader(const std::string& base_url, const std::string& path_and_query,
                         const std::string& token)
    : client_(base_url) {
  client_.set_read_timeout(60, 0);
  if (!token.empty()) headers_.emplace("Authorization", "Bearer " + token);
  thread_ = std::thread([this, path_and_query] { Run(path_and_query); });
}

WatchReader::~WatchReader() { Stop(); }

void WatchReader::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  client_.stop();
  if (thread_.joinable()) thread_.join();
}

void WatchReader::Run(std::string path) {
  auto result = client_.Get(
      path, headers_,
      [this](const httplib::Response& res) {
        absl::MutexLock lock(&mu_);
        status_ = res.status;
        return !stop_;
      },
      [this](const char* data, size_t len) {
        absl::MutexLock lock(&mu_);
        buffer_.append(data, len);
        size_t pos;
        while ((pos = buffer_.find('\n')) != std::string::npos) {
          std::string line = buffer_.substr(0, pos);
          buffer_.erase(0, pos + 1);
          Json ev = Json::parse(line, nullptr, false);
          if (ev.is_discarded()) {
            bad_lines_.push_back(line);
          } else {
            events_.push_back(std::move(ev));
          }
        }
        return !stop_;
      });
  absl::MutexLock lock(&mu_);
  if (!buffer_.empty()) bad_lines_.push_back(buffer_);
  clean_ = static_cast<bool>(result) && result.error() == httplib::Error::Success;
  ended_ = true;
}

bool WatchReader::WaitForEvents(size_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  struct Args {
    WatchReader* r;
    size_t n;
  } args{this, n};
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS { return a->r->events_.size() >= a->n; },
          &args),
      timeout);
}

bool WatchReader::WaitForEnd(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&ended_), timeout);
}

std::vector<Json> WatchReader::events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}
std::vector<std::string> WatchReader::bad_lines() const {
  absl::MutexLock lock(&mu_);
  return bad_lines_;
}
bool WatchReader::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}
int WatchReader::http_status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}
bool WatchReader::clean_end() const {
  absl::MutexLock lock(&mu_);
  return clean_;
}

}  // namespace kruise::testing
