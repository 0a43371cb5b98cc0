/*
 * The peer quench's DPDK forwarding is measured against (scripts/bench/bench-dpdk.sh): the minimal
 * DPDK forwarding loop, after examples/l2fwd's main loop without its MAC rewrite. Receives bursts
 * of 32 on each port and transmits them on the other (net_null0 <-> net_null1), freeing what tx
 * refuses; counts frames transmitted for SECONDS seconds and prints `c_loop mpps=<Mpps>`.
 *
 * With --packed-pool its pools are laid out as quench lays out its own without hugepages
 * (engine/port/src/dpdk/shim.c, quench_dpdk_pool_create: mbufs back to back rather than one per
 * 4 KiB page, which puts every mbuf in the same L1 set). The default is DPDK's
 * rte_pktmbuf_pool_create, as l2fwd; the script runs both, so the ratio against each is known.
 *
 * With --mix it forwards the realistic mix of engine/runtime/benches/dpdk_fwd.rs (`--mix`, module
 * `mix`) instead: ports net_ring_mix0 and net_ring_mix1 made with rte_eth_from_rings over two crossed rings, seeded
 * with the same frames (2,048 per direction from each of 1,024 stations on one side in turn to
 * random stations of the other, 64, 576 or 1500 octets, from the same xorshift32 sequence). This loop never reads a frame, so the mix changes
 * only what quench does; the ratio says what quench's per-frame work costs on it.
 *
 * With --ports NAME0,NAME1 it forwards between those two ethdevs as their driver gives the frames
 * (scripts/bench/bench-dpdk.sh: two net_pcap ports replaying the mix from capture files, the ports
 * Open vSwitch forwards on too), printing `c_loop_ports mpps=<Mpps>`.
 *
 * Usage: dpdk_fwd_c SECONDS [--packed-pool | --mix | --ports NAME0,NAME1] EAL-ARGS...   (EAL
 * args must create net_null0 and net_null1, or the ports of --ports)
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
#include <rte_ring.h>
#include <rte_eth_ring.h>

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

/* The mix: the constants of engine/runtime/benches/dpdk_fwd.rs's module `mix`. */
#define MIX_STATIONS 1024
#define MIX_FRAMES 2048
#define MIX_RING_SLOTS 4096
static const uint16_t mix_lens[3] = {64, 576, 1500};

static uint32_t xorshift32(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

static void mix_mac(uint8_t *m, uint8_t side, uint32_t k)
{
	const uint8_t mac[6] = {0x02, 0, 0, side, (uint8_t)(k >> 8), (uint8_t)k};

	memcpy(m, mac, 6);
}

/* Rings X and Y, crossed: mix0 receives from X and transmits into Y, mix1 the reverse. Fills X
 * with frames from side 0x0a to side 0x0b and Y with the reverse, in the Rust bench's order. */
static int mix_setup(struct rte_mempool *mp)
{
	struct rte_ring *x, *y, *rings[2];
	const uint8_t sides[2][2] = {{0x0a, 0x0b}, {0x0b, 0x0a}};
	uint32_t seed = 1;

	x = rte_ring_create("mix_x", MIX_RING_SLOTS, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	y = rte_ring_create("mix_y", MIX_RING_SLOTS, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (x == NULL || y == NULL || rte_eth_from_rings("mix0", &x, 1, &y, 1, 0) < 0 ||
	    rte_eth_from_rings("mix1", &y, 1, &x, 1, 0) < 0)
		return -1;
	rings[0] = x;
	rings[1] = y;
	for (int d = 0; d < 2; d++) {
		for (int i = 0; i < MIX_FRAMES; i++) {
			struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
			uint32_t src = (uint32_t)i % MIX_STATIONS;
			uint32_t dst = xorshift32(&seed) % MIX_STATIONS;
			uint16_t len = mix_lens[xorshift32(&seed) % 3];
			uint8_t *p;

			if (m == NULL || rte_pktmbuf_append(m, len) == NULL)
				return -1;
			p = rte_pktmbuf_mtod(m, uint8_t *);
			mix_mac(p, sides[d][1], dst);
			mix_mac(p + 6, sides[d][0], src);
			p[12] = 0x88;
			p[13] = 0xb5;
			if (rte_ring_enqueue(rings[d], m) != 0)
				return -1;
		}
	}
	return 0;
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
	int n, packed = 0, mix = 0, given = 0;
	const char *names[2] = {"net_null0", "net_null1"};
	char *comma;

	if (argc < 2) {
		fprintf(stderr, "usage: %s SECONDS EAL-ARGS...\n", argv[0]);
		return 2;
	}
	seconds = atof(argv[1]);
	argv[1] = argv[0];
	if (argc > 2 && (strcmp(argv[2], "--packed-pool") == 0 || strcmp(argv[2], "--mix") == 0)) {
		packed = strcmp(argv[2], "--packed-pool") == 0;
		mix = !packed;
		argv[2] = argv[0];
		argv++;
		argc--;
	} else if (argc > 3 && strcmp(argv[2], "--ports") == 0) {
		comma = strchr(argv[3], ',');
		if (comma == NULL) {
			fprintf(stderr, "--ports takes NAME0,NAME1\n");
			return 2;
		}
		*comma = '\0';
		names[0] = argv[3];
		names[1] = comma + 1;
		given = 1;
		argv[3] = argv[0];
		argv += 2;
		argc -= 2;
	}
	n = rte_eal_init(argc - 1, argv + 1);
	if (n < 0) {
		fprintf(stderr, "rte_eal_init failed\n");
		return 1;
	}
	mp0 = pool("c_p0", packed);
	mp1 = pool("c_p1", packed);
	if (mix) {
		names[0] = "net_ring_mix0";
		names[1] = "net_ring_mix1";
	}
	if (mp0 == NULL || mp1 == NULL || (mix && mix_setup(mp0) != 0) ||
	    setup(names[0], mp0, &ports[0]) != 0 || setup(names[1], mp1, &ports[1]) != 0) {
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
	printf("c_loop%s frames=%lu seconds=%.3f mpps=%.2f\n", mix ? "_mix" : given ? "_ports" : "",
	       (unsigned long)sent, seconds,
	       (double)sent / seconds / 1e6);
	rte_eth_dev_stop(ports[0]);
	rte_eth_dev_stop(ports[1]);
	rte_eal_cleanup();
	return 0;
}
