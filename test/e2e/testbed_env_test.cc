#include "test/e2e/testbed_env.h"

#include <gtest/gtest.h>

namespace kruise::testing {
namespace {

TEST(TestbedEnvTest, ParsesExportLinesAndStripsQuotes) {
  TestbedEnv env = TestbedEnv::ParseEnvFile(
      "# comment\n"
      "export KRUISE_TESTBED_REGISTRY=127.0.0.1:16600\n"
      "  export KRUISE_TESTBED_CTR=\"/usr/bin/ctr --address /x.sock -n k8s.io\"  \n"
      "PLAIN=1\n"
      "not a pair\n"
      "=novalue\n");
  EXPECT_EQ(env.Get("KRUISE_TESTBED_REGISTRY"), "127.0.0.1:16600");
  EXPECT_EQ(env.Get("KRUISE_TESTBED_CTR"), "/usr/bin/ctr --address /x.sock -n k8s.io");
  EXPECT_EQ(env.Get("PLAIN"), "1");
  EXPECT_FALSE(env.Has("not a pair"));
  EXPECT_EQ(env.vars().size(), 3u);
  EXPECT_EQ(env.Get("MISSING"), "");
}

TEST(TestbedEnvTest, KeepsEqualsSignsInValues) {
  TestbedEnv env = TestbedEnv::ParseEnvFile("export A=b=c\n");
  EXPECT_EQ(env.Get("A"), "b=c");
}

}  // namespace
}  // namespace kruise::testing
