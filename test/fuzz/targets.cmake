# The fuzz targets (test/fuzz/NAME.cc, corpus in test/fuzz/corpus/NAME) and how many seconds each
# runs in the test suite: read by test/fuzz/CMakeLists.txt (what to build) and test/fuzz/tests.cmake
# (the ctest tests). The runs add up to under 3 minutes of one core (issue 33).
set(KRUISE_FUZZ_TARGETS
  admission_review:20
  json_patch:20
  label_selector:20
  image_reference:20
  docker_config:20
  ws_strategic_merge:20
  kube_time:20
  cri_endpoint:5
)
