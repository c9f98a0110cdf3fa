/*
 * pipeline._vllmscan — the per-line hot path of the vLLM log parser (pipeline/sources/vllm_logs.py).
 *
 * `scan(chunk)` splits a chunk of whole lines (\n only; the caller sends chunks with \r elsewhere)
 * and, for every line it can read *exactly* as the Polars expressions of vllm_logs.py would, does
 * the work those expressions do: strips ANSI colour codes, sets the `(Name pid=N)` process prefix
 * aside, reads the envelope (level, MM-DD HH:MM:SS, [file:line]), and for `SpecDecoding metrics:`
 * and `Avg prompt throughput:` records reads every field by name, with the regex semantics of the
 * Python side (first occurrence that matches, greedy numbers). It also computes the record key's
 * hash, BLAKE2b with a 10-byte digest (RFC 7693), of the record's first line.
 *
 * Anything else — a line that is not an envelope line at its start (tracebacks, uvicorn lines, a
 * free-text prefix before the level), a non-ASCII line, an integer of more than 18 digits — is
 * marked UNSURE and left to the Polars path, so both paths give identical rows. The GIL is
 * released while a chunk is scanned.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { CLS_SPEC = 2, CLS_STATS = 3 };
/* bits of `valid` */
enum { V_I0 = 1, V_I1 = 2, V_I2 = 4, V_F0 = 8, V_F1 = 16, V_F2 = 32, V_F3 = 64, V_OK = 128 };
/* bits of `flags` */
enum { F_PP = 1, F_PP_NAN = 2, F_AGGREGATED = 4, F_ENGINE = 8 };

#define DIGEST 10
#define MAX_INT_DIGITS 18
#define MAX_NUMBER 350

/* ---- BLAKE2b (RFC 7693), unkeyed, digest of DIGEST bytes ------------------------------------- */

static const uint64_t B2_IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};

static const uint8_t B2_SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4}, {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13}, {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11}, {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5}, {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};

static inline uint64_t rotr64(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8); /* little-endian machines only; checked at import */
    return v;
}

/* One round over the working words v[16] and the message words mw[16], written in the operations
   VADD, VXOR and VROT that each user defines: 64-bit words here, vector lanes in the lane kernels. */
#define B2_G(a, b, c, d, x, y)                          \
    do {                                                \
        v[a] = VADD(VADD(v[a], v[b]), (x));             \
        v[d] = VROT(VXOR(v[d], v[a]), 32);              \
        v[c] = VADD(v[c], v[d]);                        \
        v[b] = VROT(VXOR(v[b], v[c]), 24);              \
        v[a] = VADD(VADD(v[a], v[b]), (y));             \
        v[d] = VROT(VXOR(v[d], v[a]), 16);              \
        v[c] = VADD(v[c], v[d]);                        \
        v[b] = VROT(VXOR(v[b], v[c]), 63);              \
    } while (0)

#define B2_ROUND(r)                                                    \
    do {                                                               \
        B2_G(0, 4, 8, 12, mw[B2_SIGMA[r][0]], mw[B2_SIGMA[r][1]]);     \
        B2_G(1, 5, 9, 13, mw[B2_SIGMA[r][2]], mw[B2_SIGMA[r][3]]);     \
        B2_G(2, 6, 10, 14, mw[B2_SIGMA[r][4]], mw[B2_SIGMA[r][5]]);    \
        B2_G(3, 7, 11, 15, mw[B2_SIGMA[r][6]], mw[B2_SIGMA[r][7]]);    \
        B2_G(0, 5, 10, 15, mw[B2_SIGMA[r][8]], mw[B2_SIGMA[r][9]]);    \
        B2_G(1, 6, 11, 12, mw[B2_SIGMA[r][10]], mw[B2_SIGMA[r][11]]);  \
        B2_G(2, 7, 8, 13, mw[B2_SIGMA[r][12]], mw[B2_SIGMA[r][13]]);   \
        B2_G(3, 4, 9, 14, mw[B2_SIGMA[r][14]], mw[B2_SIGMA[r][15]]);   \
    } while (0)

#define VADD(a, b) ((a) + (b))
#define VXOR(a, b) ((a) ^ (b))
#define VROT rotr64
static void b2_compress(uint64_t h[8], const uint8_t block[128], uint64_t t, int last) {
    uint64_t mw[16], v[16];
    for (int i = 0; i < 16; i++) mw[i] = load64(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = B2_IV[i];
    }
    v[12] ^= t; /* the high word of the counter stays 0: lines are far below 2^64 bytes */
    if (last) v[14] = ~v[14];
    /* unrolled with constant message indexes: about twice as fast as a loop over SIGMA */
    B2_ROUND(0); B2_ROUND(1); B2_ROUND(2); B2_ROUND(3); B2_ROUND(4); B2_ROUND(5);
    B2_ROUND(6); B2_ROUND(7); B2_ROUND(8); B2_ROUND(9); B2_ROUND(10); B2_ROUND(11);
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}
#undef VADD
#undef VXOR
#undef VROT

static void blake2b_digest(const uint8_t *data, size_t n, uint8_t out[DIGEST]) {
    uint64_t h[8];
    uint8_t block[128];
    memcpy(h, B2_IV, sizeof h);
    h[0] ^= 0x01010000ULL ^ DIGEST; /* depth 1, fanout 1, no key, digest length */
    size_t done = 0;
    while (n - done > 128) { /* every full block but the last one */
        b2_compress(h, data + done, done + 128, 0);
        done += 128;
    }
    memset(block, 0, sizeof block);
    memcpy(block, data + done, n - done);
    b2_compress(h, block, n, 1);
    memcpy(out, h, DIGEST); /* little-endian bytes of h[0], h[1] */
}

/* ---- many digests at once: BLAKE2b over 8 (or 4) lines in the lanes of vector registers ---------

   A scan hashes every record line (~2/3 of a log's lines, 1-4 blocks each), and one line at a time
   the compression was a quarter of the parse's CPU. Lines of the same block count are queued, their
   message words laid out lane by lane, and compressed 8 at once with AVX-512 (4 at once with AVX2),
   each lane exactly the scalar BLAKE2b above: the digests are the same bytes. Chosen at import by
   what the CPU has; without either (or off x86-64) every line takes the scalar path. */

#define LANES 8
#define MB_BLOCKS 4 /* lines of up to 512 bytes are queued; longer ones are hashed at once */

typedef struct {
    /* each lane's line, zero-padded to whole blocks; the kernels gather word w of block k of every
       lane at once (storing the words lane-interleaved cost as much as the compression) */
    uint8_t data[LANES][MB_BLOCKS * 128] __attribute__((aligned(64)));
    uint64_t t[LANES]; /* the length of each lane's line (the last block's counter) */
    char **dest[LANES]; /* where each digest goes: *dest + at (the buffer may move meanwhile) */
    size_t at[LANES];
    int n;
} LaneQueue;

typedef struct {
    LaneQueue q[MB_BLOCKS]; /* q[k]: lines of k + 1 blocks */
} Hasher;

typedef void (*lanes_fn)(const LaneQueue *q, int blocks, uint8_t out[LANES][DIGEST]);
static lanes_fn hash_lanes = NULL; /* NULL: scalar only */
static const char *hash_kernel_name = "scalar";

/* The body of a lane kernel: VEC lanes starting at lane `first` of the queue. */
#define MB_COMPRESS_LANES(VEC, first)                                                                 \
    do {                                                                                              \
        VEC h[8], v[16], mw[16];                                                                      \
        for (int i = 0; i < 8; i++) h[i] = VSET1(B2_IV[i]);                                           \
        h[0] = VXOR(h[0], VSET1(0x01010000ULL ^ DIGEST));                                             \
        for (int k = 0; k < blocks; k++) {                                                            \
            for (int w = 0; w < 16; w++) mw[w] = VGATHER(&q->data[first][k * 128 + w * 8]);            \
            for (int i = 0; i < 8; i++) {                                                             \
                v[i] = h[i];                                                                          \
                v[i + 8] = VSET1(B2_IV[i]);                                                           \
            }                                                                                         \
            if (k + 1 < blocks) {                                                                     \
                v[12] = VXOR(v[12], VSET1((uint64_t)(k + 1) * 128));                                  \
            } else {                                                                                  \
                v[12] = VXOR(v[12], VLOAD(&q->t[first]));                                             \
                v[14] = VXOR(v[14], VSET1(~0ULL));                                                    \
            }                                                                                         \
            B2_ROUND(0); B2_ROUND(1); B2_ROUND(2); B2_ROUND(3); B2_ROUND(4); B2_ROUND(5);              \
            B2_ROUND(6); B2_ROUND(7); B2_ROUND(8); B2_ROUND(9); B2_ROUND(10); B2_ROUND(11);            \
            for (int i = 0; i < 8; i++) h[i] = VXOR(h[i], VXOR(v[i], v[i + 8]));                      \
        }                                                                                             \
        uint64_t h0[sizeof(VEC) / 8], h1[sizeof(VEC) / 8];                                            \
        VSTORE(h0, h[0]);                                                                             \
        VSTORE(h1, h[1]);                                                                             \
        for (size_t L = 0; L < sizeof(VEC) / 8; L++) {                                                \
            memcpy(out[first + L], &h0[L], 8);                                                        \
            memcpy(out[first + L] + 8, &h1[L], DIGEST - 8);                                           \
        }                                                                                             \
    } while (0)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define VADD _mm512_add_epi64
