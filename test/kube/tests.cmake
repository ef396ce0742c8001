# Tests of kube/: the Kubernetes REST client, its configuration and the object helpers
# (kube/client.cmake), and the controller runtime (kube/runtime.cmake): one executable per label.
if(TARGET kruise_kube AND TARGET kruise_fake_kube_client)
  kruise_test(NAME kube_unit_test LABEL unit
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/client_errors_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/client_throttle_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/config_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/object_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/workqueue_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/informer_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/controller_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/leader_election_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/leader_fence_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/event_recorder_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/expectations_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/key_dictionary_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/selector_index_test.cc
    LIBS kruise_kube kruise_fake_kube_client kruise_test_fakes)
endif()

# RestKubeClient against small cpp-httplib servers (faults, TLS) in the test itself, and against
# the fake API server.
if(TARGET kruise_kube AND TARGET kruise_fake_apiserver)
  kruise_test(NAME kube_integration_test LABEL integration TIMEOUT 180
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/client_http_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/client_apiserver_test.cc
    LIBS kruise_kube kruise_fake_apiserver kruise_test_fakes PkgConfig::HTTPLIB)
endif()
