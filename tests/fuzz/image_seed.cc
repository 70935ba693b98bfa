// Writes the namespace image of a packed dataset (every partition local), as fanrun would
// build it, to a file: the seed of image_fuzz. Usage: image_seed DATASET OUT
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "meta/dataset.h"
#include "meta/namespace_image.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: image_seed DATASET OUT\n");
    return 2;
  }
  auto ds = fanstore::meta::Dataset::Open(argv[1]);
  if (!ds.ok()) {
    std::fprintf(stderr, "image_seed: %s\n", ds.status().message().c_str());
    return 1;
  }
  std::vector<std::string> parts;
  for (size_t p = 0; p < (*ds)->partitions().size(); ++p) parts.push_back("/p" + std::to_string(p));
  const std::string image = fanstore::meta::BuildNamespaceImage(**ds, parts);
  auto view = fanstore::meta::NamespaceView::Attach(
      {reinterpret_cast<const uint8_t*>(image.data()), image.size()});
  if (!view.ok()) {  // a seed that does not attach would fuzz nothing past the checks
    std::fprintf(stderr, "image_seed: %s\n", view.status().message().c_str());
    return 1;
  }
  std::ofstream(argv[2], std::ios::binary) << image;
  return 0;
}
