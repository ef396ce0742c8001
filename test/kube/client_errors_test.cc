#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "kube/errors.h"

namespace kruise::kube {
namespace {

std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  return R"({"kind":"Status","apiVersion":"v1","status":"Failure","code":)" + std::to_string(code) +
         R"(,"reason":")" + reason + R"(","message":")" + message + R"("})";
}

struct Case {
  long http;
  std::string reason;
  absl::StatusCode want;
};

TEST(StatusFromHttpTest, MapsCodesAndReasons) {
  const Case cases[] = {
      {400, "BadRequest", absl::StatusCode::kInvalidArgument},
      {401, "Unauthorized", absl::StatusCode::kUnauthenticated},
      {403, "Forbidden", absl::StatusCode::kPermissionDenied},
      {404, "NotFound", absl::StatusCode::kNotFound},
      {409, "AlreadyExists", absl::StatusCode::kAlreadyExists},
      {409, "Conflict", absl::StatusCode::kAborted},
      {410, "Gone", absl::StatusCode::kOutOfRange},
      {410, "Expired", absl::StatusCode::kOutOfRange},
      {422, "Invalid", absl::StatusCode::kInvalidArgument},
      {429, "TooManyRequests", absl::StatusCode::kResourceExhausted},
      {500, "InternalError", absl::StatusCode::kUnavailable},
      {502, "BadGateway", absl::StatusCode::kUnavailable},
      {503, "ServiceUnavailable", absl::StatusCode::kUnavailable},
      {504, "Timeout", absl::StatusCode::kDeadlineExceeded},
  };
  for (const Case& c : cases) {
    absl::Status s = StatusFromHttp(c.http, StatusBody(c.http, c.reason, "boom"));
    EXPECT_EQ(s.code(), c.want) << c.http << " " << c.reason;
    EXPECT_EQ(Reason(s), c.reason);
    EXPECT_EQ(s.message(), c.reason + ": boom");
  }
}

TEST(StatusFromHttpTest, SuccessIsOk) {
  EXPECT_TRUE(StatusFromHttp(200, "{}").ok());
  EXPECT_TRUE(StatusFromHttp(201, "").ok());
}

TEST(StatusFromHttpTest, PredicatesDistinguishConflictFromAlreadyExists) {
  absl::Status exists = StatusFromHttp(409, StatusBody(409, "AlreadyExists", "x"));
  absl::Status conflict = StatusFromHttp(409, StatusBody(409, "Conflict", "x"));
  EXPECT_TRUE(kube::IsAlreadyExists(exists));
  EXPECT_FALSE(IsConflict(exists));
  EXPECT_TRUE(IsConflict(conflict));
  EXPECT_FALSE(kube::IsAlreadyExists(conflict));
  EXPECT_TRUE(kube::IsNotFound(StatusFromHttp(404, "")));
  EXPECT_TRUE(IsGone(StatusFromHttp(410, StatusBody(410, "Expired", "too old"))));
}

TEST(StatusFromHttpTest, NonJsonBodyBecomesTruncatedMessage) {
  absl::Status s = StatusFromHttp(502, "<html>bad gateway</html>\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "BadGateway: <html>bad gateway</html>");
  EXPECT_EQ(Reason(s), "BadGateway");

  std::string big(5000, 'x');
  absl::Status t = StatusFromHttp(500, big);
  EXPECT_LT(t.message().size(), 300u);
  EXPECT_TRUE(absl::EndsWith(t.message(), "..."));
}

TEST(StatusFromHttpTest, EmptyBodyUsesDefaultReason) {
  absl::Status s = StatusFromHttp(404, "");
  EXPECT_EQ(s.message(), "NotFound: HTTP 404");
  EXPECT_EQ(Reason(s), "NotFound");
  absl::Status other = StatusFromHttp(418, "");
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(StatusFromHttpTest, RetryAfterFromDetails) {
  absl::Status s = StatusFromHttp(
      429, R"({"kind":"Status","code":429,"reason":"TooManyRequests","message":"slow down",)"
           R"("details":{"retryAfterSeconds":3}})");
  ASSERT_TRUE(RetryAfter(s).has_value());
  EXPECT_EQ(*RetryAfter(s), absl::Seconds(3));
  EXPECT_FALSE(RetryAfter(StatusFromHttp(500, "")).has_value());
}

TEST(StatusFromHttpTest, CodeFromEmbeddedStatusWhenHttpCodeUnknown) {
  // Watch ERROR events carry a Status object without an HTTP response code.
  absl::Status s = StatusFromHttp(0, StatusBody(410, "Expired", "too old resource version"));
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Reason(s), "Expired");
  absl::Status gone = StatusFromHttp(0, R"({"kind":"Status","code":410,"message":"gone"})");
  EXPECT_EQ(gone.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Reason(gone), "Gone");
}

}  // namespace
}  // namespace kruise::kube
