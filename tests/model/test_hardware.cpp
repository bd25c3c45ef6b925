// Hardware: built-in profiles, device-name lookup, validation and JSON (every field rejected by name, a field out of
// its part named with the part it belongs in).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include "expect_error.hpp"
#include "ovl/error.hpp"
#include "ovl/model/hardware.hpp"

namespace ovl {
namespace {

using test::expect_error_naming;
using test::expect_error_naming_all;

// A field's part and name: "spec.sm_count" -> {"spec", "sm_count"}.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t dot = path.find('.');
  return {path.substr(0, dot), path.substr(dot + 1)};
}

TEST(Hardware, BuiltinProfiles) {
  const Hardware h200 = builtin_hardware("h200");
  EXPECT_EQ(h200.name, "H200 SXM");
  EXPECT_EQ(h200.spec.sm_count, 132);
  EXPECT_EQ(h200.spec.sm_granularity, 8);
  EXPECT_DOUBLE_EQ(h200.spec.l2_bytes, 60.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h200.spec.hbm_GBps, 4200);
  EXPECT_NEAR(h200.matrix_tflops(), 989.4, 1e-9);  // datasheet dense bf16
  EXPECT_DOUBLE_EQ(h200.spec.link_GBps, 450);
  EXPECT_DOUBLE_EQ(h200.effective_link_GBps(), 450);  // link_efficiency 1
  EXPECT_DOUBLE_EQ(h200.fit.per_cta_copy_GBps, 100);
  EXPECT_FALSE(h200.emulation.loopback || h200.emulation.loopback_rank0 || h200.emulation.paced || h200.link);
  const Hardware h100 = builtin_hardware("H100-SXM");
  EXPECT_DOUBLE_EQ(h100.spec.l2_bytes, 50.0 * 1024 * 1024);
  EXPECT_LT(h100.spec.hbm_GBps, h200.spec.hbm_GBps);
  const Hardware a100 = builtin_hardware("A100");
  EXPECT_EQ(a100.spec.sm_count, 108);
  EXPECT_NEAR(a100.matrix_tflops(), 312.0, 1e-9);
  for (const auto& name : builtin_hardware_names()) EXPECT_NO_THROW(builtin_hardware(name).validate()) << name;
  expect_error_naming([] { builtin_hardware("b200"); }, "b200");
}

// The built-in profiles are the files of model/profiles/ (embedded at build time): each names every field in its
// part, so none is left at the struct's default without a line in its file saying so.
TEST(Hardware, ShippedProfilesNameEveryField) {
  for (const auto& name : builtin_hardware_names()) {
    std::ifstream in(std::string(OVL_PROFILES_DIR) + "/" + name + ".json");
    ASSERT_TRUE(in.good()) << name;
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const std::string& path : hardware_field_names()) {
      const auto [part, field] = split_path(path);
      EXPECT_TRUE(j.at(part).contains(field)) << name << ": " << path;
    }
  }
}

TEST(Hardware, FieldNames) {
  const std::vector<std::string> names = hardware_field_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "spec.sm_count");
  for (const std::string& path : names) {
    const std::string part = split_path(path).first;
    EXPECT_TRUE(part == "spec" || part == "fit") << path;
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "spec.link_GBps"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "fit.link_efficiency"), names.end());
}

TEST(Hardware, DeviceNames) {
  EXPECT_EQ(hardware_for_device_name("NVIDIA H200").name, "H200 SXM");
  EXPECT_EQ(hardware_for_device_name("NVIDIA H100 80GB HBM3").name, "H100 SXM");
  EXPECT_EQ(hardware_for_device_name("NVIDIA A100-SXM4-80GB").name, "A100 SXM");
  expect_error_naming([] { hardware_for_device_name("Tesla V100-SXM2-32GB"); }, "Tesla V100");
  expect_error_naming([] { hardware_for_device_name("NVIDIA H100 PCIe"); }, "PCIe");
  // Whole words: a name that only contains one of them is another GPU.
  for (const char* other : {"NVIDIA GH200 480GB", "NVIDIA RTX A1000", "H1000"})
    expect_error_naming([&] { hardware_for_device_name(other); }, other);
}

