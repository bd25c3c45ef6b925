// The discrete-event engine: integer-nanosecond clock, events ordered by (time, sequence number), and resources
// shared among flows by max-min fairness with per-flow caps (progressive filling, as SimGrid's lmm does).
//
// A resource is a server with a capacity in work units per nanosecond (FLOPs/ns for an SM pool, bytes/ns for
// HBM, an NVLink direction or a network link). A flow is an amount of work in its own progress units, the
// resources it uses (each with a weight: resource units consumed per progress unit) and a cap (progress units
// per ns; a flow driven by c CTAs is capped at c times the per-CTA bandwidth). Whenever flows start or end, or a
// capacity changes, the engine recomputes every rate:
//   maximize the smallest rate, then the next smallest, ... subject to
//   sum_f weight(f, r) * rate(f) <= capacity(r) for every resource r, and rate(f) <= cap(f).
// Completion times are recomputed from the new rates (rounded up to whole nanoseconds), so a run is a pure
// function of its inputs: equal inputs give identical event sequences.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "ovl/names.hpp"

namespace ovl::sim {

using TimeNs = int64_t;
using ResourceId = int;
using FlowId = int64_t;

inline constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();

enum class ResourceKind { kSmPool, kHbm, kLinkTx, kLinkRx, kNet };
inline constexpr Named<ResourceKind> kResourceKindNames[] = {{ResourceKind::kSmPool, "sm"},
                                                             {ResourceKind::kHbm, "hbm"},
                                                             {ResourceKind::kLinkTx, "nvlink-tx"},
                                                             {ResourceKind::kLinkRx, "nvlink-rx"},
                                                             {ResourceKind::kNet, "net"}};
std::string_view to_string(ResourceKind kind);  // "sm", "hbm", "nvlink-tx", "nvlink-rx", "net"

struct Resource {
  std::string name;
  ResourceKind kind = ResourceKind::kHbm;
  int gpu = 0;
  double capacity = 0;   // work units per ns
  double load = 0;       // units per ns being consumed now (sum of weight x rate of its flows)
  double work_done = 0;  // units consumed since the start (bytes or FLOPs): the conservation check reads this
  double busy_ns = 0;    // integral of load / capacity over time: utilization = busy_ns / elapsed
};

struct FlowUse {
  ResourceId resource = 0;
  double weight = 1.0;  // resource units per progress unit
};

struct FlowSpec {
  std::string name;
  double amount = 0;              // progress units of work
  std::vector<FlowUse> uses;      // resources it consumes
  double cap = 0;                 // progress units per ns; 0 = no cap of its own
  std::function<void()> on_done;  // runs at the completion time (may start flows and schedule events)
};

class Engine {
 public:
  ResourceId add_resource(std::string name, ResourceKind kind, int gpu, double capacity);
  // Changes a capacity now (an SM pool that lends SMs to a communication kernel); rates are recomputed.
  void set_capacity(ResourceId id, double capacity);

  FlowId start_flow(FlowSpec spec);
  // Changes an active flow's cap now (a collective's CTAs that speed up when the GEMM beside them ends); rates are
  // recomputed. An ended flow is left alone.
  void set_flow_cap(FlowId id, double cap);
  // Runs fn at absolute time t (t >= now) or after a delay; events at equal times run in scheduling order.
  void at(TimeNs t, std::function<void()> fn);
  void after(TimeNs delay, std::function<void()> fn);

  // Processes events and flow completions until none is left; returns the time of the last one. Throws
  // ovl::Error if active flows can make no progress and no event is pending (a zero-capacity deadlock).
  TimeNs run();

  TimeNs now() const { return now_; }
  const Resource& resource(ResourceId id) const;  // throws ovl::Error on an unknown id
  const std::vector<Resource>& resources() const { return resources_; }
  bool flow_active(FlowId id) const;
  double flow_rate(FlowId id) const;  // current rate (progress units per ns); 0 for an ended flow
  int64_t events_processed() const { return events_processed_; }
  int64_t flows_started() const { return next_flow_id_; }

  // Called after every rate recomputation with the current time (for utilization counter tracks).
  void set_rate_observer(std::function<void(TimeNs)> observer) { observer_ = std::move(observer); }

  // Max-min fair rates for flows on resources, exposed for tests: returns one rate per flow.
  static std::vector<double> max_min_rates(const std::vector<FlowSpec>& flows, const std::vector<double>& capacity);

 private:
  struct Flow {
    FlowId id = 0;
    FlowSpec spec;
    double remaining = 0;
    double rate = 0;
    TimeNs finish = kNever;
  };
  struct Event {
    TimeNs t;
    uint64_t seq;
    std::function<void()> fn;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  };

  void recompute_rates();
  void advance_to(TimeNs t);

  std::vector<Resource> resources_;
  std::vector<Flow> flows_;  // active flows in start order (ids ascending)
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  TimeNs now_ = 0;
  uint64_t next_seq_ = 0;
  FlowId next_flow_id_ = 0;
  int64_t events_processed_ = 0;
  bool dirty_ = false;
  std::function<void(TimeNs)> observer_;
};

}  // namespace ovl::sim
