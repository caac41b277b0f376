// weft's version as text, from the public header's macros (one spelling for the C API and the cache key).
#pragma once

#include "weft/weft.h"

#define WEFT_VERSION_STR2_(x) #x
#define WEFT_VERSION_STR_(x) WEFT_VERSION_STR2_(x)

namespace weft {

inline constexpr const char* kVersionString =
    WEFT_VERSION_STR_(WEFT_VERSION_MAJOR) "." WEFT_VERSION_STR_(WEFT_VERSION_MINOR) "." WEFT_VERSION_STR_(WEFT_VERSION_PATCH);

}  // namespace weft

#undef WEFT_VERSION_STR_
#undef WEFT_VERSION_STR2_
