#include <gtest/gtest.h>
#include "weft/weft.h"
TEST(CapiSmoke, Version) { EXPECT_EQ(weft_version(), WEFT_VERSION); }
