// The Hopper GEMM that signals finished tiles: D = A x B (bf16 or fp16 in, fp32 accumulation, same type out), or
// FP8 in (e4m3 x e4m3, e4m3 x e5m2) with per-tensor scales, D = scale_a scale_b (A x B) in bf16 or fp16.
//
// A persistent, warp-specialized sm_90a kernel (TMA loads, wgmma, one producer and two consumer warpgroups). Its
// grid is `sm_count` CTAs (fewer when there is less work), so it fills a green-context partition of that many SMs
// and no more. The CTAs take tiles in a visiting order (row bands, an L2 swizzle or an explicit permutation), the
// last ones possibly in k-pieces (stream-K, below); after each tile is stored, one
// thread adds 1 with release semantics at system scope to the counter of the tile's group, so a consumer on this or
// another GPU that acquires `counter == group size` may read the group's output. The other direction, for an
// AllGather before the GEMM: with `wait_counters`, a CTA waits for its tile's group counter before it loads the tile,
// so A's rows may still be arriving while the GEMM runs.
//
// Usage:
//   GemmArguments args{...};
//   if (auto why = gemm_can_implement(args); !why.empty()) ...;
//   workspace = device buffer of gemm_workspace_bytes(args) bytes (may be 0: then nullptr is fine);
//   gemm_run(args, workspace, stream);
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "ovl/kernels/device_error.hpp"
#include "ovl/types.hpp"

