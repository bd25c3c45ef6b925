// The `ovl` command: see `ovl help`.
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.hpp"

#ifdef OVL_WITH_CUDA
namespace ovl::cli {
int cmd_info(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
}
#endif

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
#ifdef OVL_WITH_CUDA
  const ovl::cli::Command info = ovl::cli::cmd_info;
#else
  const ovl::cli::Command info = nullptr;
#endif
  return ovl::cli::run(args, std::cout, std::cerr, info);
}
