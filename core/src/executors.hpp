// The executors: one type per way of running a call. The Context validates a call, picks the executor from its plan
// (Context::Impl::executor_for) and hands the call to it; each executor owns the streams, flags, counters and
// per-shape buffers only it uses, made on first use, and reaches what several share through Resources.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ovl/core/collectives.hpp"
#include "resources.hpp"

namespace ovl::detail {

class Executor {
 public:
  explicit Executor(Resources& res) : res_(res) {}
  virtual ~Executor() = default;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Sets the call's buffers (Call::partial, out, rows, gathered), making them on first use: by default
  // Resources::bind_buffers (the shape's, or nccl-symmetric's windows).
  virtual void bind(Call& call) { res_.bind_buffers(call); }
  // Enqueues the call (bound) on the caller's stream and the executor's streams, then joins them into the caller's.
  virtual void run(const Call& call) = 0;
  // Frees the buffers kept per shape (Context::release_caches, with the device idle; collective where they are
  // peer-mapped).
  virtual void release_shapes() {}

 protected:
  Resources& res_;
};

// Mode sequential (executor_sequential.cpp).
class SequentialExecutor final : public Executor {
 public:
  using Executor::Executor;
  void run(const Call& call) override;
};
// The sequential flow on the call's stream: cuBLAS on the whole device, then `collective(stream)` (AG+GEMM: the
// collective, then cuBLAS on the gathered A), each part only where the call runs it (Call::runs_gemm, runs_comm).
// SequentialExecutor passes Resources::collective_unit, TmaExecutor a real world's TMA collective.
void run_sequential(Resources& r, const Call& call, const std::function<void(cudaStream_t)>& collective);

// Mode decomposed (executor_decomposed.cpp).
class DecomposedExecutor final : public Executor {
 public:
  using Executor::Executor;
  void run(const Call& call) override;
};

// Modes tile-signal and green-context with NCCL or the loopback collective (executor_tile_signal.cpp).
class SignaledExecutor final : public Executor {
 public:
  using Executor::Executor;
  void run(const Call& call) override;
  void release_shapes() override { tile_major_.clear(); }

 private:
  // AG+GEMM: each group's gather, then its counter released, on the communication stream; the GEMM (one launch)
  // waits per tile for its group's counter.
  void run_gather(const Call& call, const Resources::SignaledLaunch& launch);
  std::map<std::string, DeviceBuffer> tile_major_;  // by problem name: the GEMM's tile-major output
};

// Mode tma (executor_tma.cpp).
class TmaExecutor final : public Executor {
 public:
  using Executor::Executor;
  // A real world of more than one rank: the GEMM writes the shape's `partial` and the collective its `out` (below).
  void bind(Call& call) override;
  void run(const Call& call) override;
  void release_shapes() override { shapes_.clear(); }
  // This rank's copy of the shape's `out`, made on first use (Context::symmetric_output).
  void* symmetric_output(const Problem& p);
  // Synchronizes `stream` and returns the failure the World's collective recorded (then cleared), or "".
  std::string collective_failure(cudaStream_t stream);

