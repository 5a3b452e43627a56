// The digest that binds a shard's index to the files it mirrors: XXH3-128
// (xxHash), as 32 lowercase hex digits. It tells an index written for other
// bytes (a stale or damaged one), not a forged one: whoever can edit a shard's
// descriptors can rewrite its index too, so trust comes from the JSON load and
// ukdpack-validate, and a start-up should not pay sha256 on every descriptor byte.
#pragma once

#include <cstddef>
#include <string>

namespace ukdpack::detail {

std::string bindingDigestHex(const void* data, std::size_t size);

}  // namespace ukdpack::detail
