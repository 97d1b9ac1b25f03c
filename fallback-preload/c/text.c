// text.c: the text mode's events: per-thread buffers of formatted lines
// (memtrack's, byte for byte what logfmt writes), the sinks the hooks call,
// thread and process ends, fork. The hot path takes no global lock: one
// thread-local state, one shard lock of the ptr->size table (for free
// sizes), hand-written integer formatting, a cheap clock.
#include "text.h"

#include <stdlib.h>
#include <sys/prctl.h>

#include "modules.h"
#include "stack.h"
#include "table.h"

int unbuffered;
size_t buf_cap;

static __thread tstate *t_state TLS_IE;

static spin_t reg_lock;
static tstate *reg_head;
static pid_t fork_parent;

// ---------------------------------------------------------------------------
// Per-thread states.

static void build_prefix(tstate *t)
{
	char *o = t->prefix;
	o = PUT_LIT(o, "[memtrack] tid=");
	char *s = o;
	o = put_u(o, (uint64_t)t->tid);
	while (o - s < 6)
		*o++ = ' ';
	o = PUT_LIT(o, " (");
	o = put_name15(o, t->name);
	o = PUT_LIT(o, ") ");
	t->plen = (int)(o - t->prefix);
}

static void refresh_name(tstate *t)
{
	char nm[17] = {0};
	t->gen = __atomic_load_n(&name_gen, __ATOMIC_RELAXED);
	if (syscall(SYS_prctl, PR_GET_NAME, nm, 0, 0, 0) != 0)
		nm[0] = 0;
	nm[15] = 0;
	if (strcmp(nm, t->name) != 0 || !t->plen) {
		memcpy(t->name, nm, 16);
		build_prefix(t);
	}
	t->tracked = name_matches(t->name, track_threads);
	t->stacks = stack_depth > 0 && name_matches(t->name, stack_threads);
}

static size_t record_reserve(void)
{
	return LINE_MAX_EV + (size_t)stack_depth * FRAME_MAX + 64;
}

static tstate *state_new(void)
{
	size_t reserve = record_reserve();
	size_t len = (sizeof(tstate) + 4095) & ~(size_t)4095;
	tstate *t = raw_map(len);
	if (!t)
		return NULL;
	t->buf = buf_get();
	if (!t->buf) {
		raw_unmap(t, len);
		return NULL;
	}
	t->map_len = len;
	t->cap = buf_cap;
	t->limit = buf_cap - reserve;
	t->tid = gettid_raw();
	refresh_name(t);
	spin_lock(&reg_lock);
	t->next = reg_head;
	reg_head = t;
	spin_unlock(&reg_lock);
	return t;
}

static tstate *thread_init(void)
{
	tstate *t = state_new();
	if (!t)
		return NULL;
	t_state = t;
	// The key's destructor writes the EXIT line when the thread ends.
	pthread_setspecific(exit_key, t);
	return t;
}

static inline tstate *cur_state(void)
{
	tstate *t = t_state;
	if (UNLIKELY(!t))
		t = thread_init();
	return t;
}

// A record is being formatted at t->buf+t->pos; commit makes it visible to
// other flushers and flushes when the buffer is full. Unbuffered mode
// writes its records itself and never commits.
static inline void commit(tstate *t, char *end)
{
	t->pos = (size_t)(end - t->buf);
	__atomic_store_n(&t->committed, t->pos, __ATOMIC_RELEASE);
	if (UNLIKELY(t->pos >= t->limit || g_exiting)) {
		owner_flush(t, 0);
		// Re-read the name at the next event: a rename through
		// /proc/self/task/N/comm has no hook.
		t->gen--;
	}
}

static inline char *rec_begin(tstate *t)
{
	return t->buf + t->pos;
}

// ---------------------------------------------------------------------------
// Lines.

typedef struct {
	char *o;
	int idx;
} frames_ctx;

