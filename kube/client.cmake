# Kubernetes REST client, configuration and object helpers (GitHub issue 3).
set(KUBE_CLIENT_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/call_deadline.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/config.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/errors.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/object.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/pod_defaults.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/rest_client.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/throttle.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/write_fence.cc
)
