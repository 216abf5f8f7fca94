// The fused GPU neighbour sampler's kernels in CUDA C++, launched through CuPy (tiering.sampling.fused_cupy loads
// this file and compiles it with NVRTC at first use).  They are the numba-cuda kernels of
// tiering/sampling/fused_kernels.py stated again, argument for argument, with the same integer arithmetic: the
// launches of a hop and the hash table are explained in tiering/sampling/fused.py.  Each array argument is passed as
// its address and its number of elements, in that order.
//
// Compiled for the host (the tests), each kernel runs one thread at a time: the file that includes this one defines
// thread_index() and thread_count(), and the atomics below are plain reads and writes, so the tests run the whole
// sampler over these kernels and compare its minibatches with the CPU sampler's.

typedef long long i64;
typedef unsigned long long u64;

#ifdef __CUDACC__
__device__ __forceinline__ i64 thread_index() { return (i64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ i64 thread_count() { return (i64)gridDim.x * blockDim.x; }
#else
#define __global__
#define __device__
#define __forceinline__ inline
i64 thread_index();
i64 thread_count();
#endif

constexpr i64 EMPTY = -1;                          // a free slot's key; node ids are non-negative
constexpr i64 NO_POSITION = 9223372036854775807LL;  // a free slot's position: above every position

// SplitMix64 and the uniform double of tiering.rng, bit for bit.
constexpr u64 GOLDEN = 0x9E3779B97F4A7C15ULL;
constexpr u64 MIX1 = 0xBF58476D1CE4E5B9ULL;
constexpr u64 MIX2 = 0x94D049BB133111EBULL;

__device__ __forceinline__ u64 splitmix64(u64 x)
{
    u64 z = x + GOLDEN;
    z = (z ^ (z >> 30)) * MIX1;
    z = (z ^ (z >> 27)) * MIX2;
    return z ^ (z >> 31);
}

__device__ __forceinline__ double uniform(u64 seed, u64 stream, u64 counter)
{
    u64 h = splitmix64(seed);
    h = splitmix64(h ^ stream);
    h = splitmix64(h ^ counter);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

__device__ __forceinline__ i64 compare_and_swap(i64* address, i64 expected, i64 desired)
{
#ifdef __CUDA_ARCH__
    return (i64)atomicCAS((u64*)address, (u64)expected, (u64)desired);
#else
    const i64 found = *address;
    if (found == expected) *address = desired;
    return found;
#endif
}

__device__ __forceinline__ void lower_to(i64* address, i64 value)
{
#ifdef __CUDA_ARCH__
    atomicMin(address, value);
#else
    if (value < *address) *address = value;
#endif
}

// Put key in the table of capacity slots (a power of two; linear probing) and lower its slot's position to
// position; its slot, or -1 with the flag *full set where every slot holds another key (the table is full: a sizing
// bug, which the host then reports instead of a probe that never ends).
__device__ __forceinline__ i64 insert(i64* keys, i64 capacity, i64* positions, i64 key, i64 position, i64* full)
{
    const u64 mask = (u64)(capacity - 1);
    i64 slot = (i64)(splitmix64((u64)key) & mask);
    for (i64 probe = 0; probe < capacity; ++probe) {
        const i64 found = compare_and_swap(keys + slot, EMPTY, key);
        if (found == EMPTY || found == key) {
            lower_to(positions + slot, position);
            return slot;
        }
        slot = (i64)(((u64)slot + 1) & mask);
    }
    *full = 1;
    return -1;
}

// Kernel 1 of a hop, over the frontier's bound (num_bound; its size is sizes[2 * hop]): frontier node i's draws
// (Floyd) into sampled[i*fanout : i*fanout + counts[i]], and every candidate into the table; a count of 0 for each
// row past the frontier.
template <typename Index>
__global__ void sample(const i64* indptr, i64, const Index* indices, i64, const i64* frontier, i64 num_bound,
                       i64 fanout, u64 seed, i64* sizes, i64 num_sizes, i64 hop, i64* keys, i64 capacity,
                       i64* positions, i64, i64* counts, i64, i64* sampled, i64, i64* slots, i64)
{
    const i64 num_frontier = sizes[2 * hop];
    i64* full = sizes + num_sizes - 1;
    for (i64 i = thread_index(); i < num_bound; i += thread_count()) {
        if (i >= num_frontier) {
            counts[i] = 0;
            continue;
        }
        const i64 v = frontier[i];
        slots[i] = insert(keys, capacity, positions, v, i, full);
        const i64 start = indptr[v];
        const i64 degree = indptr[v + 1] - start;
        const i64 base = i * fanout;
        i64 count;
        if (degree <= fanout) {
            count = degree;
            for (i64 r = 0; r < degree; ++r) sampled[base + r] = r;
        } else {
            count = fanout;
            for (i64 r = 0; r < fanout; ++r) {
                const i64 j = degree - fanout + r;
                i64 t = (i64)(uniform(seed, (u64)v, (u64)r) * (double)(j + 1));
                if (t > j) t = j;
                for (i64 q = 0; q < r; ++q) {
                    if (sampled[base + q] == t) {
                        t = j;
                        break;
                    }
                }
                sampled[base + r] = t;
            }
        }
        counts[i] = count;
        for (i64 r = 0; r < count; ++r) {
            const i64 u = (i64)indices[start + sampled[base + r]];
            sampled[base + r] = u;
            slots[num_frontier + base + r] = insert(keys, capacity, positions, u, num_frontier + base + r, full);
        }
        for (i64 r = count; r < fanout; ++r) slots[num_frontier + base + r] = -1;  // padding: nothing to clear
    }
}

// Kernel 1 of append_new_nodes_hashed: the frontier and given neighbours (one per row) into the table.
__global__ void insert_all(const i64* frontier, i64 num_frontier, const i64* neighbors, i64 num_neighbors, i64* keys,
                           i64 capacity, i64* positions, i64, i64* counts, i64, i64* slots, i64, i64* sizes,
                           i64 num_sizes)
{
    const i64 g = thread_index(), stride = thread_count();
    i64* full = sizes + num_sizes - 1;
    for (i64 i = g; i < num_frontier; i += stride) slots[i] = insert(keys, capacity, positions, frontier[i], i, full);
    for (i64 q = g; q < num_neighbors; q += stride) {
        counts[q] = 1;
        slots[num_frontier + q] = insert(keys, capacity, positions, neighbors[q], num_frontier + q, full);
    }
}

// Kernel 2 of a hop: ranks[q] = 1 where candidate q (row q / width, draw q % width) is its id's first position and
// not in the frontier (a new node), else 0 (0 too for a slot of -1: the table was full, the minibatch is refused).
__global__ void marks(const i64* counts, i64 rows, i64 width, const i64* sizes, i64, i64 hop, const i64* slots, i64,
                      const i64* positions, i64, i64* ranks, i64)
{
    const i64 num_frontier = sizes[2 * hop];
    for (i64 q = thread_index(); q < rows * width; q += thread_count()) {
        const i64 row = q / width;
        if (q - row * width >= counts[row]) {
            ranks[q] = 0;
            continue;
        }
        const i64 slot = slots[num_frontier + q];
        ranks[q] = slot >= 0 && positions[slot] == num_frontier + q ? 1 : 0;
    }
}

// Kernel 3 of a hop: the edges (local source, row) in row order, the next frontier, the hop's totals, and the other
// table's entries of the previous hop cleared.  row_ends and ranks are inclusive prefix sums: of the rows' edge counts
// and of the new-node marks (a new node's rank counted from 1).  edges holds the hop's E edges as a (2, E) array
// from its start: sources, then destinations.  The totals: E in sizes[2 * hop + 1], the next frontier's size in
// sizes[2 * hop + 2], and in left[table] how many of slots the next hop's clearing of this table reads;
// left[1 - table] is that of stale_slots.
__global__ void write(const i64* frontier, i64, const i64* counts, i64 rows, i64 width, const i64* sampled, i64,
                      const i64* slots, i64, const i64* positions, i64, const i64* row_ends, i64, const i64* ranks,
                      i64 num_ranks, i64* nodes, i64, i64* edges, i64, i64* sizes, i64, i64 hop, i64* stale_keys, i64,
                      i64* stale_positions, i64, const i64* stale_slots, i64, i64* left, i64, i64 table)
{
    const i64 g = thread_index(), stride = thread_count();
    const i64 num_frontier = sizes[2 * hop];
    const i64 num_edges = rows > 0 ? row_ends[rows - 1] : 0;
    for (i64 q = g; q < rows * width; q += stride) {
        const i64 row = q / width;
        const i64 r = q - row * width;
        if (r >= counts[row]) continue;
        const i64 slot = slots[num_frontier + q];
        if (slot < 0) continue;  // the table was full: the minibatch is refused
        const i64 first = positions[slot];
        const i64 local = first < num_frontier ? first : num_frontier + ranks[first - num_frontier] - 1;
        const i64 e = row_ends[row] - counts[row] + r;
        edges[e] = local;
        edges[num_edges + e] = row;
        if (first == num_frontier + q) nodes[num_frontier + ranks[q] - 1] = sampled[q];
    }
    for (i64 i = g; i < num_frontier; i += stride) nodes[i] = frontier[i];
    const i64 num_stale = left[1 - table];
    for (i64 p = g; p < num_stale; p += stride) {
        const i64 slot = stale_slots[p];
        if (slot >= 0) {
            stale_keys[slot] = EMPTY;
            stale_positions[slot] = NO_POSITION;
        }
    }
    if (g == 0) {
        sizes[2 * hop + 1] = num_edges;
        sizes[2 * hop + 2] = num_frontier + (num_ranks > 0 ? ranks[num_ranks - 1] : 0);
        left[table] = num_frontier * (1 + width);
    }
}
