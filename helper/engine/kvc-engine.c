// SPDX-License-Identifier: GPL-2.0
/*
 * kvc-engine: the reference inference engine's command line. It runs the
 * float32 Llama-style model of model.c on the CPU and reuses KV blocks
 * through libkvcache, to measure what the cache buys (time to first token,
 * throughput) and to check that reuse changes nothing (bit-exact logits).
 *
 *   kvc-engine [options] ttft --contexts 512,1024,2048,4096
 *   kvc-engine [options] chat --turns 8 --turn-tokens 128 --gen 16
 *   kvc-engine [options] agent --steps 8 --system-tokens 2048 ...
 *   kvc-engine [options] serve --requests 200 --clients 28 --prompts 100 ...
 *   kvc-engine [options] verify --context 1024 [--phase store|load]
 *
 * Prompts are made of pseudo-random tokens from a prompt seed; a run picks
 * a new seed (printed) unless --prompt-seed fixes one, so that its prompts
 * start uncached. Exit status: 0 ok, 1 failure, 2 usage error.
 *
 * The namespace identity: model "kvc-ref/" and model_describe()'s shape
 * (the same shape is the same model, whatever --model called it),
 * weights_revision the weights' seed in decimal, tokenizer
 * "kvc-ref-bytes", kv_layout "kvc-ref-v1" (model.h), kv_dtype "f32".
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "engine.h"
#include "libkvcache.h"
#include "model.h"
/* The engine builds without common/ on its path; only this is shared. */
#include "rand.h"

#define EXIT_USAGE	2
#define MAX_CONTEXTS	64

struct opts {
	const char *socket;
	uint32_t ns_id;
	const char *model;		/* tiny, demo, custom */
	struct model_config over;	/* fields given on the command line */
	unsigned int over_set;		/* OVER_* bits */
	uint32_t tpb;
	int no_cache;
	unsigned int threads;
	const char *csv;
	int quiet;
	uint64_t prompt_seed;
	int prompt_seed_set;
	/* ttft */
	uint32_t contexts[MAX_CONTEXTS];
	unsigned int ncontexts;
	/* chat, agent */
	uint32_t turns, turn_tokens, gen, steps, system_tokens, tool_tokens;
	int verify_each;
	/* serve */
	uint32_t requests, clients, prompts, shared_tokens, unique_tokens;
	uint32_t docs;
	/* verify */
	uint32_t context;
	const char *phase;
};

enum {
	OVER_LAYERS = 1 << 0, OVER_D = 1 << 1, OVER_HEADS = 1 << 2,
	OVER_KV = 1 << 3, OVER_HD = 1 << 4, OVER_FFN = 1 << 5,
	OVER_VOCAB = 1 << 6, OVER_SEED = 1 << 7, OVER_THETA = 1 << 8,
};

struct app {
	struct opts o;
	const char *cmd;
	struct model_config cfg;
	struct model *model;
	char model_name[192];
	char revision[32];
	struct kvcache *kc;
	struct kvcache_namespace *ns;
	FILE *csv;
};

static const char usage_text[] =
"usage: kvc-engine [options] COMMAND [command options]\n"
"\n"
"Commands:\n"
"  ttft    per context length, a cold then a warm request of one prompt:\n"
"          TTFT of each, speedup, reuse, bit-exact check\n"
"          --contexts LIST   lengths, comma-separated (512,1024,2048,4096)\n"
"  chat    a conversation: each turn adds user tokens, runs a request\n"
"          over the whole conversation and appends the reply\n"
"          --turns N (8) --turn-tokens M (128) --gen G (16) [--verify]\n"
"  agent   a long fixed system and tool prompt (shared by every run),\n"
"          then per step a tool result and a short generated action\n"
"          --steps N (8) --system-tokens S (2048) --tool-tokens T (192)\n"
"          --gen G (24) [--verify]\n"
"  serve   client threads, each with its own sequence, share the model\n"
"          and the kvcache client; the cache starts empty for the run's\n"
"          prompts. Prompt p is shared document p mod D (S tokens), then\n"
"          U tokens of its own; the requests take every prompt once per\n"
"          pass, each pass in its own shuffled order\n"
"          --requests R (200) --clients C (28) --prompts P (100)\n"
"          --shared-tokens S (1024) --unique-tokens U (128) --docs D (4)\n"
"          --gen G (0)\n"
"  reload  per context length, the prompt ttft made with the same\n"
"          --prompt-seed, loaded from wherever the cache holds it now\n"
"          (after kvcachectl flush, from g3 or g4), timed against a\n"
"          full recompute, with the bit-exact check\n"
"          --contexts LIST   as ttft\n"
"  verify  store a prompt, load it back, compare with a full recompute:\n"
"          exit 0 only if the logits are bit-identical\n"
"          --context N (1024) --phase both|store|load (both): store\n"
"          computes and stores, load must reuse a block; both print\n"
"          logits_hash= so two processes can be compared\n"
"\n"
"Options:\n"
"  --socket PATH          kvcached's socket ($KVCACHE_SOCKET, else the\n"
"                         default)\n"
"  --ns ID                namespace (1)\n"
"  --model NAME           tiny, demo (default) or custom (demo's shape\n"
"                         changed by the options below)\n"
"  --layers N --d-model N --heads N --kv-heads N --head-dim N --ffn N\n"
"  --vocab N --seed N --rope-theta X\n"
"                         set one field of the model (KV bytes a token:\n"
"                         layers * 2 * kv-heads * head-dim * 4)\n"
"  --tokens-per-block N   tokens per KV block (64)\n"
"  --no-cache             compute everything, no kvcached\n"
"  --threads N            threads of one prefill (the online CPUs;\n"
"                         serve: 1 per client)\n"
"  --prompt-seed N        prompts' seed (a new one per run; verify: 1)\n"
"  --csv FILE             append rows there (a header if the file is new;\n"
"                         one file per command: their columns differ)\n"
"  --quiet                no progress lines on stderr\n"
"  --help\n"
"\n"
"Exit status: 0 ok, 1 failure (no daemon, logits not bit-identical, ...),\n"
"2 usage error. A kvcache error during a request is reported and the\n"
"request computed instead.\n";

static void usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("kvc-engine: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(kvc-engine --help for the usage)\n", stderr);
	exit(EXIT_USAGE);
}

