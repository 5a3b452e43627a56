// The table of targets: generic families, features, and which object runs where.
#include <gtest/gtest.h>

#include "ukdpack/model/arch.hpp"

namespace {

using Vec = std::vector<std::string>;

TEST(TargetTable, GenericFamiliesHoldTheirMembersOnly) {
  EXPECT_EQ(ukdpack::genericTargets(), (Vec{"gfx9-generic", "gfx9-4-generic", "gfx10-1-generic", "gfx10-3-generic",
                                            "gfx11-generic", "gfx12-generic"}));
  EXPECT_EQ(ukdpack::genericMembers("gfx11-generic"),
            (Vec{"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"}));
  EXPECT_EQ(ukdpack::genericMembers("gfx9-4-generic"), (Vec{"gfx940", "gfx941", "gfx942", "gfx950"}));
  EXPECT_TRUE(ukdpack::genericMembers("gfx90a").empty());
  EXPECT_EQ(ukdpack::genericFamilyOf("gfx1036"), "gfx10-3-generic");
  EXPECT_EQ(ukdpack::genericFamilyOf("gfx90c"), "gfx9-generic");
  EXPECT_EQ(ukdpack::genericFamilyOf("gfx90a"), "");  // gfx90a belongs to no family
  EXPECT_EQ(ukdpack::genericFamilyOf("gfx908"), "");
}

TEST(TargetTable, FeaturesPerProcessor) {
  EXPECT_EQ(ukdpack::supportedFeatures("gfx90a"), (Vec{"sramecc", "xnack"}));
  EXPECT_EQ(ukdpack::supportedFeatures("gfx900"), (Vec{"xnack"}));
  EXPECT_TRUE(ukdpack::supportedFeatures("gfx1100").empty());
  EXPECT_EQ(ukdpack::supportedFeatures("gfx9-4-generic"), (Vec{"sramecc", "xnack"}));
}

TEST(TargetId, ParsesCanonicallyAndRefusesNonsense) {
  auto id = ukdpack::parseTargetId("gfx90a:xnack-:sramecc+");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->processor, "gfx90a");
  EXPECT_EQ(id->str(), "gfx90a:sramecc+:xnack-");
  EXPECT_FALSE(ukdpack::parseTargetId("gfx1100:xnack+"));  // gfx1100 has no xnack
  EXPECT_FALSE(ukdpack::parseTargetId("gfx90a:xnack"));    // no setting
  EXPECT_FALSE(ukdpack::parseTargetId("gfx90a:xnack+:xnack-"));
  EXPECT_FALSE(ukdpack::parseTargetId("x86_64"));
  EXPECT_EQ(ukdpack::targetIdProblem("gfx1100:xnack+"), "gfx1100 does not support feature 'xnack' (it supports none)");
  EXPECT_EQ(ukdpack::targetIdProblem("gfx90a:sramecc+"), "");
}

TEST(TargetId, GenericCoversMembersOnly) {
  EXPECT_TRUE(ukdpack::targetIdRunsOn("gfx11-generic", "gfx1101"));
  EXPECT_TRUE(ukdpack::targetIdRunsOn("gfx11-generic", "gfx1153"));
  EXPECT_FALSE(ukdpack::targetIdRunsOn("gfx11-generic", "gfx1030"));
  EXPECT_FALSE(ukdpack::targetIdRunsOn("gfx11-generic", "gfx1200"));
  EXPECT_FALSE(ukdpack::targetIdRunsOn("gfx1100", "gfx1101"));
  EXPECT_FALSE(ukdpack::targetIdRunsOn("gfx1100", "gfx11-generic"));  // a device is never generic
}

TEST(TargetId, FeatureSettingsMustMatchAndAnyRunsOnBoth) {
  EXPECT_TRUE(ukdpack::targetIdRunsOn("gfx90a:xnack+", "gfx90a:sramecc+:xnack+"));
  EXPECT_FALSE(ukdpack::targetIdRunsOn("gfx90a:xnack+", "gfx90a:sramecc+:xnack-"));
  EXPECT_TRUE(ukdpack::targetIdRunsOn("gfx90a:xnack-", "gfx90a:xnack-"));
  EXPECT_TRUE(ukdpack::targetIdRunsOn("gfx90a", "gfx90a:xnack+"));  // "any" runs on both
  EXPECT_TRUE(ukdpack::targetIdRunsOn("gfx90a", "gfx90a:xnack-"));
  EXPECT_FALSE(ukdpack::targetIdRunsOn("gfx90a:xnack+", "gfx90a"));  // setting unknown
  EXPECT_TRUE(ukdpack::targetIdRunsOn("gfx9-4-generic:xnack+", "gfx942:sramecc+:xnack+"));
  EXPECT_FALSE(ukdpack::targetIdRunsOn("gfx9-4-generic:xnack+", "gfx942:xnack-"));
}

TEST(TargetId, CompatibleTargetsMostSpecificFirst) {
  EXPECT_EQ(
      ukdpack::compatibleTargets("gfx942:sramecc+:xnack-"),
      (Vec{"gfx942:sramecc+:xnack-", "gfx942:sramecc+", "gfx942:xnack-", "gfx942", "gfx9-4-generic:sramecc+:xnack-",
           "gfx9-4-generic:sramecc+", "gfx9-4-generic:xnack-", "gfx9-4-generic"}));
  EXPECT_EQ(ukdpack::compatibleTargets("gfx1101"), (Vec{"gfx1101", "gfx11-generic"}));
  EXPECT_EQ(ukdpack::compatibleTargets("gfx90a:xnack+"), (Vec{"gfx90a:xnack+", "gfx90a"}));
  // gfx9-generic has no sramecc: the family's candidates leave it out.
  EXPECT_EQ(ukdpack::compatibleTargets("gfx906:sramecc-:xnack+"),
            (Vec{"gfx906:sramecc-:xnack+", "gfx906:sramecc-", "gfx906:xnack+", "gfx906", "gfx9-generic:xnack+",
                 "gfx9-generic"}));
  EXPECT_TRUE(ukdpack::compatibleTargets("gfx11-generic").empty());
}

}  // namespace
