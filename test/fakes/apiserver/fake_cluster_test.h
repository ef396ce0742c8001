#pragma once

// FakeClusterTest: the base of a controller or webhook test against the in-process fake API
// server. It owns what every such test sets up first: a FakeClock (at 1.8e9 s), the server on that
// clock, an unthrottled RestKubeClient to it, optionally an EventRecorder, and informers that it
// starts, waits for and stops. A test derives from it, calls StartCluster() in SetUp() and keeps
// only its own wiring (reconciler, informer options):
//
//   class PubControllerTest : public testing::FakeClusterTest {
//     void SetUp() override {
//       StartCluster({{"policy.kruise.io", "v1alpha1", "podunavailablebudgets",
//                      "PodUnavailableBudget", true, true}});
//       kube::Informer* pubs = AddInformer(PubInformerOptions());
//       ...
//       SyncInformers();
//     }
//   };
//
// Header-only test support: the fake server does not depend on kube/, its users do.

#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/rest_client.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/fake_clock.h"

namespace kruise::testing {

class FakeClusterTest : public ::testing::Test {
 protected:
  // Starts the server serving `resources` besides its built-in ones, and the client. Call from
  // SetUp() (it uses ASSERT; check HasFatalFailure() after it when more follows).
  void StartCluster(const std::vector<FakeResource>& resources = {}) {
    clock_.SetTime(absl::FromUnixSeconds(1'800'000'000));
    FakeApiServerOptions so;
    so.clock = &clock_;
    server_ = std::make_unique<FakeApiServer>(so);
    for (const FakeResource& r : resources) server_->RegisterResource(r);
    ASSERT_TRUE(server_->Start().ok());
    kube::RestConfig cfg;
    cfg.host = server_->base_url();
    cfg.qps = 0;
    auto client = kube::RestKubeClient::Create(cfg);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // An event recorder on the fake clock (recorder_), for tests that check events.
  kube::EventRecorder* StartRecorder() {
    kube::EventRecorderOptions eo;
    eo.clock = &clock_;
    recorder_ = std::make_unique<kube::EventRecorder>(client_.get(), eo);
    return recorder_.get();
  }

  // A new informer on the client and clock, owned here; started by SyncInformers().
  kube::Informer* AddInformer(kube::InformerOptions options) {
    informers_.push_back(
        std::make_unique<kube::Informer>(client_.get(), &clock_, std::move(options)));
    return informers_.back().get();
  }

  // Starts every informer added and waits (10 s on the fake clock) until each has synced.
  void SyncInformers() {
    for (auto& i : informers_) i->Start();
    for (auto& i : informers_) ASSERT_TRUE(i->WaitForSync(clock_.Now() + absl::Seconds(10)));
  }

  void TearDown() override {
    recorder_.reset();
    for (auto& i : informers_) i->RequestStop();
    for (auto& i : informers_) i->Stop();
  }

  FakeClock clock_;
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<kube::RestKubeClient> client_;
  std::unique_ptr<kube::EventRecorder> recorder_;
  std::vector<std::unique_ptr<kube::Informer>> informers_;
};

}  // namespace kruise::testing
