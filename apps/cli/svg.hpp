// A small SVG plot writer for `ovl validate --plot`: scatter and line series on linear or log axes.
#pragma once

#include <string>
#include <vector>

namespace ovl::cli {

struct Series {
  std::string label;
  std::vector<double> x, y;
  bool line = false;  // connect the points (sorted by x) instead of drawing markers
  std::string color = "#1f77b4";
};

struct PlotSpec {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  bool diagonal = false;  // draw y = x (predicted versus measured)
  int width = 640, height = 480;
};

// Returns the SVG document; series with no points are skipped; an empty plot still renders axes.
std::string svg_plot(const PlotSpec& spec, const std::vector<Series>& series);

}  // namespace ovl::cli
