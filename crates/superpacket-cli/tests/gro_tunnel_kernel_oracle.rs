//! Probe (temporary): what the kernel does with VXLAN frames on an IFF_NAPI TAP.

mod common;

use superpacket::packet::TunnelKind;
use superpacket::traffic::{FlowSpec, Transport, TunnelFlow};
use superpacket::wire::TcpFlags;
use superpacket_lab::{GroOracle, GroOracleConfig};

#[test]
fn probe() {
    if !superpacket_engine::io::require_privileges() {
        println!("SKIPPED");
        return;
    }
    for vx in [false, true] {
        let mut oracle = GroOracle::with_config(GroOracleConfig::default()).unwrap();
        if vx {
            let mut nl = oracle.netns().netlink().unwrap();
            nl.add_vxlan("spvx0", 4789).unwrap();
            oracle.netns().link_up("spvx0").unwrap();
        }
        for outer_v6 in [false, true] {
            for csum in [true, false] {
                let mut inner = FlowSpec::new(Transport::Tcp, false, 1);
                inner.tcp_timestamps = false;
                let mut t = TunnelFlow::new(TunnelKind::Vxlan, outer_v6, inner, 1);
                t.udp_csum = csum;
                let frames: Vec<Vec<u8>> = (0..6).map(|_| t.frame(1000, TcpFlags::empty()).unwrap()).collect();
                let out =
                    oracle.run_detailed(&frames.iter().map(|f| (Default::default(), f.as_slice())).collect::<Vec<_>>());
                match out {
                    Ok(d) => {
                        for p in d {
                            println!("vx={vx} v6={outer_v6} csum={csum}: {:?} len {}", p.hdr, p.frame.len());
                        }
                    }
                    Err(e) => println!("vx={vx} v6={outer_v6} csum={csum}: error {e}"),
                }
            }
        }
    }
}
