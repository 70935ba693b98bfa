#include "bin/mpi_load.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <string_view>

#include "base/env_names.h"
#include "bin/cli_util.h"

namespace fanstore::cli {
namespace {

struct Family {
  const char* name;
  std::vector<const char*> sonames;
};

const Family kMpich{"mpich", {"libmpi.so.12", "libmpich.so.12"}};  // (Debian: libmpich)
const Family kOpenMpi{"openmpi", {"libmpi.so.40"}};

std::string PluginPath(const Family& f) {
  const std::string name = std::string("libfanstore_mpi_") + f.name + ".so";
  const std::string lib = "../lib/" + name, build = name;
  return FindBesideExecutable({lib.c_str(), build.c_str()});
}

std::string LoadedPath(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
    return map->l_name;
  return fallback;
}

// The family's plugin with `library` (a soname or a path) made global: the choice is made.
Result<MpiChoice> Commit(const Family& f, const std::string& plugin, const std::string& library,
                         MpiChoice choice) {
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return Status::Error(std::string("MPI library: ") + ::dlerror());
  void* h = ::dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return Status::Error(std::string("MPI plugin: ") + ::dlerror());
  using Entry = mpi::Library* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(h, "fanstore_mpi_library"));
  if (!entry) return Status::Error(plugin + ": lacks fanstore_mpi_library");
  choice.family = f.name;
  choice.library = LoadedPath(lib, library);
  choice.plugin = plugin;
  choice.mpi = entry();
  mpi::SetWorld(choice.mpi);
  return choice;
}

// Tries the family's libraries, each loaded privately first (RTLD_LOCAL) so that one that
// is not chosen never lends its symbols to another family's plugin.
Result<MpiChoice> TryFamily(const Family& f, MpiChoice* choice) {
  const std::string plugin = PluginPath(f);
  if (plugin.empty()) {
    choice->tried.push_back(std::string(f.name) + ": no libfanstore_mpi_" + f.name +
                            ".so beside this program");
    return Status::Error("");
  }
  for (const char* soname : f.sonames) {
    void* h = ::dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
      choice->tried.push_back(std::string(f.name) + ": " + ::dlerror());
      continue;
    }
    const std::string path = LoadedPath(h, soname);
    return Commit(f, plugin, path, *choice);
  }
  return Status::Error("");
}

}  // namespace

Result<MpiChoice> LoadMpi() {
  MpiChoice choice;
  const char* want = std::getenv(fanstore::env::kMpi);
  std::string_view w = want ? want : "";
  if (w.find('/') != std::string_view::npos) {  // a library's path: its family by a symbol
    void* h = ::dlopen(want, RTLD_LAZY | RTLD_LOCAL);
    if (!h)
      return Status::Error(std::string(fanstore::env::kMpi) + "=" + want + ": " + ::dlerror());
    const Family& f = ::dlsym(h, "ompi_mpi_comm_world") ? kOpenMpi : kMpich;
    const std::string plugin = PluginPath(f);
    if (plugin.empty())
      return Status::Error(std::string(fanstore::env::kMpi) + "=" + want + " is " + f.name +
                           "'s, and no libfanstore_mpi_" + f.name + ".so is beside this program");
    return Commit(f, plugin, want, choice);
  }
  std::vector<const Family*> order;
  if (w == "mpich") {
    order = {&kMpich};
  } else if (w == "openmpi") {
    order = {&kOpenMpi};
  } else if (!w.empty()) {
    return Status::Error(std::string(fanstore::env::kMpi) + "='" + want +
                         "': expected mpich, openmpi or the path of an MPI library");
  } else if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("OMPI_COMMAND")) {
    order = {&kOpenMpi, &kMpich};  // (started by Open MPI's mpirun)
  } else {
    order = {&kMpich, &kOpenMpi};
  }
  for (const Family* f : order) {
    auto r = TryFamily(*f, &choice);
    if (r.ok() || !r.status().message().empty()) return r;
  }
  std::string why;
  for (const std::string& t : choice.tried) why += (why.empty() ? "" : "; ") + t;
  return Status::Error("no MPI library could be loaded (" + why +
                       "); load your MPI module, or set " + fanstore::env::kMpi);
}

}  // namespace fanstore::cli
