# libdfsel.so, the shared library beside the static one: the same objects (the static archive
# linked whole, so nothing is compiled twice and the source list stays in host/CMakeLists.txt)
# behind a version script that exports the C ABI (dfsel_*) and nothing else, not even the
# weak C++ template instances the host code would otherwise leak. Python loads it with ctypes.
option(DFSEL_SHARED "Build libdfsel.so, the shared library of the C ABI" ON)
if(NOT DFSEL_SHARED)
  return()
endif()
if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
  message(STATUS "dfsel: DFSEL_SHARED is built on Linux only; skipped on ${CMAKE_SYSTEM_NAME}")
  return()
endif()

set(_dfsel_exports ${CMAKE_CURRENT_BINARY_DIR}/dfsel_exports.map)
file(WRITE ${_dfsel_exports} "{\n  global: dfsel_*;\n  local: *;\n};\n")

# The map is its only listed source: CMake wants one, and it compiles nothing.
add_library(dfsel_shared SHARED ${_dfsel_exports})
add_library(dfsel::dfsel_shared ALIAS dfsel_shared)
# The archive's members have no caller inside the library, so a plain link would drop them.
target_link_libraries(dfsel_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,dfsel>")
target_include_directories(dfsel_shared
  PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_options(dfsel_shared PRIVATE "LINKER:--version-script=${_dfsel_exports}" "LINKER:--no-undefined")
set_target_properties(dfsel_shared PROPERTIES OUTPUT_NAME dfsel EXPORT_NAME dfsel_shared
                                              LINK_DEPENDS ${_dfsel_exports} LINKER_LANGUAGE CXX)
if(DFSEL_CUDA)
  set_target_properties(dfsel_shared PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
endif()

if(DFSEL_INSTALL)
  install(TARGETS dfsel_shared EXPORT dfselTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
