// `ovl info [--json]`: the GPU report. With no driver or no GPU it prints one line and exits 0.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/args.hpp"
#include "ovl/core/device_info.hpp"

namespace ovl::cli {

namespace {

nlohmann::json to_json(const SystemInfo& info) {
  nlohmann::json j;
  j["ok"] = info.ok;
  if (!info.ok) j["status"] = info.status;
  j["driver_version"] = info.driver_version ? version_string(info.driver_version) : "";
  j["runtime_version"] = version_string(info.runtime_version);
  j["nccl_version"] = nccl_version_string(info.nccl_version);
  j["gpus"] = nlohmann::json::array();
  for (const GpuInfo& g : info.gpus) {
    j["gpus"].push_back({{"index", g.index},
                         {"name", g.name},
                         {"pci_bus_id", g.pci_bus_id},
                         {"compute_capability", fmt::format("{}.{}", g.cc_major, g.cc_minor)},
                         {"sm_count", g.sm_count},
                         {"green_context",
                          {{"sm_count", g.green_sm_count},
                           {"min_partition", g.green_min_partition},
                           {"alignment", g.green_alignment}}},
                         {"l2_bytes", g.l2_bytes},
                         {"memory_bytes", g.memory_bytes},
                         {"smem_per_block_optin", g.smem_per_block_optin},
                         {"clock_mhz", g.clock_mhz},
                         {"memory_clock_mhz", g.memory_clock_mhz},
                         {"memory_bus_bits", g.memory_bus_bits}});
  }
  j["peer_access"] = info.peer_access;
  return j;
}

void print_text(const SystemInfo& info, std::ostream& out) {
  fmt::print(out, "driver {}  runtime {}  NCCL {}\n", version_string(info.driver_version),
             version_string(info.runtime_version), nccl_version_string(info.nccl_version));
  for (const GpuInfo& g : info.gpus) {
    fmt::print(out, "GPU {}: {} ({}), compute capability {}.{}\n", g.index, g.name, g.pci_bus_id, g.cc_major,
               g.cc_minor);
    fmt::print(out, "  SMs {}  clock {} MHz  L2 {:.1f} MiB  memory {:.1f} GiB  smem/block {} KiB\n", g.sm_count,
               g.clock_mhz, double(g.l2_bytes) / (1 << 20), double(g.memory_bytes) / (1 << 30),
               g.smem_per_block_optin / 1024);
    if (g.green_min_partition > 0) {
      fmt::print(out, "  green contexts: {} SMs, minimum partition {}, alignment {}\n", g.green_sm_count,
                 g.green_min_partition, g.green_alignment);
    } else {
      fmt::print(out, "  green contexts: unavailable with this driver\n");
    }
  }
  if (info.gpus.size() > 1) {
    fmt::print(out, "peer access (row can access column):\n     ");
    for (const GpuInfo& g : info.gpus) fmt::print(out, " {:>4}", g.index);
    fmt::print(out, "\n");
    for (size_t i = 0; i < info.gpus.size(); ++i) {
      fmt::print(out, "  {:>3}", info.gpus[i].index);
      for (int can : info.peer_access[i]) fmt::print(out, " {:>4}", can ? "yes" : "-");
      fmt::print(out, "\n");
    }
  }
}

}  // namespace

int cmd_info(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  try {
    const Args args(argv, {}, {"json"});
    if (!args.positionals().empty()) throw UsageError(fmt::format("unexpected argument '{}'", args.positionals()[0]));
    const SystemInfo info = query_system();
    if (args.flag("json")) {
      out << to_json(info).dump(2) << "\n";
    } else if (!info.ok) {
      out << "ovl info: " << info.status << "\n";
    } else {
      print_text(info, out);
    }
    return 0;
  } catch (const UsageError& e) {
    err << "ovl info: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace ovl::cli
