// Timeline: extent, Chrome trace export, JSON.
#include "ovl/model/timeline.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "json_fields.hpp"
#include "ovl/error.hpp"

namespace ovl {

int64_t Timeline::start_ns() const {
  if (intervals.empty() && counters.empty()) return 0;
  int64_t t = std::numeric_limits<int64_t>::max();
  for (const auto& i : intervals) t = std::min(t, i.start_ns);
  for (const auto& c : counters) t = std::min(t, c.t_ns);
  return t;
}

int64_t Timeline::end_ns() const {
  if (intervals.empty() && counters.empty()) return 0;
  int64_t t = std::numeric_limits<int64_t>::min();
  for (const auto& i : intervals) t = std::max(t, i.end_ns);
  for (const auto& c : counters) t = std::max(t, c.t_ns);
  return t;
}

nlohmann::json Timeline::to_chrome_trace() const {
  // Chrome trace wants numeric thread ids: number each (gpu, lane) in order of first appearance, and name it
  // with a thread_name metadata event so Perfetto shows "gemm", "comm" ...
  std::map<std::pair<int, std::string>, int> tids;
  std::set<int> gpus;
  nlohmann::json events = nlohmann::json::array();
  auto tid_of = [&](int gpu, const std::string& lane) {
    auto [it, inserted] = tids.try_emplace({gpu, lane}, int(tids.size()) + 1);
    if (inserted) {
      events.push_back(
          {{"ph", "M"}, {"name", "thread_name"}, {"pid", gpu}, {"tid", it->second}, {"args", {{"name", lane}}}});
    }
    return it->second;
  };
  for (const auto& i : intervals) {
    gpus.insert(i.gpu);
    const int tid = tid_of(i.gpu, i.lane);
    events.push_back({{"ph", "X"},
                      {"name", i.name},
                      {"cat", i.category},
                      {"pid", i.gpu},
                      {"tid", tid},
                      {"ts", double(i.start_ns) / 1e3},
                      {"dur", double(i.end_ns - i.start_ns) / 1e3}});
  }
  for (const auto& c : counters) {
    gpus.insert(c.gpu);
    events.push_back(
        {{"ph", "C"}, {"name", c.track}, {"pid", c.gpu}, {"ts", double(c.t_ns) / 1e3}, {"args", {{"value", c.value}}}});
  }
  for (int gpu : gpus) {
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", gpu},
                      {"args", {{"name", fmt::format("gpu {}{}", gpu, source.empty() ? "" : " (" + source + ")")}}}});
  }
  return nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
}

void Timeline::write_chrome_trace(const std::string& path) const {
  std::ofstream out(path);
  OVL_CHECK(out.good(), "cannot write Chrome trace \"{}\"", path);
  out << to_chrome_trace().dump() << "\n";
  OVL_CHECK(out.good(), "writing Chrome trace \"{}\" failed", path);
}

void to_json(nlohmann::json& j, const Timeline& t) {
  nlohmann::json intervals = nlohmann::json::array();
  for (const auto& i : t.intervals) {
    intervals.push_back({{"gpu", i.gpu},
                         {"lane", i.lane},
                         {"name", i.name},
                         {"category", i.category},
                         {"start_ns", i.start_ns},
                         {"end_ns", i.end_ns}});
  }
  nlohmann::json counters = nlohmann::json::array();
  for (const auto& c : t.counters) {
    counters.push_back({{"gpu", c.gpu}, {"track", c.track}, {"t_ns", c.t_ns}, {"value", c.value}});
  }
  j = nlohmann::json{{"source", t.source}, {"intervals", std::move(intervals)}, {"counters", std::move(counters)}};
}

void from_json(const nlohmann::json& j, Timeline& t) {
  using namespace detail;
  OVL_CHECK(j.is_object(), "timeline JSON must be an object, got {}", json_excerpt(j));
  Timeline out;
  if (j.contains("source")) out.source = read_string(j, "source", "timeline");
  const auto& intervals = require_field(j, "intervals", "timeline");
  OVL_CHECK(intervals.is_array(), "timeline field \"intervals\" is not an array");
  for (const auto& e : intervals) {
    Interval i;
    i.gpu = read_int32(e, "gpu", "timeline interval");
    i.lane = read_string(e, "lane", "timeline interval");
    i.name = read_string(e, "name", "timeline interval");
    i.category = read_string(e, "category", "timeline interval");
    i.start_ns = read_int(e, "start_ns", "timeline interval");
    i.end_ns = read_int(e, "end_ns", "timeline interval");
    OVL_CHECK(i.end_ns >= i.start_ns, "timeline interval \"{}\": field \"end_ns\" = {} is before start_ns = {}", i.name,
              i.end_ns, i.start_ns);
    out.intervals.push_back(std::move(i));
  }
  if (j.contains("counters")) {
    const auto& counters = j.at("counters");
    OVL_CHECK(counters.is_array(), "timeline field \"counters\" is not an array");
    for (const auto& e : counters) {
      CounterSample c;
      c.gpu = read_int32(e, "gpu", "timeline counter");
      c.track = read_string(e, "track", "timeline counter");
      c.t_ns = read_int(e, "t_ns", "timeline counter");
      c.value = read_number(e, "value", "timeline counter");
      out.counters.push_back(std::move(c));
    }
  }
  t = std::move(out);
}

}  // namespace ovl
