#include "cli/cli.hpp"

#include <ostream>

namespace ovl::cli {
int cmd_plan(const std::vector<std::string>&, std::ostream&, std::ostream& err) {
  err << "ovl plan: not built yet\n";
  return 1;
}
}  // namespace ovl::cli
namespace ovl::cli {
int cmd_simulate(const std::vector<std::string>&, std::ostream&, std::ostream& err) {
  err << "ovl simulate: not built yet\n";
  return 1;
}
}  // namespace ovl::cli
