// The `ovl` command: see `ovl help`.
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.hpp"

#ifdef OVL_WITH_CUDA
namespace ovl::cli {
int cmd_info(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_tune(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
}
#endif

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
#ifdef OVL_WITH_CUDA
  const ovl::cli::GpuCommands gpu{ovl::cli::cmd_info, ovl::cli::cmd_tune};
#else
  const ovl::cli::GpuCommands gpu{};
#endif
  const int status = ovl::cli::run(args, std::cout, std::cerr, gpu);
  // A full disk or a closed pipe: the output did not arrive, which a zero status would hide.
  if (!std::cout.flush()) {
    std::cerr << "ovl: writing the standard output failed\n";
    return status == 0 ? 1 : status;
  }
  return status;
}
