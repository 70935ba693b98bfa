#include "intercept/stub.h"

#include <sys/syscall.h>

#include <algorithm>
#include <cstring>

#include "base/syscall_numbers.h"

namespace fanstore::intercept {
namespace {

void Put32(std::vector<uint8_t>& v, int32_t x) {
  for (int i = 0; i < 4; ++i)
    v.push_back(static_cast<uint8_t>(static_cast<uint32_t>(x) >> (8 * i)));
}

// movb $value,%fs:mark_tls
void PutMarkStore(std::vector<uint8_t>& v, int32_t mark_tls, uint8_t value) {
  const uint8_t op[] = {0x64, 0xC6, 0x04, 0x25};
  v.insert(v.end(), op, op + sizeof op);
  Put32(v, mark_tls);
  v.push_back(value);
}

// After a clone-family syscall: the clone mark is 1 in a child (rax == 0), else 0.
void PutMark(std::vector<uint8_t>& v, int32_t mark_tls) {
  const uint8_t head[] = {0x48, 0x89, 0xC1,  // mov %rax,%rcx
                          0xE3, 0x0B};       // jrcxz +11 (over movb + jmp)
  v.insert(v.end(), head, head + sizeof head);
  PutMarkStore(v, mark_tls, 0);
  v.push_back(0xEB);  // jmp +9 (over the other movb)
  v.push_back(0x09);
  PutMarkStore(v, mark_tls, 1);
}

int32_t Get32(const uint8_t* p) {
  int32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

// Appends the range's bytes [from, to) as they must be at the stub's address: plain
// instructions as they are, the plan's fixups re-encoded (fixups never straddle `from` or
// `to`: both are instruction boundaries). False if a displacement would not reach. Each
// re-encoded instruction's end goes into `map` (its length may have changed).
bool CopyRange(std::vector<uint8_t>& s, const SitePlan& p, const uint8_t* range, size_t from,
               size_t to, uint64_t stub_addr, StubMap& map) {
  size_t at = from;
  for (uint8_t k = 0; k < p.fixups_n; ++k) {
    const Fixup& f = p.fixups[k];
    if (f.at < from || f.at >= to) continue;
    s.insert(s.end(), range + at, range + f.at);
    const uint8_t* x = range + f.at;
    const uint64_t old_next = p.start + f.at + f.len;  // where the original's rip points
    if (f.kind == FixKind::kRipDisp) {
      const uint64_t new_next = stub_addr + s.size() + f.len;
      const uint64_t target =
          old_next + static_cast<uint64_t>(static_cast<int64_t>(Get32(x + f.disp_at)));
      if (!Rel32Reaches(new_next, target)) return false;
      const size_t pos = s.size();
      s.insert(s.end(), x, x + f.len);
      const int32_t disp = static_cast<int32_t>(target - new_next);
      std::memcpy(&s[pos + f.disp_at], &disp, 4);
    } else {  // kBranch: EB rel8 | E9 rel32 | 7x rel8 | 0F 8x rel32, to jmp/jcc rel32
      int64_t rel;
      uint8_t cond = 0xFF;  // 0xFF: unconditional
      if (x[0] == 0xEB) {
        rel = static_cast<int8_t>(x[1]);
      } else if (x[0] == 0xE9) {
        rel = Get32(x + 1);
      } else if ((x[0] & 0xF0) == 0x70) {
        cond = x[0] & 0x0F;
        rel = static_cast<int8_t>(x[1]);
      } else {
        cond = x[1] & 0x0F;
        rel = Get32(x + 2);
      }
      const uint64_t target = old_next + static_cast<uint64_t>(rel);
      if (cond == 0xFF) {
        s.push_back(0xE9);
      } else {
        s.push_back(0x0F);
        s.push_back(static_cast<uint8_t>(0x80 | cond));
      }
      const uint64_t new_next = stub_addr + s.size() + 4;
      if (!Rel32Reaches(new_next, target)) return false;
      Put32(s, static_cast<int32_t>(target - new_next));
    }
    at = f.at + f.len;
    map.points.emplace_back(static_cast<uint32_t>(at), static_cast<uint32_t>(s.size()));
  }
  s.insert(s.end(), range + at, range + to);
  return true;
}

}  // namespace

bool Rel32Reaches(uint64_t from, uint64_t to) {
  const int64_t d = static_cast<int64_t>(to - from);
  return d >= INT32_MIN && d <= INT32_MAX;
}

uint64_t StubPcFor(const StubMap& map, const SitePlan& p, uint64_t stub_addr, uint64_t pc) {
  const uint64_t off = pc - p.start;
  auto it = std::upper_bound(map.points.begin(), map.points.end(), off,
                             [](uint64_t o, const auto& point) { return o < point.first; });
  if (it == map.points.begin()) return stub_addr + off;
  --it;
  return stub_addr + it->second + (off - it->first);
}

std::vector<uint8_t> BuildStub(const SitePlan& p, const uint8_t* range, uint64_t stub_addr,
                               uint64_t entry_slot, int32_t mark_tls, StubMap* map_out) {
  std::vector<uint8_t> s;
  StubMap local;
  StubMap& map = map_out ? *map_out : local;
  map.points.clear();
  const size_t pre = p.syscall_addr - p.start;
  const size_t post_at = pre + 2;
  const size_t range_len = p.end - p.start;
  auto point = [&](size_t range_off) {
    map.points.emplace_back(static_cast<uint32_t>(range_off), static_cast<uint32_t>(s.size()));
  };
  point(0);
  if (!CopyRange(s, p, range, 0, pre, stub_addr, map)) return {};
  point(pre);  // the syscall: the stub's call (or, for clone, its mark and syscall)
  auto jump_back = [&]() -> bool {
    s.push_back(0xE9);  // jmp rel32 back
    const uint64_t after_jmp = stub_addr + s.size() + 4;
    if (!Rel32Reaches(after_jmp, p.end)) return false;
    Put32(s, static_cast<int32_t>(p.end - after_jmp));
    return true;
  };
  if (p.nr >= 0 && IsCloneFamily(p.nr)) {
    // Set before the call too, so that a child is marked from its first instruction (a
    // signal handler may run before the code after the syscall).
    PutMarkStore(s, mark_tls, 1);
    s.push_back(0x0F);  // syscall
    s.push_back(0x05);
    point(post_at);  // after the syscall: the mark
    PutMark(s, mark_tls);
    if (!CopyRange(s, p, range, post_at, range_len, stub_addr, map)) return {};
    if (!jump_back()) return {};
    return s;
  }
  std::vector<size_t> je_fixups;
  if (p.nr < 0) {
    for (long nr : {SYS_clone, SYS_clone3, SYS_vfork, SYS_rt_sigreturn}) {
      s.push_back(0x3D);  // cmp $imm32,%eax
      Put32(s, static_cast<int32_t>(nr));
      s.push_back(0x0F);  // je rel32
      s.push_back(0x84);
      je_fixups.push_back(s.size());
      Put32(s, 0);
    }
  }
  const uint8_t lea_down[] = {0x48, 0x8D, 0x64, 0x24, 0x80};  // lea -0x80(%rsp),%rsp
  s.insert(s.end(), lea_down, lea_down + sizeof lea_down);
  s.push_back(0xFF);  // call *disp32(%rip)
  s.push_back(0x15);
  const uint64_t after_call = stub_addr + s.size() + 4;
  if (!Rel32Reaches(after_call, entry_slot)) return {};
  Put32(s, static_cast<int32_t>(entry_slot - after_call));
  const uint8_t lea_up[] = {0x48, 0x8D, 0xA4, 0x24, 0x80, 0x00, 0x00, 0x00};  // lea 0x80(%rsp),%rsp
  s.insert(s.end(), lea_up, lea_up + sizeof lea_up);
  // The entry leaves rcx = 0 when rax is the result, 1 when the kernel is to make the call:
  // then it is made here, so that no page of the entry's is touched after it returns.
  s.push_back(0xE3);  // jrcxz rel8 to .Lpost
  const size_t jrcxz_at = s.size();
  s.push_back(0);
  s.push_back(0x0F);  // syscall
  s.push_back(0x05);
  if (p.nr < 0) {
    s.push_back(0xEB);  // jmp rel8 over the direct syscall and the mark
    const size_t jmp_at = s.size();
    s.push_back(0);
    const size_t direct = s.size();
    PutMarkStore(s, mark_tls, 1);
    s.push_back(0x0F);  // syscall
    s.push_back(0x05);
    PutMark(s, mark_tls);
    s[jmp_at] = static_cast<uint8_t>(s.size() - (jmp_at + 1));
    for (size_t at : je_fixups) {
      const int32_t rel = static_cast<int32_t>(direct - (at + 4));
      std::memcpy(&s[at], &rel, 4);
    }
  }
  s[jrcxz_at] = static_cast<uint8_t>(s.size() - (jrcxz_at + 1));
  point(post_at);  // after the syscall, rax its result: .Lpost
  if (!CopyRange(s, p, range, post_at, range_len, stub_addr, map)) return {};
  if (!jump_back()) return {};
  return s;
}

std::vector<uint8_t> BuildPatch(const SitePlan& p, uint64_t stub_addr) {
  std::vector<uint8_t> b;
  b.push_back(0xE9);
  Put32(b, static_cast<int32_t>(stub_addr - (p.start + 5)));
  while (b.size() < p.end - p.start) b.push_back(0xCC);  // int3: traps if entered mid-range
  return b;
}

}  // namespace fanstore::intercept
