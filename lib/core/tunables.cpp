#include "core/tunables.hpp"
