/*
 * pipeline._answerscan — the integrity facts of one response body (pipeline/transforms/answer_scan.py) in C.
 *
 * `scan(body)` reads a body in one pass, without building any Python object for it, and returns the
 * dict `answer_scan._scan_fast` returns — or None whenever it is not *certain* that the reference
 * scanner (`_scan_reference`: orjson, then the standard library) would give the same facts. The
 * Python side then runs the msgspec fast path and the reference exactly as without this module.
 *
 * Certain means (anything else → None):
 *   - the whole body is well-formed UTF-8 and strict JSON (RFC 8259: no NaN / Infinity literals, no raw
 *     control characters in strings, valid escapes, no lone surrogate escapes), nesting at most
 *     MAX_DEPTH deep (orjson and the standard library both stop at ~1,000 levels, differently) and
 *     numbers of at most MAX_NUMBER characters (the standard library refuses integers of more than
 *     4,300 digits, which orjson reads as floats);
 *   - no object has a key twice (orjson keeps the last value, and a decoder that kept the first would
 *     differ), and no key has a backslash escape (an escaped key can equal a plain one);
 *   - the body is one JSON object with a `choices` array, or an SSE stream starting with `data:` whose
 *     every line is a `data: {chunk}` line, a blank line or the final `data: [DONE]` line followed
 *     by nothing but whitespace. Inside a chunk a raw CR or LF is not accepted as whitespace: the
 *     reference splits the stream on LF and decodes line by line;
 *   - every value the facts read has the type the facts need: choices are objects; `message`
 *     (`delta` in a stream) and `logprobs` are objects or null; content is a string or null;
 *     `logprobs.content` an array of objects or null; `token` a string without escapes or null;
 *     `logprob` a number or null (a number is never NaN in strict JSON); `top_logprobs` an array
 *     of at most MAX_TOPS objects whose `token` is a string without escapes or null; `usage` an
 *     object or null whose `prompt_tokens` / `completion_tokens` are integers of at most 18 digits or null.
 *
 * With no escapes a string's UTF-8 bytes are the string, so tokens are compared and tested as bytes:
 * a token is a numeric id when it is non-empty and all ASCII digits (`str.isascii() and isdigit()`).
 * Unknown keys are skipped, their values validated like the rest. The GIL is released while a body is
 * scanned.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef unsigned char u8;

enum { MAX_DEPTH = 64, KEY_CAP = 1024, MAX_TOPS = 64, MAX_NUMBER = 64, MAX_INT_DIGITS = 18 };
#define UNSURE (-1)
#define TRY(x)                        \
    do {                              \
        if ((x) < 0) return UNSURE;   \
    } while (0)
#define KEY(k, n, lit) ((n) == sizeof(lit) - 1 && memcmp((k), (lit), sizeof(lit) - 1) == 0)

typedef struct {
    const u8 *p, *end;
    int depth;
    int sse;   /* inside an SSE chunk: CR and LF are not whitespace */
    int nkeys; /* keys of the objects open now (for the duplicate check), innermost last */
    const u8 *kptr[KEY_CAP];
    uint32_t klen[KEY_CAP];
} Cur;

typedef struct {
    int has; /* 0: None */
    int64_t v;
} OptInt;

typedef struct {
    int64_t entries, dup, missing, not_ids;
    int text; /* some choice has a non-empty content string */
    OptInt prompt, completion;
} Facts;

typedef struct {
    int base; /* this object's keys start at kptr[base] */
    int first;
} Obj;

typedef struct {
    int first;
} Arr;

/* bytes that may appear unescaped in a JSON string without a further look: ASCII from 0x20 except " and \ */
static u8 PLAIN[256];

static void init_tables(void) {
    for (int b = 0x20; b < 0x80; b++) PLAIN[b] = 1;
    PLAIN['"'] = PLAIN['\\'] = 0;
}

static inline void skip_ws(Cur *c) {
    const u8 *p = c->p, *e = c->end;
    if (c->sse)
        while (p < e && (*p == ' ' || *p == '\t')) p++;
    else
        while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    c->p = p;
}

