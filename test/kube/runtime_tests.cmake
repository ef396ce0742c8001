# Unit tests of the controller runtime (kube/runtime.cmake).
if(TARGET kruise_kube AND TARGET kruise_fake_kube_client)
  kruise_test(NAME kube_runtime_test LABEL unit
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/workqueue_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/informer_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/controller_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/leader_election_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/event_recorder_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/expectations_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/key_dictionary_test.cc
    LIBS kruise_kube kruise_fake_kube_client kruise_test_fakes)
endif()
