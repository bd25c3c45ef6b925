// The `ovl._ovl` extension: the model, the simulator and the planner (always), and the Context (CUDA builds,
// context.cpp). Thin: values cross as the library's own structs with their fields as attributes; enums cross as
// the library's names ("tma", "gemm-reducescatter"); ovl::Error becomes ovl.Error (a RuntimeError).
#include <nanobind/nanobind.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include "cli/json_files.hpp"
#include "ovl/error.hpp"
#include "ovl/model/estimate.hpp"
#include "ovl/model/hardware.hpp"
#include "ovl/model/hardware_fields.hpp"
#include "ovl/model/json_document.hpp"
#include "ovl/model/link_profile.hpp"
#include "ovl/model/plan.hpp"
#include "ovl/model/plan_cache.hpp"
#include "ovl/model/problem.hpp"
#include "ovl/model/timeline.hpp"
#include "ovl/sim/planner.hpp"
#include "ovl/sim/simulate.hpp"
#include "ovl/tools/calibrate.hpp"
#include "ovl/tools/validate.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace ovl::python {

nb::object to_python(const nlohmann::json& j) { return nb::module_::import_("json").attr("loads")(j.dump()); }

// A JSON string, or a dict / list as json.dumps writes it (no NaN): parsed behind the loaders' depth limit, so a
// malformed or deeply nested value is an ovl.Error like a damaged file, never a crash.
nlohmann::json from_python(nb::handle obj) {
  const std::string text =
      nb::isinstance<nb::str>(obj)
          ? nb::cast<std::string>(obj)
          : nb::cast<std::string>(nb::module_::import_("json").attr("dumps")(obj, "allow_nan"_a = false));
  return parse_json_document(text, "from_json's argument");
}

