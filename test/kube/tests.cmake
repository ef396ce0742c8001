# Tests of the Kubernetes REST client, its configuration and the object helpers (kube/client.cmake).
if(TARGET kruise_kube)
  kruise_test(NAME kube_client_unit_test LABEL unit
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/client_errors_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/client_throttle_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/config_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/object_test.cc
    LIBS kruise_kube kruise_test_fakes)

  # RestKubeClient against small cpp-httplib servers (faults, TLS) in the test itself.
  kruise_test(NAME kube_client_http_test LABEL integration TIMEOUT 180
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/client_http_test.cc
    LIBS kruise_kube kruise_test_fakes PkgConfig::HTTPLIB)

  # RestKubeClient against the fake API server.
  if(TARGET kruise_fake_apiserver)
    kruise_test(NAME kube_client_apiserver_test LABEL integration TIMEOUT 180
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/client_apiserver_test.cc
      LIBS kruise_kube kruise_fake_apiserver kruise_test_fakes)
  endif()
endif()