#define VXOR _mm512_xor_si512
#define VROT _mm512_ror_epi64
#define VSET1(x) _mm512_set1_epi64((long long)(x))
#define VLOAD(p) _mm512_loadu_si512((const void *)(p))
#define VSTORE(p, x) _mm512_storeu_si512((void *)(p), (x))
#define VGATHER(p) _mm512_i64gather_epi64(lane_words, (const void *)(p), 8)
__attribute__((target("avx512f"))) static void lanes_avx512(const LaneQueue *q, int blocks, uint8_t out[LANES][DIGEST]) {
    const __m512i lane_words = _mm512_setr_epi64(0, 64, 128, 192, 256, 320, 384, 448); /* a lane is 64 words */
    MB_COMPRESS_LANES(__m512i, 0);
}
#undef VADD
#undef VXOR
#undef VROT
#undef VSET1
#undef VLOAD
#undef VSTORE
#undef VGATHER

/* AVX2 has no 64-bit rotate: 32 is a dword shuffle, 24 and 16 byte shuffles, 63 a shift and an add */
__attribute__((target("avx2"))) static inline __m256i rot_avx2(__m256i x, int n) {
    if (n == 32) return _mm256_shuffle_epi32(x, 0xB1);
    if (n == 24)
        return _mm256_shuffle_epi8(x, _mm256_setr_epi8(3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10, 3, 4, 5,
                                                       6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10));
    if (n == 16)
        return _mm256_shuffle_epi8(x, _mm256_setr_epi8(2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15, 8, 9, 2, 3, 4,
                                                       5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15, 8, 9));
    return _mm256_or_si256(_mm256_srli_epi64(x, 63), _mm256_add_epi64(x, x));
}
#define VADD _mm256_add_epi64
#define VXOR _mm256_xor_si256
#define VROT rot_avx2
#define VSET1(x) _mm256_set1_epi64x((long long)(x))
#define VLOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define VSTORE(p, x) _mm256_storeu_si256((__m256i *)(p), (x))
#define VGATHER(p) _mm256_i64gather_epi64((const long long *)(const void *)(p), lane_words, 8)
__attribute__((target("avx2"))) static void lanes_avx2(const LaneQueue *q, int blocks, uint8_t out[LANES][DIGEST]) {
    const __m256i lane_words = _mm256_setr_epi64x(0, 64, 128, 192);
    if (q->n > 0) MB_COMPRESS_LANES(__m256i, 0);
    if (q->n > 4) MB_COMPRESS_LANES(__m256i, 4);
}
#undef VADD
#undef VXOR
#undef VROT
#undef VSET1
#undef VLOAD
#undef VSTORE
#undef VGATHER

static void choose_hash_kernel(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        hash_lanes = lanes_avx512;
        hash_kernel_name = "avx512";
    } else if (__builtin_cpu_supports("avx2")) {
        hash_lanes = lanes_avx2;
        hash_kernel_name = "avx2";
    }
}
#else
static void choose_hash_kernel(void) {}
#endif

/* Compress a queue's lines and write their digests (the lanes past q->n hold stale words: ignored). */
static void hasher_run(LaneQueue *q, int blocks) {
    uint8_t out[LANES][DIGEST];
    hash_lanes(q, blocks, out);
    for (int L = 0; L < q->n; L++) memcpy(*q->dest[L] + q->at[L], out[L], DIGEST);
    q->n = 0;
}

/* The digest of data[0:n] into *dest + at: now, or when its queue is full or flushed. */
static void hasher_add(Hasher *hs, const uint8_t *data, size_t n, char **dest, size_t at) {
    size_t blocks = n ? (n + 127) / 128 : 1;
    if (!hs || blocks > MB_BLOCKS) {
        blake2b_digest(data, n, (uint8_t *)*dest + at);
        return;
    }
    LaneQueue *q = &hs->q[blocks - 1];
    int L = q->n++;
    memcpy(q->data[L], data, n);
    memset(q->data[L] + n, 0, blocks * 128 - n);
    q->t[L] = n;
    q->dest[L] = dest;
    q->at[L] = at;
    if (q->n == LANES) hasher_run(q, (int)blocks);
}

static void hasher_flush(Hasher *hs) {
    for (int k = 0; hs && k < MB_BLOCKS; k++)
        if (hs->q[k].n) hasher_run(&hs->q[k], k + 1);
}

/* A hasher for one scan, or NULL (the scalar path) when the CPU has no lane kernel. */
static Hasher *hasher_new(void) { return hash_lanes ? calloc(1, sizeof(Hasher)) : NULL; }

/* ---- the grammar of vllm_logs.py, character by character ------------------------------------ */

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static inline int is_alpha(unsigned char c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }
static inline int is_word(unsigned char c) { return is_alpha(c) || is_digit(c) || c == '_'; }
/* Rust's \s on ASCII, plus \x1c-\x1f (what Python's str.isspace() adds): vllm_logs._WS */
static inline int is_ws(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f); }

static inline int starts(const char *p, const char *end, const char *lit, size_t n) {
    return (size_t)(end - p) >= n && memcmp(p, lit, n) == 0;
}
#define STARTS(p, end, lit) starts((p), (end), (lit), sizeof(lit) - 1)

/* Length of vllm_logs.NUMBER = (?:nan|-?\d+(?:\.\d+)?) at p (greedy), 0 if none. Greedy is exact
   wherever it is used: what may follow a number never starts with a digit or a dot. */
static size_t number_len(const char *p, const char *end) {
    if (STARTS(p, end, "nan")) return 3;
    const char *q = p;
    if (q < end && *q == '-') q++;
    const char *d = q;
    while (q < end && is_digit((unsigned char)*q)) q++;
    if (q == d) return 0;
    if (q + 1 < end && *q == '.' && is_digit((unsigned char)q[1])) {
        q++;
        while (q < end && is_digit((unsigned char)*q)) q++;
    }
    return (size_t)(q - p);
}

static inline size_t digits_len(const char *p, const char *end) {
    const char *q = p;
    while (q < end && is_digit((unsigned char)*q)) q++;
    return (size_t)(q - p);
}

/* A NUMBER as Polars' string → Float64 cast reads it: correctly rounded. When its digits make a
   mantissa of at most 2^53 and at most 22 of them follow the point, mantissa and power of ten are
   exact doubles and one IEEE division rounds correctly (Clinger's fast path); anything else goes to
   strtod, also correctly rounded. */
static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static double number_value(const char *p, size_t n) {
    if (n == 3 && *p == 'n') return NAN; /* number_len's "nan" */
    const char *q = p, *end = p + n;
    int neg = *q == '-', digits = 0, frac = 0;
    q += neg;
    uint64_t mant = 0;
    for (; q < end && *q != '.'; q++, digits++) mant = mant * 10 + (uint64_t)(*q - '0');
    if (q < end)
        for (q++; q < end; q++, digits++, frac++) mant = mant * 10 + (uint64_t)(*q - '0');
    /* 19 digits cannot overflow; a mantissa up to 2^53 is an exact double */
    if (digits <= 19 && mant <= (1ULL << 53) && frac <= 22) {
        double v = (double)mant / POW10[frac];
        return neg ? -v : v;
    }
    char buf[MAX_NUMBER + 1];
    memcpy(buf, p, n);
    buf[n] = 0;
    return strtod(buf, NULL);
}

