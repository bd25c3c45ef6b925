// Calibration by least squares (Eigen) and validation against Google Benchmark JSON.
#include "ovl/tools/calibrate.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include "model_detail.hpp"
#include "ovl/error.hpp"
#include "ovl/model/estimate.hpp"
#include "ovl/model/json_document.hpp"

namespace ovl {
namespace {

double to_us(double t, std::string_view unit, const std::string& name) {
  if (unit == "ns") return t / 1e3;
  if (unit == "us") return t;
  if (unit == "ms") return t * 1e3;
  if (unit == "s") return t * 1e6;
  OVL_FAIL("benchmark \"{}\": field \"time_unit\" = \"{}\" is not ns, us, ms or s", name, unit);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

GemmShape shape_of(const BenchCase& b) { return GemmShape{b.m, b.n, b.k, DType::kBF16}; }

// ---- weighted linear least squares with held (fixed) parameters -----------------------------------------------
// Minimizes sum_i ((A_i . x - b_i) / t_i)^2 (relative errors) over the free entries of x; held entries keep their
// value. When the free columns are rank deficient, or a solution breaks its bound (x_j >= lower_j), the first
// offending parameter in `hold_order` (then any offender) is held at its current value and the fit is repeated.
struct LinearProblem {
  Eigen::MatrixXd a;
  Eigen::VectorXd b;
  Eigen::VectorXd t;  // the measured times (weights 1 / t)
};

std::vector<bool> solve_held(const LinearProblem& p, Eigen::VectorXd& x, std::vector<bool> free,
                             const std::vector<double>& lower, const std::vector<int>& hold_order) {
  const int cols = int(p.a.cols());
  for (int j = 0; j < cols; ++j) {
    if (free[size_t(j)] && p.a.col(j).cwiseAbs().maxCoeff() == 0.0) free[size_t(j)] = false;  // nothing informs it
  }
  for (int attempt = 0; attempt <= cols; ++attempt) {
    std::vector<int> idx;
    for (int j = 0; j < cols; ++j) {
      if (free[size_t(j)]) idx.push_back(j);
    }
    if (idx.empty()) return free;
    Eigen::VectorXd rhs = p.b;
    for (int j = 0; j < cols; ++j) {
      if (!free[size_t(j)]) rhs -= p.a.col(j) * x(j);
    }
    Eigen::MatrixXd m(p.a.rows(), Eigen::Index(idx.size()));
    for (size_t c = 0; c < idx.size(); ++c) m.col(Eigen::Index(c)) = p.a.col(idx[c]);
    const Eigen::VectorXd w = p.t.cwiseInverse();
    m = w.asDiagonal() * m;
    rhs = w.asDiagonal() * rhs;
    // Scale the columns so the rank test is about directions, not units.
    Eigen::VectorXd scale = m.colwise().norm().transpose();
    for (Eigen::Index c = 0; c < scale.size(); ++c) {
      if (scale(c) == 0) scale(c) = 1;
    }
    const Eigen::MatrixXd ms = m * scale.cwiseInverse().asDiagonal();
    Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(ms);
    qr.setThreshold(1e-6);
    int offender = -1;
    Eigen::VectorXd sol;
    if (qr.rank() < Eigen::Index(idx.size())) {
      for (int j : hold_order) {
        if (free[size_t(j)]) {
          offender = j;
          break;
        }
      }
      if (offender < 0) offender = idx.back();
    } else {
      sol = scale.cwiseInverse().asDiagonal() * qr.solve(rhs);
      for (size_t c = 0; c < idx.size() && offender < 0; ++c) {
        if (!(sol(Eigen::Index(c)) >= lower[size_t(idx[c])])) {
          // Prefer holding the parameter the order names first among the offenders.
          offender = idx[c];
          for (int j : hold_order) {
            const auto it = std::find(idx.begin(), idx.end(), j);
            if (it != idx.end() && !(sol(Eigen::Index(it - idx.begin())) >= lower[size_t(j)])) {
              offender = j;
              break;
            }
          }
        }
      }
    }
    if (offender < 0) {
      for (size_t c = 0; c < idx.size(); ++c) x(idx[c]) = sol(Eigen::Index(c));
      return free;
    }
    free[size_t(offender)] = false;
  }
  return free;
}

// A ModelParams field a Gauss-Newton fit moves, within [lo, hi].
struct FitParam {
  const char* name;
  double ModelParams::*field;
  double lo, hi;
};

// Gauss-Newton on relative residuals in the logarithm of each parameter (all positive; steps are relative): numeric
// derivatives (5% steps), Levenberg-Marquardt damping (with plain step halving it stopped after one step on the paced
// loopback data, at 13.8% RMS where the damped steps reach 10.4%), each step at most a factor e per parameter. residual(h, i) is case i's
// relative error under h, or 0 for a case the model cannot run. Returns the fitted hardware (a parameter no case is
// sensitive to keeps its start value exactly) and, per parameter, how many cases informed it.
template <std::size_t P, typename Residual>
std::pair<Hardware, std::array<int, P>> gauss_newton(const Hardware& start, const std::array<FitParam, P>& params,
                                                     std::size_t cases, Residual residual) {
  constexpr int kP = int(P);
  using Vec = Eigen::Matrix<double, kP, 1>;
  auto with = [&](const Vec& log_th) {
    Hardware h = start;
    for (int c = 0; c < kP; ++c)
      h.fit.*(params[size_t(c)].field) = std::clamp(std::exp(log_th(c)), params[size_t(c)].lo, params[size_t(c)].hi);
    return h;
  };
  auto residuals = [&](const Hardware& h, Eigen::VectorXd& r) {
    r.resize(Eigen::Index(cases));
    for (std::size_t i = 0; i < cases; ++i) r(Eigen::Index(i)) = residual(h, i);
  };
  Vec th;
  for (int c = 0; c < kP; ++c) th(c) = std::log(std::max(start.fit.*(params[size_t(c)].field), params[size_t(c)].lo));
  Eigen::VectorXd r;
  residuals(with(th), r);
  std::array<int, P> informed{};
  constexpr double kStep = 0.05;  // 5% in each parameter
  double damping = 1e-3;
  for (int iter = 0; iter < 50; ++iter) {
    Eigen::MatrixXd j(r.size(), kP);
    for (int c = 0; c < kP; ++c) {
      Vec tp = th;
      tp(c) += kStep;
      Eigen::VectorXd rp;
      residuals(with(tp), rp);
      j.col(c) = (rp - r) / kStep;
    }
    std::vector<int> cols;
    for (int c = 0; c < kP; ++c) {
      const int n = int((j.col(c).array().abs() > 1e-6).count());
      // A parameter the fit has driven onto its bound has no derivative any more but stays informed (its value is
      // the fit's answer): keep the largest count seen.
      informed[size_t(c)] = std::max(informed[size_t(c)], n);
      if (n > 0) cols.push_back(c);
    }
    if (cols.empty()) break;
    Eigen::MatrixXd js(r.size(), Eigen::Index(cols.size()));
    for (size_t c = 0; c < cols.size(); ++c) js.col(Eigen::Index(c)) = j.col(cols[c]);
    // Levenberg-Marquardt: the Gauss-Newton step, damped towards gradient descent (scaled by the curvature of each
    // parameter) until it lowers the cost; the damping relaxes after a step that does.
    const Eigen::MatrixXd jtj = js.transpose() * js;
    const Eigen::VectorXd jtr = js.transpose() * r;
    const double cost = r.squaredNorm();
    bool improved = false;
    Eigen::VectorXd step;
    for (int tries = 0; tries < 12 && !improved; ++tries) {
      Eigen::MatrixXd a = jtj;
      for (Eigen::Index c = 0; c < a.rows(); ++c) a(c, c) += damping * std::max(jtj(c, c), 1e-12);
      step = a.colPivHouseholderQr().solve(-jtr);
      Vec tn = th;
      for (size_t c = 0; c < cols.size(); ++c) tn(cols[c]) = th(cols[c]) + std::clamp(step(Eigen::Index(c)), -1.0, 1.0);
      Eigen::VectorXd rn;
      residuals(with(tn), rn);
      if (rn.squaredNorm() < cost) {
        th = tn;
        r = rn;
        improved = true;
        damping = std::max(damping / 4, 1e-9);
      } else {
        damping *= 4;
      }
    }
    if (!improved || step.norm() < 1e-4) break;
  }
  Hardware fitted = with(th);
  for (int c = 0; c < kP; ++c)
    if (informed[size_t(c)] == 0) fitted.fit.*(params[size_t(c)].field) = start.fit.*(params[size_t(c)].field);
  return {fitted, informed};
}

double rms_rel(const std::vector<const Measurement*>& ms, const Hardware& hw) {
  double s = 0;
  int n = 0;
  for (const Measurement* m : ms) {
    const auto p = predict_us(m->bench, measurement_hardware(*m, hw));
    if (!p) continue;
    const double e = (*p - m->us) / m->us;
    s += e * e;
    ++n;
  }
  return n ? std::sqrt(s / n) : 0.0;
}

int count_nonzero(const Eigen::MatrixXd& a, int col) {
  int n = 0;
  for (Eigen::Index i = 0; i < a.rows(); ++i) n += a(i, col) != 0.0;
  return n;
}

struct Fitter {
  Hardware hw;
  CalibrationResult* out;

  void record(const char* name, double base, double value, int points, const std::string& subset) {
    FittedParameter p;
    p.name = name;
    p.base_value = base;
    p.value = value;
    p.points = points;
    p.subset = subset;
    out->parameters.push_back(p);
  }
  void note(std::string s) { out->notes.push_back(std::move(s)); }

  // gemm/ovl* and gemm/cublas, jointly (they share launch_us and the clock curve). For a given clock curve
  // (clock_knee_sms, clock_exponent) every case is linear in the unknowns:
  //   ovl   : t = launch + W x F c / eff + W x epilogue,                      W = waves, c = clock factor
  //   cublas: t = launch + w x F c / eff_c + w x F c r x (p / eff_c) + w x epilogue_c,  w = max(1, tiles / sms),
  //           r = min(1, removed SMs / granularity)
  // F = one tile's matrix time at efficiency 1 with every SM busy. The clock curve is found by a grid search
  // (coarse, then fine) on the RMS relative error of the linear fit, when the cases' busy-SM counts span enough
  // to inform it; otherwise it keeps the base values.
  enum { kInvEff, kEpi, kLaunch, kInvEffC, kPenC, kEpiC, kGemmCols };
  struct GemmFit {
    Eigen::VectorXd x;
    std::vector<bool> free;
    double rms = 1e300;
  };
  GemmFit solve_gemm(const std::vector<const Measurement*>& ms, const Hardware& h, const Eigen::VectorXd& x0) const {
    const auto rows = Eigen::Index(ms.size());
    LinearProblem p{Eigen::MatrixXd::Zero(rows, kGemmCols), Eigen::VectorXd(rows), Eigen::VectorXd(rows)};
    for (size_t i = 0; i < ms.size(); ++i) {
      const auto& b = ms[i]->bench;
      const auto r = Eigen::Index(i);
      const bool cublas = b.gemm_impl() == GemmImpl::kCublas;
      const auto g = detail::gemm_timing(shape_of(b), b.gemm_impl(), b.sms, TileShape{}, TileOrder::kSwizzle, h,
                                         GemmRegime::kSustained);
      const TileShape t = cublas ? detail::kCublasTile : TileShape{};
      const double f =
          2.0 * t.m * t.n * double(b.k) / (h.spec.matrix_tflops_per_sm * 1e6) * g.clock_factor * g.l2_miss_factor;
      p.a(r, kLaunch) = 1.0;
      if (cublas) {
        const double removed = std::min(1.0, double(h.spec.sm_count - b.sms) / h.spec.sm_granularity);
        p.a(r, kInvEffC) = g.waves_used * f;
        p.a(r, kPenC) = g.waves_used * f * removed;
        p.a(r, kEpiC) = g.waves_used;
      } else {
        p.a(r, kInvEff) = g.waves_used * f;
        p.a(r, kEpi) = g.waves_used;
      }
      p.b(r) = p.t(r) = ms[i]->us;
    }
    GemmFit out;
    out.x = x0;
    out.free = solve_held(p, out.x, std::vector<bool>(kGemmCols, true), {1e-9, 0, 0, 1e-9, 0, 0},
                          {kLaunch, kPenC, kEpiC, kEpi});
    const Eigen::VectorXd res = (p.a * out.x - p.b).cwiseQuotient(p.t);
    out.rms = std::sqrt(res.squaredNorm() / double(std::max<Eigen::Index>(1, rows)));
    return out;
  }

  void fit_gemm(const std::vector<const Measurement*>& all) {
    std::vector<const Measurement*> ms, ovl, cublas;
    for (const Measurement* m : all) {
      const auto g = detail::gemm_timing(shape_of(m->bench), m->bench.gemm_impl(), m->bench.sms, TileShape{},
                                         TileOrder::kSwizzle, hw, GemmRegime::kSustained);
      if (g.memory_us > 0.9 * g.compute_us) {
        note(fmt::format("{}: near the HBM floor, not used to fit the matrix rate", m->name));
        continue;
      }
      ms.push_back(m);
      (m->bench.gemm_impl() == GemmImpl::kCublas ? cublas : ovl).push_back(m);
    }
    if (ms.empty()) return;
    const Hardware base = hw;
    int partitioned = 0;
    for (const Measurement* m : cublas) partitioned += m->bench.sms < hw.spec.sm_count;
    Eigen::VectorXd x0(kGemmCols);
    // A penalty the data pushes below 0 is held at 0 (its bound), not at the base value.
    x0 << 1.0 / hw.fit.gemm_efficiency, hw.fit.tile_epilogue_us, hw.fit.launch_us, 1.0 / hw.fit.cublas_efficiency,
        partitioned > 0 ? 0.0 : hw.fit.cublas_partition_penalty / hw.fit.cublas_efficiency,
        hw.fit.cublas_tile_epilogue_us;

    // The clock curve: informative when the busy-SM counts take at least 3 values spanning a factor 1.5.
    std::set<int> busy;
    for (const Measurement* m : ms) {
      const auto g = detail::gemm_timing(shape_of(m->bench), m->bench.gemm_impl(), m->bench.sms, TileShape{},
                                         TileOrder::kSwizzle, hw, GemmRegime::kSustained);
      busy.insert(int(std::lround(g.busy_sms)));
    }
    const bool clock_informed = busy.size() >= 3 && *busy.rbegin() >= 1.5 * *busy.begin();
    GemmFit best = solve_gemm(ms, hw, x0);
    if (clock_informed) {
      const double lo = std::max(1.0, double(*busy.begin())), hi = double(hw.spec.sm_count);
      auto search = [&](double k0, double k1, double kstep, double e0, double e1, double estep) {
        for (double knee = k0; knee <= k1 + 1e-9; knee += kstep) {
          for (double ex = e0; ex <= e1 + 1e-9; ex += estep) {
            Hardware h = hw;
            h.fit.clock_knee_sms = std::clamp(knee, 1.0, hi);
            h.fit.clock_exponent = std::clamp(ex, 0.0, 1.0);
            const GemmFit f = solve_gemm(ms, h, x0);
            if (f.rms < best.rms * (1 - 1e-9)) {
              best = f;
              hw.fit.clock_knee_sms = h.fit.clock_knee_sms, hw.fit.clock_exponent = h.fit.clock_exponent;
            }
          }
        }
      };
      const Hardware start = hw;
      hw.fit.clock_knee_sms = start.fit.clock_knee_sms, hw.fit.clock_exponent = start.fit.clock_exponent;
      search(lo, hi, 4, 0, 1, 0.05);
      const double k = hw.fit.clock_knee_sms, e = hw.fit.clock_exponent;
      search(std::max(lo, k - 4), std::min(hi, k + 4), 1, std::max(0.0, e - 0.05), std::min(1.0, e + 0.05), 0.005);
    } else {
      note(
          "clock_knee_sms, clock_exponent held at the base values (the GEMM cases' busy-SM counts do not span "
          "enough: at least 3 values over a factor 1.5 are needed)");
    }
    const Eigen::VectorXd& x = best.x;
    const std::vector<bool>& free = best.free;
    double eff = 1.0 / x(kInvEff), eff_c = 1.0 / x(kInvEffC);
    if (free[kInvEff]) {
      if (eff > 1.0) note(fmt::format("gemm_efficiency fitted {:.3f} > 1: clamped to 1", eff));
      hw.fit.gemm_efficiency = std::min(1.0, eff);
    }
    if (free[kEpi]) hw.fit.tile_epilogue_us = x(kEpi);
    if (free[kLaunch]) hw.fit.launch_us = x(kLaunch);
    if (free[kInvEffC]) {
      if (eff_c > 1.0) note(fmt::format("cublas_efficiency fitted {:.3f} > 1: clamped to 1", eff_c));
      hw.fit.cublas_efficiency = std::min(1.0, eff_c);
      hw.fit.cublas_partition_penalty = std::max(0.0, x(kPenC) / x(kInvEffC));
    }
    if (free[kEpiC]) hw.fit.cublas_tile_epilogue_us = x(kEpiC);

    const double rms_ovl = rms_rel(ovl, hw), rms_cublas = rms_rel(cublas, hw), rms_all = rms_rel(ms, hw);
    const int n_ovl = int(ovl.size()), n_cublas = int(cublas.size()), n = int(ms.size());
    auto rec = [&](const char* name, double b, double v, int points, const char* subset, double rms) {
      record(name, b, v, points, subset);
      out->parameters.back().rms_rel_error = rms;
    };
    auto held = [&](const char* name, const char* why) {
      note(fmt::format("{} held at the base value ({})", name, why));
    };
    if (n_ovl > 0) {
      if (free[kInvEff])
        rec("gemm_efficiency", base.fit.gemm_efficiency, hw.fit.gemm_efficiency, n_ovl, "gemm/ovl", rms_ovl);
      if (free[kEpi])
        rec("tile_epilogue_us", base.fit.tile_epilogue_us, hw.fit.tile_epilogue_us, n_ovl, "gemm/ovl", rms_ovl);
      else
        held("tile_epilogue_us", "the gemm/ovl data cannot separate it");
    }
    if (n_cublas > 0) {
      if (free[kInvEffC])
        rec("cublas_efficiency", base.fit.cublas_efficiency, hw.fit.cublas_efficiency, n_cublas, "gemm/cublas",
            rms_cublas);
      if (free[kEpiC])
        rec("cublas_tile_epilogue_us", base.fit.cublas_tile_epilogue_us, hw.fit.cublas_tile_epilogue_us, n_cublas,
            "gemm/cublas", rms_cublas);
      else
        held("cublas_tile_epilogue_us", "the gemm/cublas data cannot separate it");
      if (partitioned == 0) {
        held("cublas_partition_penalty", "no cuBLAS case on a partition");
      } else if (free[kPenC]) {
        rec("cublas_partition_penalty", base.fit.cublas_partition_penalty, hw.fit.cublas_partition_penalty, partitioned,
            "gemm/cublas", rms_cublas);
      } else {
        hw.fit.cublas_partition_penalty = 0.0;
        rec("cublas_partition_penalty", base.fit.cublas_partition_penalty, 0.0, partitioned, "gemm/cublas", rms_cublas);
        note(
            "cublas_partition_penalty fitted below 0 (cuBLAS on partitions is no slower than its clock-scaled "
            "full-device rate): held at its bound 0");
      }
    }
    if (free[kLaunch])
      rec("launch_us", base.fit.launch_us, hw.fit.launch_us, n, "gemm", rms_all);
    else
      held("launch_us", "the GEMM data cannot separate it");
    if (clock_informed) {
      rec("clock_knee_sms", base.fit.clock_knee_sms, hw.fit.clock_knee_sms, n, "gemm", rms_all);
      rec("clock_exponent", base.fit.clock_exponent, hw.fit.clock_exponent, n, "gemm", rms_all);
    }
  }

  // coll + copy, jointly: t = launch + latency x steps + bytes x factor / bandwidth, the bandwidth of the resource
  // that binds under the current estimate (re-decided each pass). Each algorithm's CTAs have their own per-CTA
  // rate (copy, tma-push, tma-pull, simt). Loopback cases run on loopback_hardware(): their rates are the base
  // rates scaled (HBM / W, link = HBM / 2W, per-CTA / W), so a row's coefficient carries that scale, and their
  // latency (a flag round trip in L2, not the link's) is a known offset, not a row of the link latency column.
  // The HBM bandwidth is the device's (spec.hbm_GBps, never fitted): a case bound by it, or by a loopback "link"
  // (HBM), is known time. The link column is the effective link (spec.link_GBps x link_efficiency).
  // Unknowns, in x:
  enum {
    kNcclLaunch,
    kTmaLaunch,
    kLatency,
    kInvCopy,
    kInvPush,
    kInvPull,
    kInvSimt,
    kInvLink,
    kInvNcclLink,
    kInvNcclPerCta,
    kCommCols
  };
  void fit_comm(const std::vector<const Measurement*>& ms) {
    if (ms.empty()) return;
    const Hardware base = hw;
    Eigen::VectorXd x(kCommCols);
    std::vector<bool> free;
    LinearProblem p;
    for (int iter = 0; iter < 6; ++iter) {
      const auto rows = Eigen::Index(ms.size());
      p = LinearProblem{Eigen::MatrixXd::Zero(rows, kCommCols), Eigen::VectorXd(rows), Eigen::VectorXd(rows)};
      for (size_t i = 0; i < ms.size(); ++i) {
        const double known = comm_row(*ms[i], p.a.row(Eigen::Index(i)));
        p.b(Eigen::Index(i)) = ms[i]->us - known;
        p.t(Eigen::Index(i)) = ms[i]->us;
      }
      x << hw.fit.nccl_launch_us, hw.fit.tma_launch_us, hw.fit.link_latency_us, 1 / hw.fit.per_cta_copy_GBps,
          1 / hw.fit.tma_push_per_cta_GBps, 1 / hw.fit.tma_pull_per_cta_GBps, 1 / hw.fit.simt_per_cta_GBps,
          1 / hw.effective_link_GBps(), 1 / (hw.effective_link_GBps() * hw.fit.nccl_efficiency),
          1 / hw.fit.nccl_per_cta_GBps;
      free =
          solve_held(p, x, std::vector<bool>(kCommCols, true),
                     {0, 0, 0, 1e-12, 1e-12, 1e-12, 1e-12, 1e-12, 1e-12, 1e-12}, {kLatency, kTmaLaunch, kNcclLaunch});
      // Only what the data informed changes (a held nccl_efficiency stays put even when the link's rate moves).
      if (free[kNcclLaunch]) hw.fit.nccl_launch_us = x(kNcclLaunch);
      if (free[kTmaLaunch]) hw.fit.tma_launch_us = x(kTmaLaunch);
      if (free[kLatency]) hw.fit.link_latency_us = x(kLatency);
      if (free[kInvCopy]) hw.fit.per_cta_copy_GBps = 1 / x(kInvCopy);
      if (free[kInvPush]) hw.fit.tma_push_per_cta_GBps = 1 / x(kInvPush);
      if (free[kInvPull]) hw.fit.tma_pull_per_cta_GBps = 1 / x(kInvPull);
      if (free[kInvSimt]) hw.fit.simt_per_cta_GBps = 1 / x(kInvSimt);
      if (free[kInvLink]) hw.fit.link_efficiency = std::min(1.0, 1 / x(kInvLink) / hw.spec.link_GBps);
      if (free[kInvNcclLink]) hw.fit.nccl_efficiency = std::min(1.0, 1 / x(kInvNcclLink) / hw.effective_link_GBps());
      if (free[kInvNcclPerCta]) hw.fit.nccl_per_cta_GBps = 1 / x(kInvNcclPerCta);
    }
    if (free[kInvLink] && 1 / x(kInvLink) > hw.spec.link_GBps) {
      note(fmt::format("link bytes moved at {:.0f} GB/s, above spec.link_GBps = {:.0f}: link_efficiency clamped to 1",
                       1 / x(kInvLink), hw.spec.link_GBps));
    }
    if (free[kInvNcclLink] && 1 / x(kInvNcclLink) > hw.effective_link_GBps()) {
      note(fmt::format("NCCL reached {:.0f} GB/s, above the link's {:.0f}: nccl_efficiency clamped to 1",
                       1 / x(kInvNcclLink), hw.effective_link_GBps()));
    }
    const double rms = rms_rel(ms, hw);
    struct Out {
      const char* name;
      int col;
      double base, value;
    };
    const Out outs[] = {
        {"nccl_launch_us", kNcclLaunch, base.fit.nccl_launch_us, hw.fit.nccl_launch_us},
        {"tma_launch_us", kTmaLaunch, base.fit.tma_launch_us, hw.fit.tma_launch_us},
        {"link_latency_us", kLatency, base.fit.link_latency_us, hw.fit.link_latency_us},
        {"per_cta_copy_GBps", kInvCopy, base.fit.per_cta_copy_GBps, hw.fit.per_cta_copy_GBps},
        {"tma_push_per_cta_GBps", kInvPush, base.fit.tma_push_per_cta_GBps, hw.fit.tma_push_per_cta_GBps},
        {"tma_pull_per_cta_GBps", kInvPull, base.fit.tma_pull_per_cta_GBps, hw.fit.tma_pull_per_cta_GBps},
        {"simt_per_cta_GBps", kInvSimt, base.fit.simt_per_cta_GBps, hw.fit.simt_per_cta_GBps},
        {"link_efficiency", kInvLink, base.fit.link_efficiency, hw.fit.link_efficiency},
        {"nccl_efficiency", kInvNcclLink, base.fit.nccl_efficiency, hw.fit.nccl_efficiency},
        {"nccl_per_cta_GBps", kInvNcclPerCta, base.fit.nccl_per_cta_GBps, hw.fit.nccl_per_cta_GBps}};
    for (const auto& o : outs) {
      if (free[size_t(o.col)]) {
        record(o.name, o.base, o.value, count_nonzero(p.a, o.col), "comm");
        out->parameters.back().rms_rel_error = rms;
      } else if (count_nonzero(p.a, o.col) > 0) {
        note(fmt::format("{} held at the base value (the coll/copy data cannot separate it)", o.name));
      }
    }
  }

  // One row of the comm fit for the current `hw`; returns the part of the time that is known (subtracted from the
  // measurement): a loopback case's latency, and the time of a case bound by HBM.
  template <typename Row>
  double comm_row(const Measurement& m, Row row) const {
    const BenchCase& b = m.bench;
    const Hardware h = measurement_hardware(m, hw);  // the profile the case ran on (loopback: scaled rates)
    const bool copy = b.kind == BenchKind::kCopy;
    const CommAlgo algo = copy ? CommAlgo::kTmaPush : b.comm_algo();
    const int world = copy ? 1 : b.world;
    const detail::CollCoeffs k =
        detail::coll_coeffs(copy ? Collective::kAllGather : b.collective, algo, world, h.emulation.loopback_rank0);
    const double s = double(b.bytes) / detail::kBytesPerUsPerGBps;  // bytes x (1/GBps) -> us
    const double ctas = b.ctas;
    double known = 0;
    if (m.loopback) {
      known = k.steps * h.fit.link_latency_us;
    } else {
      row(kLatency) = k.steps;
    }
    if (is_nccl(algo)) {
      row(kNcclLaunch) = 1;
      if (world == 1) return 2 * s / h.spec.hbm_GBps;
      const double link_rate =
          std::min(h.effective_link_GBps() * h.fit.nccl_efficiency, ctas * h.fit.nccl_per_cta_GBps);
      if (k.hbm_bytes / h.spec.hbm_GBps > k.link_bytes / link_rate) {
        known += k.hbm_bytes * s / h.spec.hbm_GBps;
      } else if (h.effective_link_GBps() * h.fit.nccl_efficiency <= ctas * h.fit.nccl_per_cta_GBps) {
        row(kInvNcclLink) = k.link_bytes * s * (hw.effective_link_GBps() / h.effective_link_GBps());
      } else {
        row(kInvNcclPerCta) = k.link_bytes * s / ctas * (hw.fit.nccl_per_cta_GBps / h.fit.nccl_per_cta_GBps);
      }
      return known;
    }
    row(kTmaLaunch) = 1;
    int cta_col = kInvCopy;
    double base_rate = hw.fit.per_cta_copy_GBps, case_rate = h.fit.per_cta_copy_GBps;
    if (world > 1) {
      cta_col = algo == CommAlgo::kSimt ? kInvSimt : algo == CommAlgo::kTmaPull ? kInvPull : kInvPush;
      base_rate = per_cta_GBps(algo, hw);
      case_rate = per_cta_GBps(algo, h);
    }
    const double t_hbm = k.hbm_bytes / h.spec.hbm_GBps;
    const double t_cta = k.cta_bytes / (ctas * case_rate);
    const double t_link = k.link_bytes / h.effective_link_GBps();
    if (t_hbm >= t_cta && t_hbm >= t_link) {
      known += k.hbm_bytes * s / h.spec.hbm_GBps;
    } else if (t_cta >= t_link) {
      row(cta_col) = k.cta_bytes * s / ctas * (base_rate / case_rate);
    } else if (m.loopback) {
      known += k.link_bytes * s / h.effective_link_GBps();  // the loopback "link" is HBM
    } else {
      row(kInvLink) = k.link_bytes * s;
    }
    return known;
  }

  // The operator regime: the overlap cases' GEMM-alone times (counter t_gemm_us: the plan's GEMM on its SMs, timed
  // alone inside the overlap benchmark) against the model's gemm_alone_us for the same plan, which is
  // launch + operator_gemm_factor x compute (x chunks, decomposed) wherever the HBM floor does not bind. One factor
  // for every mode (cuBLAS and ours alike: a clock is the SMs', not a kernel's), so sequential and the overlapped
  // modes are ranked on one footing; the two kernels' own factors are noted for reference. gauss_newton on the
  // relative residuals (the model is linear in the factor where the HBM floor does not bind: a step or two).
  static constexpr double kRegimeLo = 0.25, kRegimeHi = 4.0;  // the factor's search range
  struct RegimeFit {
    double factor = 1;
    double rms = 0;
    int points = 0;
    bool informed = false;  // some case's GEMM time depends on the factor (not every case at its HBM floor)
  };
  RegimeFit solve_regime(const std::vector<std::pair<const Measurement*, double>>& ms) const {
    // Relative error of case i's GEMM-alone time under h; NaN for a case the model cannot run (left out).
    auto residual = [&](const Hardware& h, std::size_t i) {
      const auto& [m, t_gemm] = ms[i];
      try {
        const Hardware mh = measurement_hardware(*m, h);
        return (estimate(m->bench.problem(), m->bench.plan(mh), mh).gemm_alone_us - t_gemm) / t_gemm;
      } catch (const Error&) {
        return std::nan("");
      }
    };
    const std::array<FitParam, 1> param{
        {{"operator_gemm_factor", &ModelParams::operator_gemm_factor, kRegimeLo, kRegimeHi}}};
    Hardware start = hw;
    start.fit.operator_gemm_factor = std::clamp(hw.fit.operator_gemm_factor, kRegimeLo, kRegimeHi);
    const auto [fitted, informed] = gauss_newton(start, param, ms.size(), [&](const Hardware& h, std::size_t i) {
      const double e = residual(h, i);
      return std::isfinite(e) ? e : 0.0;
    });
    RegimeFit out;
    out.factor = fitted.fit.operator_gemm_factor;
    out.informed = informed[0] > 0;
    double ss = 0;
    for (std::size_t i = 0; i < ms.size(); ++i) {
      const double e = residual(fitted, i);
      if (!std::isfinite(e)) continue;
      ss += e * e;
      ++out.points;
    }
    out.rms = out.points ? std::sqrt(ss / out.points) : 0.0;
    return out;
  }

  void fit_operator_gemm(const std::vector<const Measurement*>& overlap) {
    if (overlap.empty()) return;
    std::vector<std::pair<const Measurement*, double>> all, cublas, ours;
    int sustained = 0;
    for (const Measurement* m : overlap) {
      const auto it = m->counters.find("t_gemm_us");
      if (it == m->counters.end() || !std::isfinite(it->second) || it->second <= 0) continue;
      // A case timed in bench_overlap's sustained regime (OVL_BENCH_SUSTAIN_MS > 0) measured its GEMM back to back
      // with itself, bench_gemm's regime, not the operator's: it says nothing of the factor.
      if (const auto s = m->counters.find("sustain_ms"); s != m->counters.end() && s->second > 0) {
        ++sustained;
        continue;
      }
      all.emplace_back(m, it->second);
      const bool runs_cublas = m->bench.mode == Mode::kSequential || m->bench.mode == Mode::kDecomposed;
      (runs_cublas ? cublas : ours).emplace_back(m, it->second);
    }
    if (sustained > 0)
      note(fmt::format("operator_gemm_factor: {} overlap cases timed in the sustained regime (sustain_ms > 0) left out",
                       sustained));
    if (all.empty()) {
      note("operator_gemm_factor held at the base value (no overlap case records a burst-timed t_gemm_us)");
      return;
    }
    const RegimeFit fit = solve_regime(all);
    if (fit.points == 0) return;
    if (!fit.informed) {
      note(
          "operator_gemm_factor held at the base value (every t_gemm_us case is at the model's HBM floor, which "
          "the factor does not scale)");
      return;
    }
    if (fit.factor == kRegimeLo || fit.factor == kRegimeHi)
      note(fmt::format("operator_gemm_factor stopped at its bound {} (the fit wants a value outside [{}, {}])",
                       fit.factor, kRegimeLo, kRegimeHi));
    const double base = hw.fit.operator_gemm_factor;
    if (!cublas.empty() && !ours.empty()) {
      const RegimeFit c = solve_regime(cublas), o = solve_regime(ours);
      note(
          fmt::format("operator_gemm_factor by kernel, for reference: cuBLAS {:.4f} ({} cases, RMS {:.2f}%), ours "
                      "{:.4f} ({} cases, RMS {:.2f}%)",
                      c.factor, c.points, 100 * c.rms, o.factor, o.points, 100 * o.rms));
    }
    hw.fit.operator_gemm_factor = fit.factor;
    record("operator_gemm_factor", base, fit.factor, fit.points, "overlap/t_gemm");
    out->parameters.back().rms_rel_error = fit.rms;
  }

  // overlap: Gauss-Newton on the relative residuals, numeric derivatives. Overlap cases inform the contention
  // weights, the communication kernels' per-CTA rates inside the overlapped modes as factors on the standalone rates
  // (NCCL's channels, and the TMA mover of the tma mode, which default_plan runs as tma-push) and, while the GEMM
  // runs, one more factor on both (beside_gemm_rate_factor), the mover's per-group
  // cost (tma_group_us), and the signaling modes' per-group gap of their NCCL calls (nccl_group_us). The standalone
  // rates stay as the comm fit left them.
  void fit_overlap(const std::vector<const Measurement*>& ms) {
    if (ms.empty()) return;
    const std::array<FitParam, 8> params = {
        {{"hbm_contention", &ModelParams::hbm_contention, 1e-3, 10.0},
         {"shared_sm_penalty", &ModelParams::shared_sm_penalty, 1e-3, 10.0},
         {"overlap_tma_rate_factor", &ModelParams::overlap_tma_rate_factor, 0.02, 4.0},
         {"overlap_nccl_rate_factor", &ModelParams::overlap_nccl_rate_factor, 0.02, 4.0},
         {"beside_gemm_rate_factor", &ModelParams::beside_gemm_rate_factor, 0.02, 4.0},
         {"tma_group_us", &ModelParams::tma_group_us, 1e-2, 100.0},
         {"nccl_group_us", &ModelParams::nccl_group_us, 1e-2, 100.0},
         {"loopback_piece_us", &ModelParams::loopback_piece_us, 1e-3, 20.0}}};
    const Hardware base = hw;
    // The per-call and per-group costs first, one at a time on a coarse grid (the base value among the points): from
    // the base alone Gauss-Newton stopped at nccl_group_us 0.2 us on paced-loopback data whose calls cost about 8 us
    // more than priced, with the contention terms bent to make up for it (docs/performance.md, "Prediction accuracy").
    for (double ModelParams::*field :
         {&ModelParams::nccl_group_us, &ModelParams::tma_group_us, &ModelParams::loopback_piece_us}) {
      const double start = hw.fit.*field;
      double best = start, best_rms = rms_rel(ms, hw);
      for (double v : {0.5, 1.0, 2.0, 4.0, 8.0, 16.0}) {
        hw.fit.*field = v;
        if (const double r = rms_rel(ms, hw); r < best_rms) best = v, best_rms = r;
      }
      hw.fit.*field = best;
    }
    const auto [fitted, informed] = gauss_newton(hw, params, ms.size(), [&](const Hardware& h, std::size_t i) {
      const auto pred = predict_us(ms[i]->bench, measurement_hardware(*ms[i], h));
      return pred ? (*pred - ms[i]->us) / ms[i]->us : 0.0;
    });
    hw = fitted;
    const double rms = rms_rel(ms, hw);
    for (std::size_t c = 0; c < params.size(); ++c) {
      const FitParam& p = params[c];
      if (informed[c] > 0) {
        record(p.name, base.fit.*(p.field), hw.fit.*(p.field), informed[c], "overlap");
        out->parameters.back().rms_rel_error = rms;
      } else {
        note(fmt::format("{} held at the base value (no overlap case is sensitive to it)", p.name));
      }
    }
  }
};

}  // namespace

std::string benchmark_files_gpu(const std::vector<nlohmann::json>& files, const std::vector<std::string>& names) {
  const auto name = [&](size_t f) {
    return f < names.size() ? fmt::format("\"{}\"", names[f]) : fmt::format("benchmark file {}", f);
  };
  std::string gpu;
  size_t first = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const nlohmann::json& doc = files[f];
    if (!doc.is_object() || !doc.contains("context") || !doc["context"].is_object()) continue;
    const auto it = doc["context"].find("gpu");
    if (it == doc["context"].end() || !it->is_string() || it->get<std::string>() == "none") continue;
    if (gpu.empty()) {
      gpu = it->get<std::string>();
      first = f;
    } else {
      OVL_CHECK(*it == gpu, "{} ran on \"{}\" and {} on \"{}\": calibrate or validate one GPU's measurements at a time",
                name(first), gpu, name(f), it->get<std::string>());
    }
  }
  return gpu;
}

Hardware calibration_base(const std::vector<nlohmann::json>& files, const std::vector<std::string>& names) {
  const std::string gpu = benchmark_files_gpu(files, names);
  if (gpu.empty()) return builtin_hardware("h200");
  try {
    return hardware_for_device_name(gpu);
  } catch (const Error& e) {
    OVL_FAIL("{}: give the profile to start the fit from (a built-in GPU name or a profile file)", e.message());
  }
}

std::vector<Measurement> read_measurements(const std::vector<nlohmann::json>& files, std::vector<std::string>* notes) {
  (void)benchmark_files_gpu(files);  // medians are pooled by name: never across GPUs
  struct Acc {
    Measurement m;
    std::vector<double> iterations;
    std::optional<double> median, mean;
  };
  std::map<std::string, Acc> by_name;
  std::vector<std::string> order;
  static const std::set<std::string> kStandard = {"name",
                                                  "run_name",
                                                  "run_type",
                                                  "repetitions",
                                                  "repetition_index",
                                                  "threads",
                                                  "iterations",
                                                  "real_time",
                                                  "cpu_time",
                                                  "time_unit",
                                                  "family_index",
                                                  "per_family_instance_index",
                                                  "aggregate_name",
                                                  "aggregate_unit",
                                                  "error_occurred",
                                                  "error_message",
                                                  "label"};
  for (size_t f = 0; f < files.size(); ++f) {
    const auto& doc = files[f];
    OVL_CHECK(doc.is_object() && doc.contains("benchmarks") && doc["benchmarks"].is_array(),
              "benchmark file {}: no \"benchmarks\" array (is it Google Benchmark JSON?)", f);
    // Loopback: the context's "world_backend" when it has one ("loopback": every case of more than one rank;
    // "threads" / "mpi": none), else fewer GPUs than ranks in the context.
    int gpus = 0;
    std::optional<LoopbackShare> share;
    std::optional<LinkProfile> link;
    std::optional<bool> loopback_backend;
    if (doc.contains("context") && doc["context"].is_object()) {
      const auto& ctx = doc["context"];
      if (ctx.contains("world_backend")) {
        const auto& v = ctx["world_backend"];
        const std::string backend = v.is_string() ? v.get<std::string>() : v.dump();
        OVL_CHECK(backend == "loopback" || backend == "threads" || backend == "mpi",
                  "benchmark file {}: context \"world_backend\" = {} is not loopback, threads or mpi", f, backend);
        loopback_backend = backend == "loopback";
      }
      if (ctx.contains("gpu_count")) {
        const auto& v = ctx["gpu_count"];
        if (v.is_number_integer()) gpus = v.get<int>();
        if (v.is_string()) gpus = std::atoi(v.get<std::string>().c_str());
      }
      if (ctx.contains("loopback_share") && ctx["loopback_share"].is_string())
        share = parse_loopback_share(ctx["loopback_share"].get<std::string>());
      if (ctx.contains("link_profile")) {
        // Google Benchmark's context holds strings: the profile's JSON as text (an object is read as well).
        const auto& v = ctx["link_profile"];
        const std::string what = fmt::format("benchmark file {}: context \"link_profile\"", f);
        const nlohmann::json profile = v.is_string() ? parse_json_document(v.get<std::string>(), what) : v;
        try {
          link = profile.get<LinkProfile>();
        } catch (const nlohmann::json::exception& e) {
          OVL_FAIL("{}: {}", what, e.what());
        } catch (const Error& e) {
          OVL_FAIL("{}: {}", what, e.message());
        }
      }
    }
    for (const auto& b : doc["benchmarks"]) {
      if (!b.is_object() || !b.contains("name") || !b["name"].is_string()) continue;
      const std::string name = b["name"].get<std::string>();
      if (b.contains("error_occurred") && b["error_occurred"].is_boolean() && b["error_occurred"].get<bool>()) {
        if (notes) notes->push_back(fmt::format("{}: skipped (the run reported an error)", name));
        continue;
      }
      std::string agg;
      if (b.contains("run_type") && b["run_type"] == "aggregate") {
        agg = b.contains("aggregate_name") && b["aggregate_name"].is_string() ? b["aggregate_name"].get<std::string>()
                                                                              : "";
        if (agg != "median" && agg != "mean") continue;
      }
      // bench_overlap's label: the problem and the plan the case ran (JSON); other labels are free text. A case the
      // name parser does not know (the sequential /algo: baselines) is read from its label alone.
      std::optional<BenchCase::Ran> ran;
      if (name.starts_with("overlap/") && b.contains("label") && b["label"].is_string()) {
        const std::string text = b["label"].get<std::string>();
        const nlohmann::json label = text.starts_with("{")
                                         ? parse_json_document(text, fmt::format("benchmark \"{}\"'s label", name))
                                         : nlohmann::json();
        if (label.is_object() && label.contains("problem") && label.contains("plan")) {
          try {
            ran = BenchCase::Ran{label["problem"].get<Problem>(), label["plan"].get<Plan>()};
          } catch (const std::exception& e) {
            OVL_FAIL("benchmark \"{}\": its label's problem or plan is malformed: {}", name, e.what());
          }
        }
      }
      auto bench = parse_bench_name(name);
      if (!bench && ran) bench = BenchCase::of_run(ran->problem, ran->plan);
      if (!bench) {
        if (notes && agg.empty()) notes->push_back(fmt::format("{}: not a name the model knows, skipped", name));
        continue;
      }
      if (bench->kind == BenchKind::kOverlap && ran) bench->ran = std::move(ran);
      OVL_CHECK(b.contains("real_time") && b["real_time"].is_number(),
                "benchmark \"{}\": field \"real_time\" is missing or not a number", name);
      const std::string unit =
          b.contains("time_unit") && b["time_unit"].is_string() ? b["time_unit"].get<std::string>() : "ns";
      double us = to_us(b["real_time"].get<double>(), unit, name);
      std::map<std::string, double> counters;
      for (const auto& [key, value] : b.items()) {
        if (value.is_number() && !kStandard.count(key)) counters[key] = value.get<double>();
      }
      // Counters the model takes as counts: whole numbers in range, or the file is damaged (a cast would be UB).
      for (const char* count : {"sk_tiles", "sk_splits", "half_tiles"}) {
        const auto it = counters.find(count);
        OVL_CHECK(
            it == counters.end() || (it->second >= 0 && it->second <= 1e7 && it->second == std::floor(it->second)),
            "benchmark \"{}\": counter \"{}\" = {} is not a tile count", name, count, it->second);
      }
      if (bench->kind == BenchKind::kGemm && counters.count("sk_tiles") && counters["sk_tiles"] > 0) {
        const double splits = counters.count("sk_splits") ? counters["sk_splits"] : 0.0;
        if (splits < 2) {  // the contiguous schedule
          if (notes && agg.empty())
            notes->push_back(
                fmt::format("{}: a contiguous stream-K plan (the model times split plans), skipped", name));
          continue;
        }
        bench->stream_k = TailPlan{int(counters["sk_tiles"]), int(splits)};
      }
      if (bench->kind == BenchKind::kGemm && counters.count("half_tiles") && counters["half_tiles"] > 0) {
        bench->stream_k = TailPlan{0, 0, int(counters["half_tiles"])};
      }
      if (counters.count("us")) us = counters["us"];  // per-operation time when a case times several per iteration
      // A GPU time below a nanosecond is a damaged file (its relative errors would overflow), not a measurement.
      OVL_CHECK(std::isfinite(us) && us >= 1e-3, "benchmark \"{}\": time {} us must be at least 0.001 (1 ns)", name,
                us);
      const bool communicates = bench->kind == BenchKind::kCollective || bench->kind == BenchKind::kOverlap;
      const bool loopback = communicates && bench->world > 1 &&
                            (loopback_backend ? *loopback_backend : gpus > 0 && gpus < bench->world);
      // A loopback case and a real one of the same name are different measurements: never merged.
      const std::string key = bench->name() + (loopback ? " (loopback)" : "");
      auto [it, inserted] = by_name.try_emplace(key);
      if (inserted) {
        order.push_back(key);
        it->second.m.bench = *bench;
        it->second.m.name = name;
        it->second.m.counters = counters;
        if (loopback)
          it->second.m.loopback = bench->kind == BenchKind::kOverlap && share ? *share : LoopbackShare::kWholeWorld;
        if (loopback ? it->second.m.loopback == LoopbackShare::kRank0 : communicates && bench->world > 1)
          it->second.m.link = link;
      }
      if (agg == "median")
        it->second.median = us;
      else if (agg == "mean")
        it->second.mean = us;
      else
        it->second.iterations.push_back(us);
    }
  }
  std::vector<Measurement> out;
  for (const auto& key : order) {
    Acc& a = by_name[key];
    a.m.us = a.median ? *a.median : a.mean ? *a.mean : median(a.iterations);
    out.push_back(std::move(a.m));
  }
  return out;
}

Hardware measurement_hardware(const Measurement& m, const Hardware& hw) {
  if (m.loopback) return loopback_hardware(hw, m.bench.world, *m.loopback, m.link);
  return m.link ? with_link(hw, *m.link) : hw;
}

std::optional<double> predict_us(const BenchCase& b, const Hardware& hw, std::string* why) {
  try {
    switch (b.kind) {
      case BenchKind::kGemm:
        if (b.sms > hw.spec.sm_count) {
          if (why) *why = fmt::format("sms = {} is more than the profile's {} SMs", b.sms, hw.spec.sm_count);
          return std::nullopt;
        }
        return estimate_gemm(shape_of(b), b.gemm_impl(), b.sms, TileShape{}, TileOrder::kSwizzle, hw,
                             GemmRegime::kSustained, b.stream_k)
            .us;
      case BenchKind::kCollective:
        return estimate_collective(b.collective, b.bytes, b.world, b.comm_algo(), b.ctas, hw).us;
      case BenchKind::kCopy:
        return estimate_copy(b.bytes, b.ctas, hw).us;
      case BenchKind::kOverlap:
        return estimate(b.problem(), b.plan(hw), hw).total_us;
    }
  } catch (const Error& e) {
    if (why) *why = e.message();
    return std::nullopt;
  }
  return std::nullopt;
}

CalibrationResult calibrate_measurements(const std::vector<Measurement>& measurements, const Hardware& base) {
  base.validate();
  OVL_CHECK(!measurements.empty(), "calibrate: no benchmark the model knows was found in the input");
  CalibrationResult result;
  result.measurements = int(measurements.size());
  std::vector<const Measurement*> ovl, cublas, comm, overlap;
  for (const auto& m : measurements) {
    switch (m.bench.kind) {
      case BenchKind::kGemm:
        if (m.bench.sms > base.spec.sm_count) {
          result.notes.push_back(
              fmt::format("{}: {} SMs exceed the profile's {}, skipped", m.name, m.bench.sms, base.spec.sm_count));
        } else if (m.bench.stream_k.tiles > 0 || m.bench.stream_k.half_tiles > 0) {
          result.notes.push_back(fmt::format("{}: a stream-K or half-tile plan, validated but not fitted", m.name));
        } else {
          (m.bench.gemm_impl() == GemmImpl::kCublas ? cublas : ovl).push_back(&m);
        }
        break;
      case BenchKind::kCollective:
        if (m.bench.world > 8) {
          result.notes.push_back(
              fmt::format("{}: world {} spans nodes, not used (one-node fit)", m.name, m.bench.world));
        } else {
          comm.push_back(&m);
        }
        break;
      case BenchKind::kCopy:
        comm.push_back(&m);
        break;
      case BenchKind::kOverlap:
        overlap.push_back(&m);
        break;
    }
  }
  Fitter fit{base, &result};
  std::vector<const Measurement*> gemm = ovl;
  gemm.insert(gemm.end(), cublas.begin(), cublas.end());
  fit.fit_gemm(gemm);
  fit.fit_comm(comm);
  fit.fit_operator_gemm(overlap);  // on the GEMM parameters just fitted; before the contention, which it shifts
  fit.fit_overlap(overlap);
  fit.hw.validate();
  result.hardware = base;  // the device's spec is the base's: a fit writes the model's parameters only
  result.hardware.fit = fit.hw.fit;
  return result;
}

CalibrationResult calibrate(const std::vector<nlohmann::json>& files, const Hardware& base) {
  std::vector<std::string> notes;
  const auto ms = read_measurements(files, &notes);
  CalibrationResult r = calibrate_measurements(ms, base);
  r.notes.insert(r.notes.begin(), notes.begin(), notes.end());
  return r;
}

std::string CalibrationResult::summary() const {
  std::string s = fmt::format("{:<26} {:>12} {:>12} {:>7} {:>9}  {}\n", "parameter", "base", "fitted", "points",
                              "rms err %", "subset");
  for (const auto& p : parameters) {
    s += fmt::format("{:<26} {:>12.5g} {:>12.5g} {:>7} {:>9.2f}  {}\n", p.name, p.base_value, p.value, p.points,
                     100.0 * p.rms_rel_error, p.subset);
  }
  for (const auto& n : notes) s += fmt::format("note: {}\n", n);
  return s;
}

ValidationReport validate_measurements(const std::vector<Measurement>& ms, const Hardware& hw,
                                       std::optional<BenchKind> kind) {
  hw.validate();
  ValidationReport r;
  std::map<std::string, std::pair<double, int>> sums;
  double total = 0;
  for (const auto& m : ms) {
    if (kind && m.bench.kind != *kind) continue;
    OVL_CHECK(std::isfinite(m.us) && m.us > 0, "validate: measurement \"{}\" has time {} us (not a positive time)",
              m.name, m.us);
    const auto p = predict_us(m.bench, measurement_hardware(m, hw));
    if (!p) {
      r.notes.push_back(fmt::format("{}: the model cannot run this case on {}", m.name, hw.name));
      continue;
    }
    ValidationCase c;
    c.name = m.name;
    c.kind = m.bench.kind;
    c.measured_us = m.us;
    c.predicted_us = *p;
    c.rel_error = (*p - m.us) / m.us;
    total += std::fabs(c.rel_error);
    auto& [sum, n] = sums[std::string(to_string(c.kind))];
    sum += std::fabs(c.rel_error);
    ++n;
    r.cases.push_back(std::move(c));
  }
  r.mape = r.cases.empty() ? 0.0 : 100.0 * total / double(r.cases.size());
  for (const auto& [k, v] : sums) r.mape_by_kind[k] = 100.0 * v.first / v.second;
  return r;
}

ValidationReport validate_benchmarks(const std::vector<nlohmann::json>& files, const Hardware& hw,
                                     std::optional<BenchKind> kind) {
  OVL_CHECK(!files.empty(), "validate: no measurement files given");
  std::vector<std::string> notes;
  const auto ms = read_measurements(files, &notes);
  ValidationReport r = validate_measurements(ms, hw, kind);
  r.notes.insert(r.notes.begin(), notes.begin(), notes.end());
  return r;
}

std::string ValidationReport::summary() const {
  std::string s = fmt::format("{:<60} {:>12} {:>12} {:>8}\n", "case", "measured us", "model us", "error %");
  for (const auto& c : cases) {
    s += fmt::format("{:<60} {:>12.2f} {:>12.2f} {:>+8.2f}\n", c.name, c.measured_us, c.predicted_us,
                     100.0 * c.rel_error);
  }
  for (const auto& [k, v] : mape_by_kind) s += fmt::format("MAPE {}: {:.2f}%\n", k, v);
  s += fmt::format("MAPE all: {:.2f}% over {} cases\n", mape, cases.size());
  for (const auto& n : notes) s += fmt::format("note: {}\n", n);
  return s;
}

}  // namespace ovl