namespace ovl::kernels {

// Element types are ovl::DType (ovl/types.hpp): kBF16, kFP16: A, B and D all of the type. kE4M3: FP8 A (and B, D as
// GemmArguments::b_dtype, out_dtype say). kE5M2: FP8, for B only (GemmArguments::b_dtype). kFP32 is refused.
// B's layout, the tile order and the output layout are ovl::BLayout, ovl::TileOrder and ovl::OutputLayout
// (ovl/types.hpp). Here kSwizzle visits bands of GemmArguments::swizzle tile rows; kExplicit visits
// `explicit_order[position]` at each position; kTileMajor: tile t (t = tile_row * tiles_n + tile_col) occupies
// elements [t * tile_m * tile_n, (t + 1) * tile_m * tile_n) of D, row-major inside the tile with row length tile_n.
// Edge tiles keep the full slot; the part outside M x N is written with zeros. D then needs gemm_output_bytes()
// bytes, which is more than M * N elements when M or N is not a multiple of the tile.

// How finished tiles reach D. kTmaStore: the consumers write the converted tile into shared memory (stmatrix) and
// go on to the next tile while one thread stores it with TMA (3-stage ring). kTmaStoreSplit: kTmaStore through a half-tile buffer,
// which leaves room for a 4-stage ring; the consumers stage columns 0 .. 127 at the end of a tile and columns
// 128 .. 255 while the next tile's first k-block runs on the tensor cores (the same bits as kTmaStore;
// a tile's signal comes after its second half is stored; measured 0.996x kTmaStore over all rows on the H200, but
// about 1% faster on short GEMMs: ovl::choose_split_epilogue picks it there for K-major B; docs/kernels.md). kTmaStoreDeferred: kTmaStore (3 stages, a
// whole-tile buffer) with all of a tile's stmatrix stores moved behind the next tile's first k-block: the consumers
// only convert the accumulators into packed registers before issuing it (the same bits; a tile's signal comes about one
// k-block later). Measured 0.5-2% faster than kTmaStore on 16384x8192x1024 and level on the long
// GEMMs (docs/kernels.md); ovl::tune_gemm picks it where it does not pick kTmaStoreSplit. kAuto:
// kTmaStore. The values are recorded in benchmark JSON (bench_gemm's `epilogue`); 2 was an epilogue storing from
// registers, removed after it measured 0.92x kTmaStore (docs/performance.md, "Tried and not kept").
enum class GemmEpilogue { kAuto = 0, kTmaStore = 1, kTmaStoreSplit = 3, kTmaStoreDeferred = 4 };

// Stream-K for the last tiles (the staged epilogues, kTmaStore, kTmaStoreSplit and kTmaStoreDeferred, only). When the
// tile count is not a multiple of the grid, the last round of whole tiles leaves SMs idle. Stream-K cuts the last
// `stream_k_tiles` positions of the order into pieces along K, which the CTAs take after their whole tiles. Each
// piece's fp32 partial goes to the workspace, and the piece that finishes last sums the tile's pieces in piece order
// (so a given plan gives the same bits every run), then stores, stamps and signals the tile like any other. No CTA
// waits for another. Two schedules:
// - split (stream_k_splits >= 2): each tile in that many equal k ranges, dealt round-robin over the whole grid,
//   piece 0 of every tile first, so CTAs running at the same time read the same k range of neighbouring tiles (L2
//   reuse as for whole tiles);
// - contiguous (stream_k_splits = 0, classic stream-K): the tiles' k-block iterations in one line, cut evenly over
//   `stream_k_ctas` CTAs; a CTA's share runs across tile ends, so CTAs running at the same time read unrelated k
//   ranges (measured slower on the H200, docs/performance.md).
// Splitting changes the fp32 summation order, so results with and without stream-K (or with different plans) differ
// by rounding. The kernel takes the plan it is given (stream_k_tiles = 0: off, the default); ovl::choose_stream_k
// (ovl/model/estimate.hpp) picks split plans from a cost model.
struct GemmStreamKPlan {
  int tiles = 0;       // 0: off
  int splits = 0;      // split schedule: pieces per tile; 0: contiguous
  int ctas = 0;        // contiguous schedule: CTAs that share the tiles' iterations
  int max_pieces = 0;  // most pieces any of the tiles is cut into (workspace slots per tile)
};

struct GemmTileShape {
  int m, n, k;
};

// The CTA tile the kernel uses for A of type `dtype`: 128 x 256 x 64 (bf16, fp16) or 128 x 256 x 128 (FP8); k is
// the elements of one k-block (128 bytes of a row either way, so a k-block costs the same time on the tensor cores at
// FP8's doubled rate). Planners count tiles and k-blocks with it.
GemmTileShape gemm_tile_shape(DType dtype = DType::kBF16);

struct GemmArguments {
  int m = 0, n = 0, k = 0;
  // Element types. bf16/fp16: A, B and D are all of `dtype`, and b_dtype, out_dtype are ignored. FP8 (dtype = kE4M3):
  // A is e4m3, B b_dtype (kE4M3 or kE5M2), D out_dtype (kBF16 or kFP16); fp32 accumulation, and D = a_scale[0] *
  // b_scale[0] * (A x B). FP8 needs B N x K (kNxK: wgmma reads FP8 operands K-major only), K a multiple of 16 (16-byte
  // rows); everything else (tile orders, stream-K, half tiles,
  // signals, waits) is as for bf16.
  DType dtype = DType::kBF16;
  DType b_dtype = DType::kE4M3;    // FP8 only
  DType out_dtype = DType::kBF16;  // FP8 only
  // FP8 only (required there, null otherwise): device pointers to one float each, 4-byte aligned, read by the kernel
  // (so a scale computed by an earlier kernel on the stream needs no host round trip).
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
  BLayout b_layout = BLayout::kNxK;
  const void* a = nullptr;  // M x K row-major, 16-byte aligned
  const void* b = nullptr;  // K x N or N x K row-major, 16-byte aligned
  void* d = nullptr;        // output, 16-byte aligned
  OutputLayout output_layout = OutputLayout::kRowMajor;
  TileOrder tile_order = TileOrder::kRowBand;
  int swizzle = 8;                      // kSwizzle: tile rows per band
  const int* explicit_order = nullptr;  // kExplicit: device array, a permutation of [0, tiles); not checked
  // Signals. Tiles are numbered by their position in the visiting order; group g covers the next tile_groups[g].
  std::vector<int> tile_groups;            // empty: no signals. Sum must equal the tile count.
  unsigned int* group_counters = nullptr;  // tile_groups.size() counters (local or peer-mapped); +1 per tile
  // Waits (AllGather before the GEMM): tile_groups.size() counters, local or peer-mapped; nullptr: no waits. Before
  // the first load of a tile, the CTA's load thread waits until wait_counters[g] >= wait_value for the tile's group
  // g (acquire, system scope), once per run of tiles of the same group. So the rows of A that group g's tiles read
  // may be written while the GEMM runs (by a gather on another stream, a copy engine or a peer GPU), as long as the
  // writer moves the counter with release semantics after them and has SMs of its own (the GEMM's CTAs wait in
  // place: a writer that needs their SMs never runs). A wait over wait_timeout_ns gives up: the first one records
  // itself in *wait_error (WaitKind::kGatheredRows, the group, observed and expected values), every later wait that
  // finds a code there (in this launch, or in a later one given the same word) gives up at once, and the GEMM finishes
  // on whatever A holds. The caller zeroes *wait_error before the run, reads it after, and treats the output as invalid
  // when its code is not 0. May be combined with group_counters (both follow tile_groups).
  const unsigned int* wait_counters = nullptr;
  unsigned int wait_value = 1;
  unsigned long long wait_timeout_ns = 10'000'000'000ull;  // 10 s
  DeviceError* wait_error = nullptr;                       // required with wait_counters; device-visible
  unsigned long long* tile_timestamps = nullptr;  // optional, indexed by tile id: %globaltimer (ns) at the signal
  // Optional, one per CTA of the grid (min(sm_count, units of work) <= sm_count entries; size it sm_count):
  // %globaltimer (ns) when the CTA started, before its set-up. With tile_timestamps it splits a measured timeline
  // into launch, first tile and steady tiles. Not a signal: it changes nothing else. With programmatic_launch after
  // a kernel that lets it launch early (another of these GEMMs), a CTA may start before that kernel ends, and its
  // first tile then includes the wait for it.
  unsigned long long* cta_timestamps = nullptr;
  int sm_count = 0;  // persistent grid size: the SMs the kernel is given (e.g. a green-context partition)
  GemmEpilogue epilogue = GemmEpilogue::kAuto;
  int stream_k_tiles = 0;   // 0: off (the other two are then ignored); else 1 .. tile count
  int stream_k_splits = 0;  // 2 .. k-blocks (split schedule), or 0 (contiguous, with stream_k_ctas)
  int stream_k_ctas = 0;    // contiguous only: 1 .. sm_count, at most half the tiles' k-block iterations
  // Half tiles (a staged epilogue: kTmaStore, kTmaStoreSplit, kTmaStoreDeferred; not with stream-K): the last
  // `half_tiles` positions of the order run as two 128 x 128 units each, the left and the right half of the tile, after
  // the whole tiles. When the last round of whole tiles would fill at most half the grid, its tiles in halves fill
  // twice the SMs for about half the time, with no partial sums: the bits are those of whole tiles. A tile's second
  // half to be stored stamps and signals it.
  int half_tiles = 0;  // 0: off; else 1 .. tile count
  // Programmatic dependent launch. true: launched with cudaLaunchAttributeProgrammaticStreamSerialization, so the
  // CTAs may become resident and set up (shared-memory barriers, tensor-map prefetch) while the previous kernel on the
  // stream finishes; every thread waits for that kernel's completion and memory flush (griddepcontrol.wait) before
  // its first global-memory access. So it is safe after any kernel launched plainly, or launched likewise and waiting
  // on its own predecessor (the wait covers only the kernel right before this one). Each CTA lets the next kernel on
  // the stream launch early (griddepcontrol.launch_dependents) once it has issued its last load; a next kernel
  // launched without the attribute, or one that waits likewise, is unaffected. false: a plain launch.
  bool programmatic_launch = true;
};

// "" when the arguments can run, else a message naming the bad value. Touches no device.
std::string gemm_can_implement(const GemmArguments& args);

// The stream-K plan gemm_run will run for these arguments, with the pieces per tile it implies (tiles = 0: off, or
// stream-K fields gemm_can_implement refuses; the other arguments are not checked here). Touches no device.
GemmStreamKPlan gemm_stream_k_plan(const GemmArguments& args);

// Device workspace gemm_run needs: for more than kGemmMaxInlineGroups groups one int per tile (the position -> group
// map, filled by gemm_run with cudaMemcpyAsync; fewer groups travel in the kernel's parameters); with stream-K one
// 8-byte counter per stream-K tile and max_pieces fp32 tiles (128 KB each) per stream-K tile; with half tiles, one
// 8-byte counter per half-split tile. The counters need no zeroing (each launch tags its counts with a number of its
// own, and the last arrival clears them, so a CUDA graph replays correctly). 0 when none applies (then nullptr is
// fine); else 16-byte aligned (cudaMalloc's is). A workspace serves one gemm_run at a time: two GEMMs that may run at
// once (other streams) need two. gemm_run can be captured into a CUDA graph, except with more than
// kGemmMaxInlineGroups groups (it then uploads a map from host memory, and refuses while the stream is capturing).
inline constexpr int kGemmMaxInlineGroups = 256;
size_t gemm_workspace_bytes(const GemmArguments& args);

// Bytes D must hold: M * N elements row-major, tiles * tile_m * tile_n elements tile-major (2 bytes each: D is bf16 or
// fp16, also for FP8 inputs).
size_t gemm_output_bytes(const GemmArguments& args);

// Number of tiles (ceil(M / tile_m) * ceil(N / tile_n)).
int gemm_tile_count(const GemmArguments& args);

// What gemm_run launches for these arguments: the kernel instantiation (epilogue, B layout), the grid and
// the shared memory. gemm_run launches from this very plan, so a test of the plan is a test of what runs, and a
// user can log it (with what the arguments say directly: half_tiles, programmatic_launch). Throws ovl::Error with the
// can_implement message on arguments gemm_run would refuse. Touches no device.
struct GemmLaunchPlan {
  GemmEpilogue epilogue = GemmEpilogue::kTmaStore;  // the one that runs: kAuto resolved (to kTmaStore)
  int grid = 0;        // CTAs launched (at most sm_count)
  int threads = 0;     // per CTA: a producer and two consumer warpgroups
  int stages = 0;      // shared-memory ring stages of A and B k-blocks
  int smem_bytes = 0;  // dynamic shared memory per CTA
  // MN-major B (kKxN) whose N is a multiple of 64, with whole tiles to run: a whole tile's stage of B is
  // one 3-D TMA box of four 64-column chunks (measured 0.7% faster than four 2-D boxes on the H200,
  // docs/kernels.md); else four 2-D boxes (half tiles: two). K-major B: one 2-D box (false).
  bool b_single_box = false;
  GemmStreamKPlan stream_k;  // gemm_stream_k_plan(args)
};
GemmLaunchPlan gemm_launch_plan(const GemmArguments& args);

// Enqueues the GEMM on `stream` (of the current device). Throws ovl::Error on bad arguments (the can_implement
// message), on a device that is not compute capability 9.0, and on launch errors. Allocates nothing. The caller
// zeroes the group counters before the run (a counter's final value is its start value + its group's tile count).
void gemm_run(const GemmArguments& args, void* workspace, cudaStream_t stream);

}  // namespace ovl::kernels
