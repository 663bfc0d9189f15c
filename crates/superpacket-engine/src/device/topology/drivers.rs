//! The port driver registry: how a port's `driver` becomes a
//! [`PortDriver`].
//!
//! A [`DriverRegistry`] maps a driver kind (`driver = "memory"`, `driver =
//! { kind = "pcap", ... }`) to a factory: a function that gets what the
//! topology says about the port ([`DriverContext`]: the driver's keys and
//! their places, the port's name and `features_check`) and the
//! [`BuildOptions`], and opens the driver. The built-in kinds are registered
//! in [`DriverRegistry::builtin`] exactly as another crate registers its own
//! with [`DriverRegistry::register`]: one line per kind, each kind's keys
//! read and checked by its own factory. A kind whose cargo feature is off is
//! not registered; naming it is refused with the feature to enable.

use super::schema::{CustomDriverTable, DeviceSpec, DriverSpec, DriverTable, key_span};
use super::{BuildOptions, Topology, TopologyError};
use crate::device::features::{FeaturesCheck, NetdevFeatures};
use crate::device::port::{MemoryDriver, PcapDriver, PortDriver};
#[cfg(feature = "tap")]
use crate::device::port_io::TapDriver;
#[cfg(any(feature = "tap", feature = "tun"))]
use crate::device::port_io::TapPortOptions;
#[cfg(feature = "af-packet")]
use crate::device::port_io::{MAX_BATCH, MAX_RX_RING_FRAMES, PacketPortOptions, PacketSocketDriver};
#[cfg(feature = "tun")]
use crate::device::tun_port::TunDriver;
#[cfg(feature = "vhost-user")]
use crate::device::vhost_user::{self, VhostUserDriver, VhostUserOptions};
#[cfg(any(feature = "tap", feature = "tun"))]
use crate::io::tuntap::{
    TUN_F_CSUM, TUN_F_TSO_ECN, TUN_F_TSO4, TUN_F_TSO6, TUN_F_UDP_TUNNEL, TUN_F_UDP_TUNNEL_GSO, TUN_F_USO4, TUN_F_USO6,
};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toml::Spanned;

/// The real port drivers: (driver kind, the cargo feature of this crate
/// that builds it, whether it is built).
pub(crate) const DRIVER_FEATURES: [(&str, &str, bool); 4] = [
    ("tap", "tap", cfg!(feature = "tap")),
    ("tun", "tun", cfg!(feature = "tun")),
    ("af_packet", "af-packet", cfg!(feature = "af-packet")),
    ("vhost-user", "vhost-user", cfg!(feature = "vhost-user")),
];

/// Driver kinds superpacket had and retired: (kind, what it was, what
/// replaces it). A topology naming one (unless a crate registered a kind
/// of that name) is refused naming the replacement, not as an unknown
/// driver.
pub(crate) const RETIRED_DRIVERS: [(&str, &str, &str); 1] = [(
    "pv",
    "the home-made shared-memory port",
    "use a vhost-user port, driver = { kind = \"vhost-user\", socket = \"app0.sock\" } \
     (docs/topology.md, \"vhost-user ports\"), and attach superpacket_engine::io::virtio_user::VirtioUser, \
     DPDK virtio-user or a VMM to it",
)];