 private:
  // Buffers of one shape in a real world of more than one rank: `partial`, the GEMM's output (M x N; AG+GEMM: this
  // rank's rows of A, M/W x K) and `out`, the collective's destination (RS: M/W x N, AR: M x N; AG+GEMM: the gathered
  // A, M x K), peer-mapped on every rank and made (collectively) by the first call of the shape; and per plan, by
  // the groups' row ends (all the table depends on), (group, owner) -> rows of them.
  struct RealShape {
    SymmetricBuffer partial, out;
    std::map<std::vector<int64_t>, RangeTable> ranges;
  };
  RealShape& real_shape(const Problem& p);  // partial and out made on first use
  // Bytes of a real shape's `partial` (out = false) or `out`; AG+GEMM: this rank's rows of A, the gathered A.
  size_t real_bytes(const Problem& p, bool out) const;
  // The call in a real world of more than one rank: the GEMM into `partial`, the World's TMA collective gated by
  // the symmetric counters into `out`, then `out` copied to C (AG+GEMM: the gather releasing each group's counter to
  // the GEMM, which waits for it per tile).
  void run_real(const Call& call, const Resources::SignaledLaunch& launch);
  // Mode sequential with tma-push there (Context::Impl::executor_for): cuBLAS on the whole device, then the same
  // collective ungated on the call's stream (AG+GEMM: the gather, then cuBLAS on the gathered A).
  void run_real_sequential(const Call& call);
  // The (group, owner) rows of the call's units, made on first use per plan.
  const RangeTable& range_table(const Call& call, RealShape& rs);
  // GEMM+AR / GEMM+RS: `out` zeroed, `partial` reduced into it (gated by `gate` when not null), copied to C.
  void reduce_real(const Call& call, RealShape& rs, const RangeTable& table, CollectiveOptions o, cudaStream_t stream,
                   const GroupGate* gate);
  // AG+GEMM: this rank's rows into `partial`, pushed to every rank's `out` (releasing `release` when not null).
  void gather_real(const Call& call, RealShape& rs, const RangeTable& table, const CollectiveOptions& o,
                   cudaStream_t stream, const GroupRelease* release);
  std::unique_ptr<Collectives> coll_;        // the World's collectives, made by the first real-world call
  std::map<std::string, RealShape> shapes_;  // by problem name
};

// comm_algo ce in mode tile-signal (executor_ce.cpp).
class CopyEngineExecutor final : public Executor {
 public:
  using Executor::Executor;
  ~CopyEngineExecutor() override;
  // A real world of more than one rank: AG+GEMM's gathered A is the shape's peer-mapped one (below).
  void bind(Call& call) override;
  void run(const Call& call) override;
  void release_shapes() override { shapes_.clear(); }
  // The host-side watchdog of the waits (stream memory waits cannot time out): waits up to the context's timeout
  // for the communication stream; past it, reads every recorded gate, writes the awaited value into each one not
  // reached (cuStreamWriteValue32 on its own stream), waits for the stream to drain and returns what was missing
  // ("" when the stream finished in time). Clears the recorded gates either way.
  std::string watchdog();

 private:
  static constexpr int kFlagWords = 2 * Resources::kMaxGroups * kernels::kMaxLoopbackRanks + kernels::kMaxLoopbackRanks;
  // Buffers of one shape. Loopback and a world of 1: every owner's receive slots, [owner][source][slot]. A real
  // world of more than one rank (peer-mapped, made collectively by the first call of the shape): this rank's receive
  // slots [source][slot], the AllReduce result (M x N) and the gathered A (M x K).
  struct Shape {
    DeviceBuffer recv;
    SymmetricBuffer recv_sym, out_sym, gathered_sym;
  };
  Shape& shape(const Call& call);  // and the flags, made on first use
  // What a gate waits for, kept as numbers: the message is formatted only when the watchdog reports it, not on every
  // call's enqueue.
  struct Gate {
    enum class What { kStart, kRows, kRowsFor, kCounter, kSummedRows, kSummedGroupRows };
    const unsigned* addr;
    unsigned value;
    What what;
    int rank = -1, group = -1, for_rank = -1;  // the source rank, the tile group and the receiving rank, as used
    std::string describe() const;
  };
  // Arrival flags, written with the call's epoch (a per-context sequence number of ce calls, so nothing is ever reset)
  // and waited for with cuStreamWaitValue32 (GEQ). Loopback and a world of 1: one flag array per played owner
  // (kMaxLoopbackRanks of them); a real world: this rank's array, peer-mapped.
  DeviceBuffer flags_;
  SymmetricBuffer flags_sym_;
  std::uint32_t epoch_ = 0;
  bool flush_ = false;  // the device supports CU_STREAM_WAIT_VALUE_FLUSH (waits on flags peers write)
  // Every stream memory wait of the calls enqueued since the communication stream was last seen idle: what the
  // watchdog checks and, past the timeout, releases.
  std::vector<Gate> gates_;
  cudaStream_t watchdog_stream_ = nullptr;  // non-blocking, highest priority: the watchdog's reads and releases
  std::map<std::string, Shape> shapes_;     // by problem name
};

}  // namespace ovl::detail