static void progress(const struct app *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void progress(const struct app *a, const char *fmt, ...)
{
	va_list ap;

	if (a->o.quiet)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* ---- arguments ----------------------------------------------------------- */

static uint64_t parse_u64(const char *s, uint64_t min, uint64_t max,
			  const char *what)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || *s == '-' || v < min || v > max)
		usage_error("%s: expected a number from %llu to %llu, got '%s'",
			    what, (unsigned long long)min,
			    (unsigned long long)max, s);
	return v;
}

static uint32_t parse_u32(const char *s, uint32_t min, uint32_t max,
			  const char *what)
{
	return (uint32_t)parse_u64(s, min, max, what);
}

static void parse_contexts(struct opts *o, const char *arg)
{
	char buf[1024], *save = NULL, *tok;

	if (strlen(arg) >= sizeof(buf))
		usage_error("--contexts: list too long");
	strcpy(buf, arg);
	o->ncontexts = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->ncontexts == MAX_CONTEXTS)
			usage_error("--contexts: at most %d lengths",
				    MAX_CONTEXTS);
		o->contexts[o->ncontexts++] =
			parse_u32(tok, 1, MODEL_MAX_CTX, "--contexts");
	}
	if (!o->ncontexts)
		usage_error("--contexts: no length given");
}

enum {
	OPT_SOCKET = 256, OPT_NS, OPT_MODEL, OPT_LAYERS, OPT_D_MODEL,
	OPT_HEADS, OPT_KV_HEADS, OPT_HEAD_DIM, OPT_FFN, OPT_VOCAB, OPT_SEED,
	OPT_THETA, OPT_TPB, OPT_NO_CACHE, OPT_THREADS, OPT_CSV, OPT_QUIET,
	OPT_PROMPT_SEED, OPT_CONTEXTS, OPT_TURNS, OPT_TURN_TOKENS, OPT_GEN,
	OPT_STEPS, OPT_SYSTEM_TOKENS, OPT_TOOL_TOKENS, OPT_VERIFY,
	OPT_REQUESTS, OPT_CLIENTS, OPT_PROMPTS, OPT_SHARED, OPT_UNIQUE,
	OPT_DOCS, OPT_CONTEXT, OPT_PHASE, OPT_HELP,
};

static const struct option long_opts[] = {
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "ns", required_argument, NULL, OPT_NS },
	{ "model", required_argument, NULL, OPT_MODEL },
	{ "layers", required_argument, NULL, OPT_LAYERS },
	{ "d-model", required_argument, NULL, OPT_D_MODEL },
	{ "heads", required_argument, NULL, OPT_HEADS },
	{ "kv-heads", required_argument, NULL, OPT_KV_HEADS },
	{ "head-dim", required_argument, NULL, OPT_HEAD_DIM },
	{ "ffn", required_argument, NULL, OPT_FFN },
	{ "vocab", required_argument, NULL, OPT_VOCAB },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "rope-theta", required_argument, NULL, OPT_THETA },
	{ "tokens-per-block", required_argument, NULL, OPT_TPB },
	{ "no-cache", no_argument, NULL, OPT_NO_CACHE },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "csv", required_argument, NULL, OPT_CSV },
	{ "quiet", no_argument, NULL, OPT_QUIET },
	{ "prompt-seed", required_argument, NULL, OPT_PROMPT_SEED },
	{ "contexts", required_argument, NULL, OPT_CONTEXTS },
	{ "turns", required_argument, NULL, OPT_TURNS },
	{ "turn-tokens", required_argument, NULL, OPT_TURN_TOKENS },
	{ "gen", required_argument, NULL, OPT_GEN },
	{ "steps", required_argument, NULL, OPT_STEPS },
	{ "system-tokens", required_argument, NULL, OPT_SYSTEM_TOKENS },
	{ "tool-tokens", required_argument, NULL, OPT_TOOL_TOKENS },
	{ "verify", no_argument, NULL, OPT_VERIFY },
	{ "requests", required_argument, NULL, OPT_REQUESTS },
	{ "clients", required_argument, NULL, OPT_CLIENTS },
	{ "prompts", required_argument, NULL, OPT_PROMPTS },
	{ "shared-tokens", required_argument, NULL, OPT_SHARED },
	{ "unique-tokens", required_argument, NULL, OPT_UNIQUE },
	{ "docs", required_argument, NULL, OPT_DOCS },
	{ "context", required_argument, NULL, OPT_CONTEXT },
	{ "phase", required_argument, NULL, OPT_PHASE },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

static void defaults(struct opts *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	memset(o, 0, sizeof(*o));
	o->ns_id = 1;
	o->model = "demo";
	o->tpb = 64;
	o->threads = cpus < 1 ? 1 : cpus > MODEL_MAX_THREADS ?
		     MODEL_MAX_THREADS : (unsigned int)cpus;
	o->contexts[0] = 512;
	o->contexts[1] = 1024;
	o->contexts[2] = 2048;
	o->contexts[3] = 4096;
	o->ncontexts = 4;
	o->turns = 8;
	o->turn_tokens = 128;
	o->gen = UINT32_MAX;	/* per command */
	o->steps = 8;
	o->system_tokens = 2048;
	o->tool_tokens = 192;
	o->requests = 200;
	o->clients = 28;
	o->prompts = 100;
	o->shared_tokens = 1024;
	o->unique_tokens = 128;
	o->docs = 4;
	o->context = 1024;
	o->phase = "both";
}

