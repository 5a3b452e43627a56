#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"

using ukdpack::closestMatch;
using ukdpack::didYouMean;

namespace {

const std::vector<std::string> kKeys = {"id", "version", "name", "dispatch_symbol", "launches"};

TEST(DidYouMean, SuggestsTheClosestNameWithinAFewSlips) {
  EXPECT_EQ(closestMatch("dispach_symbol", kKeys), "dispatch_symbol");  // a letter left out
  EXPECT_EQ(closestMatch("verison", kKeys), "version");                 // two letters swapped
  EXPECT_EQ(closestMatch("Launches", kKeys), "launches");               // case alone
  EXPECT_EQ(closestMatch("nmae", kKeys), "name");
  EXPECT_EQ(didYouMean("lanches", kKeys), "; did you mean 'launches'?");
}

TEST(DidYouMean, StaysQuietWhenNothingIsClose) {
  EXPECT_EQ(closestMatch("owner", kKeys), "");
  EXPECT_EQ(closestMatch("xy", {"id"}), "");  // a short name allows one edit, no more
  EXPECT_EQ(closestMatch("idx", {"id"}), "id");
  EXPECT_EQ(closestMatch("udd-404", {"udd-1"}), "");  // a different id, not a slip
  EXPECT_EQ(closestMatch("name", kKeys), "");         // a known name needs no suggestion
  EXPECT_EQ(didYouMean("anything", {}), "");
  EXPECT_EQ(closestMatch(std::string(1 << 20, 'x'), kKeys), "");  // a huge key costs nothing
}

}  // namespace
