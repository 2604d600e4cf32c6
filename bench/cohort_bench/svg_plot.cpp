#include "svg_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace cohort::bench {
namespace {

constexpr double kWidth = 900, kHeight = 540;
constexpr double kLeft = 80, kRight = 230, kTop = 50, kBottom = 70;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kMaxXTicks = 12;

struct Point {
  double size, busbw;
};

// Maps a value on a log axis spanning [lo, hi] (exponents of `base`) to [0, 1].
double log_fraction(double value, double base, double lo_exp, double hi_exp) {
  return (std::log(value) / std::log(base) - lo_exp) / (hi_exp - lo_exp);
}

std::string y_tick_label(double value) {
  return fmt::format("{:g}", value);
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

std::string size_tick_label(double bytes) {
  static constexpr const char* kUnits[] = {"", "K", "M", "G", "T"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  return fmt::format("{:g}{}", bytes, kUnits[unit]);
}

std::string busbw_plot_svg(const RunInfo& info, const std::vector<ResultRow>& rows) {
  // Name the series by what varies: always implementation/algorithm, plus op, dtype and redop
  // when the run covered more than one of them.
  std::set<std::tuple<BenchOp, DType, std::string>> blocks;
  for (const auto& row : rows) {
    if (row.out_of_place.measured) blocks.emplace(row.op, row.dtype, redop_label(row));
  }
  const bool several_blocks = blocks.size() > 1;
  std::map<std::string, std::vector<Point>> series;
  std::vector<std::string> order;  // first appearance, so the legend follows the table
  for (const auto& row : rows) {
    std::string name = impl_label(row);
    if (several_blocks) {
      name = fmt::format("{} {} {} {}", name, bench_op_name(row.op), dtype_name(row.dtype),
                         redop_label(row));
    }
    const Measurement& m = row.out_of_place;
    if (!m.measured || row.size_bytes == 0 || !(m.busbw_gbps > 0.0)) continue;
    if (series.find(name) == series.end()) order.push_back(name);
    series[name].push_back({static_cast<double>(row.size_bytes), m.busbw_gbps});
  }

  // Axis ranges: whole powers of two for sizes, whole decades for bandwidth.
  double min_size = 8, max_size = 1 << 20, min_bw = 0.01, max_bw = 10;
  if (!order.empty()) {
    min_size = min_bw = HUGE_VAL;
    max_size = max_bw = 0;
    for (const auto& [name, points] : series) {
      for (const auto& p : points) {
        min_size = std::min(min_size, p.size);
        max_size = std::max(max_size, p.size);
        min_bw = std::min(min_bw, p.busbw);
        max_bw = std::max(max_bw, p.busbw);
      }
    }
  }
  const double x_lo = std::floor(std::log2(min_size));
  const double x_hi = std::max(std::ceil(std::log2(max_size)), x_lo + 1);
  const double y_lo = std::floor(std::log10(min_bw));
  const double y_hi = std::max(std::ceil(std::log10(max_bw)), y_lo + 1);
  auto px = [&](double size) { return kLeft + kPlotW * log_fraction(size, 2, x_lo, x_hi); };
  auto py = [&](double bw) { return kTop + kPlotH * (1 - log_fraction(bw, 10, y_lo, y_hi)); };

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      kWidth, kHeight);
  svg += fmt::format(
      "<text x=\"{}\" y=\"28\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
      kLeft + kPlotW / 2,
      xml_escape(fmt::format("cohort-bench {} {} {}: out-of-place bus bandwidth, {} ranks", info.op,
                             info.dtype, info.redop, info.world_size)));

  // Grid and ticks. X: powers of two whose exponent is a multiple of the stride, the stride
  // chosen so that at most kMaxXTicks are labelled.
  const int x_steps = static_cast<int>(x_hi - x_lo);
  int x_stride = 1;
  for (int stride : {1, 2, 5, 10}) {
    x_stride = stride;
    if (x_steps / stride + 1 <= kMaxXTicks) break;
  }
  const int x_first = static_cast<int>(std::ceil(x_lo / x_stride)) * x_stride;
  for (int e = x_first; e <= static_cast<int>(x_hi); e += x_stride) {
    const double x = px(std::exp2(e));
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#dddddd\"/>\n"
        "<line x1=\"{0:.1f}\" y1=\"{2}\" x2=\"{0:.1f}\" y2=\"{3}\" stroke=\"black\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{4}\" text-anchor=\"middle\">{5}</text>\n",
        x, kTop, kTop + kPlotH, kTop + kPlotH + 5, kTop + kPlotH + 19,
        xml_escape(size_tick_label(std::exp2(e))));
  }
  for (int e = static_cast<int>(y_lo); e <= static_cast<int>(y_hi); ++e) {
    const double y = py(std::pow(10.0, e));
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#dddddd\"/>\n"
        "<line x1=\"{3}\" y1=\"{1:.1f}\" x2=\"{0}\" y2=\"{1:.1f}\" stroke=\"black\"/>\n"
        "<text x=\"{4}\" y=\"{5:.1f}\" text-anchor=\"end\">{6}</text>\n",
        kLeft, y, kLeft + kPlotW, kLeft - 5, kLeft - 8, y + 4,
        xml_escape(y_tick_label(std::pow(10.0, e))));
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n",
      kLeft, kTop, kPlotW, kPlotH);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">message size (bytes)</text>\n",
                     kLeft + kPlotW / 2, kHeight - 22);
  svg += fmt::format(
      "<text x=\"20\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 20 {0})\">"
      "bus bandwidth (GB/s)</text>\n",
      kTop + kPlotH / 2);

  if (order.empty()) {
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888888\">no positive bus "
        "bandwidth to plot</text>\n",
        kLeft + kPlotW / 2, kTop + kPlotH / 2);
  }
  // One polyline with markers per series, and its legend entry.
  for (std::size_t i = 0; i < order.size(); ++i) {
    const char* colour = kColours[i % std::size(kColours)];
    const auto& points = series[order[i]];
    std::string coords;
    for (const auto& p : points) coords += fmt::format("{:.1f},{:.1f} ", px(p.size), py(p.busbw));
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                       colour, coords);
    for (const auto& p : points) {
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(p.size),
                         py(p.busbw), colour);
    }
    const double ly = kTop + 10 + 20 * static_cast<double>(i);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"2\"/>\n"
        "<text x=\"{4}\" y=\"{5}\">{6}</text>\n",
        kLeft + kPlotW + 15, ly, kLeft + kPlotW + 40, colour, kLeft + kPlotW + 46, ly + 4,
        xml_escape(order[i]));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace cohort::bench