static inline int hexval(u8 b) {
    if (b >= '0' && b <= '9') return b - '0';
    if (b >= 'a' && b <= 'f') return b - 'a' + 10;
    if (b >= 'A' && b <= 'F') return b - 'A' + 10;
    return -1;
}

/* \uXXXX at p (p[0] == '\\'): its code unit, or -1 */
static int u_escape(const u8 *p, const u8 *e) {
    if (e - p < 6 || p[1] != 'u') return -1;
    int v = 0;
    for (int i = 2; i < 6; i++) {
        int h = hexval(p[i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* length of the well-formed UTF-8 sequence (RFC 3629: no overlongs, no surrogates) at p, or -1 */
static inline int utf8_seq(const u8 *p, const u8 *e) {
    u8 b = p[0];
    if (b >= 0xC2 && b <= 0xDF) return (e - p >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : -1;
    if (b >= 0xE0 && b <= 0xEF) {
        if (e - p < 3) return -1;
        u8 lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
        return (p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80) ? 3 : -1;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (e - p < 4) return -1;
        u8 lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
        return (p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80) ? 4 : -1;
    }
    return -1;
}

/* c->p at the opening quote; after it, past the closing quote. *s, *n: the raw bytes between the quotes;
 * *esc: whether they hold a backslash escape. */
static int scan_string(Cur *c, const u8 **s, size_t *n, int *esc) {
    const u8 *p = c->p + 1, *e = c->end;
    int escaped = 0;
    *s = p;
    for (;;) {
        while (p < e && PLAIN[*p]) p++;
        if (p >= e) return UNSURE;
        u8 b = *p;
        if (b == '"') break;
        if (b == '\\') {
            escaped = 1;
            if (e - p < 2) return UNSURE;
            u8 x = p[1];
            if (x == 'u') {
                int cp = u_escape(p, e);
                if (cp < 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return UNSURE; /* a lone low surrogate */
                p += 6;
                if (cp >= 0xD800 && cp <= 0xDBFF) { /* a high surrogate: only as a pair */
                    int lo = u_escape(p, e);
                    if (lo < 0xDC00 || lo > 0xDFFF) return UNSURE;
                    p += 6;
                }
            } else if (x == '"' || x == '\\' || x == '/' || x == 'b' || x == 'f' || x == 'n' || x == 'r' || x == 't') {
                p += 2;
            } else {
                return UNSURE;
            }
            continue;
        }
        if (b < 0x20) return UNSURE; /* a raw control character */
        int k = utf8_seq(p, e);
        if (k < 0) return UNSURE;
        p += k;
    }
    *n = (size_t)(p - *s);
    *esc = escaped;
    c->p = p + 1;
    return 0;
}

static inline int is_digit(u8 b) { return b >= '0' && b <= '9'; }

/* a strict JSON number at c->p. *is_int: no fraction, no exponent; *v: its value when *is_int and it has
 * at most MAX_INT_DIGITS digits (*fits), which always fits in int64. */
static int scan_number(Cur *c, int *is_int, int64_t *v, int *fits) {
    const u8 *p = c->p, *e = c->end, *start = p;
    int neg = 0;
    if (p < e && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= e) return UNSURE;
    const u8 *digits = p;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (p < e && is_digit(*p)) p++;
    else
        return UNSURE;
    const u8 *digits_end = p;
    int integer = 1;
    if (p < e && *p == '.') {
        integer = 0;
        p++;
        if (p >= e || !is_digit(*p)) return UNSURE;
        while (p < e && is_digit(*p)) p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        integer = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || !is_digit(*p)) return UNSURE;
        while (p < e && is_digit(*p)) p++;
    }
    if (p - start > MAX_NUMBER) return UNSURE;
    *is_int = integer;
    *fits = 0;
    if (integer && digits_end - digits <= MAX_INT_DIGITS) {
        int64_t x = 0;
        for (const u8 *q = digits; q < digits_end; q++) x = x * 10 + (*q - '0');
        *v = neg ? -x : x;
        *fits = 1;
    }
    c->p = p;
    return 0;
}

static inline int literal(Cur *c, const char *word, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return UNSURE;
    c->p += n;
    return 0;
}

static inline int null_value(Cur *c) { return literal(c, "null", 4); }

static inline int obj_open(Cur *c, Obj *o) {
    if (++c->depth > MAX_DEPTH) return UNSURE;
    c->p++; /* '{' */
    o->base = c->nkeys;
    o->first = 1;
    return 0;
}

/* 1: a key was read and c->p is at its value; 0: the object closed; UNSURE */
static int obj_key(Cur *c, Obj *o, const u8 **k, size_t *kn) {
    skip_ws(c);
    if (c->p >= c->end) return UNSURE;
    if (*c->p == '}') {
        c->p++;
        c->depth--;
        c->nkeys = o->base;
        return 0;
    }
    if (!o->first) {
        if (*c->p != ',') return UNSURE;
        c->p++;
        skip_ws(c);
        if (c->p >= c->end) return UNSURE;
    }
    if (*c->p != '"') return UNSURE;
    o->first = 0;
    int esc;
    TRY(scan_string(c, k, kn, &esc));
    if (esc || *kn > 0xFFFFFF) return UNSURE;
    uint32_t n = (uint32_t)*kn;
    for (int i = o->base; i < c->nkeys; i++)
        if (c->klen[i] == n && memcmp(c->kptr[i], *k, n) == 0) return UNSURE; /* a duplicate key */
    if (c->nkeys >= KEY_CAP) return UNSURE;
    c->kptr[c->nkeys] = *k;
    c->klen[c->nkeys++] = n;
    skip_ws(c);
    if (c->p >= c->end || *c->p != ':') return UNSURE;
    c->p++;
    skip_ws(c);
    return c->p < c->end ? 1 : UNSURE;
}

static inline int arr_open(Cur *c, Arr *a) {
    if (++c->depth > MAX_DEPTH) return UNSURE;
    c->p++; /* '[' */
    a->first = 1;
    return 0;
}

/* 1: c->p is at the next item; 0: the array closed; UNSURE */
static int arr_next(Cur *c, Arr *a) {
    skip_ws(c);
    if (c->p >= c->end) return UNSURE;
    if (*c->p == ']') {
        c->p++;
        c->depth--;
        return 0;
    }
    if (!a->first) {
        if (*c->p != ',') return UNSURE;
        c->p++;
        skip_ws(c);
        if (c->p >= c->end) return UNSURE;
    }
    a->first = 0;
    return 1;
}

/* any JSON value, validated and skipped */
static int skip_value(Cur *c) {
    if (c->p >= c->end) return UNSURE;
    switch (*c->p) {
    case '{': {
        Obj o;
        const u8 *k;
        size_t kn;
        int r;
        TRY(obj_open(c, &o));
        while ((r = obj_key(c, &o, &k, &kn)) > 0) TRY(skip_value(c));
        return r;
    }
    case '[': {
        Arr a;
        int r;
        TRY(arr_open(c, &a));
        while ((r = arr_next(c, &a)) > 0) TRY(skip_value(c));
        return r;
    }
    case '"': {
        const u8 *s;
        size_t n;
        int esc;
        return scan_string(c, &s, &n, &esc);
    }
    case 't':
        return literal(c, "true", 4);
    case 'f':
        return literal(c, "false", 5);
    case 'n':
        return null_value(c);
    default: {
        int is_int, fits;
        int64_t v;
        return scan_number(c, &is_int, &v, &fits);
    }
    }
}

/* `message` / `delta`: null, or an object whose `content` is a string or null */
static int content_holder(Cur *c, Facts *f) {
    if (*c->p == 'n') return null_value(c);
    if (*c->p != '{') return UNSURE;
    Obj o;
    const u8 *k;
    size_t kn;
    int r;
    TRY(obj_open(c, &o));
    while ((r = obj_key(c, &o, &k, &kn)) > 0) {
        if (KEY(k, kn, "content")) {
            if (*c->p == '"') {
                const u8 *s;
                size_t n;
                int esc;
                TRY(scan_string(c, &s, &n, &esc));
                if (n) f->text = 1; /* escaped or not, a non-empty raw string is a non-empty string */
            } else if (*c->p == 'n') {
                TRY(null_value(c));
            } else {
                return UNSURE;
            }
        } else {
            TRY(skip_value(c));
        }
    }
    return r;
}

/* `top_logprobs`: at most MAX_TOPS objects; a position counts once when two of its tokens are equal */
static int tops(Cur *c, Facts *f) {
    const u8 *tp[MAX_TOPS];
    size_t tn[MAX_TOPS];
    int count = 0, r;
    Arr a;
    TRY(arr_open(c, &a));
    while ((r = arr_next(c, &a)) > 0) {
        if (count >= MAX_TOPS || *c->p != '{') return UNSURE;
        tp[count] = NULL; /* an absent or null token is None: equal to another None, to no string */
        tn[count] = 0;
        Obj o;
        const u8 *k;
        size_t kn;
        int q;
        TRY(obj_open(c, &o));
        while ((q = obj_key(c, &o, &k, &kn)) > 0) {
            if (KEY(k, kn, "token")) {
                if (*c->p == '"') {
                    int esc;
                    TRY(scan_string(c, &tp[count], &tn[count], &esc));
                    if (esc) return UNSURE;
                } else if (*c->p == 'n') {
                    TRY(null_value(c));
                } else {
                    return UNSURE; /* a number or bool: 1, 1.0 and true are one set element in Python */
                }
            } else {
                TRY(skip_value(c));
            }
        }
        TRY(q);
        count++;
    }
    TRY(r);
    for (int i = 0; i < count; i++)
        for (int j = i + 1; j < count; j++) {
            int same = tp[i] == NULL || tp[j] == NULL
                           ? tp[i] == tp[j]
                           : tn[i] == tn[j] && memcmp(tp[i], tp[j], tn[i]) == 0;
            if (same) {
                f->dup++;
                return 0;
            }
        }
    return 0;
}

/* one `logprobs.content` entry */
static int entry(Cur *c, Facts *f) {
    if (*c->p != '{') return UNSURE;
    int id = 0, has_logprob = 0, r;
    Obj o;
    const u8 *k;
    size_t kn;
    TRY(obj_open(c, &o));
    while ((r = obj_key(c, &o, &k, &kn)) > 0) {
        u8 b = *c->p;
        if (KEY(k, kn, "token")) {
            if (b == '"') {
                const u8 *s;
                size_t n;
                int esc;
                TRY(scan_string(c, &s, &n, &esc));
                if (esc) return UNSURE;
                id = n > 0;
                for (size_t i = 0; i < n && id; i++) id = is_digit(s[i]);
            } else if (b == 'n') {
                TRY(null_value(c));
            } else {
                return UNSURE;
            }
        } else if (KEY(k, kn, "logprob")) {
            if (b == 'n') {
                TRY(null_value(c));
            } else if (b == '-' || is_digit(b)) {
                int is_int, fits;
                int64_t v;
                TRY(scan_number(c, &is_int, &v, &fits));
                has_logprob = 1;
            } else {
                return UNSURE; /* a string ("nan"), bool, array, object */
            }
        } else if (KEY(k, kn, "top_logprobs")) {
            if (b == 'n')
                TRY(null_value(c));
            else if (b == '[')
                TRY(tops(c, f));
            else
                return UNSURE;
        } else {
            TRY(skip_value(c));
        }
    }
    TRY(r);
    f->entries++;
    f->missing += !has_logprob;
    f->not_ids += !id;
    return 0;
}

/* `logprobs`: null, or an object whose `content` is null or an array of entries */
static int logprobs(Cur *c, Facts *f) {
    if (*c->p == 'n') return null_value(c);
    if (*c->p != '{') return UNSURE;
    Obj o;
    const u8 *k;
    size_t kn;
    int r;
    TRY(obj_open(c, &o));
    while ((r = obj_key(c, &o, &k, &kn)) > 0) {
        if (KEY(k, kn, "content")) {
            if (*c->p == 'n') {
                TRY(null_value(c));
            } else if (*c->p == '[') {
                Arr a;
                int q;
                TRY(arr_open(c, &a));
                while ((q = arr_next(c, &a)) > 0) TRY(entry(c, f));
                TRY(q);
            } else {
                return UNSURE;
            }
        } else {
            TRY(skip_value(c));
        }
    }
    return r;
}

/* `choices`: an array of objects; the text is under `message` (a chat.completion) or `delta` (a chunk) */
static int choices(Cur *c, Facts *f, int sse) {
    Arr a;
    int r;
    TRY(arr_open(c, &a));
    while ((r = arr_next(c, &a)) > 0) {
        if (*c->p != '{') return UNSURE;
        Obj o;
        const u8 *k;
        size_t kn;
        int q;
        TRY(obj_open(c, &o));
        while ((q = obj_key(c, &o, &k, &kn)) > 0) {
            if (sse ? KEY(k, kn, "delta") : KEY(k, kn, "message"))
                TRY(content_holder(c, f));
            else if (KEY(k, kn, "logprobs"))
                TRY(logprobs(c, f));
            else
                TRY(skip_value(c));
        }
        TRY(q);
    }
    return r;
}

static int usage_int(Cur *c, OptInt *out) {
    if (*c->p == 'n') {
        out->has = 0;
        return null_value(c);
    }
    int is_int, fits;
    TRY(scan_number(c, &is_int, &out->v, &fits));
    if (!is_int || !fits) return UNSURE; /* a float, or an integer orjson might read as a float */
    out->has = 1;
    return 0;
}

/* `usage`: null or an object; *truthy: a non-empty object (what `if chunk.get("usage")` takes) */
static int usage(Cur *c, OptInt *prompt, OptInt *completion, int *truthy) {
    prompt->has = completion->has = 0;
    *truthy = 0;
    if (*c->p == 'n') return null_value(c);
    if (*c->p != '{') return UNSURE;
    Obj o;
    const u8 *k;
    size_t kn;
    int r;
    TRY(obj_open(c, &o));
    while ((r = obj_key(c, &o, &k, &kn)) > 0) {
        *truthy = 1;
        if (KEY(k, kn, "prompt_tokens"))
            TRY(usage_int(c, prompt));
        else if (KEY(k, kn, "completion_tokens"))
            TRY(usage_int(c, completion));
        else
            TRY(skip_value(c));
    }
    return r;
}

/* a chat.completion object (sse = 0) or one chat.completion.chunk of a stream (sse = 1) */
static int document(Cur *c, Facts *f, int sse) {
    if (c->p >= c->end || *c->p != '{') return UNSURE;
    int has_choices = 0, r;
    Obj o;
    const u8 *k;
    size_t kn;
    TRY(obj_open(c, &o));
    while ((r = obj_key(c, &o, &k, &kn)) > 0) {
        if (KEY(k, kn, "choices")) {
            if (*c->p == '[') {
                TRY(choices(c, f, sse));
                has_choices = 1;
            } else if (sse && *c->p == 'n') {
                TRY(null_value(c)); /* `chunk.get("choices") or ()` */
            } else {
                return UNSURE; /* not a chat.completion: the reference raises its BodyError */
            }
        } else if (KEY(k, kn, "usage")) {
            OptInt prompt, completion;
            int truthy;
            TRY(usage(c, &prompt, &completion, &truthy));
            if (truthy || !sse) { /* a stream keeps the usage of the last chunk that has a non-empty one */
                f->prompt = prompt;
                f->completion = completion;
            }
        } else {
            TRY(skip_value(c));
        }
    }
    TRY(r);
    return sse || has_choices ? 0 : UNSURE;
}

static inline int line_space(u8 b) { return b == ' ' || b == '\t' || b == '\r'; }

/* `data: {chunk}` lines, blank lines between them, and `data: [DONE]` then only whitespace */
static int stream(Cur *c, Facts *f) {
    const u8 *e = c->end;
    for (;;) {
        if (e - c->p < 5 || memcmp(c->p, "data:", 5) != 0) return UNSURE;
        c->p += 5;
        while (c->p < e && (*c->p == ' ' || *c->p == '\t')) c->p++;
        if (c->p < e && *c->p == '[') {
            TRY(literal(c, "[DONE]", 6));
            while (c->p < e && (line_space(*c->p) || *c->p == '\n')) c->p++;
            return c->p == e ? 0 : UNSURE;
        }
        TRY(document(c, f, 1));
        /* the rest of the line is whitespace the reference strips (`line[5:].strip()`) */
        while (c->p < e && line_space(*c->p)) c->p++;
        if (c->p >= e || *c->p != '\n') return UNSURE;
        c->p++;
        for (;;) { /* blank lines: the reference skips lines that do not start with data: */
            const u8 *q = c->p;
            while (q < e && line_space(*q)) q++;
            if (q >= e || *q != '\n') break;
            c->p = q + 1;
        }
    }
}

static int scan_body(const u8 *buf, size_t n, Facts *f, int *sse) {
    Cur c;
    c.p = buf;
    c.end = buf + n;
    c.depth = 0;
    c.nkeys = 0;
    if (n >= 5 && memcmp(buf, "data:", 5) == 0) {
        c.sse = *sse = 1;
        return stream(&c, f);
    }
    c.sse = *sse = 0;
    skip_ws(&c);
    TRY(document(&c, f, 0));
    skip_ws(&c);
    return c.p == c.end ? 0 : UNSURE;
}

/* ---- Python ------------------------------------------------------------------------------------- */

enum { K_PROMPT, K_COMPLETION, K_ENTRIES, K_DUP, K_NAN, K_MISSING, K_NOT_IDS, K_EMPTY, K_SSE, K_COMPLETE, N_KEYS };
static const char *KEY_NAMES[N_KEYS] = {"prompt_tokens", "completion_tokens", "logprob_tokens",
                                        "duplicate_top_logprob_positions", "nan_logprobs", "missing_logprobs",
                                        "tokens_not_ids", "empty", "sse", "complete"};
static PyObject *keys[N_KEYS];

static int set_item(PyObject *d, int key, PyObject *value) { /* steals value */
    if (!value) return -1;
    int rc = PyDict_SetItem(d, keys[key], value);
    Py_DECREF(value);
    return rc;
}

static PyObject *opt_int(OptInt x) {
    if (!x.has) Py_RETURN_NONE;
    return PyLong_FromLongLong(x.v);
}

PyDoc_STRVAR(scan_doc,
"scan(body: bytes) -> dict | None\n\n"
"The facts `answer_scan._scan_fast` returns for a response body, or None when the body is beyond\n"
"what this scanner reads exactly (see the module comment); the caller then uses the Python paths.");

static PyObject *scan(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Facts f;
    memset(&f, 0, sizeof f);
    int sse = 0, rc;
    Py_BEGIN_ALLOW_THREADS
    rc = scan_body((const u8 *)view.buf, (size_t)view.len, &f, &sse);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (rc < 0) Py_RETURN_NONE;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    if (set_item(d, K_PROMPT, opt_int(f.prompt)) < 0 || set_item(d, K_COMPLETION, opt_int(f.completion)) < 0 ||
        set_item(d, K_ENTRIES, PyLong_FromLongLong(f.entries)) < 0 ||
        set_item(d, K_DUP, PyLong_FromLongLong(f.dup)) < 0 || set_item(d, K_NAN, PyLong_FromLong(0)) < 0 ||
        set_item(d, K_MISSING, PyLong_FromLongLong(f.missing)) < 0 ||
        set_item(d, K_NOT_IDS, PyLong_FromLongLong(f.not_ids)) < 0 ||
        set_item(d, K_EMPTY, PyBool_FromLong(f.entries == 0 && !f.text)) < 0 ||
        set_item(d, K_SSE, PyBool_FromLong(sse)) < 0 || set_item(d, K_COMPLETE, PyBool_FromLong(1)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyMethodDef methods[] = {{"scan", scan, METH_O, scan_doc}, {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_answerscan", "Response-body facts (see answerscan.c).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__answerscan(void) {
    init_tables();
    for (int i = 0; i < N_KEYS; i++)
        if (!keys[i] && !(keys[i] = PyUnicode_InternFromString(KEY_NAMES[i]))) return NULL;
    return PyModule_Create(&module);
}
