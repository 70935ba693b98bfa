// The fields of a tar header and of PAX records, decoded with every bound checked: numbers
// in octal or GNU base-256, NUL-terminated strings, the header checksum (unsigned or signed,
// as old tars wrote it), PAX decimal numbers and times. Pure functions.
// Thread-safety: none needed (no state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace fanstore::meta::tar_fields {

// Parses a numeric header field: octal ASCII (spaces and NULs around it), or GNU base-256
// (first byte 0x80 positive, 0xff negative: refused unless `negative` is given). False if
// malformed or over 64 bits.
bool ParseNumber(const uint8_t* f, size_t n, uint64_t* out, bool* negative = nullptr);
// A string field: up to its first NUL, or all n bytes.
std::string Field(const uint8_t* f, size_t n);
bool AllZero(const uint8_t* p, size_t n);
// Whether the 512-byte header's checksum field matches its bytes.
bool ChecksumOk(const uint8_t* h);
// SECS seconds and FRAC nanoseconds (of the same sign) as nanoseconds; false when that
// does not fit an int64_t (before 1678 or after 2262).
bool SecondsToNs(int64_t secs, int64_t frac, int64_t* ns);
// A PAX decimal time "SECONDS[.FRACTION]" in nanoseconds.
bool ParsePaxTime(const std::string& v, int64_t* ns);
// A PAX decimal number: digits only, at most UINT64_MAX.
bool ParseDecimal(const std::string& v, uint64_t* out);

}  // namespace fanstore::meta::tar_fields
