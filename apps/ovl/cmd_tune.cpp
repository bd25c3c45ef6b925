// `ovl tune`: what a user runs once on a GPU machine. It measures the GPU with a short sweep of the benchmarks
// (the GEMM on SM partitions, the collectives per CTA count, a few overlap plans), fits a profile to them (what
// `ovl calibrate` does), then chooses a plan for each shape given by measured tuning (Context, Tuning::kMeasured)
// and writes two files: the profile (--profile-out; load it with --profile, ContextOptions::hardware or
// OVL_PROFILE) and the plan cache (--cache-out; ContextOptions::plan_cache or OVL_PLAN_CACHE).
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <sstream>

#include "cli/args.hpp"
#include "cli/cli.hpp"
#include "cli/json_files.hpp"
#include "cli/problem_args.hpp"
#include "ovl/core/context.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/error.hpp"
#include "ovl/tools/calibrate.hpp"

#ifndef OVL_BENCH_DIR
#define OVL_BENCH_DIR ""
#endif

namespace ovl::cli {
namespace {

// The default sweep: about a minute on one H200 (bench_gemm 24 cases, bench_collectives 90, bench_overlap 22).
struct Sweep {
  const char* bench;
  const char* filter;
};
constexpr std::array<Sweep, 3> kSweep = {{
    {"bench_gemm", "^gemm/(ovl|cublas)/(8192x8192x2048|4096x8192x8192|8192x4096x1024)/nt/sms:(64|116|124|132)/"},
    {"bench_collectives",
     "^coll/(simt|tma-push|tma-pull)/(reducescatter|allreduce|allgather)/(16777216|67108864)/world:8/"
     "ctas:(4|8|16|32|64)/"},
    {"bench_overlap",
     "^overlap/(sequential|decomposed|tile-signal|green-context|tma)/gemm-(allreduce|reducescatter)/"
     "8192x8192x2048/world:8/comm_sms:(16|32|132)/(iterations|algo:tma)"},
}};

void progress(std::ostream& err, const std::string& stage, int done, int total) {
  const int width = 30;
  const int filled = total > 0 ? done * width / total : width;
  err << fmt::format("\r{:<28} [{}{}] {}/{}", stage, std::string(size_t(filled), '#'),
                     std::string(size_t(width - filled), '.'), done, total)
      << std::flush;
}

// Runs `command`, calling on_line for each line it prints; returns its exit status.
int run_lines(const std::string& command, const std::function<void(const std::string&)>& on_line) {
  FILE* pipe = popen(command.c_str(), "r");
  OVL_CHECK(pipe != nullptr, "cannot run \"{}\"", command);
  std::string line;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), int(buf.size()), pipe) != nullptr) {
    line += buf.data();
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      on_line(line);
      line.clear();
    }
  }
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// One benchmark of the sweep, with a progress bar; returns the JSON file it wrote.
std::string run_sweep(const Sweep& sweep, const std::string& bench_dir, const std::string& work_dir,
                      const std::string& bench_args, std::ostream& err) {
  const std::string exe = (std::filesystem::path(bench_dir) / sweep.bench).string();
  OVL_CHECK(std::filesystem::is_regular_file(exe),
            "{} not found in \"{}\": build the benchmarks (OVL_BUILD_BENCH) and give their folder with --bench-dir",
            sweep.bench, bench_dir);
  int total = 0;
  run_lines(fmt::format("{} --benchmark_list_tests --benchmark_filter={} 2>/dev/null", quote(exe), quote(sweep.filter)),
            [&](const std::string& line) { total += line.empty() ? 0 : 1; });
  OVL_CHECK(total > 0, "{}: no case matches the sweep's filter {}", sweep.bench, sweep.filter);
  const std::string json = (std::filesystem::path(work_dir) / (std::string(sweep.bench) + ".json")).string();
  const std::string log = (std::filesystem::path(work_dir) / (std::string(sweep.bench) + ".log")).string();
  int done = 0;
  progress(err, sweep.bench, done, total);
  const int status =
      run_lines(fmt::format("{} --benchmark_filter={} --benchmark_out={} --benchmark_out_format=json {} 2>{}",
                            quote(exe), quote(sweep.filter), quote(json), bench_args, quote(log)),
                [&](const std::string& line) {
                  if (line.rfind("gemm/", 0) == 0 || line.rfind("coll/", 0) == 0 || line.rfind("overlap/", 0) == 0)
                    progress(err, sweep.bench, ++done, total);
                });
  err << "\n";
  OVL_CHECK(status == 0, "{} exited with status {} (its messages: {})", sweep.bench, status, log);
  return json;
}

