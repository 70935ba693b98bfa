# How the programs and libraries link what they depend on (FANSTORE_STATIC_DEPS, on in every
# build but the sanitizers'): libstdc++ and libgcc linked in; liburing, zstd and xz from
# their static archives; spdlog and fmt compiled in from their headers. ISA-L (no static
# archive in Debian), Zydis (dlopened), glibc and, under a launcher, the job's MPI stay
# shared. Why: every process of a job loads fewer objects. fanrun maps 3 files besides
# glibc's instead of 8, so after a dropped page cache it starts in ~25 ms instead of ~30-37
# (docs/performance.md), which is on the first epoch's critical path; and where the software
# sits on a shared file system, each start opens 5 fewer files there. A sanitizer build
# keeps them shared: its runtime replaces operator new and the rest, which a linked-in
# libstdc++ would also define. The bundle (cmake/bundle.cmake) needs this on.
if(FANSTORE_SANITIZE STREQUAL "")
  set(fanstore_static_default ON)
else()
  set(fanstore_static_default OFF)
endif()
option(FANSTORE_STATIC_DEPS "Link libstdc++, libgcc, liburing, zstd, xz, spdlog and fmt in"
  ${fanstore_static_default})
set(FANSTORE_SPDLOG spdlog::spdlog)
if(NOT FANSTORE_STATIC_DEPS)
  return()
endif()
# (also a build directory configured before FANSTORE_SANITIZE was set, whose cache kept ON)
if(NOT FANSTORE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "fanstore: FANSTORE_SANITIZE=${FANSTORE_SANITIZE} needs "
    "-DFANSTORE_STATIC_DEPS=OFF (the sanitizer's runtime and a linked-in libstdc++ would both "
    "define operator new)")
endif()
add_link_options(-static-libstdc++ -static-libgcc)
foreach(dep URING:uring ZSTD:zstd LZMA:lzma)
  string(REPLACE ":" ";" dep ${dep})
  list(GET dep 0 var)
  list(GET dep 1 name)
  find_library(FANSTORE_${var}_STATIC lib${name}.a HINTS ${${var}_LIBDIR})
  if(NOT FANSTORE_${var}_STATIC)
    message(FATAL_ERROR "fanstore: no lib${name}.a (install its -dev package, or configure "
      "with -DFANSTORE_STATIC_DEPS=OFF)")
  endif()
  set_target_properties(PkgConfig::${var} PROPERTIES
    INTERFACE_LINK_LIBRARIES ${FANSTORE_${var}_STATIC})
endforeach()
set_target_properties(spdlog::spdlog_header_only PROPERTIES
  INTERFACE_LINK_LIBRARIES "Threads::Threads;fmt::fmt-header-only")
set(FANSTORE_SPDLOG spdlog::spdlog_header_only)
