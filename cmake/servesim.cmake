# Helpers shared by every folder.
include(GoogleTest)

# Warnings as errors on our own targets (never on generated protobuf code).
function(servesim_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror
                         -Wno-sign-compare -Wno-unused-parameter)
endfunction()

# servesim_test(NAME SOURCES... LIBS ...): one GoogleTest binary, registered
# with CTest. Tests run with the repository root as working directory so
# they can read the repository's data/ folder through SERVESIM_DATA_DIR.
function(servesim_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  servesim_warnings(${name})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_definitions(${name} PRIVATE
    SERVESIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    SERVESIM_DATA_DIR="${PROJECT_SOURCE_DIR}/data")
  gtest_discover_tests(${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                       DISCOVERY_TIMEOUT 60)
endfunction()

# servesim_benchmark(NAME SOURCES... LIBS ...): a Google Benchmark program.
function(servesim_benchmark name)
  if(NOT SERVESIM_BENCHMARKS)
    return()
  endif()
  cmake_parse_arguments(B "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${B_SOURCES})
  servesim_warnings(${name})
  target_link_libraries(${name} PRIVATE ${B_LIBS} benchmark::benchmark benchmark::benchmark_main)
  target_compile_definitions(${name} PRIVATE
    SERVESIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    SERVESIM_DATA_DIR="${PROJECT_SOURCE_DIR}/data")
endfunction()
