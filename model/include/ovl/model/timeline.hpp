// Timeline: what happened (or is predicted to happen) when a Plan ran, as named intervals on lanes.
// Both the simulator and the executor's measured runs produce it, so the two can be laid side by side
// (Chrome trace JSON opens in Perfetto / chrome://tracing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ovl {

struct Interval {
  int gpu = 0;           // rank (Chrome trace pid)
  std::string lane;      // "gemm", "comm", "comm/chunk3" ... (Chrome trace tid)
  std::string name;      // "wave 0", "group 5", "reduce-scatter group 5"
  std::string category;  // "gemm", "comm", "wait"
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct CounterSample {
  int gpu = 0;
  std::string track;  // "nvlink tx util", "hbm util"
  int64_t t_ns = 0;
  double value = 0;
};

struct Timeline {
  std::vector<Interval> intervals;
  std::vector<CounterSample> counters;
  std::string source;  // "simulated" or "measured"

  int64_t start_ns() const;
  int64_t end_ns() const;
  int64_t makespan_ns() const { return end_ns() - start_ns(); }
  // Chrome trace event format: {"traceEvents":[...], "displayTimeUnit":"ns"}; intervals as "X" events
  // (ts/dur in microseconds), counters as "C" events, process/thread names as "M" events.
  nlohmann::json to_chrome_trace() const;
  void write_chrome_trace(const std::string& path) const;
};

void to_json(nlohmann::json& j, const Timeline& t);
void from_json(const nlohmann::json& j, Timeline& t);

}  // namespace ovl
