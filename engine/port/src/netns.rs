//! Opening a port inside a named network namespace (`ip netns add NAME`, /run/netns/NAME) from a
//! process that runs outside it.
//!
//! Why: on a machine with fewer cores than emulated hosts, one busy-polling process can drive the
//! ports of several hosts from a single poll loop, instead of one process per host fighting the
//! others for the same core (which costs each of them milliseconds off-CPU at a time). A socket
//! keeps the namespace it was created in, so only the opening (and, for AF_XDP, the detach on
//! close) needs the thread to be inside the namespace; [`in_netns`] enters it for the duration
//! of a closure and returns to where the thread was.
use std::fs::File;

use anyhow::Context as _;
use std::os::fd::AsRawFd;

/// Why a namespace could not be entered or left.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("no network namespace {name:?} (/run/netns/{name}: {source}); create it with `ip netns add {name}` or scripts/testbed/testbed.sh up")]
    Missing {
        name: String,
        source: std::io::Error,
    },
    #[error("entering network namespace {name:?} needs CAP_SYS_ADMIN (run as root): {source}")]
    Enter {
        name: String,
        source: std::io::Error,
    },
    #[error("cannot return to this thread's network namespace after using {name:?}: {source}")]
    Return {
        name: String,
        source: std::io::Error,
    },
    #[error("network namespace name {0:?} is not a plain name (letters, digits, '-', '_', '.')")]
    BadName(String),
}

fn valid(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

fn setns(f: &File) -> std::io::Result<()> {
    // SAFETY: setns on a namespace file descriptor we own; it only changes this thread's
    // network namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Runs `f` with the calling thread inside network namespace `name`, then returns the thread to
/// the namespace it was in. `None` runs `f` where the thread is.
pub fn in_netns<T>(name: Option<&str>, f: impl FnOnce() -> T) -> Result<T, NetnsError> {
    let Some(name) = name else {
        return Ok(f());
    };
    if !valid(name) {
        return Err(NetnsError::BadName(name.to_string()));
    }
    let target =
        File::open(format!("/run/netns/{name}")).map_err(|source| NetnsError::Missing {
            name: name.to_string(),
            source,
        })?;
    let home = File::open("/proc/thread-self/ns/net").map_err(|source| NetnsError::Enter {
        name: name.to_string(),
        source,
    })?;
    setns(&target).map_err(|source| NetnsError::Enter {
        name: name.to_string(),
        source,
    })?;
    let out = f();
    setns(&home).map_err(|source| NetnsError::Return {
        name: name.to_string(),
        source,
    })?;
    Ok(out)
}

/// Splits a `[NETNS/]IFACE` port argument. Interface and namespace names cannot hold '/', so
/// the split is unambiguous.
pub fn split_port_arg(arg: &str) -> (Option<&str>, &str) {
    match arg.split_once('/') {
        Some((ns, iface)) => (Some(ns), iface),
        None => (None, arg),
    }
}

/// A port opened by a `[NETNS/]IFACE` argument: opened inside that network namespace (see
/// [`crate::netns`]) and, on drop, closed there too (an AF_XDP port detaches its program
/// through a netlink socket of the namespace it is in).
pub struct NsPort {
    netns: Option<String>,
    port: Option<crate::any::AnyPort>,
}

impl NsPort {
    /// Opens `label` (`[NETNS/]IFACE`) with `driver` (`af_packet`, `af_xdp` or `dpdk`, the
    /// latter with EAL arguments `dpdk_eal`).
    pub fn open(label: &str, driver: &str, dpdk_eal: Option<&str>) -> anyhow::Result<NsPort> {
        let (netns, iface) = split_port_arg(label);
        let port = in_netns(netns, || open_port(iface, driver, dpdk_eal))
            .with_context(|| format!("--iface {label}"))?
            .with_context(|| format!("--iface {label}"))?;
        Ok(NsPort {
            netns: netns.map(String::from),
            port: Some(port),
        })
    }
}

impl std::ops::Deref for NsPort {
    type Target = crate::any::AnyPort;
    fn deref(&self) -> &Self::Target {
        self.port.as_ref().expect("open until drop")
    }
}

impl std::ops::DerefMut for NsPort {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.port.as_mut().expect("open until drop")
    }
}

impl Drop for NsPort {
    fn drop(&mut self) {
        if let Some(port) = self.port.take() {
            // A namespace deleted meanwhile: the port is then closed here, which for sockets is
            // the same thing.
            let _ = in_netns(self.netns.as_deref(), move || drop(port));
        }
    }
}

/// Opens `iface` with `driver`, as one port with one queue.
pub fn open_port(
    iface: &str,
    driver: &str,
    dpdk_eal: Option<&str>,
) -> Result<crate::any::AnyPort, crate::PortError> {
    use crate::any::AnyPort;
    match driver {
        "af_xdp" => {
            // Chunks that hold the device's MTU (2 KiB up to 1770, a page above).
            let mtu = crate::device_mtu(iface).unwrap_or(1500);
            let pool = crate::xdp::XdpPool::for_mtu(4096, mtu)?;
            let opts = crate::xdp::XdpOptions {
                mode: Default::default(),
                force: false,
                queues: Some(vec![0]),
                program: None,
            };
            crate::xdp::XdpPort::open(&pool, iface, &opts).map(AnyPort::Xdp)
        }
        #[cfg(feature = "dpdk")]
        "dpdk" => {
            let cfg = crate::dpdk::DpdkConfig {
                eal: dpdk_eal
                    .unwrap_or("")
                    .split_whitespace()
                    .map(String::from)
                    .collect(),
                ..Default::default()
            };
            crate::dpdk::DpdkPort::open(iface, &cfg)
                .map(AnyPort::Dpdk)
                .map_err(crate::PortError::from)
        }
        #[cfg(not(feature = "dpdk"))]
        "dpdk" => {
            let _ = dpdk_eal;
            Err(crate::PortError::Unsupported {
                name: iface.to_string(),
                what: "--driver dpdk: this quench was built without DPDK; rebuild with \
                       `cargo build --release --features dpdk`"
                    .into(),
            })
        }
        _ => crate::packet::PacketPort::open(iface).map(AnyPort::Packet),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_arguments_split_at_the_slash() {
        assert_eq!(split_port_arg("eth0"), (None, "eth0"));
        assert_eq!(split_port_arg("qnl-s0/eth0"), (Some("qnl-s0"), "eth0"));
        assert_eq!(split_port_arg("net_af_packet0"), (None, "net_af_packet0"));
    }

    #[test]
    fn no_namespace_runs_in_place() {
        assert_eq!(in_netns(None, || 7).unwrap(), 7);
    }

    #[test]
    fn bad_and_missing_namespaces_are_named() {
        let e = in_netns(Some("../etc"), || ()).unwrap_err();
        assert!(matches!(e, NetnsError::BadName(_)), "{e}");
        let e = in_netns(Some("quench-no-such-ns-4711"), || ()).unwrap_err();
        assert!(matches!(e, NetnsError::Missing { .. }), "{e}");
        assert!(e.to_string().contains("quench-no-such-ns-4711"), "{e}");
    }
}