static int64_t int_value(const char *p, size_t n) {
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) v = v * 10 + (p[i] - '0');
    return v;
}

/* A field `NAME: NUMBER<tail>` (name already matched); sets *out and returns 1 on a match.
   *unsure is set when the number is too long to read here. */
static int number_field(const char *p, const char *end, const char *tail, size_t tail_n, double *out, int *unsure) {
    size_t n = number_len(p, end);
    if (!n || !starts(p + n, end, tail, tail_n)) return 0;
    if (n > MAX_NUMBER) {
        *unsure = 1;
        return 0;
    }
    *out = number_value(p, n);
    return 1;
}

static int int_field(const char *p, const char *end, const char *tail, size_t tail_n, int64_t *out, int *unsure) {
    size_t n = digits_len(p, end);
    if (!n || !starts(p + n, end, tail, tail_n)) return 0;
    if (n > MAX_INT_DIGITS) {
        *unsure = 1;
        return 0;
    }
    *out = int_value(p, n);
    return 1;
}

typedef struct {
    int64_t ints[3];
    double floats[4];
    uint8_t valid, flags, engine_len;
    int32_t pp_start, pp_count;
    double pp_total; /* 0.0 + r_1 + r_2 + … left to right, as _spec_derive's sum */
} Fields;

typedef struct {
    double *v;
    size_t n, cap;
} DoubleVec;

static int push_double(DoubleVec *vec, double x) {
    if (vec->n == vec->cap) {
        size_t cap = vec->cap ? vec->cap * 2 : 4096;
        double *v = realloc(vec->v, cap * sizeof(double));
        if (!v) return -1;
        vec->v = v;
        vec->cap = cap;
    }
    vec->v[vec->n++] = x;
    return 0;
}

#define SET_NUMBER(slot, bit, tail)                                                               \
    do {                                                                                         \
        if (!(f->valid & (bit)) && number_field(v, end, tail, sizeof(tail) - 1, &f->floats[slot], &unsure)) \
            f->valid |= (bit);                                                                   \
    } while (0)
#define SET_INT(slot, bit, tail)                                                                  \
    do {                                                                                         \
        if (!(f->valid & (bit)) && int_field(v, end, tail, sizeof(tail) - 1, &f->ints[slot], &unsure)) \
            f->valid |= (bit);                                                                   \
    } while (0)

/* _spec_rows: ints = accepted, drafted; floats = mal_printed, accepted_tps, drafted_tps,
   acceptance_rate_printed; the per-position list into `pp`. Returns -1 (unsure), 0, or -2 (no memory). */
static const char MARK_SPEC[] = "SpecDecoding metrics:", MARK_STATS[] = "Avg prompt throughput:";

/* `mark` = the first "SpecDecoding metrics:" of the message */
static int spec_fields(const char *mark, const char *mend, Fields *f, DoubleVec *pp, char *tmp) {
    static const char PP[] = "Per-position acceptance rate: ";
    const char *st = mark + (sizeof MARK_SPEC - 1);
    while (st < mend && is_ws((unsigned char)*st)) st++; /* str.strip_chars_start(_PY_SPACE) */
    int unsure = 0;
    /* the first "Per-position acceptance rate: NUMBER(, NUMBER)*", greedy */
    const char *pp_from = NULL, *pp_to = NULL, *search = st;
    while (search < mend) {
        const char *r = memmem(search, (size_t)(mend - search), PP, sizeof PP - 1);
        if (!r) break;
        const char *q = r + sizeof PP - 1;
        size_t n = number_len(q, mend);
        if (!n) {
            search = r + 1;
            continue;
        }
        pp_from = r;
        f->pp_start = (int32_t)pp->n;
        for (;;) {
            if (n > MAX_NUMBER) return -1;
            if (n == 3 && memcmp(q, "nan", 3) == 0) f->flags |= F_PP_NAN;
            double x = number_value(q, n);
            if (push_double(pp, x) < 0) return -2;
            f->pp_total += x;
            f->pp_count++;
            q += n;
            if (!STARTS(q, mend, ", ")) break;
            n = number_len(q + 2, mend);
            if (!n) break;
            q += 2;
        }
        pp_to = q;
        f->flags |= F_PP;
        break;
    }
    /* rest = ", " + st without that match; fields are the first ", NAME: value" that matches */
    char *w = tmp;
    *w++ = ',';
    *w++ = ' ';
    if (pp_from) {
        memcpy(w, st, (size_t)(pp_from - st));
        w += pp_from - st;
        memcpy(w, pp_to, (size_t)(mend - pp_to));
        w += mend - pp_to;
    } else {
        memcpy(w, st, (size_t)(mend - st));
        w += mend - st;
    }
    const char *end = w;
    for (const char *p = tmp; p + 1 < end; p++) {
        p = memchr(p, ',', (size_t)(end - p));
        if (!p) break;
        if (p + 1 >= end || p[1] != ' ') continue;
        const char *name = p + 2, *v;
        switch (name < end ? *name : 0) {
        case 'M':
            if (STARTS(name, end, "Mean acceptance length: ")) {
                v = name + 24;
                size_t n = number_len(v, end);
                if (!(f->valid & V_F0) && n) {
                    if (n > MAX_NUMBER) return -1;
                    f->floats[0] = number_value(v, n);
                    f->valid |= V_F0;
                }
            }
            break;
        case 'A':
            if (STARTS(name, end, "Accepted throughput: ")) {
                v = name + 21;
                SET_NUMBER(1, V_F1, " tokens/s");
            } else if (STARTS(name, end, "Accepted: ")) {
                v = name + 10;
                SET_INT(0, V_I0, " tokens");
            } else if (STARTS(name, end, "Avg Draft acceptance rate: ")) {
                v = name + 27;
                SET_NUMBER(3, V_F3, "%");
            }
            break;
        case 'D':
            if (STARTS(name, end, "Drafted throughput: ")) {
                v = name + 20;
                SET_NUMBER(2, V_F2, " tokens/s");
            } else if (STARTS(name, end, "Drafted: ")) {
                v = name + 9;
                SET_INT(1, V_I1, " tokens");
            } else if (STARTS(name, end, "Draft acceptance rate: ")) {
                v = name + 23;
                SET_NUMBER(3, V_F3, "%");
            }
            break;
        }
        if (unsure) return -1;
    }
    if ((f->valid & V_I0) && (f->valid & V_I1)) f->valid |= V_OK;
    return 0;
}

/* _stats_rows: ints = running, waiting, preemptions; floats = prompt_tps, generation_tps,
   kv_cache_usage (percent), prefix_cache_hit_rate (percent). */
static int stats_fields(const char *msg, const char *end, Fields *f) {
    int unsure = 0, matched = 0;
    const char *p = msg, *v;
    /* ^(?:Engine (\d+): |(\d+) Engines Aggregated: )?Avg prompt throughput: N tokens/s, Avg generation throughput: N tokens/s */
    if (STARTS(p, end, "Engine ")) {
        size_t d = digits_len(p + 7, end);
        if (d >= 256) return -1; /* engine_len is one byte */
        if (d && STARTS(p + 7 + d, end, ": ")) {
            f->flags |= F_ENGINE;
            f->engine_len = (uint8_t)d;
            p += 7 + d + 2;
        }
    } else if (is_digit((unsigned char)*p)) {
        size_t d = digits_len(p, end);
        if (STARTS(p + d, end, " Engines Aggregated: ")) {
            f->flags |= F_AGGREGATED;
            p += d + 21;
        }
    }
    if (STARTS(p, end, "Avg prompt throughput: ")) {
        v = p + 23;
        double prompt;
        if (number_field(v, end, " tokens/s, Avg generation throughput: ", 38, &prompt, &unsure)) {
            v += number_len(v, end) + 38;
            if (number_field(v, end, " tokens/s", 9, &f->floats[1], &unsure)) {
                f->floats[0] = prompt;
                f->valid |= V_F0 | V_F1;
                matched = 1;
            }
        }
    }
    if (!matched) f->flags &= ~(F_ENGINE | F_AGGREGATED);
    for (const char *q = msg; q + 1 < end; q++) {
        q = memchr(q, ',', (size_t)(end - q));
        if (!q) break;
        if (q + 1 >= end || q[1] != ' ') continue;
        const char *name = q + 2;
        switch (name < end ? *name : 0) {
        case 'R':
            if (STARTS(name, end, "Running: ")) {
                v = name + 9;
                if (!(f->valid & V_I0) && int_field(v, end, " reqs", 5, &f->ints[0], &unsure)) f->valid |= V_I0;
            }
            break;
        case 'W':
            if (STARTS(name, end, "Waiting: ")) {
                v = name + 9;
                if (!(f->valid & V_I1) && int_field(v, end, " reqs", 5, &f->ints[1], &unsure)) f->valid |= V_I1;
            }
            break;
        case 'P':
            if (STARTS(name, end, "Pending: ")) {
                v = name + 9;
                if (!(f->valid & V_I1) && int_field(v, end, " reqs", 5, &f->ints[1], &unsure)) f->valid |= V_I1;
            } else if (STARTS(name, end, "Preemptions: ")) {
                v = name + 13;
                size_t n = digits_len(v, end);
                if (!(f->valid & V_I2) && n) {
                    if (n > MAX_INT_DIGITS) return -1;
                    f->ints[2] = int_value(v, n);
                    f->valid |= V_I2;
                }
            } else if (STARTS(name, end, "Prefix cache hit rate: ")) {
                v = name + 23;
                if (!(f->valid & V_F3) && number_field(v, end, "%", 1, &f->floats[3], &unsure)) f->valid |= V_F3;
            }
            break;
        case 'G':
            if (STARTS(name, end, "GPU KV cache usage: ")) {
                v = name + 20;
                if (!(f->valid & V_F2) && number_field(v, end, "%", 1, &f->floats[2], &unsure)) f->valid |= V_F2;
            }
            break;
        }
        if (unsure) return -1;
    }
    if (matched && (f->valid & V_I0)) f->valid |= V_OK;
    return 0;
}