static void parse_one(struct opts *o, int c, const char *arg,
		      const char *bad)
{
	switch (c) {
	case OPT_SOCKET:
		o->socket = arg;
		break;
	case OPT_NS:
		o->ns_id = parse_u32(arg, 1, UINT32_MAX, "--ns");
		break;
	case OPT_MODEL:
		o->model = arg;
		break;
	case OPT_LAYERS:
		o->over.layers = parse_u32(arg, 1, MODEL_MAX_LAYERS,
					   "--layers");
		o->over_set |= OVER_LAYERS;
		break;
	case OPT_D_MODEL:
		o->over.d_model = parse_u32(arg, 1, MODEL_MAX_DIM, "--d-model");
		o->over_set |= OVER_D;
		break;
	case OPT_HEADS:
		o->over.n_heads = parse_u32(arg, 1, MODEL_MAX_DIM, "--heads");
		o->over_set |= OVER_HEADS;
		break;
	case OPT_KV_HEADS:
		o->over.n_kv_heads = parse_u32(arg, 1, MODEL_MAX_DIM,
					       "--kv-heads");
		o->over_set |= OVER_KV;
		break;
	case OPT_HEAD_DIM:
		o->over.head_dim = parse_u32(arg, 2, MODEL_MAX_HEAD_DIM,
					     "--head-dim");
		o->over_set |= OVER_HD;
		break;
	case OPT_FFN:
		o->over.ffn_dim = parse_u32(arg, 1, MODEL_MAX_FFN, "--ffn");
		o->over_set |= OVER_FFN;
		break;
	case OPT_VOCAB:
		o->over.vocab = parse_u32(arg, 2, MODEL_MAX_VOCAB, "--vocab");
		o->over_set |= OVER_VOCAB;
		break;
	case OPT_SEED:
		o->over.seed = parse_u64(arg, 0, UINT64_MAX, "--seed");
		o->over_set |= OVER_SEED;
		break;
	case OPT_THETA: {
		char *end;

		o->over.rope_theta = strtof(arg, &end);
		if (end == arg || *end)
			usage_error("--rope-theta: not a number: '%s'", arg);
		o->over_set |= OVER_THETA;
		break;
	}
	case OPT_TPB:
		o->tpb = parse_u32(arg, 1, 65536, "--tokens-per-block");
		break;
	case OPT_NO_CACHE:
		o->no_cache = 1;
		break;
	case OPT_THREADS:
		o->threads = parse_u32(arg, 1, MODEL_MAX_THREADS, "--threads");
		break;
	case OPT_CSV:
		o->csv = arg;
		break;
	case OPT_QUIET:
		o->quiet = 1;
		break;
	case OPT_PROMPT_SEED:
		o->prompt_seed = parse_u64(arg, 0, UINT64_MAX,
					   "--prompt-seed");
		o->prompt_seed_set = 1;
		break;
	case OPT_CONTEXTS:
		parse_contexts(o, arg);
		break;
	case OPT_TURNS:
		o->turns = parse_u32(arg, 1, 100000, "--turns");
		break;
	case OPT_TURN_TOKENS:
		o->turn_tokens = parse_u32(arg, 1, MODEL_MAX_CTX,
					   "--turn-tokens");
		break;
	case OPT_GEN:
		o->gen = parse_u32(arg, 0, MODEL_MAX_CTX, "--gen");
		break;
	case OPT_STEPS:
		o->steps = parse_u32(arg, 1, 100000, "--steps");
		break;
	case OPT_SYSTEM_TOKENS:
		o->system_tokens = parse_u32(arg, 1, MODEL_MAX_CTX,
					     "--system-tokens");
		break;
	case OPT_TOOL_TOKENS:
		o->tool_tokens = parse_u32(arg, 1, MODEL_MAX_CTX,
					   "--tool-tokens");
		break;
	case OPT_VERIFY:
		o->verify_each = 1;
		break;
	case OPT_REQUESTS:
		o->requests = parse_u32(arg, 1, 10000000, "--requests");
		break;
	case OPT_CLIENTS:
		o->clients = parse_u32(arg, 1, 1024, "--clients");
		break;
	case OPT_PROMPTS:
		o->prompts = parse_u32(arg, 1, 10000000, "--prompts");
		break;
	case OPT_SHARED:
		o->shared_tokens = parse_u32(arg, 0, MODEL_MAX_CTX,
					     "--shared-tokens");
		break;
	case OPT_UNIQUE:
		o->unique_tokens = parse_u32(arg, 0, MODEL_MAX_CTX,
					     "--unique-tokens");
		break;
	case OPT_DOCS:
		o->docs = parse_u32(arg, 1, 1000000, "--docs");
		break;
	case OPT_CONTEXT:
		o->context = parse_u32(arg, 1, MODEL_MAX_CTX, "--context");
		break;
	case OPT_PHASE:
		if (strcmp(arg, "both") && strcmp(arg, "store") &&
		    strcmp(arg, "load"))
			usage_error("--phase: both, store or load, not '%s'",
				    arg);
		o->phase = arg;
		break;
	case OPT_HELP:
		fputs(usage_text, stdout);
		exit(0);
	default:
		usage_error("unknown option, or one without its value: %s",
			    bad);
	}
}

/* ---- prompts ------------------------------------------------------------- */

/* Streams of tokens: what a prompt part is, and its number. */
enum {
	S_TTFT = 1, S_CHAT, S_SYSTEM, S_TOOL, S_DOC, S_UNIQUE, S_VERIFY,
	S_ORDER,
};

/*
 * n tokens of stream (kind, id) under seed: the same in every process.
 * Token i depends on nothing else, so a stream's prefix is the prefix of
 * a longer draw.
 */
static void make_tokens(uint32_t *out, uint32_t n, uint64_t seed,
			uint32_t kind, uint64_t id, uint32_t vocab)
{
	uint64_t base = kvc_mix64(seed ^
				  kvc_mix64(((uint64_t)kind << 56) ^ id));

	for (uint32_t i = 0; i < n; i++)
		out[i] = (uint32_t)(kvc_mix64(base + KVC_GOLDEN_GAMMA * i) %
				    vocab);
}

/* ---- output -------------------------------------------------------------- */

