#include "cli/cli.hpp"

#include <ostream>

namespace ovl::cli {
int cmd_calibrate(const std::vector<std::string>&, std::ostream&, std::ostream& err) {
  err << "ovl calibrate: not built yet\n";
  return 1;
}
}  // namespace ovl::cli
