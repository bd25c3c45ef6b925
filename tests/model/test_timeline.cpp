// Timeline: extent, Chrome trace export, JSON round trip.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ovl/error.hpp"
#include "ovl/model/timeline.hpp"

namespace ovl {
namespace {

Timeline sample() {
  Timeline t;
  t.source = "simulated";
  t.intervals = {{0, "gemm", "wave 0", "gemm", 1000, 91000},
                 {0, "comm", "allreduce group 0", "comm", 91000, 150500},
                 {1, "gemm", "wave 0", "gemm", 1200, 91500}};
  t.counters = {{0, "hbm util", 500, 0.25}, {0, "hbm util", 160000, 0.0}};
  return t;
}

TEST(Timeline, Extent) {
  EXPECT_EQ(Timeline{}.makespan_ns(), 0);
  const Timeline t = sample();
  EXPECT_EQ(t.start_ns(), 500);  // the first counter sample
  EXPECT_EQ(t.end_ns(), 160000);
  EXPECT_EQ(t.makespan_ns(), 159500);
}

TEST(Timeline, ChromeTrace) {
  const nlohmann::json trace = sample().to_chrome_trace();
  EXPECT_EQ(trace["displayTimeUnit"], "ns");
  int x = 0, c = 0, threads = 0, processes = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") {
      ++x;
      if (e["name"] == "allreduce group 0") {
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 91.0);  // microseconds
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 59.5);
        EXPECT_EQ(e["cat"], "comm");
        EXPECT_EQ(e["pid"], 0);
      }
    } else if (e["ph"] == "C") {
      ++c;
      EXPECT_TRUE(e["args"].contains("value"));
    } else if (e["ph"] == "M") {
      (e["name"] == "thread_name" ? threads : processes)++;
    }
  }
  EXPECT_EQ(x, 3);
  EXPECT_EQ(c, 2);
  EXPECT_EQ(threads, 3);    // (gpu 0, gemm), (gpu 0, comm), (gpu 1, gemm)
  EXPECT_EQ(processes, 2);  // gpu 0, gpu 1
  const std::string path = ::testing::TempDir() + "ovl_trace_test.json";
  sample().write_chrome_trace(path);
  std::ifstream in(path);
  EXPECT_EQ(nlohmann::json::parse(in), trace);
  std::remove(path.c_str());
}

TEST(Timeline, JsonRoundTrip) {
  const Timeline t = sample();
  const nlohmann::json j = t;
  const Timeline back = j.get<Timeline>();
  EXPECT_EQ(nlohmann::json(back), j);
  EXPECT_EQ(back.intervals.size(), 3u);
  EXPECT_EQ(back.counters[0].track, "hbm util");
  nlohmann::json bad = j;
  bad["intervals"][0]["end_ns"] = 10;
  EXPECT_THROW((void)bad.get<Timeline>(), Error);
  nlohmann::json missing = j;
  missing["intervals"][1].erase("lane");
  try {
    (void)missing.get<Timeline>();
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lane"), std::string::npos);
  }
}

}  // namespace
}  // namespace ovl