/// Opens the driver of one port from what the topology says about it and
/// the build options; a refusal becomes a [`TopologyError`] at the place
/// the [`FactoryError`] names (by default the driver's `kind`).
pub type DriverFactory =
    dyn Fn(&DriverContext<'_>, &BuildOptions) -> Result<Box<dyn PortDriver>, FactoryError> + Send + Sync;

/// The driver kinds a topology may name, each with its factory, in the
/// order they were registered (the order errors list them in).
///
/// Cloning shares the factories. [`Default`] is [`DriverRegistry::builtin`].
#[derive(Clone)]
pub struct DriverRegistry {
    kinds: Vec<(String, Arc<DriverFactory>)>,
}

impl DriverRegistry {
    /// A registry without any kind (a port without `driver` then has none:
    /// it is a `memory` port, so register one to use such ports).
    pub fn empty() -> DriverRegistry {
        DriverRegistry { kinds: Vec::new() }
    }

    /// Every built-in driver compiled into this crate: `memory`, `pcap`,
    /// and `tap`, `tun`, `af_packet`, `vhost-user` as their cargo features
    /// allow.
    pub fn builtin() -> DriverRegistry {
        let mut r = DriverRegistry::empty();
        r.register("memory", |cx, opts| cx.memory(opts));
        r.register("pcap", |cx, opts| cx.pcap(opts));
        #[cfg(feature = "tap")]
        r.register("tap", |cx, opts| cx.kernel_port(opts));
        #[cfg(feature = "tun")]
        r.register("tun", |cx, opts| cx.kernel_port(opts));
        #[cfg(feature = "af-packet")]
        r.register("af_packet", |cx, opts| cx.kernel_port(opts));
        #[cfg(feature = "vhost-user")]
        r.register("vhost-user", |cx, opts| cx.vhost_user(opts));
        r
    }

    /// Registers `factory` for driver kind `kind`, replacing the factory a
    /// kind of that name had (the place in [`DriverRegistry::kinds`] stays).
    ///
    /// A kind named like a built-in one (`memory`, `pcap`, `tap`, `tun`,
    /// `af_packet`, `vhost-user`: [`super::schema::BUILTIN_DRIVER_KINDS`]) keeps the
    /// built-in table schema: its factory reads [`DriverContext::table`].
    /// Any other kind accepts every key, and its factory reads
    /// [`DriverContext::keys`].
    pub fn register<F>(&mut self, kind: impl Into<String>, factory: F) -> &mut DriverRegistry
    where
        F: Fn(&DriverContext<'_>, &BuildOptions) -> Result<Box<dyn PortDriver>, FactoryError> + Send + Sync + 'static,
    {
        let kind = kind.into();
        let factory: Arc<DriverFactory> = Arc::new(factory);
        match self.kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some(entry) => entry.1 = factory,
            None => self.kinds.push((kind, factory)),
        }
        self
    }

    /// The registered kinds, in registration order.
    pub fn kinds(&self) -> Vec<&str> {
        self.kinds.iter().map(|(k, _)| k.as_str()).collect()
    }

    /// True if `kind` is registered.
    pub fn contains(&self, kind: &str) -> bool {
        self.factory(kind).is_some()
    }

    fn factory(&self, kind: &str) -> Option<&DriverFactory> {
        self.kinds.iter().find(|(k, _)| k == kind).map(|(_, f)| &**f)
    }

    /// What an unknown kind's error lists: the registered kinds, then the
    /// built-in ones this build lacks.
    fn known(&self) -> String {
        let mut s = self.kinds().join(", ");
        let missing: Vec<&str> =
            DRIVER_FEATURES.iter().filter(|(k, _, built)| !built && !self.contains(k)).map(|(k, ..)| *k).collect();
        if !missing.is_empty() {
            s += &format!("; not built: {}", missing.join(", "));
        }
        s
    }
}

impl Default for DriverRegistry {
    fn default() -> DriverRegistry {
        DriverRegistry::builtin()
    }
}

impl fmt::Debug for DriverRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DriverRegistry").field("kinds", &self.kinds()).finish()
    }
}

/// A driver factory's refusal: what is wrong and where in the topology.
///
/// A plain message (`"..."?` or `Err(msg.into())` from a `String` or `&str`)
/// is placed at the driver's `kind`; [`DriverContext::key_error`] and
/// [`DriverContext::err`] place it at a key or any span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactoryError {
    /// Byte span in the topology text (`None`: the driver's `kind`).
    pub span: Option<Range<usize>>,
    /// What is wrong, without the position (the [`TopologyError`] adds it).
    pub message: String,
}

impl From<String> for FactoryError {
    fn from(message: String) -> FactoryError {
        FactoryError { span: None, message }
    }
}

impl From<&str> for FactoryError {
    fn from(message: &str) -> FactoryError {
        FactoryError::from(message.to_string())
    }
}

/// What the topology says about one port, for its driver factory.
pub struct DriverContext<'a> {
    topology: &'a Topology,
    device: &'a DeviceSpec,
    port_index: usize,
    kind: &'a str,
    /// The `kind` value (or the driver name, or the port's name when it has
    /// no `driver`): where errors without a better place go.
    span: Range<usize>,
    /// The whole `driver` value, searched for the keys of a built-in table.
    driver_span: Option<Range<usize>>,
    table: Option<&'a DriverTable>,
    custom: Option<&'a CustomDriverTable>,
    check: FeaturesCheck,
    /// What [`DriverContext::keys`] lends when the driver has no custom keys.
    no_keys: toml::Table,
}

