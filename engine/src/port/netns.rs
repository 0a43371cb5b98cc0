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
use std::os::fd::AsRawFd;

/// Why a namespace could not be entered or left.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("no network namespace {name:?} (/run/netns/{name}: {source}); create it with `ip netns add {name}` or scripts/testbed.sh up")]
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
