#include "ukdpack/json/json_text.hpp"

#include <algorithm>
#include <cctype>

namespace ukdpack {

std::string jsonPathKey(const std::string& base, std::string_view key) {
  const bool plain = !key.empty() && (std::isalpha(static_cast<unsigned char>(key.front())) || key.front() == '_') &&
                     std::all_of(key.begin(), key.end(),
                                 [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  if (plain) return base + "." + std::string(key);
  return base + "[" + Json(std::string(key)).dump() + "]";
}

std::string jsonPathIndex(const std::string& base, std::size_t index) {
  return base + "[" + std::to_string(index) + "]";
}

Json JsonText::json() const {
  if (!text_) return value_;
  // The bytes may hold comments (the tape steps over them as this parse does).
  return Json::parse(text(), nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
}

}  // namespace ukdpack
