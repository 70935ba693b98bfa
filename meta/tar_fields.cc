#include "meta/tar_fields.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace fanstore::meta::tar_fields {

bool ParseNumber(const uint8_t* f, size_t n, uint64_t* out, bool* negative) {
  if (negative) *negative = false;
  if (n > 0 && (f[0] & 0x80)) {
    const bool neg = f[0] == 0xff;
    uint64_t v = neg ? ~uint64_t{0} : 0;
    for (size_t i = 1; i < n; ++i) {
      if ((v >> 56) != (neg ? 0xff : 0)) return false;  // would not fit 64 bits
      v = (v << 8) | f[i];
    }
    if (neg) {
      if (!negative) return false;
      *negative = true;
      v = ~v + 1;
    }
    *out = v;
    return true;
  }
  size_t i = 0;
  while (i < n && (f[i] == ' ' || f[i] == 0)) ++i;
  uint64_t v = 0;
  bool any = false;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (v >> 61) return false;
    v = v * 8 + (f[i] - '0');
    any = true;
  }
  for (; i < n; ++i)
    if (f[i] != ' ' && f[i] != 0) return false;
  *out = any ? v : 0;
  return true;
}

std::string Field(const uint8_t* f, size_t n) {
  const void* z = std::memchr(f, 0, n);
  return std::string(reinterpret_cast<const char*>(f), z ? static_cast<const uint8_t*>(z) - f : n);
}

bool AllZero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

bool ChecksumOk(const uint8_t* h) {
  uint64_t want;
  if (!ParseNumber(h + 148, 8, &want)) return false;
  uint64_t u = 0;
  int64_t s = 0;
  for (size_t i = 0; i < 512; ++i) {
    const uint8_t c = (i >= 148 && i < 156) ? ' ' : h[i];
    u += c;
    s += static_cast<int8_t>(c);
  }
  return want == u || static_cast<int64_t>(want) == s;
}

bool SecondsToNs(int64_t secs, int64_t frac, int64_t* ns) {
  int64_t whole;
  return !__builtin_mul_overflow(secs, int64_t{1'000'000'000}, &whole) &&
         !__builtin_add_overflow(whole, frac, ns);
}

bool ParsePaxTime(const std::string& v, int64_t* ns) {
  char* end = nullptr;
  errno = 0;
  const long long secs = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || errno) return false;
  int64_t frac = 0;
  if (*end == '.') {
    int digits = 0;
    for (++end; *end >= '0' && *end <= '9'; ++end)
      if (digits < 9) frac = frac * 10 + (*end - '0'), ++digits;
    while (digits++ < 9) frac *= 10;
    if (v[0] == '-') frac = -frac;
  }
  if (*end) return false;
  return SecondsToNs(secs, frac, ns);
}

bool ParseDecimal(const std::string& v, uint64_t* out) {
  if (v.empty() || v.size() > 20) return false;
  uint64_t x = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    if (x > (UINT64_MAX - (c - '0')) / 10) return false;
    x = x * 10 + (c - '0');
  }
  *out = x;
  return true;
}

}  // namespace fanstore::meta::tar_fields
