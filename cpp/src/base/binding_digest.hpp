// The digest that binds a shard's index to the files it mirrors: XXH3-128
// (xxHash), as 32 lowercase hex digits. It tells an index written for other
// bytes (a stale or damaged one), not a forged one: whoever can edit a shard's
// descriptors can rewrite its index too, so trust comes from the JSON load and
// ukdpack-validate, and a start-up should not pay sha256 on every descriptor byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ukdpack::detail {

std::string bindingDigestHex(const void* data, std::size_t size);

// XXH3-64 of `bytes`: the same on every machine and build, so that a table placed by
// it can be written into an index by one process and probed by another.
std::uint64_t stableHash64(std::string_view bytes);

}  // namespace ukdpack::detail
