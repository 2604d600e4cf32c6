#pragma once

// A log-log plot of bus bandwidth against message size as a standalone SVG document: one line
// per implementation and algorithm (and per op/dtype/redop when a run swept several), labelled
// axes with ticks, and a legend. Written by hand so the benchmark needs no plotting library.

#include "results.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace cohort::bench {

/// `text` with &, <, >, " and ' replaced by XML entities.
std::string xml_escape(std::string_view text);

/// A byte count for an axis tick: "512", "1K", "64M", "2G" (powers of 1024).
std::string size_tick_label(double bytes);

/// The SVG document for the out-of-place busbw of `rows`. Points with a zero size or zero busbw
/// cannot sit on a log axis and are left out; with none left the axes are drawn with a note.
std::string busbw_plot_svg(const RunInfo& info, const std::vector<ResultRow>& rows);

}  // namespace cohort::bench