// Every built-in profile through JSON and through a file comes back the same, and its JSON holds exactly the numbers
// of its file (the file without its notes): nothing is lost or invented on the way.
TEST(Hardware, BuiltinProfilesRoundTrip) {
  for (const auto& name : builtin_hardware_names()) {
    const Hardware h = builtin_hardware(name);
    const nlohmann::json j = h;
    EXPECT_EQ(j.size(), 3u) << name;  // name, spec, fit
    EXPECT_EQ(j["spec"].size() + j["fit"].size(), hardware_field_names().size()) << name;
    Hardware back;
    from_json(j, back);
    EXPECT_EQ(nlohmann::json(back), j) << name;

    const std::string path = ::testing::TempDir() + "ovl_hw_roundtrip_" + name + ".json";
    save_hardware(h, path);
    EXPECT_EQ(nlohmann::json(load_hardware(path)), j) << name;
    std::remove(path.c_str());

    std::ifstream in(std::string(OVL_PROFILES_DIR) + "/" + name + ".json");
    nlohmann::json file = nlohmann::json::parse(in);
    for (const char* part : {"spec", "fit"}) {
      for (auto it = file[part].begin(); it != file[part].end();) {
        it = it.key().front() == '_' ? file[part].erase(it) : std::next(it);
      }
      EXPECT_EQ(j[part], file[part]) << name << ": " << part;
    }
  }
}

TEST(Hardware, MissingFieldsKeepTheBase) {
  Hardware h = builtin_hardware("h100");
  from_json(nlohmann::json{{"spec", {{"hbm_GBps", 3000.0}}}, {"name", "my H100"}}, h);
  EXPECT_DOUBLE_EQ(h.spec.hbm_GBps, 3000);
  EXPECT_EQ(h.name, "my H100");
  EXPECT_DOUBLE_EQ(h.spec.l2_bytes, builtin_hardware("h100").spec.l2_bytes);
  Hardware g = builtin_hardware("h200");
  from_json(nlohmann::json{{"base", "a100"},
                           {"fit", {{"launch_us", 3.0}, {"_launch_us", "notes are allowed beside a field"}}},
                           {"_source", "and at the top level"}},
            g);
  EXPECT_EQ(g.spec.sm_count, 108);
  EXPECT_DOUBLE_EQ(g.fit.launch_us, 3.0);
}

TEST(Hardware, EveryBadFieldIsRejectedByName) {
  const nlohmann::json good = builtin_hardware("h200");
  for (const auto& path : hardware_field_names()) {
    const auto [part, field] = split_path(path);
    for (const nlohmann::json& bad : {nlohmann::json(-1), nlohmann::json("abc"), nlohmann::json(nullptr)}) {
      nlohmann::json j = good;
      j[part][field] = bad;
      Hardware h = builtin_hardware("h200");
      expect_error_naming([&] { from_json(j, h); }, "\"" + path + "\"");
      EXPECT_EQ(nlohmann::json(h), good) << "a failed load must leave the profile unchanged";
    }
  }
  // Inconsistent or out-of-range values.
  Hardware h = builtin_hardware("h200");
  expect_error_naming(
      [&] {
        from_json(nlohmann::json{{"fit", {{"gemm_efficiency", 1.5}}}}, h);
      },
      "\"fit.gemm_efficiency\"");
  expect_error_naming([&] { from_json(nlohmann::json{{"fit", {{"nccl_efficiency", 0}}}}, h); }, "nccl_efficiency");
  expect_error_naming([&] { from_json(nlohmann::json{{"fit", {{"link_efficiency", 1.2}}}}, h); }, "link_efficiency");
  expect_error_naming([&] { from_json(nlohmann::json{{"spec", {{"sm_granularity", 256}}}}, h); }, "sm_granularity");
  expect_error_naming([&] { from_json(nlohmann::json{{"spec", {{"sm_count", 13.5}}}}, h); }, "\"spec.sm_count\"");
  expect_error_naming([&] { from_json(nlohmann::json{{"spec", {{"hbm_gbps", 1.0}}}}, h); }, "hbm_gbps");  // a typo
  expect_error_naming([&] { from_json(nlohmann::json{{"spec", 5}}, h); }, "\"spec\"");
  expect_error_naming([&] { from_json(nlohmann::json{{"fit", nlohmann::json::array()}}, h); }, "\"fit\"");
  expect_error_naming([&] { from_json(nlohmann::json{{"name", 5}}, h); }, "name");
  expect_error_naming([&] { from_json(nlohmann::json{{"base", "z80"}}, h); }, "z80");
  expect_error_naming([&] { from_json(nlohmann::json{{"emulation", {{"loopback", true}}}}, h); }, "emulation");
  Hardware direct = builtin_hardware("h200");
  direct.spec.sm_count = -4;
  expect_error_naming([&] { direct.validate(); }, "\"spec.sm_count\" = -4");
}