struct Shape {
  Op op;
  int64_t m, n, k;
};

// Lines "OP M N K" ('#' starts a comment), OP as `ovl plan --op` takes it.
std::vector<Shape> read_shapes(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) throw UsageError(fmt::format("--shapes {}: cannot read the file", path));
  std::vector<Shape> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string op;
    if (!(words >> op)) continue;
    Shape s{};
    std::string extra;
    if (!(words >> s.m >> s.n >> s.k) || (words >> extra) || s.m <= 0 || s.n <= 0 || s.k <= 0)
      throw UsageError(
          fmt::format("--shapes {} line {}: \"{}\" is not \"OP M N K\" with positive sizes", path, number, line));
    try {
      s.op = parse_op(op);
    } catch (const Error& e) {
      throw UsageError(fmt::format("--shapes {} line {}: {}", path, number, e.message()));
    }
    out.push_back(s);
  }
  return out;
}

// Random device data of `count` elements (bf16 or fp16 bit patterns of values in [-1, 1)).
struct DeviceTensor {
  void* ptr = nullptr;
  DeviceTensor(int64_t count, std::mt19937& rng) {
    std::vector<uint16_t> host(static_cast<size_t>(count));
    std::uniform_int_distribution<int> mant(0, 127);
    std::uniform_int_distribution<int> sign(0, 1);
    // bf16: exponent 120..126 (values between about 2^-7 and 1); the same bits read as fp16 are small normals.
    std::uniform_int_distribution<int> exp(120, 126);
    for (auto& h : host) h = uint16_t((sign(rng) << 15) | (exp(rng) << 7) | mant(rng));
    OVL_CUDA_CHECK(cudaMalloc(&ptr, size_t(count) * 2));
    copy_now(ptr, host.data(), size_t(count) * 2, cudaMemcpyHostToDevice);
  }
  ~DeviceTensor() {
    if (ptr != nullptr) (void)cudaFree(ptr);
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
};

}  // namespace

