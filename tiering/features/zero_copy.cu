// The one-launch gather over GPU and zero-copy host memory (tiering.features.zero_copy loads this file and compiles
// it with NVRTC at first use; its docstring says what the kernel does).  The addressing, which bytes of a row each
// lane of a warp reads in each step, is defined in tiering/features/addressing.py and re-stated here in C++;
// tests/tiering/features/test_zero_copy_kernel.py compiles this file with nvcc on the host and checks every lane's
// copy against the Python definition, constants included.

constexpr int NAIVE = 0;  // the variants, in the order of tiering.features.addressing.VARIANTS
constexpr int ALIGNED = 1;
constexpr int WIDE = 2;
constexpr int WARP = 32;   // lanes of a warp: a step copies WARP units
constexpr int LINE = 128;  // bytes of a cache line: the PCIe request the circular shift aligns steps to
constexpr int SECTOR = 32;  // bytes of a sector: what a request fetches at the least
constexpr int UNROLL = 4;  // the wide variant's loads in flight per lane

// The unit in bytes a row is copied with: the widest that divides both addresses and the row size (16 bytes for
// the wide variant only).
template <int VARIANT>
__host__ __device__ __forceinline__ int copy_unit(const unsigned char* src, const unsigned char* dst, long long row_bytes)
{
    const unsigned long long bits =
        (unsigned long long)src | (unsigned long long)dst | (unsigned long long)row_bytes;
    if (VARIANT == WIDE && (bits & 15ULL) == 0) return 16;
    return (bits & 3ULL) == 0 ? 4 : 2;
}

// The circular shift (PyTorch-Direct §3.2.1) in units: from the 128-byte line at or before src (the 64-byte half
// line for 2-byte units, whose steps span 64 bytes) to src; 0 for the naive variant.
template <int VARIANT, int UNIT>
__host__ __device__ __forceinline__ int circular_shift(const unsigned char* src)
{
    constexpr int window = WARP * UNIT < LINE ? WARP * UNIT : LINE;
    return VARIANT == NAIVE ? 0 : (int)((unsigned long long)src % window) / UNIT;
}

// Warp step s: lane k copies unit WARP s - shift + k where it falls in [0, units).
template <typename Unit>
__host__ __device__ __forceinline__ void copy_row(const unsigned char* src, unsigned char* dst, int units, int shift,
                                                  int lane)
{
    const Unit* from = reinterpret_cast<const Unit*>(src);
    Unit* to = reinterpret_cast<Unit*>(dst);
    for (int base = -shift; base < units; base += WARP) {
        const int j = base + lane;
        if (j >= 0 && j < units) to[j] = from[j];
    }
}

// 16-byte units, UNROLL loads in flight per lane before the stores: iteration t issues the steps
// UNROLL t .. UNROLL t + UNROLL - 1 of copy_row's pattern.
__host__ __device__ __forceinline__ void copy_row_wide(const unsigned char* src, unsigned char* dst, int units,
                                                       int shift, int lane)
{
    const uint4* from = reinterpret_cast<const uint4*>(src);
    uint4* to = reinterpret_cast<uint4*>(dst);
    for (int base = -shift; base < units; base += WARP * UNROLL) {
        uint4 staged[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int j = base + WARP * u + lane;
            if (j >= 0 && j < units) staged[u] = from[j];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int j = base + WARP * u + lane;
            if (j >= 0 && j < units) to[j] = staged[u];
        }
    }
}

// Lane `lane`'s share of copying one row of row_bytes bytes from src to dst.
template <int VARIANT>
__host__ __device__ __forceinline__ void copy_row_lane(const unsigned char* src, unsigned char* dst, long long row_bytes,
                                                       int lane)
{
    const int unit = copy_unit<VARIANT>(src, dst, row_bytes);
    if (unit == 16) {
        copy_row_wide(src, dst, (int)(row_bytes >> 4), circular_shift<VARIANT, 16>(src), lane);
    } else if (unit == 4) {
        copy_row<unsigned int>(src, dst, (int)(row_bytes >> 2), circular_shift<VARIANT, 4>(src), lane);
    } else {
        copy_row<unsigned short>(src, dst, (int)(row_bytes >> 1), circular_shift<VARIANT, 2>(src), lane);
    }
}