namespace {

// A property that reads and writes an enum member by the library's name for it.
template <typename T, typename E, typename ToString, typename Parse>
void enum_property(nb::class_<T>& cls, const char* name, E T::*member, ToString to_str, Parse parse) {
  cls.def_prop_rw(
      name, [member, to_str](const T& t) { return std::string(to_str(t.*member)); },
      [member, parse](T& t, std::string_view text) { t.*member = parse(text); });
}

// to_json() (a JSON string), to_dict(), from_json(str or dict) and a repr for a struct with nlohmann converters.
template <typename T>
void json_methods(nb::class_<T>& cls) {
  cls.def("to_json", [](const T& t) { return nlohmann::json(t).dump(2); })
      .def("to_dict", [](const T& t) { return to_python(nlohmann::json(t)); })
      .def_static(
          "from_json",
          [](nb::handle obj) {
            const nlohmann::json j = from_python(obj);
            try {
              return j.template get<T>();
            } catch (const nlohmann::json::exception& e) {
              OVL_FAIL("{}", e.what());  // one exception type for the caller: ovl.Error
            }
          },
          "json"_a);
}

// A value type compared by its fields and pickled / copied as its JSON: ==, != against anything (NotImplemented
// for other types), no hash (it is mutable), pickle, copy and deepcopy.
template <typename T>
void value_methods(nb::class_<T>& cls) {
  cls.def(
         "__eq__",
         [](const T& a, nb::handle b) -> nb::object {
           if (!nb::isinstance<T>(b)) return nb::borrow(Py_NotImplemented);
           return nb::bool_(a == nb::cast<const T&>(b));
         },
         nb::arg("other").none())
      .def(
          "__ne__",
          [](const T& a, nb::handle b) -> nb::object {
            if (!nb::isinstance<T>(b)) return nb::borrow(Py_NotImplemented);
            return nb::bool_(!(a == nb::cast<const T&>(b)));
          },
          nb::arg("other").none())
      .def("__getstate__", [](const T& t) { return nlohmann::json(t).dump(); })
      .def("__setstate__", [](T& t, const std::string& json) { new (&t) T(nlohmann::json::parse(json).get<T>()); })
      .def("__copy__", [](const T& t) { return T(t); })
      .def(
          "__deepcopy__", [](const T& t, nb::handle) { return T(t); }, "memo"_a);
  cls.attr("__hash__") = nb::none();
}

// A read-only struct member returned as a copy: a result's plan changed in Python must not change the result.
template <typename C, typename M>
void ro_copy(nb::class_<C>& cls, const char* name, M C::*member) {
  cls.def_prop_ro(name, [member](const C& c) { return M(c.*member); });
}

std::vector<nlohmann::json> read_files(const std::vector<std::string>& paths) {
  OVL_CHECK(!paths.empty(), "give at least one benchmark JSON file");
  try {
    return cli::read_json_files(paths);
  } catch (const std::exception& e) {
    OVL_FAIL("{}", e.what());  // cli::UsageError is no ovl::Error: keep one exception type for the caller
  }
}

void bind_problem(nb::module_& m) {
  nb::class_<Problem> problem(m, "Problem",
                              "One operator call: op, M x N x K per rank, dtype, B's layout, world "
                              "(model/problem.hpp). ovl.problem() builds a validated one.");
  problem.def(nb::init<>())
      .def_rw("m", &Problem::m)
      .def_rw("n", &Problem::n)
      .def_rw("k", &Problem::k)
      .def_rw("world", &Problem::world)
      .def_rw("gpus_per_node", &Problem::gpus_per_node)
      .def("validate", &Problem::validate)
      .def_prop_ro("name", &Problem::name)
      .def_prop_ro("comm_bytes", &Problem::comm_bytes)
      .def_prop_ro("gemm_flops", &Problem::gemm_flops)
      .def("__repr__", [](const Problem& p) { return "ovl.Problem(" + p.name() + ")"; });
  enum_property(
      problem, "op", &Problem::op, [](Op v) { return to_string(v); }, parse_op);
  enum_property(
      problem, "dtype", &Problem::dtype, [](DType v) { return to_string(v); }, parse_dtype);
  enum_property(
      problem, "out_dtype", &Problem::out_dtype, [](DType v) { return to_string(v); }, parse_dtype);
  enum_property(
      problem, "b_layout", &Problem::b_layout, [](BLayout v) { return to_string(v); }, parse_b_layout);
  json_methods(problem);
  value_methods(problem);
}

void bind_plan(nb::module_& m) {
  nb::class_<TileShape>(m, "TileShape", "The GEMM tile a plan runs: m x n x k elements (128 x 256 x 64 by default).")
      .def(nb::init<>())
      .def_rw("m", &TileShape::m)
      .def_rw("n", &TileShape::n)
      .def_rw("k", &TileShape::k)
      .def("__repr__", [](const TileShape& t) { return fmt::format("ovl.TileShape({}x{}x{})", t.m, t.n, t.k); });
  nb::class_<Plan> plan(m, "Plan",
                        "How to run a Problem: mode, GEMM and communication SMs, tile groups, collective algorithm and "
                        "CTAs (model/plan.hpp). From ovl.plan(...).best, default_plan(), load_plan() or from_json().");
  plan.def(nb::init<>())
      .def_rw("gemm_sms", &Plan::gemm_sms)
      .def_rw("comm_sms", &Plan::comm_sms)
      .def_rw("partitioned", &Plan::partitioned)
      .def_rw("tile", &Plan::tile)
      .def_rw("explicit_order", &Plan::explicit_order)
      .def_rw("tile_groups", &Plan::tile_groups)
      .def_rw("comm_ctas", &Plan::comm_ctas)
      .def_rw("chunks", &Plan::chunks)
      .def("validate", &Plan::validate, "problem"_a, "hardware"_a)
      .def("summary", &Plan::summary)
      .def("__repr__", [](const Plan& p) { return "ovl.Plan(" + p.summary() + ")"; });
  enum_property(
      plan, "mode", &Plan::mode, [](Mode v) { return to_string(v); }, parse_mode);
  enum_property(
      plan, "comm_algo", &Plan::comm_algo, [](CommAlgo v) { return to_string(v); }, parse_comm_algo);
  enum_property(
      plan, "cta_policy", &Plan::cta_policy, [](CtaPolicy v) { return to_string(v); }, parse_cta_policy);
  enum_property(
      plan, "tile_order", &Plan::tile_order, [](TileOrder v) { return to_string(v); }, parse_tile_order);
  enum_property(
      plan, "output", &Plan::output, [](OutputLayout v) { return to_string(v); }, parse_output_layout);
  json_methods(plan);
  value_methods(plan);
  m.def(
      "default_plan",
      [](std::string_view mode, const Problem& p, const Hardware& hw, int comm_sms) {
        return default_plan(parse_mode(mode), p, hw, comm_sms);
      },
      "mode"_a, "problem"_a, "hardware"_a, "comm_sms"_a = 0);
  m.def(
      "load_plan", [](const std::filesystem::path& path) { return load_plan(path.string()); }, "path"_a);
  m.def("modes", [] {
    std::vector<std::string> names;
    for (Mode mode : all_modes()) names.emplace_back(to_string(mode));
    return names;
  });
}

void bind_hardware(nb::module_& m) {
  // The fields of each part from the model's own tables (hardware_fields.hpp), so none is listed twice.
  nb::class_<DeviceSpec> spec(m, "DeviceSpec",
                              "A GPU's facts (datasheet or measured): a Hardware profile's spec part.");
  spec.def(nb::init<>());
  for (const auto& f : hardware_fields::kSpecIntFields) spec.def_rw(f.name, f.member);
  for (const auto& f : hardware_fields::kSpecFields) spec.def_rw(f.name, f.member);
  nb::class_<ModelParams> fit(m, "ModelParams",
                              "The model's parameters (what ovl calibrate fits): a Hardware profile's fit part.");
  fit.def(nb::init<>());
  for (const auto& f : hardware_fields::kFitFields) fit.def_rw(f.name, f.member);
  nb::class_<Emulation>(
      m, "Emulation",
      "How a loopback profile plays the world's peers on one device (read-only; all off on a real device).")
      .def_ro("loopback", &Emulation::loopback)
      .def_ro("loopback_rank0", &Emulation::loopback_rank0)
      .def_ro("paced", &Emulation::paced);
  nb::class_<Hardware> hw(m, "Hardware",
                          "A hardware profile: spec, fit and (loopback only) emulation. Hardware.builtin('h200'), "
                          "Hardware.load(path), or ovl.calibrate(...).hardware.");
  hw.def(nb::init<>())
      .def_rw("name", &Hardware::name)
      .def_rw("spec", &Hardware::spec)
      .def_rw("fit", &Hardware::fit)
      .def_ro("emulation", &Hardware::emulation)
      .def("validate", &Hardware::validate)
      .def("summary", &Hardware::summary)
      .def_prop_ro("matrix_tflops", &Hardware::matrix_tflops)
      .def_prop_ro("effective_link_GBps", &Hardware::effective_link_GBps)
      .def(
          "save", [](const Hardware& h, const std::filesystem::path& path) { save_hardware(h, path.string()); },
          "path"_a)
      .def_static(
          "load", [](const std::filesystem::path& path) { return load_hardware(path.string()); }, "path"_a)
      .def_static("builtin", &builtin_hardware, "name"_a)
      .def_static("builtin_names", &builtin_hardware_names)
      .def_static("for_device_name", &hardware_for_device_name, "device_name"_a)
      .def_static("field_names", &hardware_field_names)
      .def(
          "loopback",
          [](const Hardware& h, int world, std::string_view share,
             const std::optional<std::filesystem::path>& link_profile) {
            std::optional<LinkProfile> link;
            if (link_profile) link = link_profile_from_arg(link_profile->string());
            return loopback_hardware(h, world, parse_loopback_share(share), link);
          },
          "world"_a, "share"_a = "rank0", "link_profile"_a = nb::none(),
          "The profile a loopback world of `world` ranks on this GPU runs with; `link_profile` (a built-in name, "
          "nvlink4-node8 or h200x2, or a JSON file) paces rank 0's share to that link (ovl plan --link-profile).")
      .def(
          "with_link",
          [](const Hardware& h, const std::filesystem::path& link_profile) {
            return with_link(h, link_profile_from_arg(link_profile.string()));
          },
          "link_profile"_a,
          "This profile in a real world over a measured link (a built-in name or a JSON file): the calls its tables "
          "hold are priced at their measured busbw (ovl plan --link-profile without --loopback).")
      .def("__repr__", [](const Hardware& h) { return "ovl.Hardware(" + h.name + ")"; });
  json_methods(hw);
}

void bind_timeline(nb::module_& m) {
  nb::class_<Interval>(m, "Interval", "One span of a Timeline: a lane of one GPU busy from start_ns to end_ns.")
      .def_ro("gpu", &Interval::gpu)
      .def_ro("lane", &Interval::lane)
      .def_ro("name", &Interval::name)
      .def_ro("category", &Interval::category)
      .def_ro("start_ns", &Interval::start_ns)
      .def_ro("end_ns", &Interval::end_ns)
      .def("__repr__", [](const Interval& i) {
        return fmt::format("ovl.Interval(gpu {}, {}, {}, [{}, {}) ns)", i.gpu, i.lane, i.name, i.start_ns, i.end_ns);
      });
  nb::class_<CounterSample>(m, "CounterSample", "One sample of a Timeline counter (a resource's use at a time).")
      .def_ro("gpu", &CounterSample::gpu)
      .def_ro("track", &CounterSample::track)
      .def_ro("t_ns", &CounterSample::t_ns)
      .def_ro("value", &CounterSample::value);
  nb::class_<Timeline> timeline(
      m, "Timeline",
      "Intervals per GPU and lane, predicted (the simulator) or measured; write_chrome_trace() for Perfetto.");
  timeline.def(nb::init<>())
      .def_ro("intervals", &Timeline::intervals)
      .def_ro("counters", &Timeline::counters)
      .def_ro("source", &Timeline::source)
      .def_prop_ro("start_ns", &Timeline::start_ns)
      .def_prop_ro("end_ns", &Timeline::end_ns)
      .def_prop_ro("makespan_ns", &Timeline::makespan_ns)
      .def("to_chrome_trace", [](const Timeline& t) { return to_python(t.to_chrome_trace()); })
      .def(
          "write_chrome_trace",
          [](const Timeline& t, const std::filesystem::path& path) { t.write_chrome_trace(path.string()); }, "path"_a);
  json_methods(timeline);
}

void bind_estimate(nb::module_& m) {
  nb::class_<ModeEstimate>(m, "ModeEstimate", "The closed-form model's estimate of one plan (model/estimate.hpp).")
      .def_ro("total_us", &ModeEstimate::total_us)
      .def_ro("gemm_alone_us", &ModeEstimate::gemm_alone_us)
      .def_ro("comm_alone_us", &ModeEstimate::comm_alone_us)
      .def_ro("gemm_us", &ModeEstimate::gemm_us)
      .def_ro("exposed_comm_us", &ModeEstimate::exposed_comm_us)
      .def_ro("comm_us", &ModeEstimate::comm_us)
      .def("__repr__",
           [](const ModeEstimate& e) { return fmt::format("ovl.ModeEstimate(total {:.2f} us)", e.total_us); });
  m.def("_estimate", &estimate, "problem"_a, "plan"_a, "hardware"_a);

  nb::class_<sim::ResourceUsage>(m, "ResourceUsage",
                                 "How busy one simulated resource (SMs, HBM, a link) was over a run.")
      .def_ro("name", &sim::ResourceUsage::name)
      .def_prop_ro("kind", [](const sim::ResourceUsage& r) { return std::string(sim::to_string(r.kind)); })
      .def_ro("gpu", &sim::ResourceUsage::gpu)
      .def_ro("capacity", &sim::ResourceUsage::capacity)
      .def_ro("work_done", &sim::ResourceUsage::work_done)
      .def_ro("utilization", &sim::ResourceUsage::utilization);
  nb::class_<sim::SimResult>(m, "SimResult",
                             "One simulated run: total_us, the GEMM and communication times, the timeline.")
      .def_ro("total_us", &sim::SimResult::total_us)
      .def_ro("gemm_us", &sim::SimResult::gemm_us)
      .def_ro("comm_us", &sim::SimResult::comm_us)
      .def_ro("exposed_comm_us", &sim::SimResult::exposed_comm_us)
      .def_ro("tiles", &sim::SimResult::tiles)
      .def_ro("waves", &sim::SimResult::waves)
      .def_ro("groups", &sim::SimResult::groups)
      .def_ro("events", &sim::SimResult::events)
      .def_ro("required_flops", &sim::SimResult::required_flops)
      .def_ro("required_link_bytes", &sim::SimResult::required_link_bytes)
      .def_ro("required_net_bytes", &sim::SimResult::required_net_bytes)
      .def_ro("resources", &sim::SimResult::resources)
      .def_ro("timeline", &sim::SimResult::timeline)
      .def_prop_ro("intervals", [](const sim::SimResult& r) { return r.timeline.intervals; })
      .def("to_dict", [](const sim::SimResult& r) { return to_python(nlohmann::json(r)); })
      .def("__repr__",
           [](const sim::SimResult& r) { return fmt::format("ovl.SimResult(total {:.2f} us)", r.total_us); });
  m.def(
      "_simulate",
      [](const Problem& p, const Plan& plan, const Hardware& hw, bool timeline, bool counters, bool steps,
         int trace_ranks) {
        sim::SimOptions o;
        o.record_timeline = timeline;
        o.record_counters = counters;
        o.record_steps = steps;
        o.trace_ranks = trace_ranks;
        nb::gil_scoped_release release;
        return sim::simulate(p, plan, hw, o);
      },
      "problem"_a, "plan"_a, "hardware"_a, "timeline"_a, "counters"_a, "steps"_a, "trace_ranks"_a);
}

void bind_planner(nb::module_& m) {
  nb::class_<sim::PlannerOptions>(
      m, "PlannerOptions",
      "The planner's search: modes, comm SM range, simulate_top, max_groups, min_gain (sim/planner.hpp).")
      .def(nb::init<>())
      .def_prop_rw(
          "modes",
          [](const sim::PlannerOptions& o) {
            std::vector<std::string> names;
            for (Mode mode : o.modes) names.emplace_back(to_string(mode));
            return names;
          },
          [](sim::PlannerOptions& o, const std::vector<std::string>& names) {
            o.modes.clear();
            for (const std::string& n : names) o.modes.push_back(parse_mode(n));
          })
      .def_rw("min_comm_sms", &sim::PlannerOptions::min_comm_sms)
      .def_rw("max_comm_sms", &sim::PlannerOptions::max_comm_sms)
      .def_rw("simulate_top", &sim::PlannerOptions::simulate_top)
      .def_rw("max_groups", &sim::PlannerOptions::max_groups)
      .def_rw("use_simulator", &sim::PlannerOptions::use_simulator)
      .def_rw("runnable_only", &sim::PlannerOptions::runnable_only)
      .def_rw("min_gain", &sim::PlannerOptions::min_gain);
  nb::class_<sim::PlanAlternative>(m, "PlanAlternative", "A plan the planner ranked, with its predicted time.")
      .def_ro("plan", &sim::PlanAlternative::plan)
      .def_ro("predicted_us", &sim::PlanAlternative::predicted_us)
      .def_ro("model_us", &sim::PlanAlternative::model_us)
      .def_ro("speedup", &sim::PlanAlternative::speedup)
      .def("__repr__", [](const sim::PlanAlternative& a) {
        return fmt::format("ovl.PlanAlternative({}, {:.2f} us)", a.plan.summary(), a.predicted_us);
      });
  nb::class_<TunedCandidate>(m, "TunedCandidate",
                             "A plan measured tuning timed, with its predicted and measured times.")
      .def_ro("plan", &TunedCandidate::plan)
      .def_ro("predicted_us", &TunedCandidate::predicted_us)
      .def_ro("measured_us", &TunedCandidate::measured_us)
      .def_ro("confirmed_us", &TunedCandidate::confirmed_us)
      .def("__repr__", [](const TunedCandidate& c) {
        return fmt::format("ovl.TunedCandidate({}, predicted {:.2f} us, measured {:.2f} us)", c.plan.summary(),
                           c.predicted_us, c.measured_us);
      });
  // How a Context chose the plan of a call without one (model/plan_cache.hpp).
  nb::class_<PlanChoice>(m, "PlanChoice",
                         "The plan a Context chose for a problem, how it was chosen, and the times behind it.")
      .def_ro("plan", &PlanChoice::plan)
      .def_prop_ro("chosen_by", [](const PlanChoice& c) { return std::string(to_string(c.chosen_by)); })
      .def_ro("predicted_us", &PlanChoice::predicted_us)
      .def_ro("measured_us", &PlanChoice::measured_us)
      .def_ro("sequential_us", &PlanChoice::sequential_us)
      .def_ro("tuning_ms", &PlanChoice::tuning_ms)
      .def_ro("from_cache", &PlanChoice::from_cache)
      .def_ro("candidates", &PlanChoice::candidates)
      .def("__repr__", [](const PlanChoice& c) {
        return fmt::format("ovl.PlanChoice({}, by {}{}, tuning {:.1f} ms)", c.plan.summary(), to_string(c.chosen_by),
                           c.from_cache ? " (cache)" : "", c.tuning_ms);
      });
  // One line per PlanResult field: a field added to the struct is one more def_ro here.
  nb::class_<sim::PlanResult> plan_result(m, "PlanResult",
                                          "The planner's answer: best, predicted_us, the sequential baseline and its "
                                          "time, speedup, the ranked alternatives (sim/planner.hpp).");
  ro_copy(plan_result, "problem", &sim::PlanResult::problem);
  ro_copy(plan_result, "best", &sim::PlanResult::best);
  ro_copy(plan_result, "sequential", &sim::PlanResult::sequential);
  plan_result.def_ro("hardware", &sim::PlanResult::hardware)
      .def_ro("predicted_us", &sim::PlanResult::predicted_us)
      .def_ro("sequential_us", &sim::PlanResult::sequential_us)
      .def_ro("sequential_best", &sim::PlanResult::sequential_best)
      .def_ro("speedup", &sim::PlanResult::speedup)
      .def_ro("alternatives", &sim::PlanResult::alternatives)
      .def_ro("candidates", &sim::PlanResult::candidates)
      .def_ro("simulated", &sim::PlanResult::simulated)
      .def("to_json", [](const sim::PlanResult& r) { return nlohmann::json(r).dump(2); })
      .def("to_dict", [](const sim::PlanResult& r) { return to_python(nlohmann::json(r)); })
      .def("__str__", &sim::format_plan_result)
      .def("__repr__", [](const sim::PlanResult& r) {
        return fmt::format("ovl.PlanResult({}: {}, {:.2f} us, speedup {:.3f})", r.problem.name(), r.best.summary(),
                           r.predicted_us, r.speedup);
      });
  m.def(
      "_plan",
      [](const Problem& p, const Hardware& hw, const sim::PlannerOptions& o) {
        nb::gil_scoped_release release;
        return sim::plan(p, hw, o);
      },
      "problem"_a, "hardware"_a, "options"_a);
}

void bind_calibration(nb::module_& m) {
  nb::class_<FittedParameter>(m, "FittedParameter",
                              "One profile value `ovl calibrate` fitted: before, after, and on what.")
      .def_ro("name", &FittedParameter::name)
      .def_ro("value", &FittedParameter::value)
      .def_ro("base_value", &FittedParameter::base_value)
      .def_ro("points", &FittedParameter::points)
      .def_ro("rms_rel_error", &FittedParameter::rms_rel_error)
      .def_ro("subset", &FittedParameter::subset)
      .def("__repr__", [](const FittedParameter& f) {
        return fmt::format("ovl.FittedParameter({} = {:.6g}, was {:.6g})", f.name, f.value, f.base_value);
      });
  nb::class_<CalibrationResult> calibration(
      m, "CalibrationResult", "A fitted profile (hardware) with each parameter's fit (parameters) and notes.");
  ro_copy(calibration, "hardware", &CalibrationResult::hardware);
  calibration.def_ro("parameters", &CalibrationResult::parameters)
      .def_ro("notes", &CalibrationResult::notes)
      .def_ro("measurements", &CalibrationResult::measurements)
      .def("summary", &CalibrationResult::summary)
      .def("__str__", &CalibrationResult::summary);
  m.def(
      "_calibrate",
      [](const std::vector<std::string>& paths, const std::optional<Hardware>& base) {
        const std::vector<nlohmann::json> files = read_files(paths);
        const Hardware start = base ? *base : calibration_base(files, paths);  // as `ovl calibrate`
        nb::gil_scoped_release release;
        return calibrate(files, start);
      },
      "paths"_a, "base"_a = nb::none());

  nb::class_<sim::ErrorStats>(m, "ErrorStats", "Absolute percentage errors over cases: count, mean (MAPE), P90, max.")
      .def_ro("cases", &sim::ErrorStats::cases)
      .def_ro("mape", &sim::ErrorStats::mape)
      .def_ro("p90_ape", &sim::ErrorStats::p90_ape)
      .def_ro("max_ape", &sim::ErrorStats::max_ape);
  nb::class_<sim::RankingStats>(
      m, "RankingStats", "How often a predictor's fastest plan was the measured fastest, and the regret when not.")
      .def_ro("problems", &sim::RankingStats::problems)
      .def_ro("top1", &sim::RankingStats::top1)
      .def_ro("regret_mean", &sim::RankingStats::regret_mean)
      .def_ro("regret_max", &sim::RankingStats::regret_max);
  nb::class_<sim::CaseResult>(m, "CaseResult", "One measured case with the model's and the simulator's predictions.")
      .def_ro("name", &sim::CaseResult::name)
      .def_prop_ro("kind", [](const sim::CaseResult& c) { return std::string(to_string(c.kind)); })
      .def_ro("problem", &sim::CaseResult::problem)
      .def_ro("loopback", &sim::CaseResult::loopback)
      .def_ro("measured_us", &sim::CaseResult::measured_us)
      .def_ro("model_us", &sim::CaseResult::model_us)
      .def_ro("sim_us", &sim::CaseResult::sim_us);
  nb::class_<sim::ValidationResult>(
      m, "ValidationResult", "Predicted against measured per case, the error statistics and the ranking quality.")
      .def_ro("hardware", &sim::ValidationResult::hardware)
      .def_ro("cases", &sim::ValidationResult::cases)
      .def_ro("model", &sim::ValidationResult::model)
      .def_ro("simulator", &sim::ValidationResult::simulator)
      .def_ro("model_overlap", &sim::ValidationResult::model_overlap)
      .def_ro("ranking_simulator", &sim::ValidationResult::ranking_simulator)
      .def_ro("ranking_model", &sim::ValidationResult::ranking_model)
      .def_ro("notes", &sim::ValidationResult::notes)
      .def("summary", &sim::ValidationResult::summary)
      .def("__str__", &sim::ValidationResult::summary)
      .def("to_dict", [](const sim::ValidationResult& r) { return to_python(nlohmann::json(r)); });
  m.def(
      "_validate",
      [](const std::vector<std::string>& paths, const std::optional<Hardware>& profile) {
        const std::vector<nlohmann::json> files = read_files(paths);
        nb::gil_scoped_release release;
        return sim::validate(files, profile);
      },
      "paths"_a, "profile"_a = nb::none());
}

}  // namespace

}  // namespace ovl::python

