//! The kernel fast path's program (`engine::port::kfp`) on a veth testbed, below the switch:
//! the verifier accepts it, a frame whose source and destination the table holds is redirected
//! in the kernel (counted by the program, never seen by the AF_XDP socket), any other frame
//! reaches the socket. Needs root; skipped with a printed reason otherwise.
use engine::port::kfp::{FastProgram, FastTable};
use engine::port::xdp::{XdpOptions, XdpPool, XdpPort, XdpProgram};
use engine::port::{if_index, Frame, Port};
use engine::switch::fdb::key;
use engine::wire::MacAddr;

mod common;
use common::{collect, in_ns, is_test, lock, netns_or_skip, send, xdp_progs, Testbed, ETH_TEST};

const A: [u8; 6] = [0x02, 0x71, 0x6e, 0x0a, 0, 1];
const B: [u8; 6] = [0x02, 0x71, 0x6e, 0x0b, 0, 1];
const C: [u8; 6] = [0x02, 0x71, 0x6e, 0x0c, 0, 1];

fn frame(dst: [u8; 6], src: [u8; 6], seq: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETH_TEST);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(len, seq as u8);
    f
}

fn mac(m: [u8; 6]) -> u64 {
    key(MacAddr(m[0], m[1], m[2], m[3], m[4], m[5]))
}

#[test]
fn known_pairs_are_redirected_in_the_kernel_and_counted_the_rest_reach_the_socket() {
    if !netns_or_skip("known_pairs_are_redirected_in_the_kernel") {
        return;
    }
    let _l = lock();
    let tb = Testbed::up(format!("q{}k", std::process::id() % 1000), 1, 1);
    let (s0, r0) = (tb.ns("sw-s0"), tb.ns("sw-r0"));
    let sw = tb.ns("sw");
    let r0_rx = collect(&tb.ns("r0"), 20, 1500);
    // The switch side, in its own thread inside the switch's namespace: ports 0 (s0), 1 (r0).
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
    let switch = std::thread::spawn(move || {
        in_ns(&sw, move || {
            let table = FastTable::new().unwrap();
            let progs: Vec<FastProgram> = (0..2)
                .map(|p| FastProgram::load(&table, p, 1).unwrap())
                .collect();
            let pool = XdpPool::new(4096).unwrap();
            let mut ports = Vec::new();
            for (i, dev) in [&s0, &r0].into_iter().enumerate() {
                table.set_device(i as u32, if_index(dev).unwrap()).unwrap();
                let (prog_fd, xskmap_fd) = progs[i].fds();
                let opts = XdpOptions {
                    queues: Some(vec![0]),
                    program: Some(XdpProgram { prog_fd, xskmap_fd }),
                    ..Default::default()
                };
                ports.push(XdpPort::open(&pool, dev, &opts).unwrap());
            }
            table.install(mac(A), 0).unwrap();
            table.install(mac(B), 1).unwrap();
            up_tx.send(()).unwrap();
            // Read the socket of s0 until told to stop: only frames the table does not cover.
            let mut seen = Vec::new();
            let mut buf = Vec::new();
            while go_rx.try_recv().is_err() {
                for p in ports.iter_mut() {
                    p.poll().unwrap();
                    p.rx_burst(0, &mut buf, 64).unwrap();
                    seen.extend(buf.drain(..).map(|f| f.data().to_vec()));
                }
            }
            let mut counts = vec![(0, 0); 2];
            progs[0].counts(&mut counts);
            let hit_a = table.take_hit(mac(A));
            let hit_again = table.take_hit(mac(A));
            let hit_b = table.take_hit(mac(B));
            (seen, counts, hit_a, hit_again, hit_b)
        })
    });
    up_rx.recv().unwrap();
    let known: Vec<Vec<u8>> = (0..20)
        .map(|i| frame(B, A, i, 60 + 50 * i as usize))
        .collect();
    let unknown = frame(C, A, 100, 100);
    let mut all = known.clone();
    all.push(unknown.clone());
    send(&tb.ns("s0"), all);
    let got = r0_rx.join().unwrap();
    go_tx.send(()).unwrap();
    let (seen, counts, hit_a, hit_again, hit_b) = switch.join().unwrap();
    assert_eq!(
        got, known,
        "r0 gets the known frames, byte for byte, in order"
    );
    let seen: Vec<_> = seen.into_iter().filter(|f| is_test(f)).collect();
    assert_eq!(
        seen,
        vec![unknown],
        "only the unknown destination reaches the socket"
    );
    let bytes: u64 = known.iter().map(|f| f.len() as u64).sum();
    assert_eq!(
        counts,
        vec![(0, 0), (20, bytes)],
        "counted under egress port 1"
    );
    assert_eq!(
        (hit_a, hit_again, hit_b),
        (Some(true), Some(false), Some(false))
    );
    assert_eq!(
        xdp_progs(&tb.ns("sw")),
        0,
        "XDP program left attached after the ports closed"
    );
}
