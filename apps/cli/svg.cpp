#include "cli/svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ovl::cli {
namespace {

struct Axis {
  double lo, hi;
  bool log;
  double map(double v, double px_lo, double px_hi) const {
    const double a = log ? std::log10(lo) : lo, b = log ? std::log10(hi) : hi;
    const double t = ((log ? std::log10(v) : v) - a) / (b - a);
    return px_lo + t * (px_hi - px_lo);
  }
  std::vector<double> ticks() const {
    std::vector<double> out;
    if (log) {
      for (double d = std::pow(10.0, std::floor(std::log10(lo))); d <= hi * 1.0001; d *= 10)
        for (double m : {1.0, 2.0, 5.0})
          if (d * m >= lo * 0.9999 && d * m <= hi * 1.0001) out.push_back(d * m);
    } else {
      const double step = std::pow(10.0, std::floor(std::log10((hi - lo) / 5)));
      const double nice = (hi - lo) / step > 20 ? step * 5 : (hi - lo) / step > 10 ? step * 2 : step;
      for (double v = std::ceil(lo / nice) * nice; v <= hi + nice * 1e-9; v += nice) out.push_back(v);
    }
    return out;
  }
};

Axis make_axis(std::vector<double> values, bool log) {
  values.erase(std::remove_if(values.begin(), values.end(),
                              [&](double v) { return !std::isfinite(v) || (log && v <= 0); }),
               values.end());
  if (values.empty()) return {1, 10, log};
  double lo = *std::min_element(values.begin(), values.end());
  double hi = *std::max_element(values.begin(), values.end());
  if (log) {
    lo /= 1.2;
    hi *= 1.2;
  } else {
    const double pad = hi > lo ? 0.05 * (hi - lo) : std::max(1.0, std::abs(hi) * 0.1);
    lo -= pad;
    hi += pad;
  }
  return {lo, hi, log};
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string svg_plot(const PlotSpec& spec, const std::vector<Series>& series) {
  std::vector<double> xs, ys;
  for (const Series& s : series) {
    xs.insert(xs.end(), s.x.begin(), s.x.end());
    ys.insert(ys.end(), s.y.begin(), s.y.end());
  }
  if (spec.diagonal) {  // same range on both axes so y = x is the diagonal
    xs.insert(xs.end(), ys.begin(), ys.end());
    ys = xs;
  }
  const Axis ax = make_axis(xs, spec.log_x), ay = make_axis(ys, spec.log_y);
  const double left = 70, right = spec.width - 20.0, top = 40, bottom = spec.height - 50.0;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
      spec.width, spec.height, spec.width / 2, escape(spec.title));
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", left, top,
                     right - left, bottom - top);
  for (double t : ax.ticks()) {
    const double px = ax.map(t, left, right);
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#ddd\"/>"
                       "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4:.4g}</text>\n",
                       px, top, bottom, bottom + 16, t);
  }
  for (double t : ay.ticks()) {
    const double py = ay.map(t, bottom, top);
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#ddd\"/>"
                       "<text x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5:.4g}</text>\n",
                       left, py, right, left - 6, py + 4, t);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (left + right) / 2,
                     spec.height - 12, escape(spec.x_label));
  svg += fmt::format("<text x=\"16\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {0})\">{1}</text>\n",
                     (top + bottom) / 2, escape(spec.y_label));
  if (spec.diagonal) {
    const double lo = std::max(ax.lo, ay.lo), hi = std::min(ax.hi, ay.hi);
    svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>\n",
                       ax.map(lo, left, right), ay.map(lo, bottom, top), ax.map(hi, left, right),
                       ay.map(hi, bottom, top));
  }
  int legend = 0;
  for (const Series& s : series) {
    if (s.x.empty()) continue;
    std::vector<size_t> order(s.x.size());
    std::iota(order.begin(), order.end(), size_t{0});
    if (s.line) std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s.x[a] < s.x[b]; });
    std::string points;
    for (size_t i : order) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      if ((spec.log_x && s.x[i] <= 0) || (spec.log_y && s.y[i] <= 0)) continue;
      const double px = ax.map(s.x[i], left, right), py = ay.map(s.y[i], bottom, top);
      if (s.line) {
        points += fmt::format("{:.1f},{:.1f} ", px, py);
      } else {
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\" fill-opacity=\"0.75\"/>\n", px, py,
                           s.color);
      }
    }
    if (s.line) svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", points, s.color);
    const double ly = top + 16 + 16 * legend++;
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
                       "<text x=\"{}\" y=\"{}\">{}</text>\n",
                       left + 10, ly - 9, s.color, left + 25, ly, escape(s.label));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace ovl::cli
