/* PDs, MRs and CQs through the drop-in libibverbs, with rdma-core's answers
 * to bad input. Built with gcc against rdma-core's headers and linked against
 * the drop-in (ibverbs/tests/c_programs.rs); prints "ok" and exits 0, or names
 * the failed check and exits 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>
#include "check.h"

/* This process's resident memory, in KiB. */
static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	CHECK(f);
	char line[256];
	long kib = -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = atol(line + 6);
	fclose(f);
	CHECK(kib > 0);
	return kib;
}

/* A program that makes and destroys CQs and PDs for as long as it runs (a
 * server, a connection per client) keeps its memory: 1000 CQs of 4096
 * entries, each destroyed, leave no more than 32 MiB behind (a CQ that
 * stayed in the device would leave about 230 KiB each). */
static void destroyed_objects_give_their_memory_back(struct ibv_context *ctx)
{
	long before = rss_kib();
	for (int i = 0; i < 1000; i++) {
		struct ibv_cq *cq = ibv_create_cq(ctx, 4096, NULL, NULL, 0);
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		CHECK(cq && pd);
		CHECK(ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(pd) == 0);
	}
	long grew = rss_kib() - before;
	if (grew > 32 * 1024) {
		fprintf(stderr, "1000 CQs made and destroyed left %ld KiB behind\n", grew);
		exit(1);
	}
}

int main(void)
{
	struct ibv_context *ctx = open_first_device();

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd && pd->context == ctx);

	/* Memory the program owns, registered in place. */
	size_t len = 3 * 4096;
	char *buf = aligned_alloc(4096, len);
	CHECK(buf);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, access);
	CHECK(mr && mr->addr == buf && mr->length == len && mr->pd == pd && mr->context == ctx);
	CHECK(mr->lkey != 0 && mr->rkey != 0);
	/* ibv_reg_mr_iova: peers name it at an address of the program's choosing. */
	struct ibv_mr *mr2 = ibv_reg_mr_iova(pd, buf, 4096, 0x100000, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr2 && mr2->lkey != mr->lkey);

	/* Bad input: the errno rdma-core and the kernel give. */
	errno = 0;
	CHECK(!ibv_reg_mr(pd, buf, len, IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL); /* no LOCAL_WRITE */
	errno = 0;
	CHECK(!ibv_reg_mr(pd, NULL, len, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL);
	errno = 0;
	CHECK(!ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL);
	errno = 0;
	CHECK(!ibv_reg_mr(pd, buf, len, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE) && errno == EOPNOTSUPP);
	char *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(gone != MAP_FAILED && munmap(gone, 4096) == 0);
	errno = 0;
	CHECK(!ibv_reg_mr(pd, gone, 4096, IBV_ACCESS_LOCAL_WRITE) && errno == EFAULT); /* unmapped */
	CHECK(ibv_dealloc_pd(pd) == EBUSY); /* MRs still use it */

	/* A CQ: no completions yet. */
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, (void *)0x1234, NULL, 0);
	CHECK(cq && cq->cqe >= 16 && cq->cq_context == (void *)0x1234 && cq->context == ctx);
	struct ibv_wc wc[4];
	CHECK(ibv_poll_cq(cq, 4, wc) == 0);
	errno = 0;
	CHECK(!ibv_create_cq(ctx, 0, NULL, NULL, 0) && errno == EINVAL);
	errno = 0;
	CHECK(!ibv_create_cq(ctx, 1 << 30, NULL, NULL, 0) && errno == EINVAL);

	CHECK(ibv_destroy_cq(cq) == 0);
	destroyed_objects_give_their_memory_back(ctx);
	CHECK(ibv_dereg_mr(mr2) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	free(buf);
	printf("ok\n");
	return 0;
}