/* ---- envelope, process prefix, event words ---------------------------------------------------- */

static const char *const LEVELS[] = {"DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL "};
static const size_t LEVEL_LEN[] = {6, 5, 8, 6, 9};

/* vllm_logs._RX_STAMP at p: `LEVEL MM-DD HH:MM:SS`; the level code (1..5) or 0; fills stamp. */
static int stamp_at(const char *p, const char *end, uint8_t stamp[5], const char **after) {
    int level = 0;
    for (int i = 0; i < 5; i++) {
        if (starts(p, end, LEVELS[i], LEVEL_LEN[i])) {
            level = i + 1;
            p += LEVEL_LEN[i];
            break;
        }
    }
    if (!level || end - p < 14) return 0;
    const unsigned char *s = (const unsigned char *)p;
    static const char SHAPE[] = "dd-dd dd:dd:dd";
    for (int i = 0; i < 14; i++) {
        if (SHAPE[i] == 'd' ? !is_digit(s[i]) : s[i] != (unsigned char)SHAPE[i]) return 0;
    }
    for (int i = 0; i < 5; i++) stamp[i] = (uint8_t)((s[3 * i] - '0') * 10 + s[3 * i + 1] - '0');
    /* a calendar time (vllm_logs._RX_STAMP's ranges): month 01-12, day 01-31, 00-23:00-59:00-59 */
    if (stamp[0] < 1 || stamp[0] > 12 || stamp[1] < 1 || stamp[1] > 31 || stamp[2] > 23 || stamp[3] > 59 || stamp[4] > 59)
        return 0;
    *after = p + 14;
    return level;
}

/* vllm_logs._RX_ENV0 at b: the envelope `LEVEL MM-DD HH:MM:SS[.fff] [where] `; its length or 0. */
static size_t envelope_at(const char *b, const char *end) {
    uint8_t stamp[5];
    const char *p;
    if (!stamp_at(b, end, stamp, &p)) return 0;
    if (p + 1 < end && (*p == '.' || *p == ',') && is_digit((unsigned char)p[1])) {
        p++;
        while (p < end && is_digit((unsigned char)*p)) p++;
    }
    if (!STARTS(p, end, " [")) return 0;
    const char *close = memchr(p + 2, ']', (size_t)(end - p - 2));
    if (!close || close + 1 >= end || close[1] != ' ') return 0;
    return (size_t)(close + 2 - b);
}

/* vllm_logs._RX_ENV: the envelope after the shortest free-text prefix of at most MAX_PREFIX (64)
   characters; the level and stamp are the first _RX_STAMP match inside it. Returns the level code
   or 0; *msg_off = where the message starts. */
static int find_envelope(const char *b, const char *end, uint8_t stamp[5], size_t *msg_off) {
    for (size_t k = 0; k <= 64 && b + k < end; k++) {
        size_t n = envelope_at(b + k, end);
        if (!n) continue;
        const char *env_end = b + k + n, *after;
        for (size_t j = 0; j <= k; j++) {
            int level = stamp_at(b + j, env_end, stamp, &after);
            if (level) {
                *msg_off = k + n;
                return level;
            }
        }
    }
    return 0;
}

/* vllm_logs._RX_PREFIX: "(Name pid=N)" and at most one whitespace character; its length or 0. */
static size_t process_prefix(const char *l, const char *end, size_t *name_len) {
    if (end - l < 2 || l[0] != '(' || !is_alpha((unsigned char)l[1])) return 0;
    const char *p = l + 2;
    while (p < end && (is_word((unsigned char)*p) || *p == '-')) p++;
    if (!STARTS(p, end, " pid=")) return 0;
    *name_len = (size_t)(p - l - 1);
    p += 5;
    size_t d = digits_len(p, end);
    if (!d || p + d >= end || p[d] != ')') return 0;
    p += d + 1;
    if (p < end && is_ws((unsigned char)*p)) p++;
    return (size_t)(p - l);
}

/* Copy the line without ANSI codes (\x1b\[[0-9;]*[A-Za-z]); returns the new length. */
static size_t strip_ansi(const char *src, size_t n, char *dst) {
    size_t o = 0, i = 0;
    while (i < n) {
        const char *esc = memchr(src + i, 0x1b, n - i);
        size_t run = esc ? (size_t)(esc - src) - i : n - i;
        memcpy(dst + o, src + i, run);
        o += run;
        i += run;
        if (!esc) break;
        if (i + 1 < n && src[i + 1] == '[') {
            size_t j = i + 2;
            while (j < n && (is_digit((unsigned char)src[j]) || src[j] == ';')) j++;
            if (j < n && is_alpha((unsigned char)src[j])) {
                i = j + 1;
                continue;
            }
        }
        dst[o++] = src[i++];
    }
    return o;
}

/* The words that make an envelope line "rare" (vllm_logs.EVENT_WORDS and "version"), set by
   configure(). One pass over a message finds them and the two record markers, Wu–Manber style: a
   window as long as the shortest pattern slides over the message, and a table indexed by the
   window's last two bytes says how far it may jump without passing over the start of a pattern
   (most windows jump the whole length; the usual message holds no pattern but its own marker). */
#define MAX_WORDS 64
static const char *patterns[MAX_WORDS + 2]; /* the words, then the two markers */
static size_t pattern_len[MAX_WORDS + 2];
static char *words[MAX_WORDS];
static int n_words = 0, n_patterns = 0;
static size_t window = 2;
static uint8_t jump[65536]; /* indexed by two bytes as a little-endian uint16 */

static inline uint16_t pair_key(const char *p) {
    uint16_t key;
    memcpy(&key, p, 2);
    return key;
}

typedef struct {
    const char *spec; /* the first "SpecDecoding metrics:" */
    int stats, rare;  /* "Avg prompt throughput:" anywhere; an event word (or "version") anywhere */
} Marks;

/* Event words shorter than SHORT_WORD ("version") are searched apart, by their first byte: with them
   in the jump table its shifts would be at most 6 bytes. */
#define SHORT_WORD 10
static int short_words[MAX_WORDS], n_short = 0, n_long = 0;

/* The patterns that start where the window ending at `last` starts (the jump table says one may). */
static inline void check_at(const char *m, size_t n, size_t last, Marks *k) {
    const char *p = m + last + 1 - window;
    size_t left = (size_t)(m + n - p);
    for (int w = 0; w < n_patterns; w++) {
        if (pattern_len[w] > left || p[0] != patterns[w][0] || memcmp(p, patterns[w], pattern_len[w]) != 0) continue;
        if (w < n_long) k->rare = 1;
        else if (patterns[w] == MARK_SPEC) { if (!k->spec || p < k->spec) k->spec = p; } /* the first one */
        else k->stats = 1;
    }
}

