# Cross-building for aarch64 on x86-64 with Debian's cross compiler (g++-aarch64-linux-gnu)
# against an arm64 Debian root as the sysroot, which holds the arm64 -dev packages
# (ci/arm64.sh makes it: ci/debian-root.sh bookworm:arm64). Installing them on the host
# through multiarch is not an option: libisal-dev:arm64 replaces the host's ISA-L.
#   cmake --preset aarch64       (FANSTORE_ARM64_SYSROOT: another root)
# The tests run inside that root, through qemu-user (ci/arm64.sh).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_ASM_COMPILER aarch64-linux-gnu-gcc)
set(FANSTORE_ARM64_SYSROOT "$ENV{FANSTORE_ARM64_SYSROOT}" CACHE PATH "The arm64 Debian root to build against")
if(NOT FANSTORE_ARM64_SYSROOT)
  set(FANSTORE_ARM64_SYSROOT /var/cache/fanstore-roots/bookworm-arm64 CACHE PATH "" FORCE)
endif()
if(NOT EXISTS ${FANSTORE_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/libc.so)
  message(FATAL_ERROR "fanstore: no arm64 root with libc6-dev at ${FANSTORE_ARM64_SYSROOT} "
                      "(make it with ci/arm64.sh --deps)")
endif()
set(CMAKE_SYSROOT ${FANSTORE_ARM64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH ${FANSTORE_ARM64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(ENV{PKG_CONFIG_SYSROOT_DIR} ${FANSTORE_ARM64_SYSROOT})
set(ENV{PKG_CONFIG_LIBDIR}
  ${FANSTORE_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${FANSTORE_ARM64_SYSROOT}/usr/share/pkgconfig)
# MPI: only its header is used (io/mpi_plugin.cc); FindMPI would take the include path
# from the root's mpicc, which names it as seen from inside the root.
set(MPI_C_HEADER_DIR ${FANSTORE_ARM64_SYSROOT}/usr/include/aarch64-linux-gnu/mpich CACHE PATH "")
set(MPI_C_LIB_NAMES mpich CACHE STRING "")
set(MPI_mpich_LIBRARY ${FANSTORE_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/libmpich.so CACHE FILEPATH "")
