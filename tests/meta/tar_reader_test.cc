// The tar reader's header fields, on archives built here byte by byte: times in every
// form a tar writes them (octal, GNU base-256, PAX decimal with a fraction), and times that
// do not fit the namespace's nanosecond clock, which must be refused with a clear error
// rather than wrapped into a wrong mtime.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "meta/archive_reader.h"
#include "meta/tar_fields.h"

namespace fanstore::meta {
namespace {

class StringSource final : public ByteSource {
 public:
  explicit StringSource(std::string s) : s_(std::move(s)) {}
  Result<size_t> Read(uint8_t* p, size_t n) override {
    const size_t k = std::min(n, s_.size() - at_);
    std::memcpy(p, s_.data() + at_, k);
    at_ += k;
    return k;
  }
  uint64_t file_offset() const override { return at_; }
  const std::string& name() const override { return name_; }

 private:
  std::string s_;
  size_t at_ = 0;
  std::string name_ = "t.tar";
};

void Octal(char* f, size_t n, uint64_t v) {
  std::snprintf(f, n, "%0*llo", int(n - 1), (unsigned long long)v);
}

// A ustar header; `mtime` overwrites the 12-byte mtime field when not empty.
std::string Header(const std::string& name, char type, uint64_t size, const std::string& mtime) {
  char h[512] = {};
  std::memcpy(h, name.data(), name.size());
  Octal(h + 100, 8, 0644);
  Octal(h + 108, 8, 0);
  Octal(h + 116, 8, 0);
  Octal(h + 124, 12, size);
  Octal(h + 136, 12, 1234567890);
  if (!mtime.empty()) std::memcpy(h + 136, mtime.data(), 12);
  h[156] = type;
  std::memcpy(h + 257,
              "ustar\0"
              "00",
              8);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  return std::string(h, 512);
}

std::string Padded(std::string data) {
  data.resize((data.size() + 511) / 512 * 512, '\0');
  return data;
}

// A one-file archive "f" holding "hi", its mtime field as given, after a PAX header with
// `pax_mtime` when that is not empty.
std::string Archive(const std::string& mtime_field, const std::string& pax_mtime = "") {
  std::string out;
  if (!pax_mtime.empty()) {
    std::string rec = " mtime=" + pax_mtime + "\n";
    // The record's length counts its own digits.
    size_t len = rec.size() + 1;
    while (std::to_string(len).size() + rec.size() != len) ++len;
    rec = std::to_string(len) + rec;
    out += Header("PaxHeaders/f", 'x', rec.size(), "") + Padded(rec);
  }
  out += Header("f", '0', 2, mtime_field) + Padded("hi");
  return out + std::string(1024, '\0');
}

// The first entry's mtime, or the error.
Result<int64_t> FirstMtime(const std::string& archive) {
  auto r = NewTarReader(std::make_unique<StringSource>(archive));
  ArchiveEntry e;
  auto more = r->Next(&e);
  if (!more.ok()) return more.status();
  if (!*more) return Status::Error("no entry");
  return e.mtime_ns;
}

std::string Base256(bool negative, uint64_t low, uint8_t high_byte = 0) {
  std::string f(12, '\0');
  f[0] = negative ? '\xff' : '\x80';
  if (negative) std::memset(f.data() + 1, 0xff, 11);
  if (high_byte) f[3] = static_cast<char>(high_byte);
  for (int i = 0; i < 8; ++i) f[11 - i] = static_cast<char>(low >> (8 * i));
  return f;
}

TEST(TarReader, OctalMtime) {
  auto t = FirstMtime(Archive(""));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, 1234567890LL * 1'000'000'000);
}

TEST(TarReader, Base256MtimeBothSigns) {
  auto t = FirstMtime(Archive(Base256(false, 4102444800)));  // 2100-01-01
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, 4102444800LL * 1'000'000'000);
  t = FirstMtime(Archive(Base256(true, ~uint64_t{86400} + 1)));  // 1969-12-31
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, -86400LL * 1'000'000'000);
}

TEST(TarReader, PaxMtimeWithFraction) {
  auto t = FirstMtime(Archive("", "1234567890.123456789123"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, 1234567890123456789LL);
  t = FirstMtime(Archive("", "-1.5"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, -1'500'000'000LL);
  // The last second the clock holds: 9223372036.854775807 s.
  t = FirstMtime(Archive("", "9223372036.854775807"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, INT64_MAX);
}

// Found by the archive fuzzer: these overflowed int64 nanoseconds.
TEST(TarReader, MtimeBeyondTheClockIsRefused) {
  for (const char* pax :
       {"9223372036.854775808", "17957218512", "-9223372037", "99999999999999999999999"}) {
    auto t = FirstMtime(Archive("", pax));
    ASSERT_FALSE(t.ok()) << pax << " gave " << *t;
    EXPECT_NE(t.status().message().find("PAX mtime"), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("t.tar"), std::string::npos) << t.status().message();
  }
  for (const std::string& field :
       {Base256(false, 17957218512), Base256(false, 1, 0x01), Base256(true, 1, 0x7f)}) {
    auto t = FirstMtime(Archive(field));
    ASSERT_FALSE(t.ok()) << "gave " << *t;
    EXPECT_NE(t.status().message().find("mtime field"), std::string::npos) << t.status().message();
  }
}

}  // namespace
}  // namespace fanstore::meta

namespace fanstore::meta::tar_fields {
namespace {

TEST(TarFields, NumbersInOctalAndBase256) {
  uint64_t v = 1;
  const uint8_t octal[8] = {' ', '0', '0', '0', '7', '5', '5', 0};
  ASSERT_TRUE(ParseNumber(octal, sizeof octal, &v));
  EXPECT_EQ(v, 0755u);
  const uint8_t base256[12] = {0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x00};
  ASSERT_TRUE(ParseNumber(base256, sizeof base256, &v));
  EXPECT_EQ(v, 256u);
  const uint8_t negative[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe};
  EXPECT_FALSE(ParseNumber(negative, sizeof negative, &v));  // not asked for a sign
  bool neg = false;
  ASSERT_TRUE(ParseNumber(negative, sizeof negative, &v, &neg));
  EXPECT_TRUE(neg);
  EXPECT_EQ(v, 2u);
  const uint8_t junk[4] = {'1', 'x', '2', 0};
  EXPECT_FALSE(ParseNumber(junk, sizeof junk, &v));
  const uint8_t huge[12] = {0x80, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};  // 2^80
  EXPECT_FALSE(ParseNumber(huge, sizeof huge, &v));
}

TEST(TarFields, PaxTimesAndDecimals) {
  int64_t ns = 0;
  ASSERT_TRUE(ParsePaxTime("1700000000.5", &ns));
  EXPECT_EQ(ns, 1'700'000'000'500'000'000);
  ASSERT_TRUE(ParsePaxTime("-1.25", &ns));
  EXPECT_EQ(ns, -1'250'000'000);
  EXPECT_FALSE(ParsePaxTime("99999999999", &ns));  // after 2262
  EXPECT_FALSE(ParsePaxTime("12x", &ns));
  uint64_t v = 0;
  ASSERT_TRUE(ParseDecimal("18446744073709551615", &v));
  EXPECT_EQ(v, UINT64_MAX);
  EXPECT_FALSE(ParseDecimal("18446744073709551616", &v));
  EXPECT_FALSE(ParseDecimal("", &v));
  const uint8_t name[6] = {'a', 'b', 0, 'c', 0, 0};
  EXPECT_EQ(Field(name, sizeof name), "ab");
}

}  // namespace
}  // namespace fanstore::meta::tar_fields
