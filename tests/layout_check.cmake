# The rooms' rule (verify/CMakeLists.txt), checked on the source tree: run as
#   cmake -DSOURCE_DIR=<tree> -P tests/layout_check.cmake
# (ctest layout.rooms). For every file of verify/<room>/ and tests/verify/<room>/, each
# `#include "..."` of a verify/ header must name it by its room ("numeric/mpfr.hpp"), and that room
# must be one the file's room may know:
#   numeric   -> numeric                 (and from src/ only result.hpp)
#   judge     -> judge, numeric
#   tensor    -> tensor, numeric
#   campaign  -> campaign, judge, tensor, numeric
# Tests sit on top of what they test: a test of judge/ or tensor/ may also draw its inputs from
# campaign/ (the generators), never from the other side.
# A violation is printed as `path:line: includes "X": <why>` and fails the test.
cmake_minimum_required(VERSION 3.25)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "layout_check.cmake: pass -DSOURCE_DIR=<source tree>")
endif()

set(rooms numeric judge tensor campaign)
set(allowed_numeric numeric)
set(allowed_judge judge numeric)
set(allowed_tensor tensor numeric)
set(allowed_campaign campaign judge tensor numeric)
set(tests_allowed_numeric numeric)
set(tests_allowed_judge judge numeric campaign)
set(tests_allowed_tensor tensor numeric campaign)
set(tests_allowed_campaign campaign judge tensor numeric)

# Every header of every room, by bare name: an unqualified include of one is a violation (it would
# resolve only through the including file's own folder, hiding which room it reaches).
set(verify_headers)
foreach(room ${rooms})
  file(GLOB headers RELATIVE ${SOURCE_DIR}/verify/${room} ${SOURCE_DIR}/verify/${room}/*.hpp)
  list(APPEND verify_headers ${headers})
endforeach()
file(GLOB src_headers RELATIVE ${SOURCE_DIR}/src ${SOURCE_DIR}/src/*.hpp)

set(violations 0)
set(files_checked 0)
foreach(room ${rooms})
  file(GLOB_RECURSE library_files ${SOURCE_DIR}/verify/${room}/*.cpp ${SOURCE_DIR}/verify/${room}/*.hpp)
  file(GLOB_RECURSE test_files ${SOURCE_DIR}/tests/verify/${room}/*.cpp ${SOURCE_DIR}/tests/verify/${room}/*.hpp)
  set(files ${library_files} ${test_files})
  if(NOT library_files)
    message(SEND_ERROR "verify/${room}/: no sources found (a room was renamed or moved?)")
    math(EXPR violations "${violations} + 1")
  endif()
  foreach(file ${files})
    math(EXPR files_checked "${files_checked} + 1")
    file(RELATIVE_PATH shown ${SOURCE_DIR} ${file})
    if(file IN_LIST test_files)
      set(allowed ${tests_allowed_${room}})
    else()
      set(allowed ${allowed_${room}})
    endif()
    file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line ${lines})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" target "${line}")
      set(why "")
      if(target MATCHES "\\.\\.")
        set(why "a relative path out of the folder")
      elseif(target MATCHES "^(numeric|judge|tensor|campaign)/")
        string(REGEX REPLACE "/.*" "" target_room "${target}")
        if(NOT target_room IN_LIST allowed)
          set(why "${room}/ must not know ${target_room}/ (allowed: ${allowed})")
        endif()
      elseif(target IN_LIST verify_headers)
        set(why "a verify/ header must be named by its room")
      elseif(room STREQUAL "numeric" AND target IN_LIST src_headers AND NOT target STREQUAL "result.hpp")
        set(why "numeric/ takes nothing from src/ but result.hpp")
      endif()
      if(why)
        message("${shown}: includes \"${target}\": ${why}")
        math(EXPR violations "${violations} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()

if(violations GREATER 0)
  message(FATAL_ERROR "layout: ${violations} include(s) against the rooms' rule (verify/CMakeLists.txt)")
endif()
message("layout: ${files_checked} files of verify/ and tests/verify/ follow the rooms' rule")