NB_MODULE(_ovl, m) {
  using namespace ovl::python;
  m.doc() = "ovl: GEMM + collective overlap (model, simulator, planner; Context in CUDA builds)";
  // ovl.Error carries the library's message; one that is not UTF-8 (a byte of a damaged file quoted) is decoded with
  // replacement characters rather than raising UnicodeDecodeError in place of the error.
  static PyObject* error_type = nullptr;  // held for the process's life (a module's exception type)
  error_type = nb::exception<ovl::Error>(m, "Error", PyExc_RuntimeError).inc_ref().ptr();
  nb::setattr(nb::handle(error_type), "__doc__",
              nb::str("What the library refused or failed at, with the bad value named (a RuntimeError)."));
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const ovl::Error& e) {
      const std::string_view text = e.what();
      PyObject* message = PyUnicode_DecodeUTF8(text.data(), Py_ssize_t(text.size()), "replace");
      PyErr_SetObject(error_type, message);
      Py_XDECREF(message);
    }
  });
  bind_problem(m);
  bind_plan(m);
  bind_hardware(m);
  bind_timeline(m);
  bind_estimate(m);
  bind_planner(m);
  bind_calibration(m);
#if defined(OVL_PYTHON_CUDA)
  bind_context(m);
  m.attr("cuda") = true;
#else
  m.attr("cuda") = false;
#endif
}
