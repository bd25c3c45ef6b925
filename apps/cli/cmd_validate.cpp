#include "cli/cli.hpp"

#include <ostream>

namespace ovl::cli {
int cmd_validate(const std::vector<std::string>&, std::ostream&, std::ostream& err) {
  err << "ovl validate: not built yet\n";
  return 1;
}
}  // namespace ovl::cli
