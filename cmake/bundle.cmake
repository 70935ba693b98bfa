# A bundle build (ci/bundle.sh, docs/bundle.md): the tools and the runtime library for any
# Linux of this architecture with glibc 2.28 or later, needing nothing else from the system
# but glibc and, under a launcher, the job's MPI.
# - Linked against an old glibc: FANSTORE_BUNDLE_SYSROOT holds Debian 11's glibc (crt
#   files, libc.so and its companions; ci/bundle.sh assembles it), searched before the
#   compiler's own directories, so each glibc symbol binds to its oldest version. The
#   headers stay this machine's. base/old_glibc.c covers what gcc 12's libstdc++.a and
#   libgcc_eh.a name that 2.28 lacks.
# - The other libraries linked in as in every build (cmake/static_deps.cmake). ISA-L and
#   Zydis (dlopened) are shared libraries the bundle carries in lib/, found through
#   RUNPATH ($ORIGIN/../lib for the tools, $ORIGIN for the libraries).
set(FANSTORE_BUNDLE_SYSROOT "" CACHE PATH
  "Bundle build: a directory holding the old glibc to link against (ci/bundle.sh)")
if(NOT FANSTORE_BUNDLE_SYSROOT)
  return()
endif()
if(NOT FANSTORE_STATIC_DEPS)
  message(FATAL_ERROR "fanstore: a bundle build needs FANSTORE_STATIC_DEPS")
endif()
set(sysroot_lib ${FANSTORE_BUNDLE_SYSROOT}/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
if(NOT EXISTS ${sysroot_lib}/libc.so)
  message(FATAL_ERROR "fanstore: FANSTORE_BUNDLE_SYSROOT has no ${sysroot_lib}/libc.so")
endif()
add_link_options(--sysroot=${FANSTORE_BUNDLE_SYSROOT} -B${sysroot_lib}/ -L${sysroot_lib}
  -L${FANSTORE_BUNDLE_SYSROOT}/lib/${CMAKE_LIBRARY_ARCHITECTURE})
# Before glibc 2.34, threads, dlopen and shm_open had libraries of their own.
set(CMAKE_C_STANDARD_LIBRARIES "-lpthread -ldl -lrt")
set(CMAKE_CXX_STANDARD_LIBRARIES "-lpthread -ldl -lrt")
add_library(fanstore_old_glibc OBJECT ${PROJECT_SOURCE_DIR}/base/old_glibc.c)
set_target_properties(fanstore_old_glibc PROPERTIES C_VISIBILITY_PRESET hidden)

# fanstore_bundle_elf(TARGET...): the old-glibc objects linked in, and the RUNPATH that
# finds the carried libraries. Called for each executable and shared library installed.
function(fanstore_bundle_elf)
  foreach(t ${ARGN})
    target_link_libraries(${t} PRIVATE fanstore_old_glibc)
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "EXECUTABLE")
      set_target_properties(${t} PROPERTIES INSTALL_RPATH "\$ORIGIN/../lib")
    else()
      set_target_properties(${t} PROPERTIES INSTALL_RPATH "\$ORIGIN")
    endif()
  endforeach()
endfunction()