static Marks scan_message(const char *m, size_t n) {
    Marks k = {NULL, 0, 0};
    for (int s = 0; s < n_short && !k.rare; s++) {
        const char *w = patterns[short_words[s]];
        size_t len = pattern_len[short_words[s]];
        for (const char *p = m; (size_t)(m + n - p) >= len; p++) {
            p = memchr(p, w[0], (size_t)(m + n - p) - len + 1);
            if (!p) break;
            if (memcmp(p + 1, w + 1, len - 1) == 0) {
                k.rare = 1;
                break;
            }
        }
    }
    /* Two cursors, over the first and the second half of the window ends: each shift waits for the
       table lookup of the one before, and two independent chains run in the time of one. */
    size_t a = window - 1, b = n / 2 > a ? n / 2 : a, a_end = b;
    while (a < a_end && b < n) {
        uint8_t ja = jump[pair_key(m + a - 1)], jb = jump[pair_key(m + b - 1)];
        if (!ja) check_at(m, n, a, &k), ja = 1;
        if (!jb) check_at(m, n, b, &k), jb = 1;
        a += ja;
        b += jb;
    }
    for (; a < a_end; a++) {
        uint8_t j = jump[pair_key(m + a - 1)];
        if (j) a += j - 1;
        else check_at(m, n, a, &k);
    }
    for (; b < n; b++) {
        uint8_t j = jump[pair_key(m + b - 1)];
        if (j) b += j - 1;
        else check_at(m, n, b, &k);
    }
    return k;
}

static void build_jumps(void) {
    /* the long words first, then the markers (the jump table's patterns), then the short words */
    const char *all[MAX_WORDS];
    size_t all_len[MAX_WORDS];
    memcpy(all, patterns, sizeof all);
    memcpy(all_len, pattern_len, sizeof all_len);
    n_patterns = n_short = 0;
    for (int w = 0; w < n_words; w++)
        if (all_len[w] >= SHORT_WORD) patterns[n_patterns] = all[w], pattern_len[n_patterns++] = all_len[w];
    n_long = n_patterns;
    patterns[n_patterns] = MARK_SPEC;
    pattern_len[n_patterns++] = sizeof MARK_SPEC - 1;
    patterns[n_patterns] = MARK_STATS;
    pattern_len[n_patterns++] = sizeof MARK_STATS - 1;
    for (int w = 0; w < n_words; w++)
        if (all_len[w] < SHORT_WORD) {
            patterns[n_patterns + n_short] = all[w];
            pattern_len[n_patterns + n_short] = all_len[w];
            short_words[n_short] = n_patterns + n_short;
            n_short++;
        }
    window = pattern_len[0];
    for (int w = 1; w < n_patterns; w++)
        if (pattern_len[w] < window) window = pattern_len[w];
    memset(jump, (int)(window - 1), sizeof jump);
    for (int w = 0; w < n_patterns; w++) /* the pair ending at offset i of a pattern: jump to align it */
        for (size_t i = 1; i < window; i++) {
            uint16_t key = pair_key(patterns[w] + i - 1);
            if (jump[key] > window - 1 - i) jump[key] = (uint8_t)(window - 1 - i);
        }
}

static int is_blank(const char *p, const char *end) {
    for (; p < end; p++)
        if (!is_ws((unsigned char)*p)) return 0;
    return 1;
}

/* ---- the scan ---------------------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
} Buf;

/* Room for n more bytes. */
static int buf_grow(Buf *b, size_t n) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int buf_add(Buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap && buf_grow(b, n) < 0) return -1;
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}

#define ADD(buf, type, value)                                      \
    do {                                                           \
        type v_ = (value);                                         \
        if (buf_add(&(buf), &v_, sizeof v_) < 0) goto nomem;       \
    } while (0)
#define ADDN(buf, src, n)                                          \
    do {                                                           \
        if (buf_add(&(buf), (src), (n)) < 0) goto nomem;           \
    } while (0)

/* Stores into an array with room for them (room_for_record). */
#define PUTN(buf, src, size)                          \
    do {                                              \
        memcpy((buf).p + (buf).n, (src), (size));     \
        (buf).n += (size);                            \
    } while (0)
#define PUT(buf, type, value)                         \
    do {                                              \
        type v_ = (value);                            \
        PUTN(buf, &v_, sizeof v_);                    \
    } while (0)

/* Record rows (spec and stats lines read in full), one set of arrays per kind, with the kinds'
   sequence, lines and hashes in line order (`cls`, `rec_idx`, `digest`); rare rows (lines the Python
   side handles); the chunk summary. Arrays are named as in vllm_logs._native_chunk: "spec_idx",
   "stats_idx", …, "cls", "x_idx", … */
enum { R_IDX, R_LEVEL, R_ROLL, R_STAMP, R_PROC_LEN, R_ENG_LEN, R_INTS, R_FLOATS, R_VALID, R_FLAGS, R_PP_COUNT,
       R_PP_TOTAL, B_PROCS, B_ENGINES, B_PP, N_REC };
static const char *const REC_NAMES[N_REC] = {
    "idx", "level", "roll", "stamp", "proc_len", "eng_len", "ints", "floats", "valid", "flags", "pp_count",
    "pp_total", "procs", "engines", "pp_values"};
enum { B_CLS = 2 * N_REC, B_REC_IDX, B_DIGEST, X_IDX, X_KIND, X_LEVEL, X_STAMP, X_MSG_OFF, X_BODY_LEN, X_PROC_LEN,
       B_XBODIES, B_XPROCS, X_P_IDX, X_P_LEVEL, X_P_ROLL, X_P_STAMP, X_N_ENV, N_BUFS };
static const char *const OTHER_NAMES[N_BUFS - B_CLS] = {
    "cls", "rec_idx", "digest", "x_idx", "x_kind", "x_level", "x_stamp", "x_msg_off", "x_body_len", "x_proc_len",
    "x_bodies", "x_procs", "x_p_idx", "x_p_level", "x_p_roll", "x_p_stamp", "x_n_env"};
enum { K_RARE = 1, K_FAILED = 2 };

/* The bytes of one record in each fixed-size array of its kind (0: variable size) and in the shared ones. */
static const uint8_t REC_SIZE[N_REC] = {4, 1, 4, 5, 4, 4, 24, 32, 1, 1, 4, 8, 0, 0, 0};
_Static_assert(sizeof(((Fields *)0)->ints) == 24 && sizeof(((Fields *)0)->floats) == 32, "REC_SIZE of ints, floats");

static int room_for_record(Buf *r, Buf *b) {
    for (int k = 0; k < N_REC; k++)
        if (r[k].n + REC_SIZE[k] > r[k].cap && buf_grow(&r[k], REC_SIZE[k]) < 0) return -1;
    if (b[B_CLS].n + 1 > b[B_CLS].cap && buf_grow(&b[B_CLS], 1) < 0) return -1;
    if (b[B_REC_IDX].n + 4 > b[B_REC_IDX].cap && buf_grow(&b[B_REC_IDX], 4) < 0) return -1;
    if (b[B_DIGEST].n + DIGEST > b[B_DIGEST].cap && buf_grow(&b[B_DIGEST], DIGEST) < 0) return -1;
    return 0;
}

typedef struct {
    int64_t lines, env, first_idx, last_idx, last_roll;
    int last_level;
    uint8_t first_stamp[5], last_stamp[5];
} Summary;

/* The end of the line at p (its \n, or `end`), in one pass that also tells what the line holds: ESC
   (an ANSI code to strip) in *esc, and in *odd a \r or a byte past ASCII (the Polars path splits \r
   and \r\n line ends and decodes UTF-8). Three memchr calls a line cost more. */
#if defined(__SSE2__)
#include <emmintrin.h>
static inline const char *line_end(const char *p, const char *end, int *esc, int *odd) {
    const __m128i nl = _mm_set1_epi8('\n'), ansi = _mm_set1_epi8(0x1b), cr = _mm_set1_epi8('\r');
    unsigned seen_esc = 0, seen_odd = 0;
    for (; end - p >= 16; p += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        unsigned at_nl = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl));
        unsigned at_esc = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, ansi));
        unsigned at_odd = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, cr), v)); /* \r, or bit 7 */
        if (at_nl) {
            unsigned before = (at_nl & -at_nl) - 1;
            *esc = (seen_esc | (at_esc & before)) != 0;
            *odd = (seen_odd | (at_odd & before)) != 0;
            return p + __builtin_ctz(at_nl);
        }
        seen_esc |= at_esc;
        seen_odd |= at_odd;
    }
    for (; p < end && *p != '\n'; p++) {
        seen_esc |= *p == 0x1b;
        seen_odd |= *p == '\r' || (*p & 0x80);
    }
    *esc = seen_esc != 0;
    *odd = seen_odd != 0;
    return p;
}
#else
static inline const char *line_end(const char *p, const char *end, int *esc, int *odd) {
    const char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end;
    *esc = memchr(p, 0x1b, (size_t)(le - p)) != NULL;
    *odd = memchr(p, '\r', (size_t)(le - p)) != NULL;
    for (const char *q = p; q < le && !*odd; q++) *odd = (*q & 0x80) != 0;
    return le;
}
#endif

