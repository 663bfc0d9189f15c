//! The kernel as the reference (`superpacket bench peers --kernel`, root):
//! one kernel TCP stream between two throwaway namespaces over a veth (TSO
//! and GRO on, the kernel's own data path), next to the same stream between
//! two namespaces whose TAPs (`IFF_VNET_HDR`, TSO/checksum offload) are
//! joined by `superpacket run` with the `live-router` topology (routed,
//! superpackets carried whole). Both streams are hashed end to end
//! ([`superpacket_lab::streams`]). The namespaces, veths and TAPs are removed
//! afterwards, also on failure (their owners' `Drop`).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use superpacket_engine::device::Topology;
use superpacket_engine::engine::{Engine, EngineOptions};
use superpacket_engine::io::{NetNs, VethPair};
use superpacket_lab::lab::{HOST_B_V4, Lab};
use superpacket_lab::streams::{self, Limit, TcpConfig};

/// The engine's topology: two TAPs and a router (`examples/live-router.toml`).
const TOPOLOGY: &str = include_str!("../../../../../examples/live-router.toml");

const TCP_PORT: u16 = 5301;
const VETH_A: Ipv4Addr = Ipv4Addr::new(10, 73, 0, 1);
const VETH_B: Ipv4Addr = Ipv4Addr::new(10, 73, 0, 2);

/// One TCP stream's result.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamResult {
    /// Receiver goodput, Gbit/s.
    pub gbps: f64,
    /// Every byte arrived unchanged.
    pub intact: bool,
}

/// The kernel reference: veth between namespaces, and the same stream through the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelReference {
    /// Kernel TCP over a veth between two namespaces.
    pub veth: StreamResult,
    /// Kernel TCP between two namespaces through `superpacket run` (two TAPs and a router).
    pub engine: StreamResult,
}

/// Measures both paths for `seconds` each.
///
/// # Errors
/// What failed (no privileges, a namespace or TAP that could not be made,
/// the engine or a stream), as text.
pub fn measure(seconds: f64) -> Result<KernelReference, String> {
    superpacket_engine::io::netns::privileges_available()?;
    let cfg = TcpConfig { limit: Limit::Duration(Duration::from_secs_f64(seconds)), ..TcpConfig::default() };
    let veth = {
        let a = NetNs::create("sp-peers-ka").map_err(|e| e.to_string())?;
        let b = NetNs::create("sp-peers-kb").map_err(|e| e.to_string())?;
        let pair = VethPair::create(&a, "spk-a", &b, "spk-b").map_err(|e| e.to_string())?;
        for (ns, dev, addr) in [(&a, pair.name_a(), VETH_A), (&b, pair.name_b(), VETH_B)] {
            ns.add_addr(dev, &format!("{addr}/24")).map_err(|e| e.to_string())?;
            ns.link_up(dev).map_err(|e| e.to_string())?;
        }
        let t = streams::tcp_transfer(Some(&b), Some(&a), SocketAddr::from((VETH_B, TCP_PORT)), &cfg)
            .map_err(|e| format!("TCP over the veth: {e}"))?;
        StreamResult { gbps: t.gbps(), intact: t.intact() }
    };
    let engine = {
        let lab = Lab::create("sp-peers", false).map_err(|e| format!("building the lab: {e}"))?;
        let topo = Topology::parse(&lab.localize(TOPOLOGY)).map_err(|e| format!("live-router topology: {e}"))?;
        let running = Engine::start(&topo, &EngineOptions::default()).map_err(|e| e.to_string())?;
        let t = streams::tcp_transfer(Some(&lab.b), Some(&lab.a), SocketAddr::from((HOST_B_V4, TCP_PORT)), &cfg);
        running.stop().map_err(|e| e.to_string())?;
        let t = t.map_err(|e| format!("TCP through the engine: {e}"))?;
        StreamResult { gbps: t.gbps(), intact: t.intact() }
    };
    Ok(KernelReference { veth, engine })
}
