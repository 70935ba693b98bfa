// Manifest::Decode over any bytes: an error or a manifest that encodes and decodes again
// to the same text, never a crash.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "meta/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto m = fanstore::meta::Manifest::Decode(text);
  if (!m.ok()) return 0;
  const std::string again = m->Encode();
  auto back = fanstore::meta::Manifest::Decode(again);
  if (!back.ok() || back->Encode() != again) std::abort();  // a decoded manifest round-trips
  return 0;
}