/* Returns 1 done, 0 a chunk or a line this scanner cannot read exactly (the caller uses the Polars
   path for the whole chunk), -1 out of memory. */
static int scan_chunk(const char *data, size_t size, Buf *b, Summary *sum, int summary_only) {
    char *scratch = NULL, *tmp = NULL;
    size_t scratch_cap = 0;
    int rc = 1;
    Hasher *hs = summary_only ? NULL : hasher_new();
    int32_t roll = 0;
    int last_month = -1;
    int64_t last_env = -1, n_env = 0, i = 0;
    int last_level = 0;
    uint8_t last_stamp[5] = {0};
    const char *p = data, *end = data + size;
    sum->first_idx = -1;
    for (; p < end; i++) {
        int has_esc, odd;
        const char *le = line_end(p, end, &has_esc, &odd);
        const char *nl = le < end ? le : NULL;
        size_t n = (size_t)(le - p);
        if (odd) {
            rc = 0;
            goto out;
        }
        const char *l = p;
        if (n + 2 > scratch_cap) { /* room for the stripped line and for spec_fields' rewritten message */
            free(scratch);
            free(tmp);
            scratch_cap = 2 * n + 2;
            scratch = malloc(scratch_cap);
            tmp = malloc(scratch_cap);
            if (!scratch || !tmp) goto nomem;
        }
        if (has_esc) {
            n = strip_ansi(p, n, scratch);
            l = scratch;
        }
        const char *lend = l + n;
        size_t name_len = 0, msg_off = 0;
        size_t pre = process_prefix(l, lend, &name_len);
        if (!pre) name_len = 0;
        const char *body = l + pre;
        uint8_t stamp[5];
        int level = find_envelope(body, lend, stamp, &msg_off);
        int kind = 0;
        if (summary_only && !level) { /* the year pass only needs the envelope lines' stamps */
            p = nl ? nl + 1 : end;
            continue;
        }
        if (level) {
            if (last_month >= 0 && stamp[0] < last_month - 6) roll++;
            last_month = stamp[0];
            if (sum->first_idx < 0) {
                sum->first_idx = i;
                memcpy(sum->first_stamp, stamp, 5);
            }
            last_env = i;
            last_level = level;
            memcpy(last_stamp, stamp, 5);
            if (summary_only) {
                n_env++;
                p = nl ? nl + 1 : end;
                continue;
            }
            const char *msg = body + msg_off;
            size_t mn = (size_t)(lend - msg);
            int cls = 0, r = 0;
            Fields f;
            memset(&f, 0, sizeof f);
            f.pp_start = -1;
            Marks marks = scan_message(msg, mn);
            if (marks.spec) {
                cls = CLS_SPEC;
                DoubleVec pp = {(double *)(void *)b[B_PP].p, b[B_PP].n / sizeof(double), b[B_PP].cap / sizeof(double)};
                r = spec_fields(marks.spec, lend, &f, &pp, tmp);
                b[B_PP].p = (char *)pp.v;
                b[B_PP].n = pp.n * sizeof(double);
                b[B_PP].cap = pp.cap * sizeof(double);
            } else if (marks.stats) {
                cls = CLS_STATS;
                r = stats_fields(msg, lend, &f);
            }
            if (r == -2) goto nomem;
            if (r == -1) {
                rc = 0;
                goto out;
            }
            if (cls && (f.valid & V_OK)) {
                Buf *r = b + (cls == CLS_SPEC ? 0 : N_REC);
                /* room for one more record in every fixed-size array, then plain stores (a call
                   to buf_add and to memcpy per value cost a tenth of the scan) */
                if (room_for_record(r, b) < 0) goto nomem;
                PUT(b[B_CLS], uint8_t, (uint8_t)cls);
                PUT(b[B_REC_IDX], int32_t, (int32_t)i); /* records of both kinds in line order, for their keys */
                ADDN(r[B_PROCS], l + 1, name_len);
                ADDN(r[B_ENGINES], msg + 7, f.engine_len); /* "Engine " + digits, when F_ENGINE */
                PUT(r[R_IDX], int32_t, (int32_t)i);
                PUT(r[R_LEVEL], uint8_t, (uint8_t)level);
                PUT(r[R_ROLL], int32_t, roll);
                PUTN(r[R_STAMP], stamp, 5);
                PUT(r[R_PROC_LEN], int32_t, (int32_t)name_len);
                PUT(r[R_ENG_LEN], int32_t, (int32_t)f.engine_len);
                PUTN(r[R_INTS], f.ints, sizeof f.ints);
                PUTN(r[R_FLOATS], f.floats, sizeof f.floats);
                PUT(r[R_VALID], uint8_t, f.valid);
                PUT(r[R_FLAGS], uint8_t, f.flags);
                PUT(r[R_PP_COUNT], int32_t, f.pp_count);
                PUT(r[R_PP_TOTAL], double, f.pp_total);
                memset(b[B_DIGEST].p + b[B_DIGEST].n, 0, DIGEST); /* written by the hasher */
                b[B_DIGEST].n += DIGEST;
                hasher_add(hs, (const uint8_t *)body, (size_t)(lend - body), &b[B_DIGEST].p, b[B_DIGEST].n - DIGEST);
            } else if (cls) {
                kind |= K_FAILED;
                if (f.pp_start >= 0) b[B_PP].n = (size_t)f.pp_start * sizeof(double); /* drop its list */
            }
            if (marks.rare) kind |= K_RARE;
        } else if (!is_blank(body, lend)) {
            kind = K_RARE;
        }
        if (kind) {
            ADD(b[X_IDX], int32_t, (int32_t)i);
            ADD(b[X_KIND], uint8_t, (uint8_t)kind);
            /* what _lines_frame gives for the line: body (ANSI codes and process prefix removed), proc,
               and for an envelope line its level, stamp and where the message starts in the body */
            ADD(b[X_LEVEL], uint8_t, (uint8_t)level);
            ADDN(b[X_STAMP], level ? stamp : (const uint8_t[5]){0}, 5);
            ADD(b[X_MSG_OFF], int32_t, (int32_t)msg_off);
            ADD(b[X_BODY_LEN], int32_t, (int32_t)(lend - body));
            ADDN(b[B_XBODIES], body, (size_t)(lend - body));
            ADD(b[X_PROC_LEN], int32_t, (int32_t)name_len);
            ADDN(b[B_XPROCS], l + 1, name_len);
            ADD(b[X_P_IDX], int32_t, (int32_t)last_env);
            ADD(b[X_P_LEVEL], uint8_t, (uint8_t)last_level);
            ADD(b[X_P_ROLL], int32_t, roll);
            ADDN(b[X_P_STAMP], last_stamp, 5);
            ADD(b[X_N_ENV], int32_t, (int32_t)n_env); /* envelope lines before this one */
        }
        if (level) n_env++;
        p = nl ? nl + 1 : end;
    }
    sum->lines = i;
    sum->env = n_env;
    sum->last_idx = last_env;
    sum->last_level = last_level;
    sum->last_roll = roll;
    memcpy(sum->last_stamp, last_stamp, 5);
    hasher_flush(hs);
    goto out;
nomem:
    rc = -1;
out:
    free(hs);
    free(scratch);
    free(tmp);
    return rc;
}

/* A scan's arrays are handed to Python without a copy: a bytes-like object that owns the malloc'd
   memory (building bytes objects copied ~10 MB per 16 MB chunk while holding the GIL, and the main
   thread waited for it). */
typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t size;
    size_t cap;
    int array; /* which array of a scan (an index of `b` in scan()) */
} Owned;

/* The memory of arrays Python is done with, kept for the next scans by array (a chunk's arrays are
   much like the last one's): a new chunk's arrays in fresh memory cost page faults and the copies of
   growing them, a sixth of a scan. Taken and given back with the GIL held. */