int cmd_tune(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return guarded("tune", err, [&] {
    const Args args(argv,
                    with_problem_options({"shapes", "profile-out", "cache-out", "bench-dir", "bench-args", "work-dir",
                                          "candidates", "device"}),
                    {"skip-sweep", "json"});
    reject_positionals(args);
    const int device = int(args.integer("device", 0, 0, 63));
    const int world = int(args.integer("world", 8, 2, 8));
    const int candidates = int(args.integer("candidates", 4, 1, 16));
    const std::string profile_out = args.value_or("profile-out", "ovl-profile.json");
    const std::string cache_out = args.value_or("cache-out", "ovl-plans.json");
    std::vector<Shape> shapes;
    if (auto file = args.value("shapes")) shapes = read_shapes(*file);
    if (args.has("op") || args.has("m")) {
      const Problem p = problem_from_args(args, nullptr, world);
      shapes.push_back({p.op, p.m, p.n, p.k});
    }
    DType dtype = DType::kBF16;
    if (auto d = args.value("dtype")) dtype = parse_dtype(*d);
    const auto t_start = std::chrono::steady_clock::now();

    int count = 0;
    OVL_CUDA_CHECK(cudaGetDeviceCount(&count));
    OVL_CHECK(device < count, "--device {}: this machine has {} GPU(s)", device, count);
    cudaDeviceProp prop{};
    OVL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));

    // 1. The profile: fitted to a short benchmark sweep, or given.
    Hardware hw;
    if (args.flag("skip-sweep")) {
      if (!args.has("profile")) throw UsageError("--skip-sweep needs --profile FILE (the profile to tune with)");
      hw = hardware_from_args(args, "h200");
    } else {
      const Hardware base = args.has("profile") || args.has("gpu") ? hardware_from_args(args, "h200")
                                                                   : hardware_for_device_name(prop.name);
      const std::string bench_dir = args.value_or("bench-dir", OVL_BENCH_DIR);
      const std::string work_dir = args.value_or("work-dir", "ovl-tune-runs");
      std::filesystem::create_directories(work_dir);
      const std::string bench_args = args.value_or("bench-args", "--benchmark_min_time=0.05s");
      std::vector<nlohmann::json> files;
      for (const Sweep& sweep : kSweep)
        files.push_back(read_json_files({run_sweep(sweep, bench_dir, work_dir, bench_args, err)}).front());
      const CalibrationResult fit = calibrate(files, base);
      hw = fit.hardware;
      save_hardware(hw, profile_out);
      fmt::print(out, "profile    {} ({} measurements fitted; kept in {}): {}\n", profile_out, fit.measurements,
                 work_dir, hw.name);
    }

    // 2. Measured tuning of each shape in a loopback world (one GPU) on the fitted profile.
    if (shapes.empty()) {
      fmt::print(out, "no shapes given (--shapes FILE or --op/--m/--n/--k): no plan cache written\n");
      return 0;
    }
    ContextOptions options;
    options.world = World::loopback(world, device);
    options.hardware = hw;
    options.tuning = Tuning::kMeasured;
    options.tuning_candidates = candidates;
    options.plan_cache = cache_out;
    options.loopback_fixed_inputs = true;  // the same inputs in every timed call, as in the benchmarks
    Context ctx(options);
    cudaStream_t stream = nullptr;
    OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::mt19937 rng(20261205);
    nlohmann::json rows = nlohmann::json::array();
    std::string table = fmt::format("{:<48} {:<44} {:>11} {:>13} {:>8} {:>9}\n", "problem", "plan", "measured_us",
                                    "sequential_us", "speedup", "tuning_ms");
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Shape& sh = shapes[i];
      progress(err, "tuning", int(i), int(shapes.size()));
      const int64_t a_rows = sh.op == Op::kAllGatherGemm ? sh.m / world : sh.m;
      const int64_t c_rows = sh.op == Op::kGemmReduceScatter ? sh.m / world : sh.m;
      OVL_CHECK(sh.m % world == 0, "shape {} {}x{}x{}: M must be a multiple of the world ({})", to_string(sh.op), sh.m,
                sh.n, sh.k, world);
      DeviceTensor a(a_rows * sh.k, rng), b(sh.n * sh.k, rng), c(c_rows * sh.n, rng);
      const TensorRef ta{a.ptr, a_rows, sh.k, dtype}, tb{b.ptr, sh.n, sh.k, dtype, BLayout::kNxK},
          tc{c.ptr, c_rows, sh.n, dtype};
      const PlanChoice& choice = ctx.plan_for(sh.op, ta, tb, tc, stream);
      const Problem p = ctx.problem_for(sh.op, ta, tb, tc);
      const double speedup = choice.measured_us > 0 ? choice.sequential_us / choice.measured_us : 1.0;
      table += fmt::format("{:<48} {:<44} {:>11.1f} {:>13.1f} {:>7.2f}x {:>9.0f}{}\n", p.name(),
                           fmt::format("{} sms={}/{} groups={}", to_string(choice.plan.mode), choice.plan.gemm_sms,
                                       choice.plan.comm_sms, choice.plan.tile_groups.size()),
                           choice.measured_us, choice.sequential_us, speedup, choice.tuning_ms,
                           choice.from_cache ? " (cache)" : "");
      rows.push_back({{"problem", p.name()},
                      {"plan", choice.plan},
                      {"measured_us", choice.measured_us},
                      {"sequential_us", choice.sequential_us},
                      {"predicted_us", choice.predicted_us},
                      {"tuning_ms", choice.tuning_ms},
                      {"from_cache", choice.from_cache}});
      ctx.release_caches();  // one shape's buffers at a time
    }
    progress(err, "tuning", int(shapes.size()), int(shapes.size()));
    err << "\n";
    (void)cudaStreamDestroy(stream);
    const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    if (args.flag("json")) {
      out << nlohmann::json{{"profile", profile_out}, {"plan_cache", cache_out}, {"seconds", total_s}, {"shapes", rows}}
                 .dump(2)
          << "\n";
    } else {
      out << table;
      fmt::print(out, "plan cache {} ({} shapes); {:.0f} s in all\n", cache_out, shapes.size(), total_s);
    }
    return 0;
  });
}

}  // namespace ovl::cli
