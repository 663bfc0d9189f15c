//! The `superpacket` command's implementation: the subcommands ([`cli`])
//! and the benchmark suite ([`mod@bench`]). The library a program embeds is the
//! `superpacket` crate; the live data path is `superpacket-engine`.

pub mod bench;
pub mod cli;