#define SPARES 2
#define SPARE_MAX ((size_t)64 << 20)
static Buf spare[N_BUFS][SPARES];
static int n_spare[N_BUFS];

static void spare_take(int array, Buf *b) {
    if (n_spare[array]) *b = spare[array][--n_spare[array]];
    else b->p = NULL, b->cap = 0;
    b->n = 0;
}

static void spare_give(int array, Buf *b) {
    if (b->p && n_spare[array] < SPARES && b->cap <= SPARE_MAX) spare[array][n_spare[array]++] = *b;
    else free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

static int Owned_getbuffer(Owned *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, 1, flags);
}

static void Owned_dealloc(Owned *self) {
    spare_give(self->array, &(Buf){self->data, 0, self->cap});
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t Owned_len(Owned *self) { return self->size; }

static PyBufferProcs Owned_as_buffer = {(getbufferproc)Owned_getbuffer, NULL};
static PySequenceMethods Owned_as_sequence = {.sq_length = (lenfunc)Owned_len};

static PyTypeObject OwnedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pipeline._vllmscan.Owned",
    .tp_basicsize = sizeof(Owned),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Read-only bytes of one array of a scan (buffer protocol, len()).",
    .tp_dealloc = (destructor)Owned_dealloc,
    .tp_as_buffer = &Owned_as_buffer,
    .tp_as_sequence = &Owned_as_sequence,
};

/* Takes the buffer's memory (the Buf is left empty). */
static PyObject *owned_from(Buf *b, int array) {
    Owned *o = PyObject_New(Owned, &OwnedType);
    if (!o) return NULL;
    o->data = NULL;
    o->size = 0;
    o->cap = 0;
    o->array = array;
    if (!b->p && !(b->p = malloc(1))) { /* never a NULL pointer, even for an empty array */
        Py_DECREF(o);
        return PyErr_NoMemory();
    }
    o->data = b->p;
    o->size = (Py_ssize_t)b->n;
    o->cap = b->cap ? b->cap : 1;
    b->p = NULL;
    b->n = b->cap = 0;
    return (PyObject *)o;
}

PyDoc_STRVAR(scan_doc,
"scan(chunk: bytes, summary_only: bool = False) -> (summary, arrays) | None\n\n"
"Scan whole ASCII lines split on \\n (see the module comment). None when a line is beyond what the\n"
"scanner reads exactly; the caller then uses the Polars path for the chunk. summary = (lines,\n"
"envelope lines, first envelope line or -1, its stamp, last envelope line or -1, its level, its\n"
"stamp, rollovers seen in the chunk); arrays = {name: bytes-like}, see vllm_logs._native_chunk.");

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    int summary_only = 0;
    if (!PyArg_ParseTuple(args, "y*|p", &view, &summary_only)) return NULL;
    if (n_words == 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "_vllmscan.configure() was not called");
        return NULL;
    }
    Buf b[N_BUFS];
    for (int k = 0; k < N_BUFS; k++) spare_take(k, &b[k]);
    Summary sum;
    memset(&sum, 0, sizeof sum);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = scan_chunk(view.buf, (size_t)view.len, b, &sum, summary_only);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = NULL, *arrays = NULL;
    if (rc < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc == 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    arrays = PyDict_New();
    if (!arrays) goto done;
    for (int k = 0; k < N_BUFS; k++) {
        char name[32];
        if (k < B_CLS)
            snprintf(name, sizeof name, "%s_%s", k < N_REC ? "spec" : "stats", REC_NAMES[k % N_REC]);
        else
            snprintf(name, sizeof name, "%s", OTHER_NAMES[k - B_CLS]);
        PyObject *v = owned_from(&b[k], k);
        if (!v || PyDict_SetItemString(arrays, name, v) < 0) {
            Py_XDECREF(v);
            goto done;
        }
        Py_DECREF(v);
    }
    const uint8_t *fs = sum.first_stamp, *ls = sum.last_stamp;
    result = Py_BuildValue("((LLL(iiiii)Li(iiiii)L)O)", (long long)sum.lines, (long long)sum.env,
                           (long long)sum.first_idx, fs[0], fs[1], fs[2], fs[3], fs[4], (long long)sum.last_idx,
                           sum.last_level, ls[0], ls[1], ls[2], ls[3], ls[4], (long long)sum.last_roll, arrays);
done:
    Py_XDECREF(arrays);
    for (int k = 0; k < N_BUFS; k++) spare_give(k, &b[k]);
    return result;
}

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O", &seq)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "configure() takes a sequence of words");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > MAX_WORDS) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "too many words");
        return NULL;
    }
    for (int w = 0; w < n_words; w++) free(words[w]);
    n_words = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t len;
        const char *text = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(fast, k), &len);
        if (!text || len < 2 || len > 255) {
            Py_DECREF(fast);
            if (text) PyErr_SetString(PyExc_ValueError, "words need 2 to 255 bytes");
            return NULL;
        }
        words[n_words] = malloc((size_t)len);
        memcpy(words[n_words], text, (size_t)len);
        patterns[n_words] = words[n_words];
        pattern_len[n_words++] = (size_t)len;
    }
    build_jumps();
    Py_DECREF(fast);
    Py_RETURN_NONE;
}

static PyObject *py_blake2b(PyObject *self, PyObject *args) {
    Py_buffer buf;
    uint8_t out[DIGEST];
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    blake2b_digest(buf.buf, (size_t)buf.len, out);
    PyBuffer_Release(&buf);
    return PyBytes_FromStringAndSize((const char *)out, DIGEST);
}

/* The digests of many byte strings through the lane queues, as a scan computes them (for tests). */
static PyObject *py_blake2b_many(PyObject *self, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O", &seq)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "blake2b10_many() takes a sequence of bytes");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject *result = PyBytes_FromStringAndSize(NULL, n * DIGEST);
    Hasher *hs = hasher_new();
    if (!result || (hash_lanes && !hs)) goto fail;
    char *out = PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < n; i++) {
        char *data;
        Py_ssize_t len;
        if (PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(fast, i), &data, &len) < 0) goto fail;
        hasher_add(hs, (const uint8_t *)data, (size_t)len, &out, (size_t)i * DIGEST);
    }
    hasher_flush(hs);
    free(hs);
    Py_DECREF(fast);
    return result;
fail:
    free(hs);
    Py_DECREF(fast);
    Py_XDECREF(result);
    return hs || !hash_lanes ? NULL : PyErr_NoMemory();
}

/* hash_kernel() -> the lane kernel in use; hash_kernel(name) switches to "avx512", "avx2" (when the CPU
   has it) or "scalar", so tests can check each kernel against hashlib. */
static PyObject *py_hash_kernel(PyObject *self, PyObject *args) {
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "|s", &name)) return NULL;
    if (name) {
        lanes_fn fn = NULL;
        const char *chosen = NULL;
        if (!strcmp(name, "scalar")) chosen = "scalar";
#if defined(__x86_64__) && defined(__GNUC__)
        else if (!strcmp(name, "avx512") && __builtin_cpu_supports("avx512f")) fn = lanes_avx512, chosen = "avx512";
        else if (!strcmp(name, "avx2") && __builtin_cpu_supports("avx2")) fn = lanes_avx2, chosen = "avx2";
#endif
        if (!chosen) {
            PyErr_Format(PyExc_ValueError, "no hash kernel %s on this CPU", name);
            return NULL;
        }
        hash_lanes = fn;
        hash_kernel_name = chosen;
    }
    return PyUnicode_FromString(hash_kernel_name);
}

/* ---- record keys: `hex(hash):n`, n = earlier records of the file with the same hash ------------- */

/* The first 8 bytes of every hash seen in the file, in an open-addressing set (8 bytes a slot, at most
   7/8 full, grown by half: ~10 bytes a record, the parser's only state that grows with the file);
   hashes seen more than once also get a count in a second, small table. Any capacity works: a key's
   home slot is its high bits scaled to the capacity (the hashes are uniform). */
typedef struct {
    uint64_t *keys;
    uint32_t *counts; /* NULL in the main set */
    size_t cap, used;
} Table;

typedef struct {
    PyObject_HEAD
    Table seen, repeated;
    uint32_t zero; /* occurrences of the hash prefix 0, the empty-slot marker */
    int busy;      /* an assign() is running without the GIL */
} KeyState;

