//! quench's bottom layer: the wire formats of every frame quench sends or receives, one file per
//! protocol; the flow key and frame classification ([`classify`]); pcap files ([`pcap`]); the
//! clock ([`time`]).
//!
//! # Style (one for every format)
//! - **Views** are pnet packet types: `pnet_packet`'s where pnet has the protocol (Ethernet,
//!   802.1Q VLAN, IPv4, UDP), and our own `#[pnet_macros::packet]` structs for the ones it lacks
//!   (CN-TAG, CNM, PFC, RoCEv2 BTH, quench's test header). A view is built with `new(&[u8])`,
//!   which checks only the fixed minimum length; its getters read fixed offsets and never panic.
//!   We never call a view's `payload()` on untrusted bytes: payload offsets are computed here
//!   from checked lengths instead.
//! - **Reprs** are small `Copy` structs holding what the header means, with
//!   `parse(&[u8]) -> Result<Repr, XxxError>` (all checks: length, version, length fields,
//!   checksums), `buffer_len()` (octets `emit` writes) and
//!   `emit(&self, &mut [u8]) -> Result<usize, EmitError>` (returns octets written).
//!   Neither allocates: the engine's per-frame parse path is allocation-free.
//! - **Unknown codepoints round-trip**: EtherTypes, opcodes, reserved bits and the like are kept
//!   as raw numbers (newtypes with named constants), so parse-then-emit reproduces the input.
//! - **Errors**: each format has its own parse error enum (thiserror, `Copy`, small); emitting has
//!   [`EmitError`]. Malformed input is a typed error, never a panic (property tests in each file,
//!   cargo-fuzz targets in `fuzz/`).
//!
//! Byte order is network order (big-endian) except the RoCEv2 ICRC, which is stored
//! little-endian (see `roce`).

pub mod ack;
pub mod classify;
pub mod cnm;
pub mod cntag;
pub mod ethernet;
pub mod frame;
pub mod int;
pub mod ipv4;
pub mod ipv6;
pub mod pcap;
pub mod pfc;
pub mod roce;
pub mod testhdr;
pub mod time;
pub mod udp;

pub use pnet_base::MacAddr;

/// A buffer shorter than the header being read needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what} truncated: need {need} octets, have {have}")]
pub struct Truncated {
    /// Which header was being read.
    pub what: &'static str,
    /// Octets needed.
    pub need: usize,
    /// Octets present.
    pub have: usize,
}

/// Checks that `buf` holds at least `need` octets for header `what`.
#[inline]
pub(crate) fn check_len(what: &'static str, buf: &[u8], need: usize) -> Result<(), Truncated> {
    if buf.len() < need {
        Err(Truncated {
            what,
            need,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// Builds a pnet view over `buf` after checking it holds `need` octets.
#[inline]
pub(crate) fn view<'a, P>(
    what: &'static str,
    buf: &'a [u8],
    need: usize,
    new: fn(&'a [u8]) -> Option<P>,
) -> Result<P, Truncated> {
    check_len(what, buf, need)?;
    new(buf).ok_or(Truncated {
        what,
        need,
        have: buf.len(),
    })
}

/// Builds a mutable pnet view over `buf[..need]` after checking `buf` holds `need` octets.
#[inline]
pub(crate) fn view_mut<'a, P>(
    what: &'static str,
    buf: &'a mut [u8],
    need: usize,
    new: fn(&'a mut [u8]) -> Option<P>,
) -> Result<P, EmitError> {
    check_out(what, buf, need)?;
    let have = buf.len();
    buf.get_mut(..need)
        .and_then(new)
        .ok_or(EmitError::BufferTooShort { what, need, have })
}

/// Why a `Repr::emit` could not write its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    /// The output buffer is shorter than `buffer_len()`.
    #[error("{what}: output buffer too short: need {need} octets, have {have}")]
    BufferTooShort {
        /// Which header was being written.
        what: &'static str,
        /// Octets needed.
        need: usize,
        /// Octets present.
        have: usize,
    },
    /// A field value does not fit its width on the wire.
    #[error("{what}: field {field} = {value} exceeds its maximum {max}")]
    FieldRange {
        /// Which header was being written.
        what: &'static str,
        /// The field's name.
        field: &'static str,
        /// The value given.
        value: u64,
        /// The largest value the field holds.
        max: u64,
    },
}

/// Checks an output buffer for `emit`.
#[inline]
pub(crate) fn check_out(what: &'static str, buf: &[u8], need: usize) -> Result<(), EmitError> {
    check_len(what, buf, need).map_err(|t| EmitError::BufferTooShort {
        what,
        need,
        have: t.have,
    })
}

/// Checks that `value` fits in a field whose largest value is `max`.
#[inline]
pub(crate) fn check_range(
    what: &'static str,
    field: &'static str,
    value: u64,
    max: u64,
) -> Result<(), EmitError> {
    if value > max {
        Err(EmitError::FieldRange {
            what,
            field,
            value,
            max,
        })
    } else {
        Ok(())
    }
}