// The unit-byte blocks [start, end) overlaps (0 when it is empty).
__host__ __device__ __forceinline__ long long span(unsigned long long start, unsigned long long end, int unit)
{
    return end > start ? (long long)((end + unit - 1) / unit - start / unit) : 0;
}

// The traffic model (tiering.features.traffic) of copying one row from src by copy_row_lane: the payload (the
// 32-byte sectors its steps touch) and the requests (the 128-byte lines they touch; with the circular shift, the
// lines or 64-byte half lines the row overlaps, as the steps start on them) added to payload and requests.
template <int VARIANT>
__host__ __device__ __forceinline__ void row_traffic(const unsigned char* src, const unsigned char* dst,
                                                     long long row_bytes, long long& payload, long long& requests)
{
    const int unit = copy_unit<VARIANT>(src, dst, row_bytes);
    const unsigned long long start = (unsigned long long)src;
    const unsigned long long end = start + (unsigned long long)row_bytes;
    if constexpr (VARIANT != NAIVE) {
        payload += span(start, end, SECTOR) * SECTOR;
        requests += span(start, end, WARP * unit < LINE ? WARP * unit : LINE);
    } else {
        for (unsigned long long step = start; step < end; step += WARP * unit) {  // steps from the row's start
            const unsigned long long step_end = step + WARP * unit < end ? step + WARP * unit : end;
            payload += span(step, step_end, SECTOR) * SECTOR;
            requests += span(step, step_end, LINE);
        }
    }
}

// COUNT: counters are three int64 on the device to which the launch adds the rows read from a GPU tier, and the
// payload bytes and requests of those read from the host (row_traffic), one atomic add of each per warp; without
// it they are not read, and the counting is compiled out (it costs the copy registers).
template <int VARIANT, bool COUNT>
__global__ void gather_rows(
    const unsigned char* const* __restrict__ gpu_tiers, const unsigned char* __restrict__ host,
    const long long* __restrict__ ids, unsigned char* __restrict__ out, long long num_ids, long long num_rows,
    long long replicated, long long host_start, long long host_from, int gpus, int rank, long long row_bytes,
    unsigned long long* __restrict__ counters)
{
    static_assert(VARIANT == NAIVE || VARIANT == ALIGNED || VARIANT == WIDE, "one of the variants");
    const int lane = threadIdx.x % WARP;
    const long long warps_per_block = blockDim.x / WARP;
    const long long first = (long long)blockIdx.x * warps_per_block + threadIdx.x / WARP;
    const long long stride = (long long)gridDim.x * warps_per_block;
    long long hits = 0, payload = 0, requests = 0;
    for (long long i = first; i < num_ids; i += stride) {
        const long long row = ids[i];
        if (row < 0 || row >= num_rows) continue;  // checked on the host; never read past a mapping
        const unsigned char* src;
        bool from_host = false;
        if (row < replicated) {
            src = gpu_tiers[rank] + row * row_bytes;
        } else if (row < host_start) {
            const long long shifted = row - replicated;
            const unsigned char* owner = gpu_tiers[shifted % gpus];  // null: out of reach, read the host copy
            from_host = owner == nullptr;
            src = owner != nullptr ? owner + (replicated + shifted / gpus) * row_bytes
                                   : host + (row - host_from) * row_bytes;
        } else {
            src = host + (row - host_from) * row_bytes;
            from_host = true;
        }
        unsigned char* dst = out + i * row_bytes;
        if constexpr (COUNT) {
            if (from_host) {
                row_traffic<VARIANT>(src, dst, row_bytes, payload, requests);
            } else {
                ++hits;
            }
        }
        copy_row_lane<VARIANT>(src, dst, row_bytes, lane);
    }
    if constexpr (COUNT) {
        if (lane == 0 && (hits | payload | requests) != 0) {
            atomicAdd(counters, (unsigned long long)hits);
            atomicAdd(counters + 1, (unsigned long long)payload);
            atomicAdd(counters + 2, (unsigned long long)requests);
        }
    }
}