static void put_frame(void *ctx, const mt_frame *f)
{
	// Frames in glibc backtrace_symbols' layout with mangled names; a
	// line is cut to fit the record (FRAME_MAX).
	frames_ctx *c = ctx;
	char *o = c->o, *line = o;
	o = PUT_LIT(o, "[memtrack]   #");
	char *s = o;
	o = put_u(o, (uint64_t)c->idx);
	while (o - s < 2)
		*o++ = ' ';
	*o++ = ' ';
	if (f->mod) {
		size_t room = FRAME_MAX - 64;
		size_t fl = strlen(f->mod);
		if (fl > room / 2)
			fl = room / 2;
		for (size_t k = 0; k < fl; k++) {
			char ch = f->mod[k];
			*o++ = (ch == '\n' || ch == '\r') ? '?' : ch;
		}
		*o++ = '(';
		if (f->sym) {
			size_t sl = strlen(f->sym);
			size_t left = FRAME_MAX - 64 - (size_t)(o - line);
			if (sl > left)
				sl = left;
			for (size_t k = 0; k < sl; k++) {
				char ch = f->sym[k];
				*o++ = (ch == '\n' || ch == '\r') ? '?' : ch;
			}
		}
		o = PUT_LIT(o, "+0x");
		o = put_hex(o, f->off);
		o = PUT_LIT(o, ") ");
	}
	o = PUT_LIT(o, "[0x");
	o = put_hex(o, f->addr);
	o = PUT_LIT(o, "]\n");
	c->o = o;
	c->idx++;
}

static char *put_frames(char *o)
{
	frames_ctx c = {o, 0};
	stack_walk(put_frame, &c);
	return c.o;
}

static inline char *fmt_head(tstate *t, char *o, int op, uint64_t ts)
{
	// Fixed-size copies (the record has slack past its end) compile to a
	// few vector moves; variable ones become calls.
	memcpy(o, t->prefix, 64);
	o += t->plen;
	memcpy(o, op_col[op], 24);
	o += op_col_len[op];
	o = put_pad_u(o, ts, 12);
	*o++ = ' ';
	return o;
}

// emit_alloc and emit_free come in a buffered and an unbuffered version
// (unbuf is a constant where they are inlined): the mode is the sink's,
// not a test per event.
static ALWAYS_INLINE void emit_alloc(tstate *t, int op, uint64_t size, const void *p, const int unbuf)
{
	t->total += size;
	wguard_t g;
	if (unbuf)
		wlock(&g);
	char *o = rec_begin(t);
	o = fmt_head(t, o, op, now_us());
	o = PUT_LIT(o, "size=");
	o = put_pad_u(o, size, 12);
	o = PUT_LIT(o, "  total=");
	o = put_pad_u(o, t->total, 12);
	o = PUT_LIT(o, "  ptr=");
	o = put_ptr(o, (uintptr_t)p);
	*o++ = '\n';
	if (t->stacks)
		o = put_frames(o);
	if (unbuf) {
		out_write(t->buf, (size_t)(o - t->buf));
		wunlock(&g);
		return;
	}
	commit(t, o);
}

static ALWAYS_INLINE void emit_free(tstate *t, int op, uint64_t size, const void *p, uint64_t ts, const int unbuf)
{
	wguard_t g;
	if (unbuf) {
		// The time is read under the lock: the file is in time order.
		wlock(&g);
		ts = now_us();
	}
	char *o = rec_begin(t);
	o = fmt_head(t, o, op, ts);
	o = PUT_LIT(o, "size=");
	o = put_pad_u(o, size, 12);
	o = PUT_LIT(o, "  ptr=");
	o = put_ptr(o, (uintptr_t)p);
	*o++ = '\n';
	if (t->stacks)
		o = put_frames(o);
	if (unbuf) {
		out_write(t->buf, (size_t)(o - t->buf));
		wunlock(&g);
		return;
	}
	commit(t, o);
}

static char *fmt_exit(tstate *t, char *o, uint64_t ts)
{
	o = fmt_head(t, o, MT_OP_EXIT, ts);
	o = PUT_LIT(o, "total=");
	o = put_pad_u(o, t->total, 12);
	o = PUT_LIT(o, " bytes allocated\n");
	return o;
}

// ---------------------------------------------------------------------------
// Events.

static inline int want_log(tstate **tp)
{
	if (UNLIKELY(!g_ready || g_off || out_dead))
		return 0;
	tstate *t = cur_state();
	if (UNLIKELY(t == NULL || t == T_EXITED))
		return 0;
	if (UNLIKELY(t->gen != name_gen))
		refresh_name(t);
	*tp = t;
	return t->tracked;
}

// slow_event logs for a thread whose state is gone (allocations made by TLS
// destructors after our EXIT line) or while the process exits: straight to
// the output under the write lock.
static void slow_event(int op, uint64_t size, const void *p, int is_free)
{
	tstate tmp;
	memset(&tmp, 0, sizeof tmp);
	tstate *t = t_state;
	if (t == NULL || t == T_EXITED) {
		tmp.tid = gettid_raw();
		refresh_name(&tmp);
		t = &tmp;
	}
	if (!t->tracked)
		return;
	char line[LINE_MAX_EV];
	char *o = fmt_head(t, line, op, now_us());
	o = PUT_LIT(o, "size=");
	o = put_pad_u(o, size, 12);
	if (!is_free) {
		t->total += size;
		o = PUT_LIT(o, "  total=");
		o = put_pad_u(o, t->total, 12);
	}
	o = PUT_LIT(o, "  ptr=");
	o = put_ptr(o, (uintptr_t)p);
	*o++ = '\n';
	out_write_locked(line, (size_t)(o - line));
}

