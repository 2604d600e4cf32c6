#include "support/support.hpp"
