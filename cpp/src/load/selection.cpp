// A set's selection tables (ukdpack/load/loader.hpp): the order a state manager tries
// its kernels in, and the table it finds one by id with. One way to make them, for the
// state manager of a set that carries none and for the shard index's writer.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "base/binding_digest.hpp"
#include "ukdpack/load/loader.hpp"

namespace ukdpack {

namespace {

// Whether `s` holds an upper-case ASCII letter, 8 bytes at a time (every kernel's id
// is asked): a byte of each word in 'A'..'Z' sets its top bit.
bool hasUpper(std::string_view s) {
  constexpr std::uint64_t ones = 0x0101010101010101ULL;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t x = 0;
    std::memcpy(&x, s.data() + i, 8);
    const std::uint64_t low = x & (ones * 127);
    if (((ones * (127 + 'Z' + 1) - low) & ~x & (low + ones * (127 - ('A' - 1))) & (ones * 128)) != 0) return true;
  }
  for (; i < s.size(); ++i)
    if (static_cast<unsigned char>(s[i] - 'A') < 26) return true;
  return false;
}

// A member's place in selection order: priority (higher first), then id key, then g.
struct Rank {
  std::int64_t priority;
  std::uint64_t prefix;  // the key's first 8 bytes, big-endian: orders as the text does
  std::uint32_t g;
};

// Sorts `order` by priority (higher first), then key, then g. A stable LSD radix sort
// on (priority, prefix), a pass per byte that is not the same in every record (100,000
// kernels: about a third of a comparison sort's time); the rare runs of equal prefixes
// are then sorted by their whole keys.
void rankOrder(std::vector<Rank>& order, const std::vector<std::string_view>& keys) {
  const std::size_t n = order.size();
  // Byte b of the 16-byte key: 0-7 the prefix (least significant first), 8-15 the
  // priority, flipped so that a higher priority is a smaller key.
  const auto byteOf = [](const Rank& r, int b) -> unsigned {
    if (b < 8) return static_cast<unsigned>((r.prefix >> (8 * b)) & 0xFF);
    const std::uint64_t p = ~(static_cast<std::uint64_t>(r.priority) ^ (std::uint64_t{1} << 63));
    return static_cast<unsigned>((p >> (8 * (b - 8))) & 0xFF);
  };
  std::vector<std::array<std::uint32_t, 256>> counts(16);
  for (auto& c : counts) c.fill(0);
  for (const Rank& r : order)
    for (int b = 0; b < 16; ++b) ++counts[static_cast<std::size_t>(b)][byteOf(r, b)];
  std::vector<Rank> other(n);
  for (int b = 0; b < 16; ++b) {
    std::array<std::uint32_t, 256>& c = counts[static_cast<std::size_t>(b)];
    if (std::find(c.begin(), c.end(), static_cast<std::uint32_t>(n)) != c.end()) continue;  // one value: no pass
    std::uint32_t at = 0;
    for (std::uint32_t& k : c) {
      const std::uint32_t here = k;
      k = at;
      at += here;
    }
    for (const Rank& r : order) other[c[byteOf(r, b)]++] = r;
    order.swap(other);
  }
  // Equal (priority, prefix): the whole keys decide, then g (already so).
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && order[j].priority == order[i].priority && order[j].prefix == order[i].prefix) ++j;
    if (j - i > 1) {
      std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(i), order.begin() + static_cast<std::ptrdiff_t>(j),
                       [&](const Rank& a, const Rank& b) { return keys[a.g] < keys[b.g]; });
    }
    i = j;
  }
}

}  // namespace

std::size_t SelectionTables::home(std::string_view key) const {
  return static_cast<std::size_t>(detail::stableHash64(key)) & (idSlots.size() - 1);
}

std::size_t SelectionTables::idSlotsFor(std::size_t members) {
  std::size_t size = 16;
  while (size < 2 * members) size *= 2;
  return size;
}

SelectionTables selectionTablesOf(const DescriptorSet& set) {
  SelectionTables out;
  std::size_t n = 0;
  for (const Pack& p : set.packs) n += p.members.size();
  out.members = n;
  // One pass over the members (each read once): its id key, and its ranking record,
  // sorted as small contiguous records: the key's first 8 bytes settle almost every tie
  // of priority without reaching into scattered strings. A kernel's id is nearly always
  // its own key (a lower-case UUID): the key is then a view of the id in the set.
  std::deque<std::string> ownKeys;
  std::vector<std::string_view> keys;
  keys.reserve(n);
  std::vector<Rank> order;
  order.reserve(n);
  const std::size_t size = SelectionTables::idSlotsFor(n);
  const std::size_t mask = size - 1;
  std::vector<std::uint32_t> home;  // each key's first slot, hashed while the key is at hand
  home.reserve(n);
  for (const Pack& p : set.packs) {
    for (const PackMember& m : p.members) {
      // The member's id and priority: a set read through a shard index builds no kernel for them.
      const std::string_view id = m.id();
      std::string_view key = id;
      if (hasUpper(id)) {
        if (std::string own = idKey(id); own != id) key = ownKeys.emplace_back(std::move(own));
      }
      keys.push_back(key);
      std::uint64_t prefix = 0;
      for (std::size_t b = 0; b < 8; ++b)
        prefix = (prefix << 8) | (b < key.size() ? static_cast<unsigned char>(key[b]) : 0U);
      order.push_back(Rank{m.priority(), prefix, static_cast<std::uint32_t>(order.size())});
      home.push_back(static_cast<std::uint32_t>(detail::stableHash64(key) & mask));
    }
  }
  out.idSlots.assign(size, 0);
  // Fetched ahead: a table of 100,000 kernels is larger than the cache, and waiting on
  // each slot in turn was most of its build.
  constexpr std::size_t kAhead = 16;
  for (std::size_t g = 0; g < n; ++g) {
    if (g + kAhead < n) __builtin_prefetch(&out.idSlots[home[g + kAhead]], 1);
    std::size_t slot = home[g];
    while (out.idSlots[slot] != 0) slot = (slot + 1) & mask;
    out.idSlots[slot] = static_cast<std::uint32_t>(g + 1);
  }
  rankOrder(order, keys);
  out.ranking.resize(n);
  for (std::size_t i = 0; i < n; ++i) out.ranking[i] = order[i].g;
  return out;
}

}  // namespace ukdpack
