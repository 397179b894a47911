#include <doctest/doctest.h>
#include "hexir/hal/device.h"
TEST_CASE("placeholder") { CHECK(hexir::hal::create_device("cpu").ok()); }
