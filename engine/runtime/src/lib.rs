//! quench's runtimes on real ports, each a driver of the node cores (`quench-node`):
//! - [`switch`]: `quench switch`, pinned poll-mode workers forwarding between ports through the
//!   switch core, with the control socket and the kernel fast path;
//! - [`send`] and [`recv`]: `quench send` (the host core's flows as test frames) and `quench recv`
//!   (goodput, loss, latency, and the notification point's CNPs);
//! - [`appliance`]: `quench appliance`, a bump in the wire that paces every flow of unmodified
//!   hosts by its own reaction point;
//! - [`blast`]: `quench blast`, the forwarding benchmark's traffic source;
//! - [`replay`]: one algorithm of `cp` / `rp` / `np` driven from an event file.
//!
//! Each runtime is started from its configuration and options and returns a handle: live
//! stats, stop, join (the final report); `quench` only parses its arguments, calls `start` and
//! prints.
pub mod appliance;
pub mod blast;
pub mod live;
pub mod recv;
pub mod replay;
pub mod send;
pub mod switch;

/// How the appliance, the sender and the receiver open their ports, `[NETNS/]IFACE`
/// ([`quench_port::netns::NsPort::open`]).
#[derive(Clone, Debug)]
pub struct PortDriver {
    /// `af_packet`, `af_xdp` or `dpdk`.
    pub driver: String,
    /// EAL arguments for `dpdk`, one string.
    pub dpdk_eal: Option<String>,
}

impl Default for PortDriver {
    fn default() -> Self {
        PortDriver {
            driver: "af_packet".into(),
            dpdk_eal: None,
        }
    }
}

impl PortDriver {
    /// Opens `label` (`[NETNS/]IFACE`) with this driver.
    pub fn open(&self, label: &str) -> anyhow::Result<quench_port::netns::NsPort> {
        quench_port::netns::NsPort::open(label, &self.driver, self.dpdk_eal.as_deref())
    }
}