static ALWAYS_INLINE void on_alloc(int op, uint64_t size, const void *p, uint64_t kind, const int unbuf)
{
	tstate *t = NULL;
	int log = want_log(&t) && size >= min_size;
	tbl_put(p, (size << 2) | kind | (log ? V_LOGGED : 0));
	if (!log) {
		if (UNLIKELY(t_state == T_EXITED && g_ready && !g_off && size >= min_size))
			slow_event(op, size, p, 0);
		return;
	}
	if (UNLIKELY(g_exiting)) {
		slow_event(op, size, p, 0);
		return;
	}
	emit_alloc(t, op, size, p, unbuf);
}

static ALWAYS_INLINE void on_free(int op, uint64_t size, const void *p, uint64_t ts, const int unbuf)
{
	tstate *t = NULL;
	if (!want_log(&t)) {
		if (UNLIKELY(t_state == T_EXITED && g_ready && !g_off))
			slow_event(op, size, p, 1);
		return;
	}
	if (UNLIKELY(g_exiting)) {
		slow_event(op, size, p, 1);
		return;
	}
	emit_free(t, op, size, p, ts, unbuf);
}

static ALWAYS_INLINE uint64_t free_ts(const int unbuf)
{
	// Unbuffered mode re-reads the clock under the write lock.
	return (g_ready && !unbuf) ? now_us() : 0;
}

// free_pre takes p's entry out of the table before the real call, so that
// another thread that gets the same address cannot lose its entry. A
// block not in the table is logged (size 0) unless --min-size filters.
static ALWAYS_INLINE void free_pre(mt_call_t *c, const void *p, const int unbuf)
{
	c->ts = free_ts(unbuf);
	c->had = tbl_take(p, &c->val);
	c->size = c->had ? c->val >> 2 : 0;
	c->log = c->had ? (c->val & V_LOGGED) != 0 : min_size == 0;
}

static ALWAYS_INLINE void realloc_pre(mt_call_t *c, const void *p, const int unbuf)
{
	if (p) {
		free_pre(c, p, unbuf);
	} else {
		c->ts = c->size = 0;
		c->had = c->log = 0;
	}
}

static ALWAYS_INLINE void realloc_post(mt_call_t *c, int op, const void *p, const void *q, size_t n, const int unbuf)
{
	if (!q) {
		// realloc(p, 0) frees p; any other NULL is a failure that
		// leaves p live and logs nothing.
		if (p && n == 0) {
			if (c->log)
				on_free(MT_OP_FREE, c->size, p, c->ts, unbuf);
		} else if (p && c->had) {
			tbl_put(p, c->val);
		}
		return;
	}
	if (p && c->log)
		on_free(MT_OP_FREE, c->size, p, c->ts, unbuf);
	on_alloc(op, n, q, 0, unbuf);
}

// unmap_pre: c->log is -1 for a range that is not a mapping this process
// logged (not ours to log), else whether its munmap is logged.
static ALWAYS_INLINE void unmap_pre(mt_call_t *c, const void *p, const int unbuf)
{
	c->ts = free_ts(unbuf);
	uint64_t v = 0;
	int found = tbl_take(p, &v);
	c->size = 0;
	if (!found || !(v & V_MMAP)) {
		if (found)
			tbl_put(p, v);
		c->log = -1;
		return;
	}
	c->size = v >> 2;
	c->log = (v & V_LOGGED) ? 1 : 0;
}

static ALWAYS_INLINE void unmap_post(mt_call_t *c, const void *p, size_t len, int ok, const int unbuf)
{
	if (c->log < 0)
		return;
	if (!ok) {
		// Failed: the mapping stays.
		tbl_put(p, (c->size << 2) | V_MMAP | (c->log ? V_LOGGED : 0));
		return;
	}
	if (c->log)
		on_free(MT_OP_MUNMAP, len, p, c->ts, unbuf);
}

