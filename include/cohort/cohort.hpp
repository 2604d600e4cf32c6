#pragma once

/// Everything public in one include.

#include <cohort/algorithm.hpp>
#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>
#include <cohort/device.hpp>
#include <cohort/dlpack.hpp>
#include <cohort/dtype.hpp>
#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/launch.hpp>
#include <cohort/log.hpp>
#include <cohort/store.hpp>
#include <cohort/tunables.hpp>
#include <cohort/version.hpp>
#include <cohort/work.hpp>
