# ctest tests (label fuzz) running each fuzz target of test/fuzz/targets.cmake for its seconds
# (test/fuzz/run). The targets are a clang project of their own (test/fuzz/CMakeLists.txt) that
# scripts/test builds into KRUISE_FUZZ_BUILD_DIR after the main build; without that build the
# tests skip, unless KRUISE_FUZZ_REQUIRED=1 (scripts/test sets it), when they fail.
set(KRUISE_FUZZ_BUILD_DIR ${PROJECT_BINARY_DIR}/fuzz CACHE PATH
    "Build directory of test/fuzz (cmake -S test/fuzz -B <it> -DCMAKE_CXX_COMPILER=clang++)")
include(${CMAKE_CURRENT_LIST_DIR}/targets.cmake)
foreach(entry ${KRUISE_FUZZ_TARGETS})
  string(REPLACE ":" ";" parts ${entry})
  list(GET parts 0 name)
  list(GET parts 1 seconds)
  add_test(NAME fuzz_${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/run ${KRUISE_FUZZ_BUILD_DIR} ${name} ${seconds})
  math(EXPR timeout "${seconds} + 60")
  set_tests_properties(fuzz_${name} PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77 TIMEOUT ${timeout})
endforeach()