static ALWAYS_INLINE void remap_post(mt_call_t *c, const void *old, size_t oldlen, const void *r, size_t newlen,
				     const int unbuf)
{
	if (c->log < 0)
		return;
	if (r == MAP_FAILED) {
		tbl_put(old, (c->size << 2) | V_MMAP | (c->log ? V_LOGGED : 0));
		return;
	}
	if (c->log)
		on_free(MT_OP_MUNMAP, oldlen, old, c->ts, unbuf);
	on_alloc(MT_OP_MREMAP, newlen, r, V_MMAP, unbuf);
}

// ---------------------------------------------------------------------------
// Thread and process ends.

static void write_exit_of(tstate *t)
{
	char line[LINE_MAX_EV];
	char *o = fmt_exit(t, line, now_us());
	out_write_locked(line, (size_t)(o - line));
}

static void thread_exit(void *arg)
{
	tstate *t = arg;
	int in = t_in;
	t_in = 1;
	if (g_ready && !g_off && t->tracked) {
		if (t->gen != name_gen)
			refresh_name(t);
		char *o = fmt_exit(t, rec_begin(t), now_us());
		t->pos = (size_t)(o - t->buf);
		__atomic_store_n(&t->committed, t->pos, __ATOMIC_RELEASE);
	}
	t_state = T_EXITED;
	owner_flush(t, 1);
	spin_lock(&reg_lock);
	for (tstate **pp = &reg_head; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	}
	spin_unlock(&reg_lock);
	raw_unmap(t, t->map_len);
	t_in = in;
}

// flush_all writes every thread's committed records; with exits, the EXIT
// line of every live thread follows its records (process exit).
static void flush_all(int exits)
{
	q_drain();
	spin_lock(&reg_lock);
	for (tstate *t = reg_head; t; t = t->next) {
		flush_state(t);
		if (exits && g_ready && !g_off && t->tracked)
			write_exit_of(t);
	}
	spin_unlock(&reg_lock);
}

static void text_process_exit(void)
{
	if (g_exiting)
		return;
	int in = t_in;
	t_in = 1;
	// Later frees (libc's own teardown) are written one by one.
	g_exiting = 1;
	flush_all(1);
	t_in = in;
}

static void text_before_exec(void)
{
	if (g_ready)
		flush_all(0);
}

// ---------------------------------------------------------------------------
// The sinks: buffered (MEMTRACK_BUFFER_SIZE > 0) and unbuffered.

#define TEXT_SINK(NAME, UNBUF)                                                                      \
	static void NAME##_alloc(int op, uint64_t size, const void *p, uint64_t kind)                \
	{                                                                                             \
		on_alloc(op, size, p, kind, UNBUF);                                                   \
	}                                                                                             \
	static void NAME##_free(int op, void *p, void (*real)(void *))                               \
	{                                                                                             \
		mt_call_t c;                                                                          \
		free_pre(&c, p, UNBUF);                                                               \
		real(p);                                                                              \
		if (c.log)                                                                            \
			on_free(op, c.size, p, c.ts, UNBUF);                                          \
	}                                                                                             \
	static void NAME##_free_pre(mt_call_t *c, const void *p)                                     \
	{                                                                                             \
		free_pre(c, p, UNBUF);                                                                \
	}                                                                                             \
	static void NAME##_free_post(mt_call_t *c, int op, const void *p)                            \
	{                                                                                             \
		if (c->log)                                                                           \
			on_free(op, c->size, p, c->ts, UNBUF);                                        \
	}                                                                                             \
	static void NAME##_realloc_pre(mt_call_t *c, const void *p)                                  \
	{                                                                                             \
		realloc_pre(c, p, UNBUF);                                                             \
	}                                                                                             \
	static void NAME##_realloc_post(mt_call_t *c, int op, const void *p, const void *q, size_t n) \
	{                                                                                             \
		realloc_post(c, op, p, q, n, UNBUF);                                                  \
	}                                                                                             \
	static void NAME##_unmap_pre(mt_call_t *c, const void *p)                                    \
	{                                                                                             \
		unmap_pre(c, p, UNBUF);                                                               \
	}                                                                                             \
	static void NAME##_unmap_post(mt_call_t *c, const void *p, size_t len, int ok)               \
	{                                                                                             \
		unmap_post(c, p, len, ok, UNBUF);                                                     \
	}                                                                                             \
	static void NAME##_remap_post(mt_call_t *c, const void *old, size_t oldlen, const void *r,   \
				      size_t newlen)                                                  \
	{                                                                                             \
		remap_post(c, old, oldlen, r, newlen, UNBUF);                                         \
	}                                                                                             \
	const mt_sink NAME = {                                                                        \
		.alloc = NAME##_alloc,                                                                \
		.free = NAME##_free,                                                                  \
		.free_pre = NAME##_free_pre,                                                          \
		.free_post = NAME##_free_post,                                                        \
		.realloc_pre = NAME##_realloc_pre,                                                    \
		.realloc_post = NAME##_realloc_post,                                                  \
		.unmap_pre = NAME##_unmap_pre,                                                        \
		.unmap_post = NAME##_unmap_post,                                                      \
		.remap_post = NAME##_remap_post,                                                      \
		.before_exec = text_before_exec,                                                      \
		.process_exit = text_process_exit,                                                    \
	};

