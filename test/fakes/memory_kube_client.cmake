# In-memory KubeClient for unit tests of the controller runtime (kube/ informers, leader election,
# events). Included from test/fakes/CMakeLists.txt.
if(TARGET kruise_kube)
  add_library(kruise_fake_kube_client STATIC ${CMAKE_CURRENT_LIST_DIR}/memory_kube_client.cc)
  kruise_strict(kruise_fake_kube_client)
  kruise_test_support(kruise_fake_kube_client)
  target_link_libraries(kruise_fake_kube_client PUBLIC kruise_kube kruise_common)
endif()
