/*
 * quench's C shim over DPDK 22.11: the calls Rust cannot bind directly because DPDK defines them
 * `static inline` in its headers (rx/tx burst, mbuf alloc/free, rte_errno), plus port set-up,
 * which needs `struct rte_eth_conf` / `struct rte_eth_dev_info` (large, version-dependent structs
 * that the Rust side would otherwise have to mirror field by field).
 *
 * Built by engine/build.rs with the cflags from `pkg-config --cflags libdpdk`, only with the
 * cargo feature `dpdk`. The Rust side reads mbuf fields directly (see ffi.rs `MBUF_*`); the
 * _Static_asserts below pin the offsets it assumes, so a DPDK whose rte_mbuf differs fails here,
 * at build time, instead of corrupting frames.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>

/* Keep in step with ffi.rs. */
_Static_assert(offsetof(struct rte_mbuf, buf_addr) == 0, "rte_mbuf.buf_addr moved");
_Static_assert(offsetof(struct rte_mbuf, data_off) == 16, "rte_mbuf.data_off moved");
_Static_assert(offsetof(struct rte_mbuf, nb_segs) == 20, "rte_mbuf.nb_segs moved");
_Static_assert(offsetof(struct rte_mbuf, pkt_len) == 36, "rte_mbuf.pkt_len moved");
_Static_assert(offsetof(struct rte_mbuf, data_len) == 40, "rte_mbuf.data_len moved");
_Static_assert(offsetof(struct rte_mbuf, buf_len) == 54, "rte_mbuf.buf_len moved");
_Static_assert(sizeof(struct rte_ether_addr) == 6, "rte_ether_addr is not 6 octets");

uint16_t quench_dpdk_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t quench_dpdk_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(port, queue, pkts, n);
}

struct rte_mbuf *quench_dpdk_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

void quench_dpdk_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

int quench_dpdk_errno(void)
{
	return rte_errno;
}

/* Frames the device dropped for want of a receive descriptor (rte_eth_stats.imissed), or -1
 * when the driver does not say. struct rte_eth_stats is large and version-dependent: read here. */
int64_t quench_dpdk_imissed(uint16_t port)
{
	struct rte_eth_stats st;
	if (rte_eth_stats_get(port, &st) != 0)
		return -1;
	return (int64_t)st.imissed;
}

/*
 * A packet mbuf pool, as rte_pktmbuf_pool_create makes one, except that without hugepages and
 * with IOVA as VA its mbufs are packed back to back instead of one per 4 KiB page. Why: DPDK keeps
 * each object inside one page unless told that objects need not be IOVA-contiguous, and with
 * 4 KiB pages that puts every mbuf header (and every frame's first octets) at the same offset in
 * its page, hence in the same set of an 8-way L1 cache: a burst of 32 frames then evicts itself,
 * and each read of an mbuf field or a header cost an L1 miss (~7 cycles per load instead of ~1,
 * measured on the target VM). With IOVA as VA an object spanning two pages is contiguous in IOVA
 * space too, so a device can still DMA into it; with hugepages or IOVA as PA nothing changes.
 */
struct rte_mempool *quench_dpdk_pool_create(const char *name, unsigned n, unsigned cache,
					    uint16_t data_room, int socket)
{
	struct rte_pktmbuf_pool_private priv;
	struct rte_mempool *mp;
	int rc;

	if (rte_eal_has_hugepages() || rte_eal_iova_mode() != RTE_IOVA_VA)
		return rte_pktmbuf_pool_create(name, n, cache, 0, data_room, socket);
	mp = rte_mempool_create_empty(name, n, sizeof(struct rte_mbuf) + data_room, cache,
				      sizeof(priv), socket, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
	if (mp == NULL)
		return NULL;
	rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL);
	if (rc == 0) {
		memset(&priv, 0, sizeof(priv));
		priv.mbuf_data_room_size = data_room;
		rte_pktmbuf_pool_init(mp, &priv);
		rc = rte_mempool_populate_default(mp);
		/* populate returns the number of objects added */
		rc = rc < 0 ? rc : 0;
	}
	if (rc != 0) {
		rte_mempool_free(mp);
		rte_errno = -rc;
		return NULL;
	}
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
}

/*
 * Configures `port` with `nrx` receive and `ntx` transmit queues of `desc` descriptors each,
 * receive buffers from `mp`, starts it in promiscuous mode and writes its MAC to `mac`.
 * Returns 0, or a negative errno with `*step` naming the call that failed.
 */
int quench_dpdk_port_setup(uint16_t port, uint16_t nrx, uint16_t ntx, uint16_t desc,
			   struct rte_mempool *mp, uint8_t mac[6], const char **step)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	struct rte_ether_addr addr;
	uint16_t rxd = desc, txd = desc;
	int socket = rte_eth_dev_socket_id(port);
	int rc;

	if (socket < 0)
		socket = (int)rte_socket_id();
	memset(&conf, 0, sizeof(conf));
	*step = "rte_eth_dev_info_get";
	rc = rte_eth_dev_info_get(port, &info);
	if (rc != 0)
		return rc;
	if (nrx > info.max_rx_queues || ntx > info.max_tx_queues) {
		*step = "queue count (device maximum)";
		return -EINVAL;
	}
	/*
	 * Several receive queues: RSS spreads flows over them by a hash of their IP addresses and
	 * ports, so a flow stays on one queue (one worker). A device without RSS (net_null) fills
	 * each queue on its own.
	 */
	if (nrx > 1) {
		uint64_t hf = info.flow_type_rss_offloads &
			      (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP);
		if (hf != 0) {
			conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
			conf.rx_adv_conf.rss_conf.rss_hf = hf;
		}
	}
	*step = "rte_eth_dev_configure";
	rc = rte_eth_dev_configure(port, nrx, ntx, &conf);
	if (rc != 0)
		return rc;
	*step = "rte_eth_dev_adjust_nb_rx_tx_desc";
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
	if (rc != 0)
		return rc;
	*step = "rte_eth_rx_queue_setup";
	for (uint16_t q = 0; q < nrx; q++) {
		rc = rte_eth_rx_queue_setup(port, q, rxd, (unsigned)socket, NULL, mp);
		if (rc != 0)
			return rc;
	}
	*step = "rte_eth_tx_queue_setup";
	for (uint16_t q = 0; q < ntx; q++) {
		rc = rte_eth_tx_queue_setup(port, q, txd, (unsigned)socket, NULL);
		if (rc != 0)
			return rc;
	}
	*step = "rte_eth_dev_start";
	rc = rte_eth_dev_start(port);
	if (rc != 0)
		return rc;
	/* Not every PMD supports promiscuous mode (net_null does not care); ignore -ENOTSUP. */
	rc = rte_eth_promiscuous_enable(port);
	if (rc != 0 && rc != -ENOTSUP) {
		*step = "rte_eth_promiscuous_enable";
		return rc;
	}
	*step = "rte_eth_macaddr_get";
	rc = rte_eth_macaddr_get(port, &addr);
	if (rc != 0)
		return rc;
	memcpy(mac, addr.addr_bytes, 6);
	*step = "";
	return 0;
}