TEXT_SINK(text_sink, 0)
TEXT_SINK(text_unbuf_sink, 1)

// ---------------------------------------------------------------------------
// Meta lines and fork.

static void put_meta_line(tstate *t, const char *word, const char *kvs)
{
	// kvs is already formatted "k=v k=v".
	char line[512];
	char *o = PUT_LIT(line, "[memtrace] ");
	o = put_s(o, word, strlen(word));
	if (kvs[0]) {
		*o++ = ' ';
		size_t n = strlen(kvs);
		if (n > sizeof line - 64)
			n = sizeof line - 64;
		o = put_s(o, kvs, n);
	}
	*o++ = '\n';
	if (t && t != T_EXITED && !unbuffered && !g_exiting) {
		memcpy(rec_begin(t), line, (size_t)(o - line));
		commit(t, rec_begin(t) + (o - line));
	} else {
		out_write_locked(line, (size_t)(o - line));
	}
}

static void atfork_prepare(void)
{
	// First: a thread asking the loader may hold the locks below.
	modules_atfork_prepare();
	int in = t_in;
	t_in = 1;
	tstate *t = t_state;
	if (t && t != T_EXITED)
		owner_flush(t, 0);
	// Take every lock so that the child inherits none held by a thread
	// that does not exist there (see text.h for the order).
	spin_lock(&reg_lock);
	out_fork_lock_queue();
	tbl_lock_all();
	out_fork_lock_write();
	fork_parent = getpid();
	t_in = in;
}

static void atfork_parent(void)
{
	out_fork_parent();
	tbl_unlock_all();
	spin_unlock(&reg_lock);
	modules_atfork_parent();
}

static void atfork_child(void)
{
	modules_atfork_child();
	int in = t_in;
	t_in = 1;
	out_fork_child();
	tbl_unlock_all();
	// The other threads do not exist here: forget their states (their
	// records were or will be written by the parent).
	tstate *self = t_state;
	tstate *t = reg_head;
	reg_head = NULL;
	while (t) {
		tstate *next = t->next;
		if (t == self) {
			t->next = NULL;
			reg_head = t;
		} else {
			raw_unmap(t->buf, buf_cap);
			raw_unmap(t, t->map_len);
		}
		t = next;
	}
	spin_unlock(&reg_lock);
	g_pid = getpid();
	if (!follow) {
		g_off = 1;
		t_in = in;
		return;
	}
	if (self && self != T_EXITED) {
		self->tid = gettid_raw();
		self->total = 0;
		self->pos = self->flushed = self->committed = 0;
		spin_unlock(&self->flock);
		refresh_name(self);
		build_prefix(self);
	}
	if (g_ready && !g_off) {
		char kv[256], *o = kv;
		o = PUT_LIT(o, "event=fork ");
		o = kv_u(o, "pid", (uint64_t)g_pid);
		o = kv_u(o, "ppid", (uint64_t)fork_parent);
		o = kv_u(o, "ts", now_us());
		o[-1] = 0;
		put_meta_line(self, "proc", kv);
	}
	t_in = in;
}

// ---------------------------------------------------------------------------
// Start-up.

void text_start(void)
{
	init_op_cols();
	const char *bs = getenv("MEMTRACK_BUFFER_SIZE");
	size_t buf_size = parse_size(bs, 64 << 10);
	unbuffered = bs && *bs && buf_size == 0;
	buf_cap = ((unbuffered ? 0 : buf_size) + record_reserve() + 4095) & ~(size_t)4095;
	int exec_child = join_session();
	if (!exec_child)
		epoch_ns = mono_ns();
	if (!g_off)
		clock_init(2);
	if (!exec_child)
		start_session();
	if (g_off)
		return;
	pthread_key_create(&exit_key, thread_exit);
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	write_start_line(exec_child);
	writer_start();
	const mt_sink *s = unbuffered ? &text_unbuf_sink : &text_sink;
	early_set_fallback(s);
	__atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
	set_sink(s);
}
