/*
 * The peer quench's DPDK forwarding is measured against (scripts/bench-dpdk.sh): the minimal
 * DPDK forwarding loop, after examples/l2fwd's main loop without its MAC rewrite. Receives bursts
 * of 32 on each port and transmits them on the other (net_null0 <-> net_null1), freeing what tx
 * refuses; counts frames transmitted for SECONDS seconds and prints `c_loop mpps=<Mpps>`.
 *
 * With --packed-pool its pools are laid out as quench lays out its own without hugepages
 * (engine/src/port/dpdk/shim.c, quench_dpdk_pool_create: mbufs back to back rather than one per
 * 4 KiB page, which puts every mbuf in the same L1 set). The default is DPDK's
 * rte_pktmbuf_pool_create, as l2fwd; the script runs both, so the ratio against each is known.
 *
 * Usage: dpdk_fwd_c SECONDS [--packed-pool] EAL-ARGS...   (EAL args must create net_null0 and
 * net_null1)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_cycles.h>
#include <rte_mbuf_pool_ops.h>

#define BURST 32
#define MBUFS 8191
#define CACHE 256

/* A pool whose objects need not be IOVA-contiguous, so DPDK packs them across pages. */
static struct rte_mempool *packed_pool(const char *name)
{
	struct rte_pktmbuf_pool_private priv;
	struct rte_mempool *mp;

	mp = rte_mempool_create_empty(name, MBUFS, sizeof(struct rte_mbuf) + RTE_MBUF_DEFAULT_BUF_SIZE,
				      CACHE, sizeof(priv), SOCKET_ID_ANY, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
	if (mp == NULL)
		return NULL;
	memset(&priv, 0, sizeof(priv));
	priv.mbuf_data_room_size = RTE_MBUF_DEFAULT_BUF_SIZE;
	if (rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL) != 0)
		return NULL;
	rte_pktmbuf_pool_init(mp, &priv);
	if (rte_mempool_populate_default(mp) < 0)
		return NULL;
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
}

static struct rte_mempool *pool(const char *name, int packed)
{
	if (packed)
		return packed_pool(name);
	return rte_pktmbuf_pool_create(name, MBUFS, CACHE, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
}

static int setup(const char *name, struct rte_mempool *mp, uint16_t *port)
{
	struct rte_eth_conf conf;

	memset(&conf, 0, sizeof(conf));
	if (rte_eth_dev_get_port_by_name(name, port) != 0)
		return -1;
	if (rte_eth_dev_configure(*port, 1, 1, &conf) != 0 ||
	    rte_eth_rx_queue_setup(*port, 0, 1024, SOCKET_ID_ANY, NULL, mp) != 0 ||
	    rte_eth_tx_queue_setup(*port, 0, 1024, SOCKET_ID_ANY, NULL) != 0 ||
	    rte_eth_dev_start(*port) != 0)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct rte_mbuf *pkts[BURST];
	struct rte_mempool *mp0, *mp1;
	uint16_t ports[2];
	uint64_t sent = 0, hz, start, stop;
	double seconds;
	int n, packed = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s SECONDS EAL-ARGS...\n", argv[0]);
		return 2;
	}
	seconds = atof(argv[1]);
	argv[1] = argv[0];
	if (argc > 2 && strcmp(argv[2], "--packed-pool") == 0) {
		packed = 1;
		argv[2] = argv[0];
		argv++;
		argc--;
	}
	n = rte_eal_init(argc - 1, argv + 1);
	if (n < 0) {
		fprintf(stderr, "rte_eal_init failed\n");
		return 1;
	}
	mp0 = pool("c_p0", packed);
	mp1 = pool("c_p1", packed);
	if (mp0 == NULL || mp1 == NULL || setup("net_null0", mp0, &ports[0]) != 0 ||
	    setup("net_null1", mp1, &ports[1]) != 0) {
		fprintf(stderr, "port set-up failed\n");
		return 1;
	}
	hz = rte_get_tsc_hz();
	start = rte_rdtsc();
	stop = start + (uint64_t)(seconds * (double)hz);
	for (;;) {
		for (int i = 0; i < 1024; i++) {
			for (int p = 0; p < 2; p++) {
				uint16_t rx = rte_eth_rx_burst(ports[p], 0, pkts, BURST);
				uint16_t tx = rte_eth_tx_burst(ports[p ^ 1], 0, pkts, rx);
				for (uint16_t k = tx; k < rx; k++)
					rte_pktmbuf_free(pkts[k]);
				sent += tx;
			}
		}
		if (rte_rdtsc() >= stop)
			break;
	}
	seconds = (double)(rte_rdtsc() - start) / (double)hz;
	printf("c_loop frames=%lu seconds=%.3f mpps=%.2f\n", (unsigned long)sent, seconds,
	       (double)sent / seconds / 1e6);
	rte_eth_dev_stop(ports[0]);
	rte_eth_dev_stop(ports[1]);
	rte_eal_cleanup();
	return 0;
}