// A field in the other part, or at the top level (a profile written before the parts), is refused with the part it
// belongs in; nothing of the profile changes.
TEST(Hardware, MisplacedFieldsNameTheirPart) {
  const nlohmann::json good = builtin_hardware("h200");
  for (const auto& path : hardware_field_names()) {
    const auto [part, field] = split_path(path);
    const std::string other = part == "spec" ? "fit" : "spec";
    Hardware h = builtin_hardware("h200");
    expect_error_naming_all(
        [&] {
          from_json(nlohmann::json{{field, good[part][field]}}, h);
        },
        {"\"" + field + "\" is at the top level", "move it into \"" + part + "\""});
    expect_error_naming_all(
        [&] {
          from_json(nlohmann::json{{other, {{field, good[part][field]}}}}, h);
        },
        {"\"" + other + "." + field + "\"", "belongs in \"" + part + "\""});
    EXPECT_EQ(nlohmann::json(h), good) << path;
  }
  // A whole flat profile (the form before the parts) fails on its first field, in a file as well.
  const std::string path = ::testing::TempDir() + "ovl_hw_flat.json";
  std::ofstream(path) << R"({"name": "old", "sm_count": 132, "gemm_efficiency": 0.8})";
  expect_error_naming_all([&] { load_hardware(path); }, {path, "\"gemm_efficiency\" is at the top level", "\"fit\""});
  std::remove(path.c_str());
}

