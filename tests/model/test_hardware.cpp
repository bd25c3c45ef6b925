// Hardware: built-in profiles, device-name lookup, validation and JSON (every field rejected by name).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "expect_error.hpp"
#include "ovl/error.hpp"
#include "ovl/model/hardware.hpp"

namespace ovl {
namespace {

using test::expect_error_naming;

TEST(Hardware, BuiltinProfiles) {
  const Hardware h200 = builtin_hardware("h200");
  EXPECT_EQ(h200.name, "H200 SXM");
  EXPECT_EQ(h200.sm_count, 132);
  EXPECT_EQ(h200.sm_granularity, 8);
  EXPECT_DOUBLE_EQ(h200.l2_bytes, 60.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h200.hbm_GBps, 4200);
  EXPECT_NEAR(h200.matrix_tflops(), 989.4, 1e-9);  // datasheet dense bf16
  EXPECT_DOUBLE_EQ(h200.link_GBps, 450);
  EXPECT_DOUBLE_EQ(h200.per_cta_copy_GBps, 100);
  const Hardware h100 = builtin_hardware("H100-SXM");
  EXPECT_DOUBLE_EQ(h100.l2_bytes, 50.0 * 1024 * 1024);
  EXPECT_LT(h100.hbm_GBps, h200.hbm_GBps);
  const Hardware a100 = builtin_hardware("A100");
  EXPECT_EQ(a100.sm_count, 108);
  EXPECT_NEAR(a100.matrix_tflops(), 312.0, 1e-9);
  for (const auto& name : builtin_hardware_names()) EXPECT_NO_THROW(builtin_hardware(name).validate()) << name;
  expect_error_naming([] { builtin_hardware("b200"); }, "b200");
}

// The built-in profiles are the files of model/profiles/ (embedded at build time): each names every field, so none
// is left at the struct's default without a line in its file saying so.
TEST(Hardware, ShippedProfilesNameEveryField) {
  for (const auto& name : builtin_hardware_names()) {
    std::ifstream in(std::string(OVL_PROFILES_DIR) + "/" + name + ".json");
    ASSERT_TRUE(in.good()) << name;
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const std::string& f : hardware_field_names()) EXPECT_TRUE(j.contains(f)) << name << ": " << f;
  }
}

TEST(Hardware, DeviceNames) {
  EXPECT_EQ(hardware_for_device_name("NVIDIA H200").name, "H200 SXM");
  EXPECT_EQ(hardware_for_device_name("NVIDIA H100 80GB HBM3").name, "H100 SXM");
  EXPECT_EQ(hardware_for_device_name("NVIDIA A100-SXM4-80GB").name, "A100 SXM");
  expect_error_naming([] { hardware_for_device_name("Tesla V100-SXM2-32GB"); }, "Tesla V100");
  expect_error_naming([] { hardware_for_device_name("NVIDIA H100 PCIe"); }, "PCIe");
}

TEST(Hardware, JsonRoundTrip) {
  for (const auto& name : builtin_hardware_names()) {
    const Hardware h = builtin_hardware(name);
    const nlohmann::json j = h;
    Hardware back;
    from_json(j, back);
    EXPECT_EQ(nlohmann::json(back), j) << name;
    EXPECT_EQ(j.size(), hardware_field_names().size() + 1);  // every numeric field and the name
  }
}

TEST(Hardware, MissingFieldsKeepTheBase) {
  Hardware h = builtin_hardware("h100");
  from_json(nlohmann::json{{"hbm_GBps", 3000.0}, {"name", "my H100"}}, h);
  EXPECT_DOUBLE_EQ(h.hbm_GBps, 3000);
  EXPECT_EQ(h.name, "my H100");
  EXPECT_DOUBLE_EQ(h.l2_bytes, builtin_hardware("h100").l2_bytes);
  Hardware g = builtin_hardware("h200");
  from_json(nlohmann::json{{"base", "a100"}, {"launch_us", 3.0}, {"_source", "notes are allowed"}}, g);
  EXPECT_EQ(g.sm_count, 108);
  EXPECT_DOUBLE_EQ(g.launch_us, 3.0);
}

TEST(Hardware, EveryBadFieldIsRejectedByName) {
  const nlohmann::json good = builtin_hardware("h200");
  for (const auto& field : hardware_field_names()) {
    for (const nlohmann::json& bad : {nlohmann::json(-1), nlohmann::json("abc"), nlohmann::json(nullptr)}) {
      nlohmann::json j = good;
      j[field] = bad;
      Hardware h = builtin_hardware("h200");
      expect_error_naming([&] { from_json(j, h); }, "\"" + field + "\"");
      EXPECT_EQ(nlohmann::json(h), good) << "a failed load must leave the profile unchanged";
    }
  }
  // Inconsistent or out-of-range values.
  Hardware h = builtin_hardware("h200");
  expect_error_naming([&] { from_json(nlohmann::json{{"gemm_efficiency", 1.5}}, h); }, "gemm_efficiency");
  expect_error_naming([&] { from_json(nlohmann::json{{"nccl_efficiency", 0}}, h); }, "nccl_efficiency");
  expect_error_naming([&] { from_json(nlohmann::json{{"sm_granularity", 256}}, h); }, "sm_granularity");
  expect_error_naming([&] { from_json(nlohmann::json{{"sm_count", 13.5}}, h); }, "sm_count");
  expect_error_naming([&] { from_json(nlohmann::json{{"hbm_gbps", 1.0}}, h); }, "hbm_gbps");  // a typo
  expect_error_naming([&] { from_json(nlohmann::json{{"name", 5}}, h); }, "name");
  expect_error_naming([&] { from_json(nlohmann::json{{"base", "z80"}}, h); }, "z80");
  Hardware direct = builtin_hardware("h200");
  direct.sm_count = -4;
  expect_error_naming([&] { direct.validate(); }, "\"sm_count\" = -4");
}

TEST(Hardware, OperatorGemmFactor) {
  // The power-state factor: optional (absent = the base's, 1 on every built-in profile), carried through JSON,
  // and refused by name when it is not a positive finite number.
  for (const auto& name : builtin_hardware_names()) EXPECT_EQ(builtin_hardware(name).operator_gemm_factor, 1.0);
  Hardware h = builtin_hardware("h200");
  from_json(nlohmann::json{{"operator_gemm_factor", 0.9}}, h);
  EXPECT_DOUBLE_EQ(h.operator_gemm_factor, 0.9);
  const nlohmann::json j = h;
  ASSERT_TRUE(j.contains("operator_gemm_factor"));
  EXPECT_DOUBLE_EQ(j["operator_gemm_factor"].get<double>(), 0.9);
  Hardware back = builtin_hardware("h200");
  from_json(j, back);
  EXPECT_DOUBLE_EQ(back.operator_gemm_factor, 0.9);
  Hardware kept = h;
  from_json(nlohmann::json{{"launch_us", 2.0}}, kept);
  EXPECT_DOUBLE_EQ(kept.operator_gemm_factor, 0.9);
  for (double bad : {0.0, -0.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    Hardware g = builtin_hardware("h200");
    expect_error_naming(
        [&] {
          from_json(nlohmann::json{{"operator_gemm_factor", bad}}, g);
        },
        "\"operator_gemm_factor\"");
    EXPECT_EQ(g.operator_gemm_factor, 1.0) << "a failed load must leave the profile unchanged";
    Hardware direct = builtin_hardware("h200");
    direct.operator_gemm_factor = bad;
    expect_error_naming([&] { direct.validate(); }, "\"operator_gemm_factor\"");
  }
  EXPECT_NE(fmt::format("{}", h).find("operator GEMM x0.900"), std::string::npos);
}

TEST(Hardware, FilesAndPrinting) {
  const std::string path = ::testing::TempDir() + "ovl_hw_test.json";
  Hardware h = builtin_hardware("h100");
  h.gemm_efficiency = 0.7;
  save_hardware(h, path);
  const Hardware back = load_hardware(path);
  EXPECT_EQ(nlohmann::json(back), nlohmann::json(h));
  std::ofstream(path) << "{\"base\": \"h200\", \"link_GBps\": \"fast\"}";
  try {
    load_hardware(path);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("link_GBps"), std::string::npos);
  }
  std::remove(path.c_str());
  const std::string s = fmt::format("{}", builtin_hardware("h200"));
  EXPECT_NE(s.find("H200 SXM"), std::string::npos);
  EXPECT_NE(s.find("132 SMs"), std::string::npos);
}

TEST(Hardware, Loopback) {
  // 4 virtual ranks on one H200: each gets 4200 / 4 = 1050 GB/s of HBM; its link is a copy: 4200 / 8 = 525 GB/s.
  const Hardware lb = loopback_hardware(builtin_hardware("h200"), 4);
  EXPECT_DOUBLE_EQ(lb.hbm_GBps, 1050);
  EXPECT_DOUBLE_EQ(lb.link_GBps, 525);
  EXPECT_NO_THROW(lb.validate());
  EXPECT_THROW(loopback_hardware(builtin_hardware("h200"), 0), Error);
}

}  // namespace
}  // namespace ovl
