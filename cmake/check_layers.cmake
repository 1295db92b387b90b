# cmake -DROOT=DIR -P cmake/check_layers.cmake: fails (listing file:line and
# the header) when a source under DIR includes a header of a layer above its
# own. The layers, lowest first (docs/architecture.md):
#   sim/base < proto < sim < {traces, hwmodels} < calibration
#     < experiments/runner < experiments/capacity < experiments/cli
#     < experiments/python
# A folder may include its own layer and any lower one; traces and hwmodels
# are siblings and may not include each other. tests/ holds test support
# (any layer's tests may include it) and cross-library tests (may include
# anything). It checks the same arrows on the targets: a library target
# (add_library) of a layer's CMakeLists.txt may link (target_link_libraries)
# only servesim_* libraries of its own layer or a lower one, so an upward
# link fails here before it could hide an upward include. The include check
# also catches a header-only include that would link anyway.
if(NOT DEFINED ROOT)
  message(FATAL_ERROR "check_layers.cmake: give -DROOT=<source dir>")
endif()

# Layer of a repository path (a source or an included header); "" when the
# path is not in a layer (third-party headers, tests/).
function(layer_of path out_name out_rank)
  set(name "")
  set(rank -1)
  if(path MATCHES "^sim/base/")
    set(name base)
    set(rank 0)
  elseif(path MATCHES "^proto/")
    set(name proto)
    set(rank 1)
  elseif(path MATCHES "^sim/")
    set(name sim)
    set(rank 2)
  elseif(path MATCHES "^traces/")
    set(name traces)
    set(rank 3)
  elseif(path MATCHES "^hwmodels/")
    set(name hwmodels)
    set(rank 3)
  elseif(path MATCHES "^calibration/")
    set(name calibration)
    set(rank 4)
  elseif(path MATCHES "^experiments/runner/")
    set(name runner)
    set(rank 5)
  elseif(path MATCHES "^experiments/capacity/")
    set(name capacity)
    set(rank 6)
  elseif(path MATCHES "^experiments/cli/")
    set(name cli)
    set(rank 7)
  elseif(path MATCHES "^experiments/python/")
    set(name python)
    set(rank 8)
  elseif(path MATCHES "^experiments/")
    # A source directly in experiments/ belongs to no library: every one
    # has its folder.
    set(name experiments)
    set(rank 99)
  endif()
  set(${out_name} "${name}" PARENT_SCOPE)
  set(${out_rank} ${rank} PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE sources RELATIVE ${ROOT}
     ${ROOT}/sim/*.h ${ROOT}/sim/*.cc ${ROOT}/proto/*.h ${ROOT}/proto/*.cc
     ${ROOT}/traces/*.h ${ROOT}/traces/*.cc ${ROOT}/hwmodels/*.h ${ROOT}/hwmodels/*.cc
     ${ROOT}/calibration/*.h ${ROOT}/calibration/*.cc
     ${ROOT}/experiments/*.h ${ROOT}/experiments/*.cc)
list(SORT sources)
set(bad "")
set(nbad 0)
set(nfiles 0)
foreach(src ${sources})
  layer_of(${src} src_layer src_rank)
  math(EXPR nfiles "${nfiles} + 1")
  if(src_layer STREQUAL "experiments")
    string(APPEND bad "  ${src}: in experiments/ but in no library folder "
           "(runner/, capacity/, cli/, python/)\n")
    math(EXPR nbad "${nbad} + 1")
    continue()
  endif()
  file(STRINGS ${ROOT}/${src} lines)
  set(lineno 0)
  foreach(line IN LISTS lines)
    math(EXPR lineno "${lineno} + 1")
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\"")
      continue()
    endif()
    set(header ${CMAKE_MATCH_1})
    layer_of(${header} h_layer h_rank)
    if(h_layer STREQUAL "" OR h_layer STREQUAL src_layer)
      continue()
    endif()
    # Upward, or across the traces / hwmodels siblings.
    if(h_rank GREATER_EQUAL src_rank)
      string(APPEND bad "  ${src}:${lineno}: ${src_layer} includes ${header} "
             "(layer ${h_layer}, not below ${src_layer})\n")
      math(EXPR nbad "${nbad} + 1")
    endif()
  endforeach()
endforeach()
# The layer of a servesim library target; "" for a target of no layer.
function(layer_of_target target out_name out_rank)
  set(dir "")
  if(target MATCHES "^servesim_(base|version)$")
    set(dir sim/base/)
  elseif(target STREQUAL "servesim_proto")
    set(dir proto/)
  elseif(target MATCHES "^servesim_(sim|model_check)$")
    set(dir sim/)
  elseif(target STREQUAL "servesim_traces")
    set(dir traces/)
  elseif(target STREQUAL "servesim_hwmodels")
    set(dir hwmodels/)
  elseif(target STREQUAL "servesim_calibration")
    set(dir calibration/)
  elseif(target STREQUAL "servesim_runner")
    set(dir experiments/runner/)
  elseif(target STREQUAL "servesim_capacity")
    set(dir experiments/capacity/)
  elseif(target MATCHES "^servesim(_cli)?$")
    set(dir experiments/cli/)
  elseif(target STREQUAL "servesim_python")
    set(dir experiments/python/)
  endif()
  if(dir STREQUAL "")
    set(${out_name} "" PARENT_SCOPE)
    set(${out_rank} -1 PARENT_SCOPE)
  else()
    layer_of(${dir} name rank)
    set(${out_name} "${name}" PARENT_SCOPE)
    set(${out_rank} ${rank} PARENT_SCOPE)
  endif()
endfunction()

file(GLOB_RECURSE cmake_lists RELATIVE ${ROOT}
     ${ROOT}/sim/CMakeLists.txt ${ROOT}/proto/CMakeLists.txt ${ROOT}/traces/CMakeLists.txt
     ${ROOT}/hwmodels/CMakeLists.txt ${ROOT}/calibration/CMakeLists.txt
     ${ROOT}/experiments/CMakeLists.txt)
list(SORT cmake_lists)
set(nlinks 0)
foreach(cml ${cmake_lists})
  layer_of(${cml} dir_layer dir_rank)
  file(READ ${ROOT}/${cml} text)
  # One call per match, its arguments up to the closing parenthesis.
  string(REGEX MATCHALL "target_link_libraries\\([^)]*\\)" calls "${text}")
  foreach(call IN LISTS calls)
    string(REGEX REPLACE "^target_link_libraries\\([ \t\n]*([A-Za-z0-9_]+)(.*)\\)$"
           "\\1;\\2" parts "${call}")
    list(LENGTH parts nparts)
    if(nparts LESS 2)
      continue()  # a target named by a variable (a helper function's)
    endif()
    list(GET parts 0 target)
    list(GET parts 1 args)
    layer_of_target(${target} t_layer t_rank)
    if(t_layer STREQUAL "")
      continue()  # a test or tool target: it may link anything
    endif()
    if(NOT t_layer STREQUAL dir_layer)
      string(APPEND bad "  ${cml}: target ${target} (layer ${t_layer}) is defined in "
             "the ${dir_layer} folder\n")
      math(EXPR nbad "${nbad} + 1")
    endif()
    string(REGEX MATCHALL "servesim[A-Za-z0-9_]*" deps "${args}")
    foreach(dep IN LISTS deps)
      layer_of_target(${dep} d_layer d_rank)
      math(EXPR nlinks "${nlinks} + 1")
      if(d_layer STREQUAL "" OR d_layer STREQUAL t_layer)
        continue()
      endif()
      if(d_rank GREATER_EQUAL t_rank)
        string(APPEND bad "  ${cml}: ${target} (layer ${t_layer}) links ${dep} "
               "(layer ${d_layer}, not below ${t_layer})\n")
        math(EXPR nbad "${nbad} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()

if(nfiles EQUAL 0)
  message(FATAL_ERROR "check_layers: no sources under ${ROOT}")
endif()
if(nbad GREATER 0)
  message(FATAL_ERROR "check_layers: ${nbad} include(s) or link(s) against the layer arrows "
          "(base <- sim <- {traces, hwmodels} <- calibration <- runner <- capacity "
          "<- cli):\n${bad}")
endif()
message(STATUS "check_layers: ${nfiles} sources and ${nlinks} library links, every "
        "include and link points down")
