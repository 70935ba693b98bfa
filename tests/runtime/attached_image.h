// A small tree packed once per test process and attached as fanrun's CMD attaches a dataset
// (runtime/process/env.h; runtime/calls/hook.cc PreloadHookSpec, without patching anything), for
// the runtime's unit tests: the runtime's state is one per process, so every suite of the binary
// shares this one. Thread-safety: Get from the test's main thread.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "intercept/hook_api.h"
#include "meta/dataset.h"
#include "meta/format.h"
#include "meta/namespace_image.h"
#include "meta/pack.h"
#include "runtime/process/env.h"
#include "runtime/process/state.h"
#include "tests/testutil.h"

namespace fanstore::intercept {
HookSpec PreloadHookSpec();  // runtime/calls/hook.cc
}

namespace fanstore::runtime {

class AttachedImage {
 public:
  // The mount point: never made; a virtual answer needs no native directory.
  static constexpr char kMount[] = "/fanstore-unit-test/ds";

  // The attached image, or nullptr (and a test failure) if packing or attaching failed. Its
  // directory goes at exit (the runtime keeps its blobs open or mapped, which outlive that).
  static AttachedImage* Get() {
    static AttachedImage image;
    static const bool made = image.Make();
    return made ? &image : nullptr;
  }

  // The source tree's bytes of `rel`.
  std::string Source(const std::string& rel) const {
    std::ifstream in(src_ + "/" + rel, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  const std::string& out() const { return out_; }

 private:
  bool Make() {
    namespace fs = std::filesystem;
    src_ = dir_ / "src";
    out_ = dir_ / "ds";
    testing::WriteFile(src_ + "/train/a/x.jpg", "x");
    testing::WriteFile(src_ + "/train/b/y.jpg", "yy");
    testing::WriteFile(src_ + "/val/v.txt", "v");
    fs::create_symlink("train/a/x.jpg", src_ + "/link");  // inside, relative
    fs::create_symlink("../train", src_ + "/val/up");     // a directory, through ".."
    fs::create_symlink("/etc/hostname", src_ + "/out");   // leaves the dataset
    fs::create_symlink("loop2", src_ + "/loop1");         // ELOOP
    fs::create_symlink("loop1", src_ + "/loop2");
    // Members of each codec: random bytes stay raw; text deflates whole, or in 1 MiB
    // blocks when large.
    std::mt19937_64 rng(42);
    std::string noise(300 * 1024, 0);
    for (char& c : noise) c = static_cast<char>(rng());
    testing::WriteFile(src_ + "/m/raw.bin", noise);
    auto text = [&](size_t n) {
      std::string t;
      while (t.size() < n) t += "line " + std::to_string(rng() % 1000) + " of some text\n";
      t.resize(n);
      return t;
    };
    testing::WriteFile(src_ + "/m/text.txt", text(200 * 1024));
    // (members of kStreamThreshold bytes or more are deflated in blocks)
    testing::WriteFile(src_ + "/m/big.txt", text(meta::kStreamThreshold + 1024 * 1024 + 123));
    testing::WriteFile(src_ + "/m/bad.txt", text(100 * 1024));
    meta::PackOptions o;
    o.src = src_;
    o.out = out_;
    if (auto packed = meta::Pack(o); !packed.ok()) {
      ADD_FAILURE() << "pack: " << packed.status().message();
      return false;
    }
    auto ds = meta::Dataset::Open(out_);
    if (!ds.ok()) {
      ADD_FAILURE() << ds.status().message();
      return false;
    }
    std::vector<std::string> parts;
    for (uint32_t p = 0; p < (*ds)->partitions().size(); ++p)
      parts.push_back(out_ + "/" + meta::PartitionFileName(p));
    const std::string image = dir_ / "namespace.img";
    std::ofstream(image, std::ios::binary) << meta::BuildNamespaceImage(**ds, parts);
    ::chmod(image.c_str(), 0600);
    ::setenv(env::kImage, image.c_str(), 1);
    ::setenv(env::kMount, kMount, 1);
    // The hook's start-up, as in CMD (it exits 121 if the image cannot be attached): the
    // state, the fd table and the prefilter's tables. Nothing is patched in this process.
    if (!intercept::PreloadHookSpec().prefilter || !runtime::Get()) {
      ADD_FAILURE() << "attach: no dataset";
      return false;
    }
    return true;
  }

  testing::TempDir dir_;
  std::string src_, out_;
};

}  // namespace fanstore::runtime