static inline size_t home(uint64_t key, size_t cap) { return (size_t)(((unsigned __int128)key * cap) >> 64); }

static inline int too_full(size_t used, size_t cap) { return 8 * used > 7 * cap; }

/* Zeroed memory for a table, written now: the set is probed (read) before it is written, and a read
   of untouched calloc memory maps the shared zero page, whose copy-on-write at the first store then
   flushed the TLBs of the scanning threads' cores too (a tenth of the main thread's time). Large
   tables ask for transparent huge pages: random probes over tens of MB missed the TLB at every key. */
static void *table_alloc(size_t n, size_t size) {
    size_t bytes = n * size, huge = (size_t)2 << 20;
    void *p;
    if (bytes >= huge) {
        bytes = (bytes + huge - 1) / huge * huge;
        p = aligned_alloc(huge, bytes);
#ifdef MADV_HUGEPAGE
        if (p) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    } else {
        p = malloc(bytes);
    }
    if (p) memset(p, 0, bytes);
    return p;
}

/* Room for `more` keys: grown by half, or at once to the capacity they need. */
static int table_grow(Table *t, int with_counts, size_t more) {
    size_t cap = t->cap ? t->cap + t->cap / 2 : 1024;
    if (too_full(t->used + more, cap)) cap = 8 * (t->used + more) / 7 + 1;
    uint64_t *keys = table_alloc(cap, sizeof *keys);
    uint32_t *counts = with_counts ? table_alloc(cap, sizeof *counts) : NULL;
    if (!keys || (with_counts && !counts)) {
        free(keys);
        free(counts);
        return -1;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->keys[i]) continue;
        size_t j = home(t->keys[i], cap);
        while (keys[j]) j = j + 1 == cap ? 0 : j + 1;
        keys[j] = t->keys[i];
        if (with_counts) counts[j] = t->counts[i];
    }
    free(t->keys);
    free(t->counts);
    t->keys = keys;
    t->counts = counts;
    t->cap = cap;
    return 0;
}

static inline uint64_t digest_key(const uint8_t *d) { /* the first 16 hex digits as a number */
    uint64_t key = 0;
    for (int b = 0; b < 8; b++) key = (key << 8) | d[b];
    return key;
}

/* The slot of `key` (inserted when absent, *fresh = 1); NULL when out of memory. */
static uint64_t *table_slot(Table *t, uint64_t key, int with_counts, int *fresh, size_t *index) {
    if (too_full(t->used + 1, t->cap) && table_grow(t, with_counts, 1) < 0) return NULL;
    size_t j = home(key, t->cap);
    while (t->keys[j] && t->keys[j] != key) j = j + 1 == t->cap ? 0 : j + 1;
    *fresh = !t->keys[j];
    if (*fresh) {
        t->keys[j] = key;
        t->used++;
    }
    *index = j;
    return &t->keys[j];
}

static void KeyState_dealloc(KeyState *self) {
    free(self->seen.keys);
    free(self->repeated.keys);
    free(self->repeated.counts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static const char HEXDIGITS[] = "0123456789abcdef";

PyDoc_STRVAR(assign_doc,
"assign(digests: bytes) -> (offsets: bytes, text: bytes)\n\n"
"Record keys for 10-byte hashes in line order: int64 Arrow (large) string offsets and their text.");

static char hex_pairs[512]; /* "000102…ff": the two hex digits of every byte value */

static PyObject *KeyState_assign(KeyState *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    size_t n = (size_t)view.len / DIGEST;
    const uint8_t *digests = view.buf;
    PyObject *offsets = NULL, *text = NULL;
    uint32_t *seen = malloc((n ? n : 1) * sizeof *seen);
    if (!seen) goto nomem;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "KeyState.assign() is already running in another thread");
        goto fail;
    }
    /* Room for all of them first, so that the slots of the next keys can be prefetched: the set
       outgrows the caches (8 bytes a record), and a miss per key cost more than the rest. */
    if (too_full(self->seen.used + n, self->seen.cap) && table_grow(&self->seen, 0, n) < 0) goto nomem;
    enum { AHEAD = 16 };
    size_t length = 0;
    int oom = 0;
    /* without the GIL (the set is this call's alone: busy), so the scanning threads' Python goes on */
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) {
        const uint8_t *d = digests + i * DIGEST;
        if (i + AHEAD < n)
            __builtin_prefetch(&self->seen.keys[home(digest_key(d + AHEAD * DIGEST), self->seen.cap)]);
        uint64_t key = digest_key(d);
        uint32_t seen_before = 0;
        if (key == 0) {
            seen_before = self->zero++;
        } else {
            int fresh;
            size_t j;
            if (!table_slot(&self->seen, key, 0, &fresh, &j)) {
                oom = 1;
                break;
            }
            if (!fresh) {
                if (!table_slot(&self->repeated, key, 1, &fresh, &j)) {
                    oom = 1;
                    break;
                }
                if (fresh) self->repeated.counts[j] = 1;
                seen_before = self->repeated.counts[j]++;
            }
        }
        seen[i] = seen_before;
        length += 2 * DIGEST + 2;
        for (uint32_t v = seen_before; v >= 10; v /= 10) length++;
    }
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (oom) goto nomem;
    /* then the keys, written into text of the exact length */
    offsets = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * (n + 1)));
    text = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)length);
    if (!offsets || !text) goto fail;
    int64_t *off = (int64_t *)PyBytes_AS_STRING(offsets);
    char *out = PyBytes_AS_STRING(text), *w = out;
    off[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *d = digests + i * DIGEST;
        for (int b = 0; b < DIGEST; b++, w += 2) memcpy(w, hex_pairs + 2 * d[b], 2);
        *w++ = ':';
        char digits[10];
        int nd = 0;
        uint32_t v = seen[i];
        do {
            digits[nd++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (nd) *w++ = digits[--nd];
        off[i + 1] = (int64_t)(w - out);
    }
    free(seen);
    PyBuffer_Release(&view);
    return Py_BuildValue("(NN)", offsets, text);
nomem:
    PyErr_NoMemory();
fail:
    free(seen);
    PyBuffer_Release(&view);
    Py_XDECREF(offsets);
    Py_XDECREF(text);
    return NULL;
}

static PyObject *KeyState_reserve(KeyState *self, PyObject *args) {
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n)) return NULL;
    if (n > 0 && too_full(self->seen.used + (size_t)n, self->seen.cap) && table_grow(&self->seen, 0, (size_t)n) < 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyMethodDef KeyState_methods[] = {
    {"assign", (PyCFunction)KeyState_assign, METH_VARARGS, assign_doc},
    {"reserve", (PyCFunction)KeyState_reserve, METH_VARARGS,
     "reserve(n): room for n more hashes now (growing the set later holds the old and new tables at once)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject KeyStateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pipeline._vllmscan.KeyState",
    .tp_basicsize = sizeof(KeyState),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The record hashes seen so far in one file (for the occurrence number of record keys).",
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)KeyState_dealloc,
    .tp_methods = KeyState_methods,
};

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, scan_doc},
    {"configure", configure, METH_VARARGS, "configure(words): the words that make an envelope line rare."},
    {"blake2b10", py_blake2b, METH_VARARGS, "BLAKE2b with a 10-byte digest (for tests against hashlib)."},
    {"blake2b10_many", py_blake2b_many, METH_VARARGS, "blake2b10 of each item, through the lane kernel (for tests)."},
    {"hash_kernel", py_hash_kernel, METH_VARARGS, "hash_kernel([name]): the record-hash kernel in use (or switch it)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_vllmscan", "vLLM log hot path (see vllmscan.c).", -1, methods};

PyMODINIT_FUNC PyInit__vllmscan(void) {
    const uint16_t one = 1;
    if (*(const uint8_t *)&one != 1) {
        PyErr_SetString(PyExc_ImportError, "_vllmscan assumes a little-endian machine");
        return NULL;
    }
    for (int v = 0; v < 256; v++) {
        hex_pairs[2 * v] = HEXDIGITS[v >> 4];
        hex_pairs[2 * v + 1] = HEXDIGITS[v & 15];
    }
    choose_hash_kernel();
    if (PyType_Ready(&KeyStateType) < 0 || PyType_Ready(&OwnedType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&KeyStateType);
    if (PyModule_AddObject(m, "KeyState", (PyObject *)&KeyStateType) < 0) {
        Py_DECREF(&KeyStateType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
