#include "common/logging.h"

#include "gtest/gtest.h"

namespace kruise {
namespace {

TEST(Logging, ParseLogFormat) {
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(ParseLogFormat("xml").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Logging, VerbosityLevels) {
  EXPECT_EQ(LevelFromVerbosity(0), spdlog::level::info);
  EXPECT_EQ(LevelFromVerbosity(4), spdlog::level::debug);
  EXPECT_EQ(LevelFromVerbosity(6), spdlog::level::trace);
}

TEST(Logging, SameLoggerPerComponent) {
  EXPECT_EQ(Logger("unit-a"), Logger("unit-a"));
  EXPECT_NE(Logger("unit-a"), Logger("unit-b"));
  InitLogging({.format = LogFormat::kJson, .level = spdlog::level::warn});
  EXPECT_EQ(Logger("unit-a")->level(), spdlog::level::warn);
  InitLogging({});
}

}  // namespace
}  // namespace kruise
