/* Hyperscan anchor for the pattern-matcher benchmark: libhs (block mode) called from C.
 *
 * Usage: hs_bench RULES.tsv CORPUS.txt [--repeat N] [--concat] [--rules-name NAME]
 *
 * RULES.tsv comes from hs_bench.py --emit-tsv (one expression a line: flags, entity ids,
 * expression; see hs_rules.py). The database is compiled (timed apart), then every message of
 * CORPUS.txt (one a line) is scanned with hs_scan, single-threaded, N times (default 3), and
 * the fastest pass is kept. Timed per message: the scan, the match callback (it records the
 * expression), and turning the expressions into the distinct entities (as assay returns them).
 * With --concat, the whole corpus is one buffer (messages separated by NUL bytes, which no
 * rule can match) scanned by one hs_scan call, each match mapped back to its message.
 * Prints one JSON line of the same shape as pattern_bench, with the same checksum (FNV-1a 64
 * over each message's sorted entity ids joined by ',' plus '\n').
 *
 * Build: cc -O2 -o hs_bench hs_bench.c -lhs   (Debian: apt-get install libhyperscan-dev)
 */
#include <hs/hs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die(const char *what) {
    fprintf(stderr, "hs_bench: %s\n", what);
    exit(2);
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) die(path);
    buf[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Entities: interned strings. */
static char **entity_names;
static unsigned n_entities, cap_entities;

static unsigned intern(const char *name) {
    for (unsigned i = 0; i < n_entities; i++)
        if (strcmp(entity_names[i], name) == 0) return i;
    if (n_entities == cap_entities) {
        cap_entities = cap_entities ? cap_entities * 2 : 64;
        entity_names = realloc(entity_names, cap_entities * sizeof *entity_names);
    }
    entity_names[n_entities] = strdup(name);
    return n_entities++;
}

/* Per expression: its entities (offsets into one array). */
static unsigned *expr_ent_start, *expr_ent_len, *ent_of;

struct ctx {
    unsigned *hits;
    unsigned n_hits;
};

/* --concat: the corpus as one buffer, messages separated by NUL bytes; each match is mapped
 * back to its message (the first NUL at or after its end). */
struct concat {
    const unsigned long long *ends; /* offset of each message's NUL */
    size_t n_msg;
    unsigned long long *pairs;      /* message << 32 | expression */
    size_t n_pairs;
};

static int on_match_concat(unsigned id, unsigned long long from, unsigned long long to,
                           unsigned flags, void *p) {
    (void)from; (void)flags;
    struct concat *c = p;
    size_t lo = 0, hi = c->n_msg;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->ends[mid] < to) lo = mid + 1; else hi = mid;
    }
    c->pairs[c->n_pairs++] = (unsigned long long)lo << 32 | id;
    return 0;
}

static int on_match_count(unsigned id, unsigned long long from, unsigned long long to,
                          unsigned flags, void *p) {
    (void)id; (void)from; (void)to; (void)flags;
    ++*(unsigned long long *)p;
    return 0;
}

