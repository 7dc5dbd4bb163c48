/* What the project's C tests share: CHECK, which names the failed check
 * with errno and exits 1, and the first device, opened. */
#ifndef UROCE_TEST_CHECK_H
#define UROCE_TEST_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <infiniband/verbs.h>

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", \
				__FILE__, __LINE__, #cond, errno);             \
			exit(1);                                               \
		}                                                              \
	} while (0)

/* The first device of the list (UROCE_DEVICES), opened. */
static inline struct ibv_context *open_first_device(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 1);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	ibv_free_device_list(list);
	return ctx;
}

#endif
