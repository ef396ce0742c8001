#pragma once

// A RestKubeClient talking to an in-process FakeApiServer, with client-side throttling off so
// tests are not paced by the QPS limiter. Header-only: the fake server itself does not depend on
// kube/, its users do.
//
//   testing::FakeApiServer api;
//   ASSERT_TRUE(api.Start().ok());
//   auto client = testing::UnthrottledClientFor(api);
//   ASSERT_TRUE(client.ok()) << client.status();

#include <memory>

#include "absl/status/statusor.h"
#include "kube/rest_client.h"
#include "test/fakes/apiserver/fake_apiserver.h"

namespace kruise::testing {

inline absl::StatusOr<std::unique_ptr<kube::RestKubeClient>> UnthrottledClientFor(
    const FakeApiServer& api, kube::RestClientOptions options = {}) {
  kube::RestConfig config;
  config.host = api.base_url();
  config.qps = 0;
  return kube::RestKubeClient::Create(config, Clock::Real(), std::move(options));
}

}  // namespace kruise::testing