static int by_u64(const void *a, const void *b) {
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

static int on_match(unsigned id, unsigned long long from, unsigned long long to,
                    unsigned flags, void *p) {
    (void)from; (void)to; (void)flags;
    struct ctx *c = p;
    c->hits[c->n_hits++] = id;
    return 0;
}

/* The distinct entities of the expressions hit, into out; returns how many. */
static unsigned entities_of(const struct ctx *c, unsigned *stamp, unsigned gen, unsigned *out) {
    unsigned n = 0;
    for (unsigned h = 0; h < c->n_hits; h++) {
        unsigned e = c->hits[h];
        for (unsigned k = 0; k < expr_ent_len[e]; k++) {
            unsigned ent = ent_of[expr_ent_start[e] + k];
            if (stamp[ent] != gen) {
                stamp[ent] = gen;
                out[n++] = ent;
            }
        }
    }
    return n;
}

static int by_name(const void *a, const void *b) {
    return strcmp(entity_names[*(const unsigned *)a], entity_names[*(const unsigned *)b]);
}

static uint64_t fnv1a(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static double clock_seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double now(void) { return clock_seconds(CLOCK_MONOTONIC); }

/* The thread's CPU time (what pattern_bench reads from /proc/thread-self/schedstat). */
static double cpu_now(void) { return clock_seconds(CLOCK_THREAD_CPUTIME_ID); }

int main(int argc, char **argv) {
    const char *rules_path = NULL, *corpus_path = NULL, *rules_name = NULL;
    int repeat = 3, concat = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--concat") == 0) concat = 1;
        else if (strcmp(argv[i], "--rules-name") == 0 && i + 1 < argc) rules_name = argv[++i];
        else if (!rules_path) rules_path = argv[i];
        else if (!corpus_path) corpus_path = argv[i];
        else die("usage: hs_bench RULES.tsv CORPUS.txt [--repeat N] [--rules-name NAME]");
    }
    if (!corpus_path || repeat < 1)
        die("usage: hs_bench RULES.tsv CORPUS.txt [--repeat N] [--rules-name NAME]");
    if (!rules_name) rules_name = rules_path;

    /* Rules. */
    size_t rules_len;
    char *rules = read_all(rules_path, &rules_len);
    unsigned n_expr = 0;
    for (size_t i = 0; i < rules_len; i++) n_expr += rules[i] == '\n';
    const char **exprs = malloc(n_expr * sizeof *exprs);
    unsigned *flags = malloc(n_expr * sizeof *flags), *ids = malloc(n_expr * sizeof *ids);
    expr_ent_start = malloc(n_expr * sizeof(unsigned));
    expr_ent_len = calloc(n_expr, sizeof(unsigned));
    ent_of = malloc(rules_len * sizeof(unsigned));
    unsigned n_ent_of = 0;
    char *line = rules;
    for (unsigned e = 0; e < n_expr; e++) {
        char *end = strchr(line, '\n');
        *end = 0;
        char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        if (!tab2) die("bad rules line");
        *tab1 = *tab2 = 0;
        flags[e] = (unsigned)atoi(line);
        ids[e] = e;
        exprs[e] = tab2 + 1;
        expr_ent_start[e] = n_ent_of;
        for (char *tok = strtok(tab1 + 1, ","); tok; tok = strtok(NULL, ",")) {
            ent_of[n_ent_of++] = intern(tok);
            expr_ent_len[e]++;
        }
        line = end + 1;
    }

    /* Corpus. */
    size_t corpus_len;
    char *corpus = read_all(corpus_path, &corpus_len);
    size_t n_msg = 0;
    for (size_t i = 0; i < corpus_len; i++) n_msg += corpus[i] == '\n';
    if (corpus_len && corpus[corpus_len - 1] != '\n') n_msg++;
    const char **msg = malloc(n_msg * sizeof *msg);
    unsigned *msg_len = malloc(n_msg * sizeof *msg_len);
    size_t at = 0;
    for (size_t m = 0; m < n_msg; m++) {
        char *nl = memchr(corpus + at, '\n', corpus_len - at);
        size_t end = nl ? (size_t)(nl - corpus) : corpus_len;
        msg[m] = corpus + at;
        msg_len[m] = (unsigned)(end - at);
        at = end + 1;
    }

    /* In one buffer, single-match would stop each expression after its first message. */
    if (concat)
        for (unsigned e = 0; e < n_expr; e++) flags[e] &= ~HS_FLAG_SINGLEMATCH;

    /* Compile (timed apart). */
    double t0 = now();
    hs_database_t *db;
    hs_compile_error_t *err;
    if (hs_compile_multi(exprs, flags, ids, n_expr, HS_MODE_BLOCK, NULL, &db, &err) != HS_SUCCESS) {
        fprintf(stderr, "hs_bench: expression %d: %s\n", err->expression, err->message);
        return 2;
    }
    hs_scratch_t *scratch = NULL;
    if (hs_alloc_scratch(db, &scratch) != HS_SUCCESS) die("hs_alloc_scratch");
    double build_seconds = now() - t0;

    struct ctx c = {malloc(n_expr * sizeof(unsigned)), 0};
    unsigned *stamp = calloc(n_entities + 1, sizeof(unsigned)), gen = 0;
    unsigned *out = malloc((n_entities + 1) * sizeof(unsigned));

    if (concat) {
        /* One buffer: each message's bytes, then a NUL. */
        char *joined = malloc(corpus_len + 2);
        unsigned long long *ends = malloc(n_msg * sizeof *ends), off = 0;
        for (size_t m = 0; m < n_msg; m++) {
            memcpy(joined + off, msg[m], msg_len[m]);
            off += msg_len[m];
            ends[m] = off;
            joined[off++] = 0;
        }
        /* Untimed: count the matches (to size the buffer), then the answers per message. */
        unsigned long long count = 0;
        if (hs_scan(db, joined, (unsigned)off, 0, scratch, on_match_count, &count) != HS_SUCCESS)
            die("hs_scan");
        unsigned long long *pairs = malloc((count + 1) * sizeof *pairs);
        struct concat cc = {ends, n_msg, pairs, 0};
        uint64_t checksum = 0xcbf29ce484222325ULL;
        size_t total = 0;
        hs_scan(db, joined, (unsigned)off, 0, scratch, on_match_concat, &cc);
        qsort(pairs, cc.n_pairs, sizeof *pairs, by_u64);
        size_t p = 0;
        for (size_t m = 0; m < n_msg; m++) {
            c.n_hits = 0;
            for (; p < cc.n_pairs && (pairs[p] >> 32) == m; p++) {
                unsigned e = (unsigned)pairs[p];
                if (c.n_hits == 0 || c.hits[c.n_hits - 1] != e) c.hits[c.n_hits++] = e;
            }
            unsigned n = entities_of(&c, stamp, ++gen, out);
            total += n;
            qsort(out, n, sizeof *out, by_name);
            for (unsigned k = 0; k < n; k++) {
                if (k) checksum = fnv1a(checksum, ",", 1);
                checksum = fnv1a(checksum, entity_names[out[k]], strlen(entity_names[out[k]]));
            }
            checksum = fnv1a(checksum, "\n", 1);
        }
        /* Timed: the scan (the callback maps each match to its message and records it), then
         * the distinct entities of each message (matches come in end-offset order). */
        double best = 1e300;
        for (int r = 0; r < repeat; r++) {
            size_t sum = 0;
            double start = now();
            cc.n_pairs = 0;
            hs_scan(db, joined, (unsigned)off, 0, scratch, on_match_concat, &cc);
            unsigned long long cur = ~0ULL;
            for (size_t q = 0; q < cc.n_pairs; q++) {
                unsigned long long m = pairs[q] >> 32;
                if (m != cur) {
                    cur = m;
                    ++gen;
                }
                unsigned e = (unsigned)pairs[q];
                for (unsigned k = 0; k < expr_ent_len[e]; k++) {
                    unsigned ent = ent_of[expr_ent_start[e] + k];
                    if (stamp[ent] != gen) {
                        stamp[ent] = gen;
                        sum++;
                    }
                }
            }
            double seconds = now() - start;
            if (sum < total) die("not deterministic");
            if (seconds < best) best = seconds;
        }
        printf("{\"engine\":\"hyperscan-c-concat\",\"hyperscan\":\"%s\",\"rules\":\"%s\","
               "\"expressions\":%u,\"messages\":%zu,\"seconds\":%.6f,"
               "\"messages_per_second\":%.1f,\"matched_entity_total\":%zu,"
               "\"checksum\":\"%016llx\",\"build_seconds\":%.6f,\"repeat\":%d}\n",
               hs_version(), rules_name, n_expr, n_msg, best, (double)n_msg / best, total,
               (unsigned long long)checksum, build_seconds, repeat);
        return 0;
    }

    /* Untimed pass: the answers, for the checksum. */
    uint64_t checksum = 0xcbf29ce484222325ULL;
    size_t total = 0;
    for (size_t m = 0; m < n_msg; m++) {
        c.n_hits = 0;
        if (hs_scan(db, msg[m], msg_len[m], 0, scratch, on_match, &c) != HS_SUCCESS) die("hs_scan");
        unsigned n = entities_of(&c, stamp, ++gen, out);
        total += n;
        qsort(out, n, sizeof *out, by_name);
        for (unsigned k = 0; k < n; k++) {
            if (k) checksum = fnv1a(checksum, ",", 1);
            checksum = fnv1a(checksum, entity_names[out[k]], strlen(entity_names[out[k]]));
        }
        checksum = fnv1a(checksum, "\n", 1);
    }

    /* Timed passes: best of N. */
    double best = 1e300, best_cpu = 1e300;
    for (int r = 0; r < repeat; r++) {
        size_t sum = 0;
        double cpu_start = cpu_now(), start = now();
        for (size_t m = 0; m < n_msg; m++) {
            c.n_hits = 0;
            hs_scan(db, msg[m], msg_len[m], 0, scratch, on_match, &c);
            sum += entities_of(&c, stamp, ++gen, out);
        }
        double seconds = now() - start, cpu = cpu_now() - cpu_start;
        if (sum != total) die("not deterministic");
        if (seconds < best) best = seconds;
        if (cpu < best_cpu) best_cpu = cpu;
    }

    printf("{\"engine\":\"hyperscan-c\",\"hyperscan\":\"%s\",\"rules\":\"%s\",\"expressions\":%u,"
           "\"messages\":%zu,\"seconds\":%.6f,\"messages_per_second\":%.1f,"
           "\"cpu_seconds\":%.6f,\"cpu_messages_per_second\":%.1f,"
           "\"matched_entity_total\":%zu,\"checksum\":\"%016llx\",\"build_seconds\":%.6f,"
           "\"repeat\":%d}\n",
           hs_version(), rules_name, n_expr, n_msg, best, (double)n_msg / best, best_cpu,
           (double)n_msg / best_cpu, total, (unsigned long long)checksum, build_seconds, repeat);
    return 0;
}
