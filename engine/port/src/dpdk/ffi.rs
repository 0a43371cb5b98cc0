//! Hand-written bindings for the part of DPDK 22.11 quench uses, plus the C shim
//! (`shim.c`, built by engine/port/build.rs) for what DPDK defines `static inline`.
//!
//! Only opaque pointers cross this boundary, except five `rte_mbuf` fields that the frame type
//! reads and writes in place (the `MBUF_*` offsets below, pinned by `_Static_assert`s in
//! shim.c, so a DPDK with another mbuf layout fails to build rather than corrupt frames).
use std::os::raw::{c_char, c_int, c_uint};

/// `struct rte_mbuf` (opaque; fields through the `MBUF_*` offsets).
#[repr(C)]
pub struct RteMbuf {
    _opaque: [u8; 0],
}

/// `struct rte_mempool` (opaque).
#[repr(C)]
pub struct RteMempool {
    _opaque: [u8; 0],
}

/// `rte_mbuf.buf_addr`: `void *`, start of the buffer (headroom first).
pub const MBUF_BUF_ADDR: usize = 0;
/// `rte_mbuf.data_off`: `uint16_t`, offset of the frame's first octet in the buffer.
pub const MBUF_DATA_OFF: usize = 16;
/// `rte_mbuf.nb_segs`: `uint16_t`, segments in the chain (quench uses single-segment frames).
pub const MBUF_NB_SEGS: usize = 20;
/// `rte_mbuf.pkt_len`: `uint32_t`, octets in all segments.
pub const MBUF_PKT_LEN: usize = 36;
/// `rte_mbuf.data_len`: `uint16_t`, octets in this segment.
pub const MBUF_DATA_LEN: usize = 40;
/// `rte_mbuf.buf_len`: `uint16_t`, size of the buffer including headroom.
pub const MBUF_BUF_LEN: usize = 54;

/// `SOCKET_ID_ANY` from rte_memory.h.
pub const SOCKET_ID_ANY: c_int = -1;

extern "C" {
    // rte_eal.h
    pub fn rte_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    // rte_dev.h
    pub fn rte_dev_probe(devargs: *const c_char) -> c_int;
    // rte_errno.h
    pub fn rte_strerror(errnum: c_int) -> *const c_char;
    // rte_mempool.h
    pub fn rte_mempool_avail_count(mp: *const RteMempool) -> c_uint;
    // rte_ethdev.h
    pub fn rte_eth_dev_get_port_by_name(name: *const c_char, port_id: *mut u16) -> c_int;
    pub fn rte_eth_dev_stop(port_id: u16) -> c_int;
    pub fn rte_eth_macaddr_get(port_id: u16, mac: *mut u8) -> c_int;
    // rte_lcore.h
    pub fn rte_thread_register() -> c_int;

    // shim.c
    pub fn quench_dpdk_rx_burst(port: u16, queue: u16, pkts: *mut *mut RteMbuf, n: u16) -> u16;
    pub fn quench_dpdk_tx_burst(port: u16, queue: u16, pkts: *mut *mut RteMbuf, n: u16) -> u16;
    pub fn quench_dpdk_alloc(mp: *mut RteMempool) -> *mut RteMbuf;
    pub fn quench_dpdk_free(m: *mut RteMbuf);
    pub fn quench_dpdk_errno() -> c_int;
    pub fn quench_dpdk_imissed(port: u16) -> i64;
    pub fn quench_dpdk_pool_create(
        name: *const c_char,
        n: c_uint,
        cache_size: c_uint,
        data_room_size: u16,
        socket_id: c_int,
    ) -> *mut RteMempool;
    pub fn quench_dpdk_port_setup(
        port: u16,
        nrx: u16,
        ntx: u16,
        desc: u16,
        mp: *mut RteMempool,
        mac: *mut u8,
        step: *mut *const c_char,
    ) -> c_int;
}
