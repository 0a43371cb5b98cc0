//! A transmit-only source that has the kernel replay one frame into a device: a four-instruction
//! XDP program (`return bpf_redirect(ifindex, 0)`) run by `BPF_PROG_TEST_RUN` in live-frames mode
//! (`BPF_F_TEST_XDP_LIVE_FRAMES`, Linux 5.18+), the mechanism of xdp-tools' xdp-trafficgen.
//!
//! Why this exists: an AF_XDP socket on a veth transmits in copy mode, building an skb per frame,
//! and the ingress veth's receive work runs on the sender's core too; on the 2-core testbed that
//! source tops out near 1.2 Mpps, below what the forwarders under test can take. Live frames
//! reach the device as `xdp_frame`s through `ndo_xdp_xmit`, with no skb and no system call per
//! frame (2.3-2.9 Mpps into a veth whose peer's stack drops them, 3.6-4.2 Mpps into one with an
//! XDP program, here). The frames are all the same: there is no per-frame sequence number.
//!
//! A veth accepts redirected frames only when its peer has an XDP program attached or GRO on;
//! otherwise the kernel drops them without counting them anywhere the caller can read: the
//! device's `tx_packets` simply does not move (which is what `quench blast` checks).
use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};

use super::{if_index, PortError};

/// eBPF instruction encoding (the kernel's `struct bpf_insn`: opcode, dst/src register nibbles,
/// offset, immediate), built by hand so that no compiler or object file is needed at run time.
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const BPF_ALU64_MOV_K: u8 = 0x07 | 0xb0; // BPF_ALU64 | BPF_MOV | BPF_K
const BPF_JMP_CALL: u8 = 0x05 | 0x80; // BPF_JMP | BPF_CALL
const BPF_JMP_EXIT: u8 = 0x05 | 0x90; // BPF_JMP | BPF_EXIT

/// `r1 = ifindex; r2 = 0; r0 = bpf_redirect(r1, r2); return r0`.
fn redirect_program(ifindex: u32) -> [Insn; 4] {
    let mov = |dst: u8, imm: i32| Insn {
        code: BPF_ALU64_MOV_K,
        regs: dst,
        off: 0,
        imm,
    };
    [
        mov(1, ifindex as i32),
        mov(2, 0),
        Insn {
            code: BPF_JMP_CALL,
            regs: 0,
            off: 0,
            imm: libxdp_sys::bpf_func_id_BPF_FUNC_redirect as i32,
        },
        Insn {
            code: BPF_JMP_EXIT,
            regs: 0,
            off: 0,
            imm: 0,
        },
    ]
}

/// A loaded redirect program and the frame it replays into one device.
pub struct LiveTx {
    prog: OwnedFd,
    frame: Vec<u8>,
    iface: String,
}

impl LiveTx {
    /// Loads the program that redirects into `iface` (in the caller's network namespace).
    pub fn open(iface: &str, frame: Vec<u8>) -> Result<LiveTx, PortError> {
        let ifindex = if_index(iface)?;
        let insns = redirect_program(ifindex);
        let name = CString::new("quench_live").expect("no NUL in a literal");
        let license = CString::new("GPL").expect("no NUL in a literal");
        // Safety: `insns` is a valid array of 4 `struct bpf_insn` (same layout, 8 octets each);
        // the strings outlive the call; a null opts pointer asks for libbpf's defaults.
        let fd = unsafe {
            libxdp_sys::bpf_prog_load(
                libxdp_sys::bpf_prog_type_BPF_PROG_TYPE_XDP,
                name.as_ptr(),
                license.as_ptr(),
                insns.as_ptr().cast(),
                insns.len(),
                std::ptr::null_mut(),
            )
        };
        if fd < 0 {
            let e = std::io::Error::from_raw_os_error(-fd);
            return Err(PortError::from_open(
                iface,
                "load the live-frames XDP program",
                e,
            ));
        }
        // Safety: bpf_prog_load returned a new descriptor that nothing else owns.
        let prog = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(LiveTx {
            prog,
            frame,
            iface: iface.to_string(),
        })
    }

    /// Has the kernel transmit the frame `count` times (at most `i32::MAX`). Returns `Ok(true)`
    /// when it has, `Ok(false)` when a signal to this thread cut the run short (the way to stop
    /// a long run: each test run costs ~20 ms of set-up and tear-down here, during which
    /// nothing is sent, so runs are long and ended by a signal rather than short and repeated).
    /// Frames the device refuses are dropped by the kernel and not reported here.
    pub fn send(&mut self, count: u32) -> Result<bool, PortError> {
        use std::os::fd::AsRawFd;
        // Safety: bpf_test_run_opts is plain old data; zeroed is its documented initial state
        // (libbpf reads `sz` to know which fields the caller set).
        let mut opts: libxdp_sys::bpf_test_run_opts = unsafe { std::mem::zeroed() };
        opts.sz = std::mem::size_of::<libxdp_sys::bpf_test_run_opts>();
        opts.data_in = self.frame.as_ptr().cast();
        opts.data_size_in = self.frame.len() as u32;
        opts.repeat = count.min(i32::MAX as u32) as i32;
        opts.flags = libxdp_sys::BPF_F_TEST_XDP_LIVE_FRAMES;
        // Safety: `opts` points at our frame, which outlives the call; the fd is our program.
        let rc = unsafe { libxdp_sys::bpf_prog_test_run_opts(self.prog.as_raw_fd(), &mut opts) };
        if rc == -libc::EINTR {
            return Ok(false);
        }
        if rc < 0 {
            let e = std::io::Error::from_raw_os_error(-rc);
            let what = match -rc {
                libc::EINVAL => format!(
                    "the kernel refused XDP live-frames test runs ({e}); they need Linux 5.18 or \
                     later (use `--engine af_xdp`)"
                ),
                _ => format!("live-frames test run failed: {e}"),
            };
            return Err(PortError::Unsupported {
                name: self.iface.clone(),
                what,
            });
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_the_documented_four_instructions() {
        let p = redirect_program(7);
        // Encodings as `bpftool prog dump xlated` prints them: mov r1, 7; mov r2, 0;
        // call bpf_redirect#23; exit.
        let bytes: Vec<[u8; 8]> = p
            .iter()
            // Safety: Insn is repr(C), 8 octets, no padding.
            .map(|i| unsafe { std::mem::transmute::<Insn, [u8; 8]>(*i) })
            .collect();
        assert_eq!(bytes[0], [0xb7, 0x01, 0, 0, 7, 0, 0, 0]);
        assert_eq!(bytes[1], [0xb7, 0x02, 0, 0, 0, 0, 0, 0]);
        assert_eq!(bytes[2], [0x85, 0x00, 0, 0, 23, 0, 0, 0]);
        assert_eq!(bytes[3], [0x95, 0x00, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn a_missing_interface_is_named() {
        let e = match LiveTx::open("quench-no-such0", vec![0; 60]) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("opened a missing interface"),
        };
        assert!(e.contains("quench-no-such0"), "{e}");
    }
}
