#include "comm/p2p_inflight.hpp"