TEST(Hardware, OperatorGemmFactor) {
  // The power-state factor: optional (absent = the base's, 1 on every built-in profile), carried through JSON,
  // and refused by name when it is not a positive finite number.
  for (const auto& name : builtin_hardware_names()) EXPECT_EQ(builtin_hardware(name).fit.operator_gemm_factor, 1.0);
  Hardware h = builtin_hardware("h200");
  from_json(nlohmann::json{{"fit", {{"operator_gemm_factor", 0.9}}}}, h);
  EXPECT_DOUBLE_EQ(h.fit.operator_gemm_factor, 0.9);
  const nlohmann::json j = h;
  ASSERT_TRUE(j["fit"].contains("operator_gemm_factor"));
  EXPECT_DOUBLE_EQ(j["fit"]["operator_gemm_factor"].get<double>(), 0.9);
  Hardware back = builtin_hardware("h200");
  from_json(j, back);
  EXPECT_DOUBLE_EQ(back.fit.operator_gemm_factor, 0.9);
  Hardware kept = h;
  from_json(nlohmann::json{{"fit", {{"launch_us", 2.0}}}}, kept);
  EXPECT_DOUBLE_EQ(kept.fit.operator_gemm_factor, 0.9);
  for (double bad : {0.0, -0.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    Hardware g = builtin_hardware("h200");
    expect_error_naming(
        [&] {
          from_json(nlohmann::json{{"fit", {{"operator_gemm_factor", bad}}}}, g);
        },
        "\"fit.operator_gemm_factor\"");
    EXPECT_EQ(g.fit.operator_gemm_factor, 1.0) << "a failed load must leave the profile unchanged";
    Hardware direct = builtin_hardware("h200");
    direct.fit.operator_gemm_factor = bad;
    expect_error_naming([&] { direct.validate(); }, "\"fit.operator_gemm_factor\"");
  }
  EXPECT_NE(fmt::format("{}", h).find("operator GEMM x0.900"), std::string::npos);
}

TEST(Hardware, FilesAndPrinting) {
  const std::string path = ::testing::TempDir() + "ovl_hw_test.json";
  Hardware h = builtin_hardware("h100");
  h.fit.gemm_efficiency = 0.7;
  save_hardware(h, path);
  const Hardware back = load_hardware(path);
  EXPECT_EQ(nlohmann::json(back), nlohmann::json(h));
  std::ofstream(path) << "{\"base\": \"h200\", \"spec\": {\"link_GBps\": \"fast\"}}";
  expect_error_naming_all([&] { load_hardware(path); }, {path, "spec.link_GBps"});
  std::remove(path.c_str());
  const std::string s = fmt::format("{}", builtin_hardware("h200"));
  EXPECT_NE(s.find("H200 SXM"), std::string::npos);
  EXPECT_NE(s.find("132 SMs"), std::string::npos);
}

TEST(Hardware, Loopback) {
  // 4 virtual ranks on one H200: each gets 4200 / 4 = 1050 GB/s of HBM; its link is a copy: 4200 / 8 = 525 GB/s.
  Hardware base = builtin_hardware("h200");
  base.fit.link_efficiency = 0.5;  // a real link's; the loopback's "link" is the memory system, at its rate
  const Hardware lb = loopback_hardware(base, 4);
  EXPECT_DOUBLE_EQ(lb.spec.hbm_GBps, 1050);
  EXPECT_DOUBLE_EQ(lb.spec.link_GBps, 525);
  EXPECT_DOUBLE_EQ(lb.effective_link_GBps(), 525);
  EXPECT_TRUE(lb.emulation.loopback);
  EXPECT_FALSE(lb.emulation.loopback_rank0);
  EXPECT_NO_THROW(lb.validate());
  // The emulation is never written: a loopback profile saved and loaded is a plain one with the emulated numbers.
  Hardware back = builtin_hardware("h200");
  from_json(nlohmann::json(lb), back);
  EXPECT_FALSE(back.emulation.loopback);
  EXPECT_DOUBLE_EQ(back.spec.hbm_GBps, 1050);
  EXPECT_THROW(loopback_hardware(builtin_hardware("h200"), 0), Error);
}

// The loopback SIMT kernel keeps 8 loads in flight per thread up to W = 8 and stores 8 / W results per memory
// latency: its rate relative to W = 8 (where the profiles measured it) is (8 + 8 / W) / 9.
TEST(Hardware, LoopbackSimtRatePerWorld) {
  const Hardware base = builtin_hardware("h200");  // simt_per_cta_GBps 32, measured at W = 8
  EXPECT_DOUBLE_EQ(simt_world_factor(8), 1.0);
  EXPECT_DOUBLE_EQ(simt_world_factor(2), 12.0 / 9);
  const Hardware w2 = loopback_hardware(base, 2, LoopbackShare::kRank0);
  EXPECT_DOUBLE_EQ(w2.fit.simt_per_cta_GBps, 32 * 12.0 / 9);
  EXPECT_DOUBLE_EQ(w2.fit.nccl_per_cta_GBps, 32 * 12.0 / 9);  // the NCCL stand-in is that kernel
  EXPECT_DOUBLE_EQ(loopback_hardware(base, 8, LoopbackShare::kRank0).fit.nccl_per_cta_GBps, 32);
  EXPECT_DOUBLE_EQ(loopback_hardware(base, 4).fit.simt_per_cta_GBps, 32 * 10.0 / 9 / 4);  // each of 4 shares
  EXPECT_THROW((void)simt_world_factor(0), Error);
}

}  // namespace
}  // namespace ovl