impl DriverContext<'_> {
    /// The driver kind the topology names (`memory` for a port without `driver`).
    pub fn kind(&self) -> &str {
        self.kind
    }

    /// The name of the port being built.
    pub fn port(&self) -> &str {
        self.device.name.get_ref()
    }

    /// The port's position among the topology's devices (stable across
    /// builds: e.g. the AF_PACKET fanout group adds it).
    pub fn port_index(&self) -> usize {
        self.port_index
    }

    /// The port's `features_check` key (default `any`).
    pub fn features_check(&self) -> FeaturesCheck {
        self.check
    }

    /// The keys of a driver table of a kind that is not built in, without
    /// `kind` (`{ kind = "counting", step = 3 }`: `step = 3`); empty for the
    /// name form (`driver = "counting"`) and for the built-in kinds.
    pub fn keys(&self) -> &toml::Table {
        self.custom.map_or(&self.no_keys, |t| &t.keys)
    }

    /// The table of a built-in kind ([`super::schema::BUILTIN_DRIVER_KINDS`]),
    /// if the driver is given as a table.
    pub fn table(&self) -> Option<&DriverTable> {
        self.table
    }

    /// Where the driver's `kind` is in the topology text.
    pub fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    /// Where key `key` of the driver table is, if present.
    pub fn key_span(&self, key: &str) -> Option<Range<usize>> {
        match (self.custom, self.table, &self.driver_span) {
            (Some(t), ..) => t.key_spans.get(key).cloned(),
            // A built-in table's keys carry no span of their own: found in its text.
            (None, Some(_), Some(driver)) => key_span(&self.topology.src, driver, key),
            _ => None,
        }
    }

    /// An error at `span` of the topology text.
    pub fn err(&self, span: &Range<usize>, message: impl Into<String>) -> FactoryError {
        FactoryError { span: Some(span.clone()), message: message.into() }
    }

    /// An error about key `key`, at the key (or at `kind` if it is absent).
    pub fn key_error(&self, key: &str, message: impl Into<String>) -> FactoryError {
        FactoryError { span: self.key_span(key), message: message.into() }
    }

    /// Refuses the keys of [`DriverContext::keys`] not in `known`, with the
    /// words the schema uses for an unknown key of a built-in driver.
    ///
    /// # Errors
    /// The first unknown key (in sorted order), at the key.
    pub fn deny_unknown_keys(&self, known: &'static [&'static str]) -> Result<(), FactoryError> {
        use serde::de::Error as _;
        match self.keys().keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(self.key_error(k, serde::de::value::Error::unknown_field(k, known).to_string())),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for DriverContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DriverContext")
            .field("port", &self.port())
            .field("kind", &self.kind)
            .field("keys", self.keys())
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl Topology {
    /// The driver of port `d` (the `port_index`th device), opened by the
    /// factory its kind has in [`BuildOptions::drivers`].
    pub(super) fn driver(
        &self,
        d: &DeviceSpec,
        opts: &BuildOptions,
        port_index: usize,
    ) -> Result<Box<dyn PortDriver>, TopologyError> {
        let check = match &d.features_check {
            None => FeaturesCheck::Any,
            Some(c) => match c.get_ref().as_str() {
                "any" => FeaturesCheck::Any,
                "vlan" => FeaturesCheck::Vlan,
                other => return Err(self.err(&c.span(), format!("unknown features_check `{other}` (any, vlan)"))),
            },
        };
        // A port without `driver` is a `memory` port.
        let (kind, span, table, custom) = match d.driver.as_ref() {
            None => ("memory", d.name.span(), None, None),
            Some(spec) => match spec.get_ref() {
                DriverSpec::Name(n) => (n.as_str(), spec.span(), None, None),
                DriverSpec::Table(t) => (t.kind.get_ref().as_str(), t.kind.span(), Some(&**t), None),
                DriverSpec::Custom(t) => (t.kind.get_ref().as_str(), t.kind.span(), None, Some(&**t)),
            },
        };
        let Some(factory) = opts.drivers.factory(kind) else {
            if let Some((_, feature, false)) = DRIVER_FEATURES.iter().find(|(k, ..)| *k == kind) {
                return Err(self.err(
                    &span,
                    format!(
                        "driver kind \"{kind}\" is not built in: enable the superpacket-engine feature \"{feature}\""
                    ),
                ));
            }
            if let Some((_, what, instead)) = RETIRED_DRIVERS.iter().find(|(k, ..)| *k == kind) {
                return Err(self.err(&span, format!("driver kind \"{kind}\" ({what}) is retired: {instead}")));
            }
            return Err(self.err(&span, format!("unknown driver `{kind}` ({})", opts.drivers.known())));
        };
        let cx = DriverContext {
            topology: self,
            device: d,
            port_index,
            kind,
            span: span.clone(),
            driver_span: d.driver.as_ref().map(Spanned::span),
            table,
            custom,
            check,
            no_keys: toml::Table::new(),
        };
        factory(&cx, opts).map_err(|e| self.err(&e.span.unwrap_or(span), e.message))
    }
}

/// The built-in drivers' factories (registered in [`DriverRegistry::builtin`]).
impl DriverContext<'_> {
    /// Refuses the keys of a built-in table that belong to other driver kinds.
    fn only_keys(&self, allowed: &[&str]) -> Result<(), FactoryError> {
        let (Some(t), Some(driver), kind) = (self.table, &self.driver_span, self.kind) else { return Ok(()) };
        let keys = [
            ("path", &t.path),
            ("input", &t.input),
            ("name", &t.name),
            ("interface", &t.interface),
            ("netns", &t.netns),
            ("socket", &t.socket),
            ("mode", &t.mode),
        ];
        let spans = [
            ("offloads", t.offloads.as_ref().map(Spanned::span)),
            ("qdisc_bypass", t.qdisc_bypass.as_ref().map(Spanned::span)),
            ("batch", t.batch.as_ref().map(Spanned::span)),
            ("ring", t.ring.as_ref().map(Spanned::span)),
            ("busy_poll_us", t.busy_poll_us.as_ref().map(Spanned::span)),
        ];
        let keys = keys.iter().map(|(k, v)| (*k, v.as_ref().map(Spanned::span))).chain(spans);
        for (key, v) in keys {
            if let Some(v) = v
                && !allowed.contains(&key)
            {
                let at = key_span(&self.topology.src, driver, key).unwrap_or(v);
                return Err(self.err(&at, format!("key `{key}` does not apply to a {kind} driver")));
            }
        }
        Ok(())
    }

    /// `memory`: in-memory queues, a full-featured NIC.
    fn memory(&self, opts: &BuildOptions) -> Result<Box<dyn PortDriver>, FactoryError> {
        self.only_keys(&[])?;
        Ok(Box::new(MemoryDriver::full().with_check(self.check).with_mode(opts.memory_mode)))
    }

    /// `pcap`: writes what it transmits to `path`, receives from `input`.
    fn pcap(&self, opts: &BuildOptions) -> Result<Box<dyn PortDriver>, FactoryError> {
        self.only_keys(&["path", "input"])?;
        let (span, table, check) = (self.span.clone(), self.table, self.check);
        let t = table.ok_or_else(|| self.err(&span, "a pcap driver is a table { kind = \"pcap\", path }"))?;
        let path = t.path.as_ref().ok_or_else(|| self.err(&span, "a pcap driver needs `path`"))?;
        let resolve = |p: &str| match &opts.base_dir {
            Some(b) if Path::new(p).is_relative() => b.join(p),
            _ => PathBuf::from(p),
        };
        let input = t.input.as_ref().map(|i| resolve(i.get_ref()));
        let drv =
            PcapDriver::new(&resolve(path.get_ref()), input.as_deref(), NetdevFeatures::FULL_NIC).map_err(|e| {
                let at = match (&t.input, e.message.contains(path.get_ref().as_str())) {
                    (Some(i), false) => i.span(),
                    _ => path.span(),
                };
                self.err(&at, format!("pcap driver: {e}"))
            })?;
        if !matches!(check, FeaturesCheck::Any) {
            return Err(self.err(&span, "a pcap driver parses any VLAN depth: features_check must be `any`"));
        }
        Ok(Box::new(drv))
    }

    /// `vhost-user`: a virtio-net device for a VMM or DPDK virtio-user, one
    /// queue pair per engine worker.
    #[cfg(feature = "vhost-user")]
    fn vhost_user(&self, opts: &BuildOptions) -> Result<Box<dyn PortDriver>, FactoryError> {
        self.only_keys(&["socket", "mode", "offloads", "ring", "busy_poll_us"])?;
        let (span, table) = (self.span.clone(), self.table);
        let t = table.ok_or_else(|| {
            self.err(&span, "a vhost-user driver is a table { kind = \"vhost-user\", socket = \"/path.sock\" }")
        })?;
        let socket = t.socket.as_ref().ok_or_else(|| self.err(&span, "a vhost-user driver needs `socket`"))?;
        let path = Path::new(socket.get_ref());
        let path = match &opts.base_dir {
            Some(b) if path.is_relative() => b.join(path),
            _ => path.to_path_buf(),
        };
        let mut o = VhostUserOptions::new(path);
        if let Some(m) = &t.mode {
            o.mode = match m.get_ref().as_str() {
                "server" => vhost_user::Mode::Server,
                "client" => vhost_user::Mode::Client,
                other => {
                    return Err(self.err(&m.span(), format!("unknown vhost-user mode `{other}` (server, client)")));
                }
            };
        }
        if let Some(list) = &t.offloads {
            o.features = vhost_user::features::BASE;
            for name in list.get_ref() {
                o.features |= vhost_user::features::offload(name.get_ref()).ok_or_else(|| {
                    self.err(
                        &name.span(),
                        format!("unknown vhost-user offload `{}` (csum, tso4, tso6, tso-ecn, uso)", name.get_ref()),
                    )
                })?;
            }
        }
        if let Some(r) = &t.ring {
            let n = *r.get_ref();
            if !(64..=u32::from(vhost_user::DEFAULT_QUEUE_SIZE)).contains(&n) || !n.is_power_of_two() {
                return Err(self.err(
                    &r.span(),
                    format!("ring {n} is not a power of two in 64..={}", vhost_user::DEFAULT_QUEUE_SIZE),
                ));
            }
            o.queue_size = n as u16;
        }
        if let Some(us) = &t.busy_poll_us {
            let n = *us.get_ref();
            if n > vhost_user::MAX_BUSY_POLL_US {
                return Err(self.err(&us.span(), format!("busy_poll_us {n} is above {}", vhost_user::MAX_BUSY_POLL_US)));
            }
            o.busy_poll = std::time::Duration::from_micros(u64::from(n));
        }
        let at = socket.span();
        VhostUserDriver::open_worker(&o, opts.workers.max(1))
            .map(|d| Box::new(d) as Box<dyn PortDriver>)
            .map_err(|e| self.err(&at, format!("vhost-user driver: {e}")))
    }

    /// A port on a kernel device: `tap` or `tun` (the device `name`,
    /// created if missing) or `af_packet` (an existing `interface`), in the
    /// namespace `netns` if given. Only kinds whose feature is built get here.
    #[cfg(any(feature = "tap", feature = "tun", feature = "af-packet"))]
    fn kernel_port(&self, opts: &BuildOptions) -> Result<Box<dyn PortDriver>, FactoryError> {
        let (kind, span, table, port_index) = (self.kind, &self.span, self.table, self.port_index);
        self.only_keys(match kind {
            "af_packet" => &["interface", "netns", "qdisc_bypass", "batch", "ring"],
            _ => &["name", "netns", "offloads"],
        })?;
        let (key, example) =
            if kind == "af_packet" { ("interface", "interface = \"veth0\"") } else { ("name", "name = \"sp0\"") };
        let t = table
            .ok_or_else(|| self.err(span, format!("a {kind} driver is a table {{ kind = \"{kind}\", {example} }}")))?;
        let dev = if kind == "af_packet" { &t.interface } else { &t.name };
        let dev = dev.as_ref().ok_or_else(|| self.err(span, format!("a {kind} driver needs `{key}`")))?;
        let ns = match &t.netns {
            None => None,
            Some(n) => Some(crate::io::NetNs::attach(n.get_ref()).map_err(|e| {
                self.err(&n.span(), format!("{kind} driver: network namespace `{}`: {e}", n.get_ref()))
            })?),
        };
        let (name, ns) = (dev.get_ref().as_str(), ns.as_ref());
        #[cfg(not(feature = "af-packet"))]
        let _ = port_index;
        let opened: Result<Box<dyn PortDriver>, crate::device::port::DriverError> = match kind {
            #[cfg(feature = "tap")]
            "tap" => TapDriver::open_with(name, ns, &self.tap_options(kind, t, opts)?).map(|d| Box::new(d) as _),
            #[cfg(feature = "tun")]
            "tun" => TunDriver::open_with(name, ns, &self.tap_options(kind, t, opts)?).map(|d| Box::new(d) as _),
            #[cfg(feature = "af-packet")]
            "af_packet" => PacketSocketDriver::open_with(name, ns, &self.packet_options(t, opts, port_index)?)
                .map(|d| Box::new(d) as _),
            other => return Err(self.err(span, format!("driver kind \"{other}\" is not built in"))),
        };
        opened.map_err(|e| {
            let hint = if crate::io::privileges_available().is_err() { " (needs root: CAP_NET_ADMIN)" } else { "" };
            self.err(&dev.span(), format!("{kind} driver: {e}{hint}"))
        })
    }

    /// The options of a `tap` or `tun` port.
    #[cfg(any(feature = "tap", feature = "tun"))]
    fn tap_options(&self, kind: &str, t: &DriverTable, opts: &BuildOptions) -> Result<TapPortOptions, FactoryError> {
        let mut o = TapPortOptions { multi_queue: opts.workers > 1, ..TapPortOptions::default() };
        if let Some(list) = &t.offloads {
            o.offloads = 0;
            for name in list.get_ref() {
                o.offloads |= match name.get_ref().as_str() {
                    "csum" => TUN_F_CSUM,
                    "tso4" => TUN_F_TSO4,
                    "tso6" => TUN_F_TSO6,
                    "tso-ecn" => TUN_F_TSO_ECN,
                    "uso" => TUN_F_USO4 | TUN_F_USO6,
                    "udp-tunnel" => TUN_F_UDP_TUNNEL_GSO,
                    "udp-tunnel-csum" => TUN_F_UDP_TUNNEL,
                    other => {
                        return Err(self.err(
                            &name.span(),
                            format!(
                                "unknown {} offload `{other}` (csum, tso4, tso6, tso-ecn, uso, udp-tunnel, udp-tunnel-csum)",
                                kind.to_ascii_uppercase()
                            ),
                        ));
                    }
                };
            }
        }
        if let Some(over) = opts.tap_offloads {
            o.offloads = over;
        }
        Ok(o)
    }

    /// A `batch` key: 1..=`max`.
    #[cfg(feature = "af-packet")]
    fn batch(&self, b: &Spanned<u32>, max: usize) -> Result<usize, FactoryError> {
        let n = *b.get_ref() as usize;
        if !(1..=max).contains(&n) {
            return Err(self.err(&b.span(), format!("batch {n} is outside 1..={max}")));
        }
        Ok(n)
    }

    #[cfg(feature = "af-packet")]
    fn packet_options(
        &self,
        t: &DriverTable,
        opts: &BuildOptions,
        port_index: usize,
    ) -> Result<PacketPortOptions, FactoryError> {
        let mut o = PacketPortOptions {
            qdisc_bypass: t.qdisc_bypass.as_ref().is_some_and(|b| *b.get_ref()),
            fanout_group: (opts.workers > 1).then(|| opts.fanout_group.wrapping_add(port_index as u16)),
            ..PacketPortOptions::default()
        };
        if let Some(b) = &t.batch {
            o.batch = self.batch(b, MAX_BATCH)?;
        }
        if let Some(r) = &t.ring {
            let n = *r.get_ref() as usize;
            if n > MAX_RX_RING_FRAMES {
                return Err(self.err(&r.span(), format!("ring {n} is outside 0..={MAX_RX_RING_FRAMES} frames")));
            }
            o.rx_ring_frames = n;
        }
        if let Some(b) = opts.packet_batch {
            o.batch = b.clamp(1, MAX_BATCH);
        }
        Ok(o)
    }
}