/* Open the CSV file once; a header first if it is new (empty). */
static void csv_row(struct app *a, const char *header, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void csv_row(struct app *a, const char *header, const char *fmt, ...)
{
	struct stat st;
	va_list ap;

	if (!a->o.csv)
		return;
	if (!a->csv) {
		a->csv = fopen(a->o.csv, "ae");
		if (!a->csv) {
			fprintf(stderr, "kvc-engine: %s: %s\n", a->o.csv,
				strerror(errno));
			a->o.csv = NULL;
			return;
		}
		if (!fstat(fileno(a->csv), &st) && st.st_size == 0)
			fprintf(a->csv, "%s\n", header);
	}
	va_start(ap, fmt);
	vfprintf(a->csv, fmt, ap);
	va_end(ap);
	fflush(a->csv);
}

/* A request survives libkvcache errors; say what they were. */
static void report_errors(const struct engine_result *r)
{
	if (r->errors)
		fprintf(stderr,
			"kvc-engine: kvcache: %s (%u failed call%s, computed "
			"instead)\n", kvcache_strerror(r->last_error),
			r->errors, r->errors == 1 ? "" : "s");
}

/* A request the engine could not run at all (not a kvcache error). */
static int request_failed(uint32_t n, int err)
{
	fprintf(stderr, "kvc-engine: a request of %u tokens failed: %s\n", n,
		strerror(-err));
	return 1;
}

static int make_engine(struct app *a, uint32_t max_tokens,
		       unsigned int threads, struct engine **e)
{
	struct engine_options eo = {
		.model = a->model, .ns = a->ns, .max_tokens = max_tokens,
		.threads = threads,
		/* verify --phase load checks what another process stored */
		.read_only = !strcmp(a->cmd, "verify") &&
			     !strcmp(a->o.phase, "load"),
	};
	int err = engine_create(&eo, e);

	if (err)
		fprintf(stderr, "kvc-engine: engine: %s\n", strerror(-err));
	return err;
}

/* ---- ttft ---------------------------------------------------------------- */

static int cmd_ttft(struct app *a)
{
	static const char header[] =
		"cmd,model,context,ttft_cold_s,ttft_warm_s,speedup,"
		"reused_tokens,computed_tokens,bytes_loaded,blocks_dram,"
		"blocks_g3,blocks_g4,identical,errors";
	uint32_t max = 0, vocab = a->cfg.vocab, *tok;
	struct engine_result cold, warm;
	struct engine *e;
	float *lcold;
	int status = 0;

	for (unsigned int i = 0; i < a->o.ncontexts; i++)
		if (a->o.contexts[i] > max)
			max = a->o.contexts[i];
	tok = malloc((size_t)max * sizeof(*tok));
	lcold = malloc((size_t)vocab * sizeof(float));
	if (!tok || !lcold || make_engine(a, max, a->o.threads, &e)) {
		free(tok);
		free(lcold);
		return 1;
	}
	printf("%8s %12s %12s %8s %8s %12s %9s\n", "context", "ttft_cold_s",
	       "ttft_warm_s", "speedup", "reused", "bytes_loaded",
	       "identical");
	for (unsigned int i = 0; i < a->o.ncontexts; i++) {
		uint32_t n = a->o.contexts[i];
		double speedup;
		int same, ret;

		make_tokens(tok, n, a->o.prompt_seed, S_TTFT, n, vocab);
		progress(a, "ttft: context %u: cold request...\n", n);
		ret = engine_request(e, tok, n, 0, &cold);
		if (ret) {
			status = request_failed(n, ret);
			break;
		}
		report_errors(&cold);
		if (cold.reused_tokens)
			fprintf(stderr, "kvc-engine: context %u: the cold "
				"request reused %u tokens (prompt cached "
				"before?)\n", n, cold.reused_tokens);
		memcpy(lcold, cold.logits, (size_t)vocab * sizeof(float));
		progress(a, "ttft: context %u: cold %.3f s, warm request...\n",
			 n, cold.ttft_s);
		ret = engine_request(e, tok, n, 0, &warm);
		if (ret) {
			status = request_failed(n, ret);
			break;
		}
		report_errors(&warm);
		same = !memcmp(lcold, warm.logits, (size_t)vocab *
						  sizeof(float));
		if (!same)
			status = 1;
		speedup = warm.ttft_s > 0 ? cold.ttft_s / warm.ttft_s : 0;
		progress(a, "ttft: context %u: warm %.3f s (%u tokens reused, "
			 "%.1fx)\n", n, warm.ttft_s, warm.reused_tokens,
			 speedup);
		printf("%8u %12.4f %12.4f %8.1f %8u %12" PRIu64 " %9s\n", n,
		       cold.ttft_s, warm.ttft_s, speedup, warm.reused_tokens,
		       warm.bytes_loaded, same ? "yes" : "NO");
		fflush(stdout);
		csv_row(a, header, "ttft,%s,%u,%.6f,%.6f,%.3f,%u,%u,%" PRIu64
			",%u,%u,%u,%s,%u\n", a->model_name, n, cold.ttft_s,
			warm.ttft_s, speedup, warm.reused_tokens,
			warm.computed_tokens, warm.bytes_loaded,
			warm.tier_blocks[ENGINE_DRAM],
			warm.tier_blocks[ENGINE_G3],
			warm.tier_blocks[ENGINE_G4], same ? "yes" : "no",
			cold.errors + warm.errors);
	}
	engine_free(e);
	free(tok);
	free(lcold);
	return status;
}

/* ---- reload ---------------------------------------------------------------- */

/*
 * The ttft prompts again (same --prompt-seed), served from wherever the
 * cache holds them now: the demo flushes the pool, then g3, between runs
 * to time each tier. Each is checked against a full recompute.
 */
static int cmd_reload(struct app *a)
{
	static const char header[] =
		"cmd,model,context,ttft_s,ttft_full_s,speedup,reused_tokens,"
		"computed_tokens,bytes_loaded,blocks_dram,blocks_g3,"
		"blocks_g4,identical,errors";
	uint32_t max = 0, *tok;
	struct engine_result r;
	struct engine *e;
	int status = 0;

	for (unsigned int i = 0; i < a->o.ncontexts; i++)
		if (a->o.contexts[i] > max)
			max = a->o.contexts[i];
	tok = malloc((size_t)max * sizeof(*tok));
	if (!tok || make_engine(a, max, a->o.threads, &e)) {
		free(tok);
		return 1;
	}
	printf("%8s %10s %12s %8s %8s %6s %6s %6s %9s\n", "context", "ttft_s",
	       "ttft_full_s", "speedup", "reused", "dram", "g3", "g4",
	       "identical");
	for (unsigned int i = 0; i < a->o.ncontexts; i++) {
		uint32_t n = a->o.contexts[i];
		double speedup;
		int same;

		make_tokens(tok, n, a->o.prompt_seed, S_TTFT, n, a->cfg.vocab);
		progress(a, "reload: context %u...\n", n);
		same = engine_verify(e, tok, n, 0, &r);
		if (same < 0) {
			status = request_failed(n, same);
			break;
		}
		report_errors(&r);
		if (!same)
			status = 1;
		speedup = r.ttft_s > 0 ? r.recompute_s / r.ttft_s : 0;
		printf("%8u %10.4f %12.4f %8.1f %8u %6u %6u %6u %9s\n", n,
		       r.ttft_s, r.recompute_s, speedup, r.reused_tokens,
		       r.tier_blocks[ENGINE_DRAM], r.tier_blocks[ENGINE_G3],
		       r.tier_blocks[ENGINE_G4], same ? "yes" : "NO");
		fflush(stdout);
		csv_row(a, header, "reload,%s,%u,%.6f,%.6f,%.3f,%u,%u,%" PRIu64
			",%u,%u,%u,%s,%u\n", a->model_name, n, r.ttft_s,
			r.recompute_s, speedup, r.reused_tokens,
			r.computed_tokens, r.bytes_loaded,
			r.tier_blocks[ENGINE_DRAM], r.tier_blocks[ENGINE_G3],
			r.tier_blocks[ENGINE_G4], same ? "yes" : "no",
			r.errors);
	}
	engine_free(e);
	free(tok);
	return status;
}

/* ---- chat and agent ------------------------------------------------------ */

static const char step_header[] =
	"cmd,model,step,context,ttft_s,reused_tokens,computed_tokens,"
	"bytes_loaded,bytes_stored,blocks_dram,blocks_g3,blocks_g4,"
	"ttft_full_s,identical,errors";

static void step_table_header(const struct app *a)
{
	printf("%5s %8s %10s %8s %9s %12s %12s %12s", "step", "context",
	       "ttft_s", "reused", "computed", "bytes_loaded", "bytes_stored",
	       "dram/g3/g4");
	if (a->o.verify_each)
		printf(" %12s %9s", "ttft_full_s", "identical");
	printf("\n");
}

/*
 * One request over conv[0 .. *len-1]; appends the generated tokens to conv.
 * Returns 0, or 1 on a failure (or a mismatch with --verify).
 */
static int conversation_step(struct app *a, struct engine *e, uint32_t step,
			     uint32_t *conv, uint32_t *len, uint32_t gen)
{
	struct engine_result r;
	char tiers[40], full[32] = "";
	int same = -1, ret;

	if (a->o.verify_each) {
		ret = engine_verify(e, conv, *len, gen, &r);
		if (ret < 0)
			return request_failed(*len, ret);
		same = ret;
	} else {
		ret = engine_request(e, conv, *len, gen, &r);
		if (ret)
			return request_failed(*len, ret);
	}
	report_errors(&r);
	snprintf(tiers, sizeof(tiers), "%u/%u/%u",
		 r.tier_blocks[ENGINE_DRAM], r.tier_blocks[ENGINE_G3],
		 r.tier_blocks[ENGINE_G4]);
	progress(a, "%s: step %u: %u tokens, ttft %.3f s, %u reused\n",
		 a->cmd, step, *len, r.ttft_s, r.reused_tokens);
	printf("%5u %8u %10.4f %8u %9u %12" PRIu64 " %12" PRIu64 " %12s",
	       step, *len, r.ttft_s, r.reused_tokens, r.computed_tokens,
	       r.bytes_loaded, r.bytes_stored, tiers);
	if (same >= 0) {
		printf(" %12.4f %9s", r.recompute_s, same ? "yes" : "NO");
		snprintf(full, sizeof(full), "%.6f", r.recompute_s);
	}
	printf("\n");
	fflush(stdout);
	csv_row(a, step_header, "%s,%s,%u,%u,%.6f,%u,%u,%" PRIu64 ",%" PRIu64
		",%u,%u,%u,%s,%s,%u\n", a->cmd, a->model_name, step, *len,
		r.ttft_s, r.reused_tokens, r.computed_tokens, r.bytes_loaded,
		r.bytes_stored, r.tier_blocks[ENGINE_DRAM],
		r.tier_blocks[ENGINE_G3], r.tier_blocks[ENGINE_G4], full,
		same < 0 ? "" : same ? "yes" : "no", r.errors);
	memcpy(conv + *len, r.generated, r.generated_count * sizeof(*conv));
	*len += r.generated_count;
	return same == 0;
}

static uint32_t cmd_gen(const struct app *a, uint32_t dflt)
{
	return a->o.gen == UINT32_MAX ? dflt : a->o.gen;
}

static int cmd_chat(struct app *a, uint32_t max)
{
	uint32_t gen = cmd_gen(a, 16), len = 0, *conv;
	struct engine *e;
	int status = 0;

	conv = malloc((size_t)max * sizeof(*conv));
	if (!conv || make_engine(a, max, a->o.threads, &e)) {
		free(conv);
		return 1;
	}
	step_table_header(a);
	for (uint32_t t = 1; t <= a->o.turns && !status; t++) {
		make_tokens(conv + len, a->o.turn_tokens, a->o.prompt_seed,
			    S_CHAT, t, a->cfg.vocab);
		len += a->o.turn_tokens;
		status = conversation_step(a, e, t, conv, &len, gen);
	}
	engine_free(e);
	free(conv);
	return status;
}

/* The agent's system and tool prompt: the same for every run. */
#define AGENT_SYSTEM_SEED	0x6b76632d61676e74ull

static int cmd_agent(struct app *a, uint32_t max)
{
	uint32_t gen = cmd_gen(a, 24), len, *conv;
	struct engine *e;
	int status = 0;

	conv = malloc((size_t)max * sizeof(*conv));
	if (!conv || make_engine(a, max, a->o.threads, &e)) {
		free(conv);
		return 1;
	}
	make_tokens(conv, a->o.system_tokens, AGENT_SYSTEM_SEED, S_SYSTEM, 0,
		    a->cfg.vocab);
	len = a->o.system_tokens;
	step_table_header(a);
	for (uint32_t s = 1; s <= a->o.steps && !status; s++) {
		make_tokens(conv + len, a->o.tool_tokens, a->o.prompt_seed,
			    S_TOOL, s, a->cfg.vocab);
		len += a->o.tool_tokens;
		status = conversation_step(a, e, s, conv, &len, gen);
	}
	engine_free(e);
	free(conv);
	return status;
}

/* ---- serve --------------------------------------------------------------- */

struct serve {
	struct app *a;
	uint32_t *order;		/* request -> prompt */
	struct engine_result *res;	/* per request (no pointers kept) */
	int *failed;			/* per request */
	atomic_uint next, done;
	uint32_t len, gen;
};

/* Prompt p: document p % docs (shared), then p's own tokens. */
static void serve_prompt(const struct app *a, uint32_t p, uint32_t *tok)
{
	make_tokens(tok, a->o.shared_tokens, a->o.prompt_seed, S_DOC,
		    p % a->o.docs, a->cfg.vocab);
	make_tokens(tok + a->o.shared_tokens, a->o.unique_tokens,
		    a->o.prompt_seed, S_UNIQUE, p, a->cfg.vocab);
}

static void *serve_client(void *arg)
{
	struct serve *s = arg;
	struct app *a = s->a;
	uint32_t *tok = malloc((size_t)s->len * sizeof(*tok));
	unsigned int step = a->o.requests / 10 ? a->o.requests / 10 : 1;
	struct engine *e = NULL;
	unsigned int i, done;

	if (!tok || make_engine(a, s->len + s->gen, 1, &e)) {
		/* This client serves nothing; the others take its share. */
		free(tok);
		return NULL;
	}
	while ((i = atomic_fetch_add(&s->next, 1)) < a->o.requests) {
		serve_prompt(a, s->order[i], tok);
		/* kvcache errors: summed up at the end, not per request */
		if (engine_request(e, tok, s->len, s->gen, &s->res[i]))
			s->failed[i] = 1;
		s->res[i].logits = NULL;
		s->res[i].generated = NULL;
		done = atomic_fetch_add(&s->done, 1) + 1;
		if (done % step == 0)
			progress(a, "serve: %u/%u requests\n", done,
				 a->o.requests);
	}
	engine_free(e);
	free(tok);
	return NULL;
}

/*
 * The request order: pass after pass over the prompts, each pass in its
 * own shuffled order (Fisher-Yates from the prompt seed), so every prompt
 * comes once before any comes twice. Returns 0 or -ENOMEM.
 */
static int serve_order(const struct app *a, uint32_t *order)
{
	uint32_t np = a->o.prompts, *perm = malloc(np * sizeof(*perm));

	if (!perm)
		return -ENOMEM;
	for (uint32_t first = 0, pass = 0; first < a->o.requests;
	     first += np, pass++) {
		uint32_t left = a->o.requests - first;

		for (uint32_t j = 0; j < np; j++)
			perm[j] = j;
		for (uint32_t j = np - 1; j > 0; j--) {
			uint64_t r = kvc_mix64(a->o.prompt_seed ^
				kvc_mix64(((uint64_t)S_ORDER << 56) |
					  ((uint64_t)pass << 32) | j));
			uint32_t x = (uint32_t)(r % (j + 1)), t = perm[j];

			perm[j] = perm[x];
			perm[x] = t;
		}
		memcpy(order + first, perm,
		       (left < np ? left : np) * sizeof(*perm));
	}
	free(perm);
	return 0;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

static int cmd_serve(struct app *a)
{
	static const char header[] =
		"cmd,model,cache,requests,clients,prompts,docs,shared_tokens,"
		"unique_tokens,wall_s,req_per_s,ttft_mean_s,ttft_p50_s,"
		"ttft_p99_s,hit_rate,blocks_dram,blocks_g3,blocks_g4,"
		"bytes_loaded,bytes_stored,failed,errors";
	struct serve s = { .a = a };
	uint32_t nreq = a->o.requests, ok = 0, failed = 0, errors = 0;
	int last_error = 0;
	uint64_t reused = 0, reusable = 0, tiers[ENGINE_TIERS] = { 0 };
	uint64_t bl = 0, bs = 0;
	pthread_t *th;
	double t0, wall, sum = 0, p50 = 0, p99 = 0, mean = 0, hit;
	double *ttft;
	unsigned int started = 0;
	int status = 0;

	s.len = a->o.shared_tokens + a->o.unique_tokens;
	s.gen = cmd_gen(a, 0);
	if (!s.len)
		usage_error("serve: the prompts are empty");
	s.order = malloc(nreq * sizeof(*s.order));
	s.res = calloc(nreq, sizeof(*s.res));
	s.failed = calloc(nreq, sizeof(*s.failed));
	ttft = malloc(nreq * sizeof(*ttft));
	th = malloc(a->o.clients * sizeof(*th));
	if (!s.order || !s.res || !s.failed || !ttft || !th ||
	    serve_order(a, s.order)) {
		fprintf(stderr, "kvc-engine: out of memory\n");
		status = 1;
		goto out;
	}
	atomic_init(&s.next, 0);
	atomic_init(&s.done, 0);
	progress(a, "serve: %u requests over %u prompts (%u + %u tokens, "
		 "%u documents), %u clients\n", nreq, a->o.prompts,
		 a->o.shared_tokens, a->o.unique_tokens, a->o.docs,
		 a->o.clients);
	t0 = kvc_now();
	for (unsigned int i = 0; i < a->o.clients; i++) {
		if (pthread_create(&th[i], NULL, serve_client, &s))
			break;
		started++;
	}
	for (unsigned int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	wall = kvc_now() - t0;
	if (atomic_load(&s.next) < nreq) {
		fprintf(stderr, "kvc-engine: serve: no client could run\n");
		status = 1;
		goto out;
	}

	for (uint32_t i = 0; i < nreq; i++) {
		const struct engine_result *r = &s.res[i];

		if (s.failed[i]) {
			failed++;
			continue;
		}
		ttft[ok++] = r->ttft_s;
		sum += r->ttft_s;
		reused += r->blocks_loaded;
		reusable += r->blocks_reusable;
		for (int t = 0; t < ENGINE_TIERS; t++)
			tiers[t] += r->tier_blocks[t];
		bl += r->bytes_loaded;
		bs += r->bytes_stored;
		errors += r->errors;
		if (r->errors)
			last_error = r->last_error;
	}
	if (ok) {
		qsort(ttft, ok, sizeof(*ttft), cmp_double);
		mean = sum / ok;
		/* Nearest rank. */
		p50 = ttft[(ok * 50 + 99) / 100 - 1];
		p99 = ttft[(ok * 99 + 99) / 100 - 1];
	}
	hit = reusable ? (double)reused / (double)reusable : 0;
	printf("requests      %u (%u failed) in %.2f s: %.3f req/s\n", nreq,
	       failed, wall, nreq / wall);
	printf("clients       %u, prompts %u (%u documents of %u tokens + "
	       "%u unique)\n", a->o.clients, a->o.prompts, a->o.docs,
	       a->o.shared_tokens, a->o.unique_tokens);
	printf("ttft          mean %.4f s, p50 %.4f s, p99 %.4f s\n", mean, p50,
	       p99);
	printf("hit rate      %.3f (%" PRIu64 " of %" PRIu64 " reusable "
	       "blocks)\n", hit, reused, reusable);
	printf("loads         dram %" PRIu64 ", g3 %" PRIu64 ", g4 %" PRIu64
	       " blocks, %" PRIu64 " bytes; stored %" PRIu64 " bytes\n",
	       tiers[ENGINE_DRAM], tiers[ENGINE_G3], tiers[ENGINE_G4], bl, bs);
	if (errors)
		printf("errors        %u failed kvcache calls (computed "
		       "instead), the last: %s\n", errors,
		       kvcache_strerror(last_error));
	csv_row(a, header, "serve,%s,%s,%u,%u,%u,%u,%u,%u,%.4f,%.4f,%.6f,%.6f,"
		"%.6f,%.4f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%"
		PRIu64 ",%u,%u\n", a->model_name, a->ns ? "yes" : "no", nreq,
		a->o.clients, a->o.prompts, a->o.docs, a->o.shared_tokens,
		a->o.unique_tokens, wall, nreq / wall, mean, p50, p99, hit,
		tiers[ENGINE_DRAM], tiers[ENGINE_G3], tiers[ENGINE_G4], bl, bs,
		failed, errors);
	if (failed)
		status = 1;
out:
	free(s.order);
	free(s.res);
	free(s.failed);
	free(ttft);
	free(th);
	return status;
}

/* ---- verify -------------------------------------------------------------- */

static int cmd_verify(struct app *a)
{
	static const char header[] =
		"cmd,model,phase,context,reused_tokens,computed_tokens,"
		"blocks_stored,identical,logits_hash";
	uint32_t n = a->o.context, *tok;
	const char *phase = a->o.phase;
	struct engine_result r;
	struct engine *e;
	int same = -1, status = 0, ret;

	tok = malloc((size_t)n * sizeof(*tok));
	if (!tok || make_engine(a, n, a->o.threads, &e)) {
		free(tok);
		return 1;
	}
	make_tokens(tok, n, a->o.prompt_seed, S_VERIFY, n, a->cfg.vocab);
	if (strcmp(phase, "load")) {
		/* both, store: compute (or reuse) and store. */
		ret = engine_request(e, tok, n, 0, &r);
		if (ret) {
			status = request_failed(n, ret);
			goto out;
		}
		report_errors(&r);
		progress(a, "verify: %u tokens, %u reused, %u blocks stored "
			 "(%u cached before)\n", n, r.reused_tokens,
			 r.blocks_stored, r.blocks_matched);
		if (a->ns && r.blocks_total &&
		    !r.blocks_stored && !r.blocks_matched) {
			fprintf(stderr, "kvc-engine: verify: no block could be "
				"stored\n");
			status = 1;
		}
	}
	if (strcmp(phase, "store")) {
		/* both, load: reuse and compare with a full recompute. */
		ret = engine_verify(e, tok, n, 0, &r);
		if (ret < 0) {
			status = request_failed(n, ret);
			goto out;
		}
		same = ret;
		report_errors(&r);
		progress(a, "verify: %u tokens, %u reused, full recompute "
			 "%.3f s, warm ttft %.3f s\n", n, r.reused_tokens,
			 r.recompute_s, r.ttft_s);
		if (!same) {
			fprintf(stderr, "kvc-engine: verify: the logits with "
				"reuse differ from a full recompute\n");
			status = 1;
		}
		if (a->ns && !r.reused_tokens) {
			fprintf(stderr, "kvc-engine: verify: no block was "
				"reused\n");
			status = 1;
		}
	}
	printf("phase=%s context=%u reused_tokens=%u computed_tokens=%u "
	       "blocks_stored=%u from_dram=%u from_g3=%u from_g4=%u "
	       "identical=%s logits_hash=%016" PRIx64 "\n",
	       phase, n, r.reused_tokens, r.computed_tokens, r.blocks_stored,
	       r.tier_blocks[ENGINE_DRAM], r.tier_blocks[ENGINE_G3],
	       r.tier_blocks[ENGINE_G4],
	       same < 0 ? "n/a" : same ? "yes" : "no", r.logits_hash);
	csv_row(a, header, "verify,%s,%s,%u,%u,%u,%u,%s,%016" PRIx64 "\n",
		a->model_name, phase, n, r.reused_tokens, r.computed_tokens,
		r.blocks_stored, same < 0 ? "" : same ? "yes" : "no",
		r.logits_hash);
out:
	engine_free(e);
	free(tok);
	return status;
}

/* ---- setup --------------------------------------------------------------- */

static void build_config(struct app *a)
{
	const struct opts *o = &a->o;
	const char *base = strcmp(o->model, "custom") ? o->model : "demo";
	struct model_config *c = &a->cfg;

	if (model_config_named(base, c))
		usage_error("--model: tiny, demo or custom, not '%s'",
			    o->model);
	if (o->over_set & OVER_LAYERS)
		c->layers = o->over.layers;
	if (o->over_set & OVER_D)
		c->d_model = o->over.d_model;
	if (o->over_set & OVER_HEADS)
		c->n_heads = o->over.n_heads;
	if (o->over_set & OVER_KV)
		c->n_kv_heads = o->over.n_kv_heads;
	if (o->over_set & OVER_HD)
		c->head_dim = o->over.head_dim;
	if (o->over_set & OVER_FFN)
		c->ffn_dim = o->over.ffn_dim;
	if (o->over_set & OVER_VOCAB)
		c->vocab = o->over.vocab;
	if (o->over_set & OVER_SEED)
		c->seed = o->over.seed;
	if (o->over_set & OVER_THETA)
		c->rope_theta = o->over.rope_theta;
	if (model_config_check(c))
		usage_error("invalid model: layers %u, d-model %u, heads %u, "
			    "kv-heads %u (must divide heads), head-dim %u "
			    "(even), ffn %u, vocab %u, rope-theta %g",
			    c->layers, c->d_model, c->n_heads, c->n_kv_heads,
			    c->head_dim, c->ffn_dim, c->vocab,
			    (double)c->rope_theta);
}

/* The most tokens one sequence of the command holds. */
static uint64_t needed_tokens(const struct app *a)
{
	const struct opts *o = &a->o;
	uint64_t max = 0;

	if (!strcmp(a->cmd, "ttft") || !strcmp(a->cmd, "reload")) {
		for (unsigned int i = 0; i < o->ncontexts; i++)
			if (o->contexts[i] > max)
				max = o->contexts[i];
	} else if (!strcmp(a->cmd, "chat")) {
		max = (uint64_t)o->turns *
		      (o->turn_tokens + cmd_gen(a, 16));
	} else if (!strcmp(a->cmd, "agent")) {
		max = o->system_tokens + (uint64_t)o->steps *
		      (o->tool_tokens + cmd_gen(a, 24));
	} else if (!strcmp(a->cmd, "serve")) {
		max = (uint64_t)o->shared_tokens + o->unique_tokens +
		      cmd_gen(a, 0);
	} else {
		max = o->context;
	}
	return max;
}

static int open_cache(struct app *a)
{
	struct kvcache_options ko = {
		.socket = a->o.socket,
		/* serve: a connection for every few clients */
		.connections = !strcmp(a->cmd, "serve") ?
			       (a->o.clients < 16 ? a->o.clients : 16) : 0,
	};
	struct kvcache_identity id = {
		.model = a->model_name, .weights_revision = a->revision,
		.tokenizer = "kvc-ref-bytes", .kv_layout = "kvc-ref-v1",
		.kv_dtype = "f32", .lora = "",
		.tokens_per_block = a->o.tpb,
		.tp_rank = 0, .tp_size = 1, .pp_rank = 0, .pp_size = 1,
	};
	size_t bb = kv_block_bytes(a->model, a->o.tpb);
	struct kvcache_client_info info;
	int err;

	err = kvcache_open(&ko, &a->kc);
	if (err) {
		fprintf(stderr, "kvc-engine: cannot connect to kvcached (%s): "
			"%s\n", a->o.socket ? a->o.socket :
			getenv("KVCACHE_SOCKET") ? getenv("KVCACHE_SOCKET") :
			KVCACHE_DEFAULT_SOCKET, kvcache_strerror(err));
		return 1;
	}
	err = kvcache_get_info(a->kc, &info);
	if (err) {
		fprintf(stderr, "kvc-engine: kvcache: %s\n",
			kvcache_strerror(err));
		return 1;
	}
	if (bb > info.block_size) {
		fprintf(stderr, "kvc-engine: a block of %u tokens holds %zu "
			"bytes of KV, more than the pool's blocks (%" PRIu64
			"): lower --tokens-per-block\n", a->o.tpb, bb,
			info.block_size);
		return 1;
	}
	err = kvcache_ns_open(a->kc, a->o.ns_id, &id, bb, &a->ns);
	if (err) {
		fprintf(stderr, "kvc-engine: namespace %u: %s\n", a->o.ns_id,
			kvcache_strerror(err));
		return 1;
	}
	progress(a, "kvcache: %s mode, %" PRIu64 " blocks of %" PRIu64
		 " bytes; namespace %u, %u tokens (%zu bytes) a block\n",
		 info.mode == KVCACHE_MODE_KERNEL ? "kernel" : "memfd",
		 info.nr_blocks, info.block_size, a->o.ns_id, a->o.tpb, bb);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const cmds[] = {
		"ttft", "reload", "chat", "agent", "serve", "verify",
	};
	struct app a = { 0 };
	uint64_t need;
	char shape[128];
	double t0;
	int c, err, status = 1;

	defaults(&a.o);
	opterr = 0;	/* parse_one() says what was wrong */
	while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1)
		parse_one(&a.o, c, optarg, argv[optind - 1]);
	if (optind != argc - 1)
		usage_error(optind >= argc ? "no command given" :
			    "one command at a time");
	a.cmd = argv[optind];
	for (c = 0; c < (int)(sizeof(cmds) / sizeof(cmds[0])); c++)
		if (!strcmp(a.cmd, cmds[c]))
			break;
	if (c == (int)(sizeof(cmds) / sizeof(cmds[0])))
		usage_error("unknown command '%s'", a.cmd);
	if (!a.o.prompt_seed_set) {
		/* verify's phases run in different processes: fixed. */
		a.o.prompt_seed = !strcmp(a.cmd, "verify") ? 1 :
				  kvc_mix64((uint64_t)time(NULL) ^
					    ((uint64_t)getpid() << 32));
	}

	build_config(&a);
	need = needed_tokens(&a);
	if (!need || need > MODEL_MAX_CTX)
		usage_error("%s needs %" PRIu64 " tokens of context; 1 to %u "
			    "are possible", a.cmd, need, MODEL_MAX_CTX);
	if (need > a.cfg.max_ctx)
		a.cfg.max_ctx = (uint32_t)need;
	model_describe(&a.cfg, shape, sizeof(shape));
	snprintf(a.model_name, sizeof(a.model_name), "kvc-ref/%s", shape);
	snprintf(a.revision, sizeof(a.revision), "%" PRIu64, a.cfg.seed);

	t0 = kvc_now();
	err = model_create(&a.cfg, &a.model);
	if (err) {
		fprintf(stderr, "kvc-engine: model: %s\n", strerror(-err));
		return 1;
	}
	progress(&a, "model %s seed %s: %.1f MiB of weights in %.2f s; "
		 "%zu bytes of KV a token; %u threads; prompt seed %" PRIu64
		 "\n", a.model_name, a.revision,
		 model_weight_bytes(a.model) / 1048576.0, kvc_now() - t0,
		 kv_block_bytes(a.model, 1), a.o.threads, a.o.prompt_seed);
	if (!a.o.no_cache && open_cache(&a))
		goto out;

	if (!strcmp(a.cmd, "ttft"))
		status = cmd_ttft(&a);
	else if (!strcmp(a.cmd, "reload"))
		status = cmd_reload(&a);
	else if (!strcmp(a.cmd, "chat"))
		status = cmd_chat(&a, (uint32_t)need);
	else if (!strcmp(a.cmd, "agent"))
		status = cmd_agent(&a, (uint32_t)need);
	else if (!strcmp(a.cmd, "serve"))
		status = cmd_serve(&a);
	else
		status = cmd_verify(&a);
out:
	if (a.csv)
		fclose(a.csv);
	kvcache_close(a.kc);
	model_free(a.model);
	return status;
}
