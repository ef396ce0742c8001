# Controller runtime sources of kruise_kube: informers, work queue, controllers, manager, leader
# election, events, expectations.
set(KUBE_RUNTIME_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/rate_limiter.cc
  ${CMAKE_CURRENT_LIST_DIR}/workqueue.cc
  ${CMAKE_CURRENT_LIST_DIR}/key_dictionary.cc
  ${CMAKE_CURRENT_LIST_DIR}/store.cc
  ${CMAKE_CURRENT_LIST_DIR}/informer.cc
)
list(APPEND KUBE_RUNTIME_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/controller.cc
  ${CMAKE_CURRENT_LIST_DIR}/manager.cc
  ${CMAKE_CURRENT_LIST_DIR}/leader_election.cc
)
list(APPEND KUBE_RUNTIME_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/event_recorder.cc
  ${CMAKE_CURRENT_LIST_DIR}/expectations.cc
)
