#include "common/status_macros.h"

#include "gtest/gtest.h"

namespace kruise {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacros, AssignOrReturnPropagatesFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Quarter(7).status().message(), "odd");
}

TEST(StatusMacros, ReturnIfError) {
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), absl::StatusCode::kInvalidArgument);
}

TEST(StatusMacros, AnnotateKeepsCode) {
  absl::Status s = Annotate(absl::NotFoundError("no such image"), "pull busybox");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "pull busybox: no such image");
  EXPECT_TRUE(Annotate(absl::OkStatus(), "x").ok());
}

}  // namespace
}  // namespace kruise
